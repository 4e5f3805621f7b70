"""Which near-duplicate candidate pairs to compare, and the clusters the confirmed ones make.

Documents that share an LSH band key form a bucket. Comparing only each member with the
bucket's first and previous members misses a document whose true partner sits elsewhere in a
crowded bucket; comparing every pair is quadratic in the bucket. Here each member is compared
with up to ``WINDOW`` earlier members of its bucket, nearest first, one distance per round, and
a pair is skipped when the confirmed pairs so far already link its two documents (union-find)
or when another band made it a candidate already. A bucket of 100,000 copies of one text is
linked by its first round, and its later rounds skip every pair: the cost stays linear in the
bucket's size, however crowded, and a skipped pair could not have found a new document.

Rounds, buckets and read order decide everything, so the pairs (and the clusters) are the same
whichever way the corpus was split into pieces or workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from preflight.minhash import components

WINDOW = 8  # earlier bucket members each document is compared with, at most


@dataclass
class Linked:
    """The confirmed pairs (``u < v``, document indices) and their similarity (NaN when not
    confirmed), each document's cluster label (its smallest linked document) and counts."""

    u: np.ndarray
    v: np.ndarray
    similarity: np.ndarray
    labels: np.ndarray
    compared: int


def bucket_members(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Members of every bucket of two or more documents, band after band, each bucket in read
    order: ``(document index, rank in its bucket)`` (rank 0 is the bucket's first)."""
    members, ranks = [], []
    for band in range(keys.shape[1]):
        # Stable (by key, then read order): a bucket's order is the same whichever other
        # records are present. polars sorts on all cores.
        order = pl.DataFrame({"k": keys[:, band]}).with_row_index("i").sort(
            ["k", "i"]).get_column("i").to_numpy().astype(np.int64)
        sorted_keys = keys[order, band]
        new = np.ones(len(order), dtype=bool)
        new[1:] = sorted_keys[1:] != sorted_keys[:-1]
        starts = np.flatnonzero(new)
        sizes = np.diff(np.append(starts, len(order)))
        shared = np.repeat(sizes >= 2, sizes)
        rank = np.arange(len(order), dtype=np.int64) - np.repeat(starts, sizes)
        members.append(order[shared])
        ranks.append(rank[shared])
    if not members:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(members), np.concatenate(ranks)


def link(members: np.ndarray, ranks: np.ndarray, n: int,
         compare: Callable[[np.ndarray, np.ndarray], np.ndarray | None], threshold: float, *,
         window: int = WINDOW) -> Linked:
    """Compare bucket members with earlier ones, round by round (distance 1, 2, ... up to
    ``window`` in the bucket), and join the pairs ``compare`` puts at or above ``threshold``
    (``compare`` returning None accepts every pair: LSH candidates only)."""
    labels = np.arange(n, dtype=np.int64)
    rejected = np.zeros(0, np.int64)  # pair codes compared and found below the threshold
    us, vs, sims = [], [], []
    compared = 0
    alive = np.arange(len(members), dtype=np.int64)  # entries with an earlier member at d
    for d in range(1, window + 1):
        alive = alive[ranks[alive] >= d]
        if not len(alive):
            break
        a, b = members[alive - d], members[alive]
        fresh = labels[a] != labels[b]
        if not fresh.any():
            continue
        a, b = a[fresh], b[fresh]
        codes = unique((np.minimum(a, b) << 32) | np.maximum(a, b))
        codes = codes[~_isin_sorted(codes, rejected)]
        if not len(codes):
            continue
        u, v = codes >> 32, codes & 0xFFFFFFFF
        compared += len(codes)
        similarity = compare(u, v)
        if similarity is None:
            similarity = np.full(len(codes), np.nan)
            ok = np.ones(len(codes), dtype=bool)
        else:
            ok = similarity >= threshold
            # Disjoint from the pairs rejected before (filtered out above): a sort, not a
            # union.
            rejected = np.sort(np.concatenate([rejected, codes[~ok]]))
        us.append(u[ok])
        vs.append(v[ok])
        sims.append(similarity[ok])
        if ok.any():  # relabel the roots, then every document through its root
            labels = components(labels[u[ok]], labels[v[ok]], n)[labels]
    if not us:
        empty = np.zeros(0, np.int64)
        return Linked(empty, empty, np.zeros(0), labels, compared)
    return Linked(np.concatenate(us), np.concatenate(vs), np.concatenate(sims), labels,
                  compared)


def partners(nodes: np.ndarray, linked: Linked) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``nodes`` (sorted), its most similar confirmed neighbour and that Jaccard
    (NaN without confirmation: the neighbour is then the earliest linked document)."""
    ends = np.concatenate([linked.u, linked.v])
    others = np.concatenate([linked.v, linked.u])
    sims = np.concatenate([linked.similarity, linked.similarity])
    # Most similar first; on a tie the earliest, i.e. the kept row when it is one.
    order = np.lexsort((others, -np.nan_to_num(sims, nan=0.0), ends))
    ends, others, sims = ends[order], others[order], sims[order]
    first = np.ones(len(ends), dtype=bool)
    first[1:] = ends[1:] != ends[:-1]
    at = np.searchsorted(nodes, ends[first])
    neighbour = np.zeros(len(nodes), dtype=np.int64)
    best = np.full(len(nodes), np.nan)
    neighbour[at], best[at] = others[first], sims[first]
    return neighbour, best


def unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of integers by a sort: numpy 2.3+ hashes them instead, a hundred times
    slower on a million distinct ones."""
    return unique_counts(values)[0]


def unique_counts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values, sorted, and how often each occurs."""
    ordered = np.sort(values)
    new = np.ones(len(ordered), dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    starts = np.flatnonzero(new)
    return ordered[starts], np.diff(np.append(starts, len(ordered)))


def _isin_sorted(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin`` for a sorted, unique ``sorted_set``."""
    if not len(sorted_set):
        return np.zeros(len(values), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[pos] == values
