"""Exact token counts from the tokens of text pieces, each distinct piece encoded once.

For a byte-level BPE whose pieces never join a non-space character and the space after it
(``TokenCounter.pieces`` is set for them: GPT-2's, Llama 3's or Qwen 2's split with no
normalizer; tiktoken's GPT-2, r50k, cl100k and o200k patterns), a text
cut before every such space is a list of pieces whose token counts add up to the text's:
the pre-tokenizer splits there (no regex alternative holds a space after another
character), it reads nothing before a cut (no look-behind) and BPE never merges across its
splits. A corpus repeats its pieces (`` the``, `` package``, `` of``): 250 MB of Debian
descriptions hold 27.7 million pieces, 0.36 million distinct, 2.4% of the text's bytes. So:

1. one compiled pass cuts each text, hashes each piece (two 64-bit hashes) and looks it up
   in an open-addressing table; a known piece adds its count to its text, a new one is
   noted (once per batch, however often it occurs);
2. the new pieces go to the tokenizer, each encoded alone as it would be as a text: with
   ``tokenizers``, in groups of pre-tokenized words (``Encoding.word_ids`` says which word
   each token came from; one input per word costs ~10 µs each), with tiktoken, in its batch
   API;
3. their counts enter the table and the texts that hold them.

A piece longer than ``MAX_PIECE_BYTES`` is encoded every time instead of being remembered,
and the table holds at most ``MAX_ENTRIES`` pieces (about 40 MB). Full, it drops the pieces
not found since the last time it was full (a corpus's pieces drift: one language's shards,
then another's). Counts stay exact either way. Where pieces rarely repeat, whole texts are
encoded instead (``FRESH_LIMIT``). Only a space after a character known not to be
whitespace cuts: an ASCII letter, digit or sign, or a non-ASCII character outside Unicode's
whitespace and the invisible separators beside it. The counts equal encoding every text
(hypothesis, on random texts and tokenizers of each qualifying kind:
``tests/test_token_pieces.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from preflight.jit import FNV_OFFSET, FNV_PRIME, GOLDEN, Kernels, fmix64
from preflight.text import utf8_buffers

numba: Any = None
_KERNELS = Kernels(globals())
_kernel = _KERNELS.kernel

# Longer pieces (a URL, a hash, a line of base64) are rarely seen twice: encoded each time.
MAX_PIECE_BYTES = 96
# The most pieces remembered: 2 slots each at most, 20 bytes a slot (two hashes, a count).
MAX_ENTRIES = 1 << 20
_FIRST_SLOTS = 1 << 16
# Words per tokenizer input: enough that the tokenizer's per-input cost fades.
_WORDS_PER_INPUT = 1024
# Pieces per round of the compiled pass (5 int64 arrays of this length).
_ROUND = 1 << 20
# Counting by pieces pays while the new pieces' bytes stay under this share of the bytes
# counted (per block of _BLOCK_BYTES): a word encoded alone costs the tokenizer more than
# inside its text. Past it (hashes, all-distinct words, text with few spaces), whole texts
# are encoded, and one batch in _PROBE_EVERY still goes by pieces, so that a corpus that
# starts repeating itself is noticed (the wait doubles while it does not, to _PROBE_MAX).
FRESH_LIMIT = 0.4
_BLOCK_BYTES = 2_000_000
_PROBE_EVERY = 8
_PROBE_MAX = 256
_EMPTY = -1

# Words -> the tokens of each, encoded alone, without the special tokens.
CountWords = Callable[[list[str]], np.ndarray]


class PieceCounter:
    """Token counts of texts (without the special tokens a tokenizer adds) from the
    counts of their pieces, remembered across batches. Thread-safe (one batch at a time)."""

    def __init__(self, count_words: CountWords) -> None:
        self._count_words = count_words
        self._lock = threading.Lock()
        self._clear(_FIRST_SLOTS)
        # Bytes given to the tokenizer, and bytes counted: what the cache saved.
        self.encoded_bytes = 0
        self.counted_bytes = 0
        self._block = [0, 0]  # the same, in the block being measured
        self._fresh = 0.0  # the new pieces' share of the last block's bytes
        self._waited = 0
        self._wait = _PROBE_EVERY

    def worth(self) -> bool:
        """Whether to count the next batch by pieces (``FRESH_LIMIT``)."""
        with self._lock:
            if self._fresh <= FRESH_LIMIT:
                self._wait = _PROBE_EVERY
                return True
            self._waited += 1
            if self._waited < self._wait:
                return False
            self._waited = 0
            self._wait = min(2 * self._wait, _PROBE_MAX)
            return True

    def _clear(self, slots: int) -> None:
        self._keys1 = np.zeros(slots, np.uint64)
        self._keys2 = np.zeros(slots, np.uint64)
        self._values = np.full(slots, _EMPTY, np.int32)
        self._used = np.zeros(slots, np.uint8)  # found or added since the last eviction
        self._entries = 0

    def _move(self, slots: int, *, used_only: bool) -> int:
        """Rebuild the table with ``slots`` slots, keeping every piece or (``used_only``)
        those used since the last eviction; return how many were dropped."""
        old = self._keys1, self._keys2, self._values, self._used
        self._clear(slots)
        self._entries = _rehash(*old, self._keys1, self._keys2, self._values, used_only)
        return int((old[2] >= 0).sum()) - self._entries

    def count(self, texts: pl.Series) -> np.ndarray:
        """The token count of each text of ``texts`` (a String Series; a null counts 0)."""
        data, offsets = utf8_buffers(texts)
        n = len(offsets) - 1
        # Every piece but a text's first starts at a space: a bound on the pieces, and
        # rounds of at most ``_ROUND`` pieces bound the memory a batch of any size takes.
        most = min(n + int(np.count_nonzero(data == 32)), _ROUND)
        counts = np.zeros(n, np.int64)
        starts, lengths, slots, occ_text, occ_new = (np.empty(most, np.int64)
                                                     for _ in range(5))
        t, at = 0, 0
        evict = True  # stop when the table is full, to drop the pieces not in use
        with self._lock:
            encoded_before = self.encoded_bytes
            while t < n:
                room = self._make_room(most)
                try:
                    new, occ, added, t, at, full = _scan(
                        data, offsets, t, at, self._keys1, self._keys2, self._values,
                        self._used, room, evict, MAX_PIECE_BYTES, counts, starts, lengths,
                        slots, occ_text, occ_new)
                    self._entries += added
                    tokens = self._encode(data, starts[:new], lengths[:new])
                    known = slots[:new] >= 0
                    self._values[slots[:new][known]] = tokens[known]
                except BaseException:
                    # The table may hold this round's placeholders: forget all, stay exact.
                    self._clear(_FIRST_SLOTS)
                    raise
                counts += np.bincount(occ_text[:occ], weights=tokens[occ_new[:occ]],
                                      minlength=n).astype(np.int64)
                if full:  # every piece in use since the last eviction: go on without adding
                    evict = self._move(len(self._values), used_only=True) > 0
            self._measure(len(data), self.encoded_bytes - encoded_before)
        return counts

    def _measure(self, counted: int, encoded: int) -> None:
        """Add a batch's bytes to the block; a full block sets the new pieces' share."""
        self.counted_bytes += counted
        self._block[0] += encoded
        self._block[1] += counted
        if self._block[1] >= _BLOCK_BYTES:
            self._fresh = self._block[0] / self._block[1]
            self._block = [0, 0]

    def _make_room(self, most: int) -> int:
        """Grow the table for up to ``most`` new pieces if it may; return how many pieces
        may be added (the table stays at most half full)."""
        want = min(self._entries + most, MAX_ENTRIES)
        slots = len(self._values)
        if 2 * want > slots:  # a power of two, at most 2 * MAX_ENTRIES
            most_slots = 1 << (2 * MAX_ENTRIES).bit_length() - 1
            grown = min(1 << (2 * want - 1).bit_length(), most_slots)
            if grown > slots:
                self._move(grown, used_only=False)
        return max(min(MAX_ENTRIES, len(self._values) // 2) - self._entries, 0)

    def _encode(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Each new piece's token count."""
        if not len(starts):
            return np.zeros(0, np.int64)
        view = memoryview(data)
        words = [str(view[s: s + k], "utf-8")
                 for s, k in zip(starts.tolist(), lengths.tolist(), strict=True)]
        self.encoded_bytes += int(lengths.sum())
        return np.asarray(self._count_words(words), dtype=np.int64)


