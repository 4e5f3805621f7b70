"""The token counter every check and the smoke test use: token counts per batch of texts, the
proven bounds that let most texts skip the tokenizer, truncation on a token boundary, and a
conversation rendered as the model is trained on it.

A backend (``preflight.tokenizer.hf``, ``preflight.tokenizer.tiktoken_encoding``) fills a
``TokenCounter`` with its encoding functions and what ``preflight.tokenizer.bounds`` proved
about it; with no tokenizer, ``estimate_counter()`` gives a stated estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from preflight.token_pieces import PieceCounter
from preflight.tokenizer.chat_template import compile_chat_template, render_limited

if TYPE_CHECKING:
    import polars as pl

# A plain template for chat data when the tokenizer has none (documented in the README).
PLAIN_CHAT_TEMPLATE = "<|{role}|>\n{content}\n"
# The fallback estimate: about 3 UTF-8 bytes per token over-counts English (about 4) and
# matches CJK (3 bytes per character, about one token each).
ESTIMATE_BYTES_PER_TOKEN = 3.0


@dataclass
class TokenCounter:
    """Counts tokens for batches of texts; knows its exact bounds when they are proven."""

    name: str
    family: str
    encode: Callable[[list[str], bool], list[int]] | None
    specials: int = 0
    byte_bound: bool = False
    # ByteLevel may add a space before every split, not only the text's start: the upper
    # bound is two tokens a byte.
    prefix_per_split: bool = False
    longest_token_bytes: int | None = None
    chat_template: str | None = None
    template_vars: dict[str, Any] = field(default_factory=dict)
    # Text of the first ``k`` tokens, cut on a token boundary (None when not supported).
    prefix: Callable[[str, int], str] | None = None
    # Token ids per text (the smoke test trains on them) and the vocabulary's size.
    ids: Callable[[list[str], bool], list[list[int]]] | None = None
    vocab_size: int | None = None
    # What the ``vocab`` check compares with the model's embedding: the added tokens
    # (content -> id), those matched on normalized text (a substring search of the raw
    # text cannot rule them out), the largest id of an ordinary vocabulary entry, the
    # special tokens by role (``pad``, ``eos``, ...; None where the tokenizer lacks the
    # token its config names) and the ids the post-processor adds to every text.
    added_tokens: dict[str, int] = field(default_factory=dict)
    added_normalized: frozenset[str] = frozenset()
    base_max_id: int | None = None
    special_tokens: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    template_ids: tuple[int, ...] = ()
    # The vocabulary entry of an id, for messages (None when unknown).
    token_text: Callable[[int], str | None] | None = None
    # Counts from the counts of text pieces: set for the tokenizers whose tokens never
    # cross a space that follows a non-space character (``preflight.tokenizer.bounds``).
    pieces: PieceCounter | None = None
    _compiled: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.chat_template:
            self._compiled = compile_chat_template(self.chat_template, self.name,
                                                   probe=self._variables())

    def _variables(self) -> dict[str, Any]:
        return {k: v for k, v in self.template_vars.items() if v is not None}

    def render(self, turns: list[Any]) -> str:
        """A conversation as the model is trained on it: the chat template, or the plain one."""
        if self._compiled is None:
            return "".join(
                PLAIN_CHAT_TEMPLATE.format(role=t.get("role", ""), content=t.get("content") or "")
                for t in turns
                if isinstance(t, dict)
            )
        return render_limited(self._compiled, messages=turns, add_generation_prompt=False,
                              **self._variables())

    @property
    def exact(self) -> bool:
        """False for the estimate used when no tokenizer is configured."""
        return self.encode is not None

    def count(self, texts: list[str], *, add_special_tokens: bool = True) -> np.ndarray:
        """Token counts of ``texts`` (the batch API, on all cores)."""
        if not texts:
            return np.zeros(0, dtype=np.int64)
        if self.encode is None:
            return self.estimate(np.array([len(t.encode()) for t in texts]))
        return np.asarray(self.encode(texts, add_special_tokens), dtype=np.int64)

    def count_series(self, texts: pl.Series, *, add_special_tokens: bool = True) -> np.ndarray:
        """Token counts of a String Series of texts (no nulls): from the counts of their
        pieces when the tokenizer splits before spaces and its pieces repeat
        (``preflight.token_pieces``), else as ``count``."""
        if self.pieces is None or not self.pieces.worth():
            return self.count(texts.to_list(), add_special_tokens=add_special_tokens)
        return self.pieces.count(texts) + (self.specials if add_special_tokens else 0)

    def truncate(self, text: str, limit: int, marker: str = "") -> str:
        """``text`` cut on a token boundary so that it plus ``marker`` counts at most
        ``limit`` tokens (specials included); the text itself when it already fits."""
        if self.prefix is None:
            raise ValueError(f"{self.name} cannot truncate on token boundaries")
        if int(self.count([text])[0]) <= limit:
            return text
        keep = limit - self.specials - (int(self.count([marker], add_special_tokens=False)[0])
                                        if marker else 0)
        while keep > 0:
            cut = self.prefix(text, keep) + marker
            if int(self.count([cut])[0]) <= limit:  # re-tokenising can shift a boundary
                return cut
            keep -= 1
        return marker if int(self.count([marker])[0]) <= limit else ""

    def estimate(self, nbytes: np.ndarray) -> np.ndarray:
        """The stated estimate from UTF-8 byte counts."""
        return np.ceil(nbytes / ESTIMATE_BYTES_PER_TOKEN).astype(np.int64)

    def upper_bound(self, nbytes: np.ndarray, *, specials: bool = True) -> np.ndarray | None:
        """A proven upper bound on the token count per text, or None."""
        if not self.byte_bound:
            return None
        return (2 if self.prefix_per_split else 1) * nbytes + 1 + (self.specials if specials
                                                                    else 0)

    def lower_bound(self, nbytes: np.ndarray, *, specials: bool = True) -> np.ndarray | None:
        """A proven lower bound on the token count per text, or None."""
        if not self.byte_bound or not self.longest_token_bytes:
            return None
        return np.ceil(nbytes / self.longest_token_bytes).astype(np.int64) + (
            self.specials if specials else 0
        )


def estimate_counter() -> TokenCounter:
    """The counter used when the rules name no tokenizer."""
    return TokenCounter(name=f"estimate (UTF-8 bytes / {ESTIMATE_BYTES_PER_TOKEN:g})",
                        family="estimate", encode=None)
