"""Reading the numeric check's fields: one field of a batch flattened into elements.

Each scalar, or each element of a (nested) list, becomes one entry: its record, its kind
(a number, null, a string that parses as a number, NaN or infinity, any other string, a
boolean, an object, an array where a scalar is expected), its float value and its position
per list level. Typed columns are flattened level by level, vectorised; a field with mixed
JSON types in a batch is walked in Python, the slow path the reader only takes for such
fields. Judging the elements is ``numeric.py``'s work.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from preflight.batch import Batch, repeated

# Element kinds: what a value is before it is judged.
NUM, NULL, STR_NUM, STR_NAN, STR_INF, STR_BAD, BOOL, OBJECT, ARRAY = range(9)
NOT_A_NUMBER = (STR_BAD, BOOL, OBJECT, ARRAY)


@dataclass
class Elements:
    """One field of one batch, flattened: an entry per scalar or list element."""

    i: np.ndarray  # record index in the batch (int64, non-decreasing)
    kind: np.ndarray  # int8, one of the kinds above
    value: np.ndarray  # float64; NaN where there is no number
    levels: list[np.ndarray] = field(default_factory=list)  # position per depth, -1: none
    text: pl.Series | None = None  # the string (string kinds) or a description (others)

    def levels_depth(self) -> np.ndarray:
        """Per element, how many list levels down it sits (0: the field's value itself)."""
        depth = np.zeros(len(self.kind), dtype=np.int64)
        for lv in self.levels:
            depth += lv >= 0
        return depth

    def positions(self, idx: np.ndarray) -> list[str]:
        """``[3]`` or ``[1][0]`` for the elements ``idx`` (``""`` for a scalar)."""
        cols = [lv[idx].tolist() for lv in self.levels]
        return ["".join(f"[{p}]" for p in ps if p >= 0) for ps in zip(*cols, strict=True)] \
            if cols else [""] * len(idx)

    def texts(self, idx: np.ndarray) -> list[str | None]:
        """The texts of the elements ``idx`` (None where there is none)."""
        if self.text is None:
            return [None] * len(idx)
        return self.text.gather(idx).to_list()


def elements(batch: Batch, name: str, *, scalar: bool) -> Elements:
    """The field's values in this batch as elements, from typed columns where possible."""
    if name in batch.raw:  # mixed JSON types in this batch: only Python values say what
        return _from_python(batch.raw[name], scalar=scalar)
    col = batch.frame.get_column(name)
    if scalar and isinstance(col.dtype, pl.List | pl.Array):
        null = col.is_null().to_numpy()
        kind = np.where(null, NULL, ARRAY).astype(np.int8)
        return Elements(np.arange(len(col)), kind, np.full(len(col), np.nan))
    return _from_column(col)


def _from_column(col: pl.Series) -> Elements:
    """Flatten a typed column level by level (vectorised); null lists become null
    elements at their own position."""
    col = col.cast(_lists(col.dtype)) if _has_array(col.dtype) else col
    i = np.arange(len(col), dtype=np.int64)
    levels: list[np.ndarray] = []
    nulls: list[tuple[np.ndarray, list[np.ndarray]]] = []
    while isinstance(col.dtype, pl.List):
        isnull = col.is_null().to_numpy()
        if isnull.any():
            nulls.append((i[isnull], [lv[isnull] for lv in levels]))
        lens = col.list.len().fill_null(0).to_numpy().astype(np.int64)
        starts = np.cumsum(lens) - lens
        col = col.filter(pl.Series(lens > 0)).explode()
        i = np.repeat(i, lens)
        levels = [np.repeat(lv, lens) for lv in levels]
        levels.append(np.arange(len(i), dtype=np.int64) - np.repeat(starts, lens))
    kind, value, text = _leaf(col)
    if nulls:
        depth = len(levels)
        for ni, nlv in nulls:
            pad = [np.full(len(ni), -1, np.int64)] * (depth - len(nlv))
            levels = [np.concatenate([a, b]) for a, b in zip(levels, [*nlv, *pad], strict=True)]
            i = np.concatenate([i, ni])
            kind = np.concatenate([kind, np.full(len(ni), NULL, np.int8)])
            value = np.concatenate([value, np.full(len(ni), np.nan)])
            if text is not None:
                text = pl.concat([text, repeated(None, len(ni), pl.String)])
        order = np.lexsort([*reversed(levels), i])
        i, kind, value = i[order], kind[order], value[order]
        levels = [lv[order] for lv in levels]
        text = text.gather(order) if text is not None else None
    return Elements(i, kind, value, levels, text)


def _leaf(col: pl.Series) -> tuple[np.ndarray, np.ndarray, pl.Series | None]:
    """Kinds, float values and texts of a non-list column."""
    n = len(col)
    null = col.is_null().to_numpy()
    dtype = col.dtype
    if dtype.is_numeric():
        value = col.cast(pl.Float64).to_numpy().astype(np.float64, copy=False)
        kind = np.where(null, NULL, NUM).astype(np.int8) if null.any() \
            else np.zeros(n, np.int8)
        return kind, value, None
    if dtype == pl.String:
        kind, value = _classify_strings(col)
        return kind, value, col
    if dtype == pl.Null:
        return np.full(n, NULL, np.int8), np.full(n, np.nan), None
    if dtype == pl.Boolean:
        text = col.cast(pl.String)
        return np.where(null, NULL, BOOL).astype(np.int8), np.full(n, np.nan), text
    what = "an object" if isinstance(dtype, pl.Struct) else f"a {dtype} value"
    text = repeated(what, n, pl.String)
    return np.where(null, NULL, OBJECT).astype(np.int8), np.full(n, np.nan), text


def _classify_strings(col: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Kinds and parsed values of strings: "NaN", "inf"/"1e400", "3.5", or not a number."""
    parsed = col.str.strip_chars().cast(pl.Float64, strict=False)
    value = parsed.to_numpy().astype(np.float64, copy=False)
    null = col.is_null().to_numpy()
    bad = parsed.is_null().to_numpy() & ~null
    kind = np.full(len(col), STR_NUM, np.int8)
    kind[np.isnan(value)] = STR_NAN
    kind[np.isinf(value)] = STR_INF
    kind[bad] = STR_BAD
    kind[null] = NULL
    return kind, value


def _from_python(values: list[Any], *, scalar: bool) -> Elements:
    """Elements of Python values (a field with mixed JSON types): a walk per record, the
    slow path the reader only takes for such fields."""
    out_i: list[int] = []
    paths: list[tuple[int, ...]] = []
    kinds: list[int] = []
    nums: list[float] = []
    texts: list[str | None] = []

    def add(i: int, path: tuple[int, ...], kind: int, num: float = math.nan,
            text: str | None = None) -> None:
        out_i.append(i)
        paths.append(path)
        kinds.append(kind)
        nums.append(num)
        texts.append(text)

    def walk(i: int, v: Any, path: tuple[int, ...]) -> None:
        if v is None:
            add(i, path, NULL)
        elif isinstance(v, bool):
            add(i, path, BOOL, text="true" if v else "false")
        elif isinstance(v, int | float):
            try:
                add(i, path, NUM, float(v))
            except OverflowError:  # an integer beyond float64 (copysign would convert it)
                add(i, path, NUM, math.inf if v > 0 else -math.inf)
        elif isinstance(v, str):
            add(i, path, STR_BAD, text=v)  # classified below, all strings at once
        elif isinstance(v, list):
            if scalar and not path:
                add(i, path, ARRAY)
            for k, e in enumerate(v) if not (scalar and not path) else ():
                walk(i, e, (*path, k))
        else:
            add(i, path, OBJECT, text="an object")

    for i, v in enumerate(values):
        walk(i, v, ())
    kind = np.asarray(kinds, np.int8)
    value = np.asarray(nums, np.float64)
    text = pl.Series(texts, dtype=pl.String)
    strings = np.flatnonzero((kind == STR_BAD) & text.is_not_null().to_numpy())
    if len(strings):
        k, v = _classify_strings(text.gather(strings))
        kind[strings], value[strings] = k, v
    depth = max(map(len, paths), default=0)
    levels = [np.asarray([p[d] if d < len(p) else -1 for p in paths], np.int64)
              for d in range(depth)]
    return Elements(np.asarray(out_i, np.int64), kind, value, levels, text)


def by_record(el: Elements, idx: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Flagged elements grouped by record, in record and position order."""
    if not el.levels:  # scalars: one element per record
        for k in idx.tolist():
            yield int(el.i[k]), np.asarray([k])
        return
    owners = el.i[idx]
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
    for s, e in zip(starts.tolist(), [*starts[1:].tolist(), len(idx)], strict=True):
        yield int(owners[s]), idx[s:e]


def _has_array(dtype: pl.DataType) -> bool:
    while isinstance(dtype, pl.List | pl.Array):
        if isinstance(dtype, pl.Array):
            return True
        dtype = dtype.inner
    return False


def _lists(dtype: pl.DataType) -> pl.DataType:
    """``dtype`` with every fixed-size Array level made a List (flattened the same way)."""
    if isinstance(dtype, pl.List | pl.Array):
        return pl.List(_lists(dtype.inner))
    return dtype