def pretokenized_counts(encode_batch: Callable[..., list[Any]]) -> CountWords:
    """``CountWords`` for a ``tokenizers.Tokenizer``'s ``encode_batch``: the words go in
    groups of ``_WORDS_PER_INPUT`` pre-tokenized words, each encoded alone."""

    def count(words: list[str]) -> np.ndarray:
        size = _WORDS_PER_INPUT
        groups = [words[k: k + size] for k in range(0, len(words), size)]
        out = np.zeros(len(words), np.int64)
        encoded = encode_batch(groups, is_pretokenized=True, add_special_tokens=False)
        for g, (group, e) in enumerate(zip(groups, encoded, strict=True)):
            which = np.fromiter((w for w in e.word_ids if w is not None), np.int64)
            out[g * size: g * size + len(group)] = np.bincount(which, minlength=len(group))
        return out

    return count


_SEED2 = np.uint64(0x2545F4914F6CDD1D)


@_kernel()
def _maybe_space(cp: int) -> bool:
    """Unicode whitespace beyond ASCII, and the invisible separators beside it (a cut
    needs a character that is certainly not whitespace before the space)."""
    return (cp == 0x85 or cp == 0xA0 or cp == 0x1680 or cp == 0x180E
            or 0x2000 <= cp <= 0x200D or cp == 0x2028 or cp == 0x2029 or cp == 0x202F
            or cp == 0x205F or cp == 0x2060 or cp == 0x3000 or cp == 0xFEFF)


