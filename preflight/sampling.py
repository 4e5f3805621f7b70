"""Deterministic sampling by hash priority: the same seed picks the same records whatever
the batch boundaries, and a bounded "bottom k" keeps memory flat on any corpus size."""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def priority(keys: np.ndarray, seed: int) -> np.ndarray:
    """A pseudo-random uint64 per record key (splitmix64 of the key and the seed)."""
    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) + np.uint64(seed + 1) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class BottomK:
    """The ``k`` record keys of lowest priority seen so far (duplicates counted once)."""

    def __init__(self, k: int, seed: int) -> None:
        self.k = k
        self.seed = seed
        self._keys = np.zeros(0, dtype=np.int64)
        self._prio = np.zeros(0, dtype=np.uint64)

    def add(self, keys: np.ndarray) -> None:
        """Offer record keys."""
        if len(keys) == 0 or self.k == 0:
            return
        keys = np.concatenate([self._keys, np.asarray(keys, dtype=np.int64)])
        keys = np.unique(keys)
        prio = priority(keys, self.seed)
        if len(keys) > self.k:
            keep = np.argpartition(prio, self.k - 1)[: self.k]
            keys, prio = keys[keep], prio[keep]
        self._keys, self._prio = keys, prio

    def keys(self) -> np.ndarray:
        """The kept keys, sorted by priority."""
        return self._keys[np.argsort(self._prio, kind="stable")]

    def __len__(self) -> int:
        return len(self._keys)
