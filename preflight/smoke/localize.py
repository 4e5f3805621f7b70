"""Narrow a failing sample to the fewest rows that still fail from the same initial
weights: rows whose own loss is already non-finite first, then delta debugging (ddmin)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence


def ddmin(items: Sequence[int], fails: Callable[[list[int]], bool], *,
          budget: int = 64, seconds: float = 20.0) -> list[int]:
    """A 1-minimal subset of ``items`` for which ``fails`` holds (``fails(items)`` is
    assumed); stops early, with the smallest failing set found, when the budget is spent."""
    current = list(items)
    n = 2
    deadline = time.monotonic() + seconds
    while len(current) >= 2 and budget > 0 and time.monotonic() < deadline:
        size = math.ceil(len(current) / n)
        chunks = [current[i : i + size] for i in range(0, len(current), size)]
        reduced = False
        for subset in chunks:  # one chunk alone still fails: jump to it
            if budget <= 0:
                break
            budget -= 1
            if fails(subset):
                current, n, reduced = subset, 2, True
                break
        if not reduced and len(chunks) > 2:
            for subset in chunks:  # or drop one chunk
                if budget <= 0:
                    break
                complement = [i for i in current if i not in subset]
                budget -= 1
                if fails(complement):
                    current, n, reduced = complement, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(current):
                break
            n = min(len(current), n * 2)
    return sorted(current)


def minimal_rows(count: int, losses: list[float], fails: Callable[[list[int]], bool], *,
                 known: list[int] = ()) -> list[int]:  # type: ignore[assignment]
    """The fewest of ``count`` rows that still fail. Rows the run already named (``known``)
    or whose own loss is non-finite are tried first as the starting set."""
    for start in (sorted(set(known)), [i for i, x in enumerate(losses) if math.isnan(x)]):
        if start and fails(start):
            return ddmin(start, fails)
    return ddmin(list(range(count)), fails)
