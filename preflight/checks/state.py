"""Merging the corpus-wide state of checks scanned apart.

A distributed executor scans batches on workers, each with its own check instances, and
merges their state into one instance in read order before ``finish``. A check names the
attributes that hold that state (``Check.merged``); their values are combined by type:
lists are concatenated (read order), counters and numbers added (so only counts belong
there: a calibration is a ``Check.scan_plan``), histograms (arrays) added, sets united,
dicts merged key by key, dataclasses field by field, and any other value (a file label)
keeps the first one seen. A value with a ``merged_with`` method (minimum and maximum, say)
merges itself.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import numpy as np


def empty_like(value: Any) -> Any:
    """A fresh, empty value of the same shape: what the state was before any scan."""
    if hasattr(value, "empty"):
        return value.empty()
    if isinstance(value, Counter):
        return Counter()
    if isinstance(value, dict):
        return {k: empty_like(v) for k, v in value.items()}
    if isinstance(value, list):
        return []
    if isinstance(value, set):
        return set()
    if isinstance(value, np.ndarray):
        return np.zeros_like(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value)()
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return type(value)(0)
    return None


def merge(a: Any, b: Any) -> Any:
    """``a`` then ``b`` (read order matters for lists)."""
    if a is None:
        return b
    if b is None:
        return a
    if hasattr(a, "merged_with"):
        return a.merged_with(b)
    if isinstance(a, Counter):
        out = Counter(a)
        out.update(b)
        return out
    if isinstance(a, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if k in out else v
        return out
    if isinstance(a, list):
        return a + b
    if isinstance(a, set):
        return a | b
    if isinstance(a, np.ndarray):
        return a + b
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a)(**{f.name: merge(getattr(a, f.name), getattr(b, f.name))
                          for f in dataclasses.fields(a)})
    if isinstance(a, bool):
        return a or b
    if isinstance(a, int | float):
        return a + b
    return a  # not a count: the first value seen stays