@_kernel()
def _cuts_at(data: np.ndarray, p: int, lo: int) -> bool:
    """Whether a piece starts at ``p``: a space after a character that is not whitespace
    (``lo``: where the text starts; ``p > lo``)."""
    if data[p] != 32:
        return False
    b = data[p - 1]
    if 0x21 <= b <= 0x7E:
        return True
    if b < 0x80:  # ASCII whitespace, a control character, DEL
        return False
    q = p - 1  # the character's first byte
    while q > lo and (data[q] & 0xC0) == 0x80 and p - q < 4:
        q -= 1
    lead = int(data[q])
    width = p - q
    if width == 2 and (lead & 0xE0) == 0xC0:
        cp = ((lead & 0x1F) << 6) | (int(data[q + 1]) & 0x3F)
    elif width == 3 and (lead & 0xF0) == 0xE0:
        cp = ((lead & 0x0F) << 12) | ((int(data[q + 1]) & 0x3F) << 6) | (int(data[q + 2]) & 0x3F)
    elif width == 4 and (lead & 0xF8) == 0xF0:
        cp = 0x10000  # beyond the BMP: no whitespace there
    else:
        return False
    return not _maybe_space(cp)


@_kernel()
def _scan(data: np.ndarray, offsets: np.ndarray, t: int, start: int, keys1: np.ndarray,
          keys2: np.ndarray, values: np.ndarray, used: np.ndarray, room: int, evict: bool,
          max_piece: int, counts: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
          slots: np.ndarray, occ_text: np.ndarray, occ_new: np.ndarray
          ) -> tuple[int, int, int, int, int, bool]:
    """Cut the texts into pieces, from text ``t``'s piece at byte ``start`` on, and count
    the known pieces into ``counts``. Each new piece (once per round) gets
    ``starts``/``lengths`` and its table slot (-1: not remembered); each occurrence of a
    new piece gets its text and the new piece's number. A new piece waits in the table as
    ``-2 - number``. A piece found or added is marked ``used``. A round ends when the
    occurrences fill their arrays, or (``evict``) when a new piece finds no ``room``.
    Returns (new pieces, occurrences, pieces added, the text and byte to go on from (``t``
    is the number of texts when all are done), and whether the table was full)."""
    mask = np.uint64(len(values) - 1)
    n = len(offsets) - 1
    new = 0
    occ = 0
    added = 0
    while t < n:
        lo = offsets[t]
        hi = offsets[t + 1]
        start = max(start, lo)
        for p in range(start + 1, hi + 1):
            if p < hi and not _cuts_at(data, p, lo):
                continue
            if occ == len(occ_text):
                return new, occ, added, t, start, False
            size = p - start
            slot = -1
            if size <= max_piece:
                h1 = FNV_OFFSET
                h2 = _SEED2
                for k in range(start, p):
                    b = np.uint64(data[k])
                    h1 = (h1 ^ b) * FNV_PRIME
                    h2 = (h2 ^ b) * GOLDEN
                    h2 ^= h2 >> np.uint64(29)
                h1 = fmix64(h1 ^ np.uint64(size))
                h2 = fmix64(h2 + np.uint64(size))
                at = h1 & mask
                while values[at] != -1 and not (keys1[at] == h1 and keys2[at] == h2):
                    at = (at + np.uint64(1)) & mask
                value = values[at]
                if value >= 0:
                    used[at] = 1
                    counts[t] += value
                    start = p
                    continue
                if value <= -2:
                    occ_text[occ] = t
                    occ_new[occ] = -2 - value
                    occ += 1
                    start = p
                    continue
                if added < room:
                    keys1[at] = h1
                    keys2[at] = h2
                    values[at] = -2 - new
                    used[at] = 1
                    added += 1
                    slot = np.int64(at)
                elif evict:
                    return new, occ, added, t, start, True
            starts[new] = start
            lengths[new] = size
            slots[new] = slot
            occ_text[occ] = t
            occ_new[occ] = new
            occ += 1
            new += 1
            start = p
        t += 1
    return new, occ, added, t, 0, False


@_kernel()
def _rehash(keys1: np.ndarray, keys2: np.ndarray, values: np.ndarray, used: np.ndarray,
            to1: np.ndarray, to2: np.ndarray, to_values: np.ndarray, used_only: bool) -> int:
    """Move the remembered pieces (``used_only``: those marked used) into an empty table;
    return how many moved."""
    mask = np.uint64(len(to_values) - 1)
    moved = 0
    for k in range(len(values)):
        if values[k] < 0 or (used_only and used[k] == 0):
            continue
        at = keys1[k] & mask
        while to_values[at] != -1:
            at = (at + np.uint64(1)) & mask
        to1[at] = keys1[k]
        to2[at] = keys2[k]
        to_values[at] = values[k]
        moved += 1
    return moved
