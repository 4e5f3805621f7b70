"""The exhaustive near-duplicate truth of a JSON Lines corpus: every pair of documents whose
word 5-gram shingle sets (of the folded text, ``bench_near_dups.fold`` / ``shingle_set``) have
an exact Jaccard of at least 0.8.

All pairs are found, not sampled: documents with identical shingle sets are grouped first,
then the distinct sets are joined by prefix filtering (AllPairs). Tokens are ordered rarest
first over the whole corpus; a pair at Jaccard >= t with ``|y| <= |x|`` shares at least
``ceil(t |x|)`` tokens, so the first ``|x| - ceil(t |x|) + 1`` tokens of ``x`` and the first
``|y| - ceil(t |y|) + 1`` of ``y`` intersect, and ``|y| >= t |x|`` (size filter). Every
candidate is verified by its exact Jaccard. ``verify`` checks the result against brute force
(every pair compared) on a sample of related documents, and runs each time the truth is built.

The truth is cached in ``cache_dir`` by the file's SHA-256 (``.npz``: each row's distinct-set
index, and the distinct-set pairs), so a corpus pays for it once.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_near_dups import NGRAM, THRESHOLD, cf_table, fold, shingle_set

TRUTH_VERSION = 2


@dataclass
class Truth:
    """Each row's distinct shingle set (-1: no text) and the pairs of distinct sets at or above
    the threshold (codes ``i << 32 | j``, ``i < j``, sorted)."""

    group: np.ndarray
    codes: np.ndarray
    stats: dict[str, Any]

    def docs(self) -> np.ndarray:
        """Rows with a partner at the threshold (an identical copy or a similar set)."""
        sizes = np.bincount(self.group[self.group >= 0], minlength=1)
        partnered = sizes > 1
        partnered[self.codes >> 32] = True
        partnered[self.codes & 0xFFFFFFFF] = True
        ok = self.group >= 0
        ok[ok] = partnered[self.group[ok]]
        return np.flatnonzero(ok)

    def similar(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per pair of rows: is their exact Jaccard at or above the threshold?"""
        ga, gb = self.group[a], self.group[b]
        lo, hi = np.minimum(ga, gb), np.maximum(ga, gb)
        code = (lo << 32) | hi
        pos = np.minimum(np.searchsorted(self.codes, code), max(len(self.codes) - 1, 0))
        hit = (self.codes[pos] == code) if len(self.codes) else np.zeros(len(a), dtype=bool)
        return (ga >= 0) & (gb >= 0) & ((ga == gb) | hit)


def similar_pairs(sets: list[frozenset[int]], threshold: float = THRESHOLD
                  ) -> list[tuple[int, int]]:
    """Every pair ``(i, j)``, ``i < j``, of ``sets`` with Jaccard >= ``threshold``, exactly
    (prefix and size filtering, each candidate verified)."""
    freq: dict[int, int] = defaultdict(int)
    for x in sets:
        for g in x:
            freq[g] += 1
    rank = {g: r for r, g in enumerate(sorted(freq, key=lambda g: (freq[g], g)))}
    index: dict[int, list[int]] = defaultdict(list)
    out = []
    for d in sorted(range(len(sets)), key=lambda k: len(sets[k])):
        x = sets[d]
        size = len(x)
        prefix = sorted(rank[g] for g in x)[: size - math.ceil(threshold * size - 1e-9) + 1]
        seen: set[int] = set()
        for r in prefix:
            seen.update(index[r])
        for c in seen:  # earlier sets are no larger than x
            y = sets[c]
            if len(y) < threshold * size - 1e-9:
                continue
            inter = len(x & y)
            if inter / (size + len(y) - inter) >= threshold - 1e-12:
                out.append((min(c, d), max(c, d)))
        for r in prefix:
            index[r].append(d)
    return out


def brute_pairs(sets: list[frozenset[int]], threshold: float = THRESHOLD
                ) -> set[tuple[int, int]]:
    """Every pair at or above ``threshold``, by comparing all of them."""
    out = set()
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            inter = len(sets[i] & sets[j])
            union = len(sets[i]) + len(sets[j]) - inter
            if union and inter / union >= threshold - 1e-12:
                out.add((i, j))
    return out


def verify(sets: list[frozenset[int]], pairs: set[tuple[int, int]], *, seeds: int = 150,
           cap: int = 2000, seed: int = 0) -> dict[str, int]:
    """Check ``pairs`` (the join's result on ``sets``) against brute force on a sample of
    related sets: random sets and every set sharing one of the three rarest shared tokens of each
    (their near copies, and sets only partly alike), up to ``cap``. Raises AssertionError on
    a difference; returns the sample's size and its pairs."""
    rng = random.Random(seed)
    freq: dict[int, int] = defaultdict(int)
    for x in sets:
        for g in x:
            freq[g] += 1
    picked = rng.sample(range(len(sets)), min(seeds, len(sets)))
    shared = [sorted((g for g in sets[p] if freq[g] > 1), key=lambda g: (freq[g], g))[:3]
              for p in picked]
    tokens = {g for some in shared for g in some}
    sample = sorted({*picked, *(k for k, x in enumerate(sets) if not x.isdisjoint(tokens))})
    if len(sample) > cap:
        sample = sorted(rng.sample(sample, cap))
    sub = [sets[k] for k in sample]
    want = brute_pairs(sub)
    at = {k: i for i, k in enumerate(sample)}
    got = {(at[i], at[j]) for i, j in pairs if i in at and j in at}
    assert got == want, f"exhaustive join differs from brute force: {len(got ^ want)} pairs"
    assert set(similar_pairs(sub)) == want
    return {"verified_sample_sets": len(sub), "verified_sample_pairs": len(want)}


def exhaustive_truth(path: Path, cache_dir: Path, *, table: dict[int, None] | None = None
                     ) -> Truth:
    """The truth of ``path``, from the cache or computed (and verified, then cached)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 24):
            digest.update(chunk)
    name = f"truth_{digest.hexdigest()[:16]}_t{THRESHOLD}_n{NGRAM}_v{TRUTH_VERSION}.npz"
    cache = cache_dir / name
    if cache.exists():
        with np.load(cache) as z:
            return Truth(z["group"], z["codes"], json.loads(str(z["stats"])) | {"cached": True})
    t0 = time.perf_counter()
    table = cf_table() if table is None else table
    token: dict[str, int] = {}
    groups: dict[frozenset[int], int] = {}
    group: list[int] = []
    with open(path, "rb") as fh:
        for line in fh:
            try:
                text = json.loads(line).get("text")
            except (ValueError, AttributeError):
                text = None
            folded = fold(text, table) if isinstance(text, str) else ""
            if not folded:
                group.append(-1)
                continue
            key = frozenset(token.setdefault(g, len(token)) for g in shingle_set(folded))
            group.append(groups.setdefault(key, len(groups)))
    sets = list(groups)
    del groups, token
    pairs = similar_pairs(sets)
    seconds = time.perf_counter() - t0
    checked = verify(sets, set(pairs))
    codes = np.unique(np.array([(i << 32) | j for i, j in pairs], dtype=np.int64))
    truth = Truth(np.array(group, dtype=np.int64), codes, {})
    truth.stats = {"documents": int((truth.group >= 0).sum()), "distinct_sets": len(sets),
                   "distinct_pairs": len(codes), "docs": len(truth.docs()),
                   "seconds": round(seconds, 1), **checked}
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp.npz")
    np.savez(tmp, group=truth.group, codes=truth.codes, stats=json.dumps(truth.stats))
    tmp.replace(cache)
    truth.stats["cached"] = False
    return truth
