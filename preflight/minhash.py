"""MinHash signatures and LSH band keys for whole batches, compiled with numba.

Compatible with datasketch (``MinHash(num_perm, seed)``, its default ``affine32`` scheme): a
shingle's 32-bit hash is pre-mixed with the MurmurHash3 finalizer, then permuted as
``a * h + b mod 2^32`` with the ``a``/``b`` that datasketch draws from
``numpy.random.RandomState(seed)``. Fed the same 32-bit shingle hashes, datasketch computes the
same signature; ``tests/test_minhash.py`` checks it. What differs is the cost: one compiled
pass over a batch's shingles instead of a Python object per document.

Shingles are word n-grams of the folded text (the view ``exact_duplicate`` uses), or
character n-grams for texts without spaces (Chinese, Japanese). A text shorter than ``n``
units is one shingle: the hash of its whole folded text, so short texts match only exact
copies of themselves.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import polars as pl

from preflight.jit import FNV_OFFSET, FNV_PRIME, GOLDEN, Kernels, fmix64
from preflight.text import utf8_buffers

# The kernels compile (and numba loads) when the first one runs (``preflight.jit``).
numba: Any = None
_KERNELS = Kernels(globals())
_kernel = _KERNELS.kernel
kernels = _KERNELS.compiled


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's affine32 permutation parameters: odd ``a`` and any ``b``, uint32."""
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def catch_probability(similarity: float, bands: int, rows: int) -> float:
    """Chance that LSH with ``bands`` x ``rows`` makes a pair of this Jaccard a candidate."""
    return 1.0 - (1.0 - similarity**rows) ** bands


# Chance that LSH makes a pair at exactly the threshold a candidate, at least. Measured on the
# Debian corpus scaled to 50 MB (benchmarks/RESULTS.md, issue 17 item 4): 16 x 8 (0.947 at
# 0.8) found 0.9917 of the documents with a partner at 0.8, 18 x 6 (0.9958) found 0.9990.
CATCH_AT_THRESHOLD = 0.995


def choose_bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """Bands x rows for recall: the most rows per band (the fewest false candidates) with
    which enough bands fit in ``num_perm`` to catch a pair at ``threshold`` with probability
    ``CATCH_AT_THRESHOLD``, and the fewest such bands; one row per band in every permutation
    when none does."""
    for rows in range(num_perm, 0, -1):
        hit = threshold**rows
        if hit >= 1.0:
            return 1, rows
        if hit <= 0.0:
            continue
        needed = math.log1p(-CATCH_AT_THRESHOLD) / math.log1p(-hit) - 1e-9
        # a hit too rare for a float ratio (a low threshold, many rows) needs too many bands
        if math.isfinite(needed) and math.ceil(needed) * rows <= num_perm:
            return max(math.ceil(needed), 1), rows
    return num_perm, 1


