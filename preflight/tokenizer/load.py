"""Resolve a tokenizer spec to a ``TokenCounter``, offline.

``load_tokenizer(spec)`` takes a ``tokenizer.json`` path, a local folder holding a
``tokenizer.json`` (with ``tokenizer_config.json`` for the chat template), a folder that only
``transformers`` can load, a Hugging Face name (``org/name``) found in the local hub cache
(``preflight.hf_cache``; looked up before the name is tried as a path), or
``tiktoken:NAME`` for an encoding already in tiktoken's cache. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

from preflight.errors import ConfigError
from preflight.hf_cache import cached_snapshot, looks_like_repo_id, not_cached_hint
from preflight.paths import find_beside
from preflight.tokenizer.counter import TokenCounter
from preflight.tokenizer.hf import hf_tokenizer, transformers_tokenizer
from preflight.tokenizer.tiktoken_encoding import tiktoken_counter


def load_tokenizer(spec: str, *, base: Path | None = None) -> TokenCounter:
    """Load the tokenizer ``spec`` names, offline; a problem is a ``ConfigError``."""
    if spec.startswith("tiktoken:"):
        return tiktoken_counter(spec.removeprefix("tiktoken:"))
    hub = looks_like_repo_id(spec)
    path = cached_snapshot(spec) if hub else None
    if path is None:
        try:
            path = find_beside(spec, base, what="tokenizer", hint=" (give a tokenizer.json, a "
                               "local tokenizer folder, a Hugging Face name in the local cache, "
                               "or tiktoken:NAME)")
        except ConfigError as e:
            if hub:
                raise ConfigError(f"tokenizer {not_cached_hint(spec)}; nor is {spec} a file "
                                  "or folder here") from e
            raise
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return hf_tokenizer(path / "tokenizer.json", config=path / "tokenizer_config.json")
        if not any((path / name).is_file() for name in _TOKENIZER_FILES):
            raise ConfigError(f"no tokenizer in folder {path}: it holds none of "
                              f"{', '.join(_TOKENIZER_FILES)}; give the model's tokenizer "
                              "folder or its tokenizer.json")
        return transformers_tokenizer(path)
    return hf_tokenizer(path, config=path.parent / "tokenizer_config.json")


# What a tokenizer folder that only transformers can load holds (one of them at least).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                    "vocab.txt", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model")
