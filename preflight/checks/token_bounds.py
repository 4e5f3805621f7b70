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
decides only how much is encoded, never a verdict. A prefix that proves nothing sends its
text to the full encoding, so the verdicts stay those of encoding every text (tested with
hypothesis in ``tests/checks/test_token_bounds.py``).
"""

from __future__ import annotations

import numpy as np

from preflight.tokenizer import TokenCounter

# The calibrated bytes per token, made pessimistic (a text denser than the sample must
# still be proven by its prefix, not sent to the full encoding).
_DENSITY_MARGIN = 0.8
# A prefix longer than this share of its text saves too little to be worth a second pass.
_MAX_PREFIX_SHARE = 0.85


def prefix_bounds(counter: TokenCounter, texts: list[str], nbytes: np.ndarray, room: int,
                  bytes_per_token: float) -> np.ndarray:
    """A proven upper bound on the tokens of each text (without the added special tokens),
    from the exact tokens of a prefix and the bytes after it: ``room + 1`` where no
    prefix was tried or it proved nothing (the caller encodes those texts whole)."""
    bounds = np.full(len(texts), room + 1, dtype=np.int64)
    dense = bytes_per_token * _DENSITY_MARGIN
    if not counter.splits_before_spaces or dense <= 1.0 or room <= 0:
        return bounds
    chosen, prefixes, rest = [], [], []
    for k, (text, size) in enumerate(zip(texts, nbytes.tolist(), strict=True)):
        # Shortest prefix P with P / dense + (size - P) <= room, at the density guessed.
        want = (size - room) / (1.0 - 1.0 / dense)
        if size / dense > room or want > _MAX_PREFIX_SHARE * size:
            continue  # likely too long, or the prefix would be nearly the whole text
        cut = _cut(text, int(max(want, 0.0) * len(text) / max(size, 1)))
        if cut <= 0:
            continue
        prefix = text[:cut]
        chosen.append(k)
        prefixes.append(prefix)
        rest.append(size - len(prefix.encode("utf-8")))
    if chosen:
        counted = counter.count(prefixes, add_special_tokens=False)
        bounds[np.asarray(chosen)] = np.minimum(counted + np.asarray(rest, np.int64), room + 1)
    return bounds


def _cut(text: str, start: int) -> int:
    """The first position at or after ``start`` holding a space that follows a non-space
    character (a boundary no tokenizer piece crosses), or -1."""
    i = text.find(" ", max(start, 1))
    while i > 0 and text[i - 1].isspace():
        i = text.find(" ", i + 1)
    return i
