"""Proving that a long text fits the context window by encoding only its start.

The byte bound (``TokenCounter.upper_bound``: at most one token per UTF-8 byte) settles a
text only when it has fewer bytes than the limit has tokens; at a window of 256 most texts
of a real corpus have more, and must be encoded although they fit with room to spare.

For tokenizers whose pieces never join a non-space character and the space after it
(``TokenCounter.splits_before_spaces``: byte-level BPE with GPT-2's or Llama 3's split, no
normalizer), a text cut before a space that follows a non-space character, ``a + b``, has
the tokens of ``a`` then those of ``b``: BPE never merges across pre-tokenizer pieces. Every
token of ``b`` covers at least one of its bytes, so

    tokens(a + b) <= tokens(a) + utf8_bytes(b) (+ the special tokens added once)

and a text whose start is dense enough is proven to fit from its prefix alone. How long a
prefix to encode comes from the bytes per token calibrated on the first batch: a guess that
decides only how much is encoded, never a verdict. A prefix that proves nothing is not
wasted: the tokens of the rest, added to it, are the text's exact count (equality above).
The verdicts are those of encoding every text (tested with hypothesis in
``tests/checks/test_token_bounds.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from preflight.tokenizer import TokenCounter

# A prefix longer than this share of its text saves too little to be worth a cut.
_MAX_PREFIX_SHARE = 0.9


@dataclass
class Prefixes:
    """The texts cut (positions in the list given), where, the exact tokens of each start
    (without specials) and the UTF-8 bytes after each cut."""

    chosen: np.ndarray
    cuts: list[int]
    tokens: np.ndarray
    rest_bytes: np.ndarray

    def bounds(self, n: int, room: int) -> np.ndarray:
        """A proven upper bound on each of ``n`` texts' tokens (without specials):
        ``room + 1`` for the texts not cut."""
        out = np.full(n, room + 1, dtype=np.int64)
        out[self.chosen] = self.tokens + self.rest_bytes
        return out


def cut_and_count(counter: TokenCounter, texts: list[str], nbytes: np.ndarray, room: int,
                  bytes_per_token: float) -> Prefixes:
    """Encode the start of each text that its start may prove to fit in ``room`` tokens
    (without specials), cut where ``tokens(start) + bytes(rest) <= room`` should hold at
    ``bytes_per_token`` (the calibration's guess; a start that proves nothing is not
    wasted: the rest's tokens added to it are the text's exact count, ``rest_counts``)."""
    chosen, prefixes, rest = [], [], []
    cuts: list[int] = []
    if counter.splits_before_spaces and bytes_per_token > 1.0 and room > 0:
        for k, (text, size) in enumerate(zip(texts, nbytes.tolist(), strict=True)):
            # The shortest start P with P / bytes_per_token + (size - P) <= room.
            want = (size - room) / (1.0 - 1.0 / bytes_per_token)
            if size / bytes_per_token > room or want > _MAX_PREFIX_SHARE * size:
                continue  # likely too long, or the start would be nearly the whole text
            cut = _cut(text, int(max(want, 0.0) * len(text) / max(size, 1)))
            if cut <= 0:
                continue
            prefix = text[:cut]
            chosen.append(k)
            cuts.append(cut)
            prefixes.append(prefix)
            rest.append(size - len(prefix.encode("utf-8")))
    tokens = (counter.count(prefixes, add_special_tokens=False) if prefixes
              else np.zeros(0, np.int64))
    return Prefixes(np.asarray(chosen, dtype=np.int64), cuts, tokens,
                    np.asarray(rest, dtype=np.int64))


def rest_counts(counter: TokenCounter, texts: list[str], cuts: list[int]) -> np.ndarray:
    """The exact tokens (without specials) after each cut: with the start's, the text's."""
    return counter.count([t[c:] for t, c in zip(texts, cuts, strict=True)],
                         add_special_tokens=False)


def _cut(text: str, start: int) -> int:
    """The first position at or after ``start`` holding a space that follows a non-space
    character (a boundary no tokenizer piece crosses), or -1."""
    i = text.find(" ", max(start, 1))
    while i > 0 and text[i - 1].isspace():
        i = text.find(" ", i + 1)
    return i
