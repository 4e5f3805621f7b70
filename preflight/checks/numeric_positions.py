"""Robust statistics per position of a fixed-length vector field (a feature vector).

The positions of a feature vector are different features: an age at ``[0]``, 0/1 flags at
``[1]``..``[3]``. Pooled, one median and MAD describe none of them (a median near 1, and
every age 30 MADs out of it), so a field whose records hold lists of one length L (its
modal length, ``numeric_shapes``: the records of another shape are ``wrong_length``
findings, left out here) gets a median and MAD per position, and each element is judged
against its own position's. A ragged list (token ids, a series of varying length) or a
deeper nesting keeps the pooled statistics: position 7 of a sequence is not a feature, and
only some records reach it.

Nothing more is kept per value than the pooled path keeps: positions are derived from the
record ends of the chunks at the end.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from preflight.checks.numeric_stats import Chunk


def positions(c: Chunk, length: int) -> np.ndarray:
    """Each of the chunk's values' position in its record's list."""
    k = np.arange(len(c.values))
    if whole(c, length):
        return k % length
    pos = k - (c.ends - _counts(c))[_owners(c)]  # type: ignore[operator]
    if c.moved_k is not None and c.moved_pos is not None:
        pos[c.moved_k] = c.moved_pos
    return pos


def deviations(c: Chunk, length: int, med: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """``|x - median| / sigma`` of each of the chunk's values, with its own position's
    median and sigma (inf where the position is not judged: z is 0 there)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if whole(c, length):  # a (records × positions) matrix: no position array
            return (np.abs(c.values.reshape(-1, length) - med) / sigma).ravel()
        pos = positions(c, length)
        return np.abs(c.values - med[pos]) / sigma[pos]


def centers(chunks: list[Chunk], length: int) -> tuple[np.ndarray, np.ndarray]:
    """The median and MAD of each position over all chunks (NaN where a position holds no
    finite value). The values go into one (positions × records) matrix, 8 bytes a value as
    the pooled path's copy; with every record's list all finite, one partition along the
    records gives every position's median at once (O(n)), else each position's finite
    values are taken apart."""
    held = [_counts(c) > 0 for c in chunks]
    cols = np.empty((length, sum(int(h.sum()) for h in held)))
    at, holes = 0, False
    for c, h in zip(chunks, held, strict=True):
        r = int(h.sum())
        if whole(c, length):
            cols[:, at:at + r] = c.values.reshape(r, length).T
        else:  # records holding non-finite elements: NaN at their positions
            holes = True
            block = np.full((r, length), np.nan)
            rank = np.cumsum(h) - 1
            block[rank[_owners(c)], positions(c, length)] = c.values
            cols[:, at:at + r] = block.T
        at += r
    if not holes:
        med = _row_medians(cols)
        with np.errstate(over="ignore"):  # deviations of values near ±1.8e308 may overflow
            np.subtract(cols, med[:, None], out=cols)
        np.abs(cols, out=cols)
        return med, _row_medians(cols)
    med, mad = np.full(length, np.nan), np.full(length, np.nan)
    for p in range(length):
        seg = cols[p][~np.isnan(cols[p])]
        if len(seg):
            med[p] = median_in_place(seg)
            with np.errstate(over="ignore"):
                np.subtract(seg, med[p], out=seg)
            np.abs(seg, out=seg)
            mad[p] = median_in_place(seg)
    return med, mad


def median_in_place(a: np.ndarray) -> float:
    """The median of finite values, reordering ``a``: one partition, where ``np.median``
    also partitions at the end to look for NaN."""
    half = len(a) // 2
    if len(a) % 2:
        a.partition(half)
        return float(a[half])
    a.partition((half - 1, half))
    lo, hi = float(a[half - 1]), float(a[half])
    mid = (lo + hi) / 2
    return mid if math.isfinite(mid) else lo / 2 + hi / 2


def _row_medians(a: np.ndarray) -> np.ndarray:
    """Each row's median of a matrix of finite values, reordering each row."""
    half = a.shape[1] // 2
    if a.shape[1] % 2:
        a.partition(half, axis=1)
        return a[:, half].copy()
    a.partition((half - 1, half), axis=1)
    lo, hi = a[:, half - 1], a[:, half]
    with np.errstate(over="ignore"):
        mid = (lo + hi) / 2
    return np.where(np.isfinite(mid), mid, lo / 2 + hi / 2)


def whole(c: Chunk, length: int) -> bool:
    """Whether each record of the chunk holds ``length`` finite values or none (its values
    are whole lists, one after another)."""
    counts = _counts(c)
    return bool(np.all((counts == 0) | (counts == length)))


def _counts(c: Chunk) -> np.ndarray:
    """How many of the chunk's values each of its records holds."""
    assert c.ends is not None
    return np.diff(c.ends, prepend=0)


def _owners(c: Chunk) -> np.ndarray:
    """The record of each of the chunk's values (``Chunk.records`` of all, without a
    search)."""
    counts = _counts(c)
    return np.repeat(np.arange(len(counts)), counts)