def shingles(folded: pl.Series, *, n: int, char_n: int, unit: str, seed: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """Shingle hashes of each text: ``(values uint32, offsets int64)``, text ``k`` owning
    ``values[offsets[k]:offsets[k+1]]``. Texts must be non-null and folded (single spaces,
    no space at either end); ``unit`` is ``word``, ``char`` or ``auto`` (characters for a
    text with no space). Works on the UTF-8 bytes directly, one text per core at a time."""
    data, text_offsets = utf8_buffers(folded)
    mode = {"word": 0, "char": 1, "auto": 2}[unit]
    counts = _shingle_counts(data, text_offsets, n, char_n, mode)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    values = np.empty(offsets[-1], dtype=np.uint32)
    _fill_shingles(data, text_offsets, offsets, n, char_n, mode, np.uint64(seed), values)
    return values, offsets




@_kernel()
def _by_char(data: np.ndarray, lo: int, hi: int, mode: int) -> bool:
    if mode != 2:
        return mode == 1
    for k in range(lo, hi):  # noqa: SIM110 - numba compiles loops, not generators
        if data[k] == 32:
            return False
    return True


@_kernel(parallel=True)
def _shingle_counts(data: np.ndarray, text_offsets: np.ndarray, n: int, char_n: int,
                    mode: int) -> np.ndarray:
    docs = len(text_offsets) - 1
    counts = np.empty(docs, dtype=np.int64)
    for d in numba.prange(docs):
        lo, hi = text_offsets[d], text_offsets[d + 1]
        if _by_char(data, lo, hi, mode):
            units = 0
            for k in range(lo, hi):
                if data[k] & 0xC0 != 0x80:  # a character starts at every non-continuation byte
                    units += 1
            counts[d] = max(units - char_n + 1, 1)
        else:
            units = 1
            for k in range(lo, hi):
                if data[k] == 32:
                    units += 1
            counts[d] = max(units - n + 1, 1)
    return counts


@_kernel()
def _next_unit(data: np.ndarray, k: int, hi: int, by_char: bool, seed: np.uint64
               ) -> tuple[np.uint64, int]:
    """Hash of the word or character starting at ``k``, and where the next one starts."""
    h = FNV_OFFSET ^ seed
    if by_char:
        h = (h ^ np.uint64(data[k])) * FNV_PRIME
        k += 1
        while k < hi and data[k] & 0xC0 == 0x80:
            h = (h ^ np.uint64(data[k])) * FNV_PRIME
            k += 1
        return fmix64(h), k
    while k < hi and data[k] != 32:
        h = (h ^ np.uint64(data[k])) * FNV_PRIME
        k += 1
    return fmix64(h), k + 1


@_kernel(parallel=True)
def _fill_shingles(data: np.ndarray, text_offsets: np.ndarray, offsets: np.ndarray, n: int,
                   char_n: int, mode: int, seed: np.uint64, out: np.ndarray) -> None:
    for d in numba.prange(len(text_offsets) - 1):
        lo, hi = text_offsets[d], text_offsets[d + 1]
        by_char = _by_char(data, lo, hi, mode)
        size = char_n if by_char else n
        ring = np.zeros(size, dtype=np.uint64)
        at, units, k = offsets[d], 0, lo
        while k < hi:
            h, k = _next_unit(data, k, hi, by_char, seed)
            ring[units % size] = h
            units += 1
            if units >= size:
                g = np.uint64(0)
                for j in range(size):
                    g = (g ^ ring[(units - size + j) % size]) * GOLDEN + np.uint64(j + 1)
                out[at] = np.uint32(fmix64(g) >> np.uint64(32))
                at += 1
        if units < size:  # shorter than one shingle: the whole text is its only shingle
            whole = FNV_OFFSET ^ seed ^ np.uint64(0x5BD1E995)
            for k in range(lo, hi):
                whole = (whole ^ np.uint64(data[k])) * FNV_PRIME
            out[at] = np.uint32(fmix64(whole) >> np.uint64(32))


@_kernel(parallel=True)
def signatures(values: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray
               ) -> np.ndarray:
    """MinHash signature per text (``uint32[texts, num_perm]``), datasketch's affine32."""
    docs, perms = len(offsets) - 1, len(a)
    sig = np.empty((docs, perms), dtype=np.uint32)
    mask = np.uint64(0xFFFFFFFF)
    a64, b64 = a.astype(np.uint64), b.astype(np.uint64)
    for d in numba.prange(docs):
        row = np.full(perms, mask, dtype=np.uint64)
        for s in range(offsets[d], offsets[d + 1]):
            # numba widens uint32 arithmetic: work in uint64 and keep the low 32 bits.
            h = np.uint64(values[s])
            h ^= h >> np.uint64(16)
            h = (h * np.uint64(0x85EBCA6B)) & mask
            h ^= h >> np.uint64(13)
            h = (h * np.uint64(0xC2B2AE35)) & mask
            h ^= h >> np.uint64(16)
            for k in range(perms):
                v = (a64[k] * h + b64[k]) & mask
                if v < row[k]:
                    row[k] = v
        sig[d] = row.astype(np.uint32)
    return sig


@_kernel(parallel=True)
def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit key per text and band (``uint64[texts, bands]``): equal keys mean equal
    signature slices, up to a 2^-64 chance of collision (which confirmation removes)."""
    keys = np.empty((sig.shape[0], bands), dtype=np.uint64)
    for d in numba.prange(sig.shape[0]):
        for band in range(bands):
            h = np.uint64(band + 1)
            for j in range(band * rows, (band + 1) * rows):
                h = (h ^ np.uint64(sig[d, j])) * GOLDEN
                h ^= h >> np.uint64(29)
            keys[d, band] = h
    return keys


@_kernel(parallel=True)
def sorted_sets(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each text's shingles as a sorted set (duplicates dropped), in CSR form."""
    docs = len(offsets) - 1
    ordered = np.empty(len(values), dtype=np.uint32)
    distinct = np.zeros(docs + 1, dtype=np.int64)
    for d in numba.prange(docs):  # sort each text's shingles in place, count the distinct
        lo, hi = offsets[d], offsets[d + 1]
        ordered[lo:hi] = np.sort(values[lo:hi])
        count = 0
        for k in range(lo, hi):
            if k == lo or ordered[k] != ordered[k - 1]:
                count += 1
        distinct[d + 1] = count
    new_offsets = np.cumsum(distinct)
    out = np.empty(new_offsets[-1], dtype=np.uint32)
    for d in numba.prange(docs):
        lo, hi, at = offsets[d], offsets[d + 1], new_offsets[d]
        for k in range(lo, hi):
            if k == lo or ordered[k] != ordered[k - 1]:
                out[at] = ordered[k]
                at += 1
    return out, new_offsets


@_kernel(parallel=True)
def jaccard_pairs(values: np.ndarray, offsets: np.ndarray, u: np.ndarray, v: np.ndarray
                  ) -> np.ndarray:
    """Exact Jaccard of pairs of sorted sets (CSR, as from ``sorted_sets``)."""
    out = np.empty(len(u), dtype=np.float64)
    for p in numba.prange(len(u)):
        i, i_end = offsets[u[p]], offsets[u[p] + 1]
        j, j_end = offsets[v[p]], offsets[v[p] + 1]
        size = (i_end - i) + (j_end - j)
        inter = 0
        while i < i_end and j < j_end:
            if values[i] == values[j]:
                inter += 1
                i += 1
                j += 1
            elif values[i] < values[j]:
                i += 1
            else:
                j += 1
        union = size - inter
        out[p] = inter / union if union else 1.0
    return out


def components(u: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    """Connected components of an undirected graph on ``n`` nodes: each node's label is the
    smallest node index in its component."""
    labels = np.arange(n, dtype=np.int64)
    if len(u) == 0:
        return labels
    while True:
        low = np.minimum(labels[u], labels[v])
        changed = bool(((labels[u] != low) | (labels[v] != low)).any())
        np.minimum.at(labels, u, low)
        np.minimum.at(labels, v, low)
        labels = labels[labels]  # pointer jumping
        if not changed:
            return labels


class LSH:
    """One MinHash LSH setup: how folded documents are shingled, signed and banded."""

    def __init__(self, *, num_perm: int, threshold: float, bands: int | None,
                 rows: int | None, n: int, char_n: int, unit: str, seed: int) -> None:
        self.num_perm, self.threshold = num_perm, threshold
        self.n, self.char_n, self.unit, self.seed = n, char_n, unit, seed
        if bands and rows:
            self.bands, self.rows = bands, rows
        else:
            self.bands, self.rows = choose_bands(threshold, num_perm)
        self._a, self._b = permutations(num_perm, seed)
        _warm_up()

    def shingles(self, docs: pl.Series) -> tuple[np.ndarray, np.ndarray]:
        """Shingle hashes of folded documents (CSR)."""
        return shingles(docs, n=self.n, char_n=self.char_n, unit=self.unit, seed=self.seed)

    def band_keys(self, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """LSH band keys of documents given as shingle hashes (CSR)."""
        return band_keys(signatures(values, offsets, self._a, self._b), self.bands, self.rows)

    def describe(self) -> dict[str, object]:
        """The parameters and catch probabilities, for the report."""
        return {
            "num_perm": self.num_perm,
            "bands": self.bands,
            "rows": self.rows,
            "threshold": self.threshold,
            "catch_probability": {
                str(s): round(catch_probability(s, self.bands, self.rows), 4)
                for s in (0.7, 0.8, 0.9)
            },
        }


@functools.cache
def _warm_up() -> None:
    """Start numba's parallel runtime and load the cached kernels (about 0.3 s, once per
    process) when a rule is set up, so it shows as setup time, not scan time."""
    values, offsets = shingles(pl.Series(["warm up"]), n=5, char_n=5, unit="auto", seed=0)
    a, b = permutations(8, 0)
    band_keys(signatures(values, offsets, a, b), 2, 4)
    sets, set_offsets = sorted_sets(values, offsets)
    sets.setflags(write=False)  # as confirmation sees them: mapped read-only from disk
    jaccard_pairs(sets, set_offsets, np.zeros(1, np.int64), np.zeros(1, np.int64))
