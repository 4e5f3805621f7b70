"""Token counting with the model's real tokenizer, and the exact bounds that let most texts
skip it.

``load_tokenizer(spec)`` resolves a ``tokenizer.json``, a tokenizer folder, a Hugging Face
name in the local hub cache or ``tiktoken:NAME`` to a ``TokenCounter``, offline; with no
tokenizer, ``estimate_counter()`` gives a stated estimate. The modules:

- ``load``: the spec resolved to a file, a folder or a tiktoken encoding;
- ``counter``: ``TokenCounter`` (counts, bounds, truncation, chat rendering) and the estimate;
- ``hf``: ``tokenizer.json`` with the ``tokenizers`` library, folders with ``transformers``;
- ``tiktoken_encoding``: tiktoken encodings from tiktoken's local cache;
- ``bounds``: which bounds a tokenizer's pipeline proves, per family;
- ``chat_template``: chat templates compiled and rendered in a bounded sandbox.
"""

from __future__ import annotations

from preflight.tokenizer.counter import TokenCounter, estimate_counter
from preflight.tokenizer.load import load_tokenizer

__all__ = ["TokenCounter", "estimate_counter", "load_tokenizer"]
