"""``numeric``: numbers that break training, in the declared numeric fields.

The fields are ``fields.numeric``, ``fields.target`` and ``fields.features`` (each one name or
a list). A field holds a number per record or a list of numbers (a feature vector, nested
lists too); every element is judged and a finding names its position (``features[3]: NaN``).
``target`` must hold a scalar: a list there is ``not_a_number``.

Per record and field, one finding per code (several elements of a vector make one finding
with a count): ``nan``, ``pos_inf``, ``neg_inf`` (Python's ``NaN``/``Infinity`` literals
included), ``null`` (null, missing while the field appears in other records, or a null
element), ``nan_string``/``inf_string``/``numeric_string`` (``"NaN"``, ``"-Infinity"``,
``"1e400"``, ``"3.5"``: numbers written as strings), ``not_a_number`` (any other string, a
boolean, an object, a list where a number is expected), ``below_min``/``above_max`` (inclusive
bounds), ``dtype_overflow`` and, from ``finish``, ``outlier``.

``dtype_overflow``: a value overflows a training dtype when ``value * scale`` rounds to ±inf on
a cast from float64 (round to nearest even, one rounding), i.e. ``|x| >= (2 - 2**-(p+1)) *
2**emax``: 65520 for fp16 (65519 still rounds to 65504), about 3.3962e38 for bf16 and
3.4028235678e38 for fp32.

``outlier``: a robust z-score ``|x - median| / (1.4826 * MAD)`` above ``outlier_z``, with the
median and MAD (median absolute deviation) of all finite values of the field over the whole
corpus, not per batch; for a list field, over all its elements together. When the MAD is 0
(over half the values equal the median, e.g. sparse or binary features) the z-score is
undefined and no outlier is reported; the field's stats say so. State is compact: the finite
values as float64 arrays (8 bytes per value) plus each batch's row numbers, never records.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import Field, StrictFloat, model_validator

from preflight.batch import Batch
from preflight.checks.base import Check, Context, Params, findings
from preflight.checks.registry import register

# Element kinds: what a value is before it is judged.
_NUM, _NULL, _STR_NUM, _STR_NAN, _STR_INF, _STR_BAD, _BOOL, _OBJECT, _ARRAY = range(9)
_NOT_A_NUMBER = (_STR_BAD, _BOOL, _OBJECT, _ARRAY)
# (mantissa bits, largest exponent): a float64 rounds to inf at (2 - 2**-(p+1)) * 2**emax.
_DTYPES = {"fp16": (10, 15), "bf16": (7, 127), "fp32": (23, 127)}
_BINS = 40  # histogram bins per field in the report
_MAD_SCALE = 1.4826  # MAD * 1.4826 estimates the standard deviation of a normal distribution
_SHOWN = 5  # element positions listed in one finding's detail
_TEXT_CHARS = 32  # longest string value quoted in a detail
_LABELS = {
    "null": "null", "nan": "NaN", "pos_inf": "+Inf", "neg_inf": "-Inf",
    "nan_string": '"NaN" strings', "inf_string": "infinite strings",
    "numeric_string": "numbers written as strings", "not_a_number": "not numbers",
}
_STRING_NOTES = {
    "nan_string": "a string",
    "inf_string": "a string; infinite as a number",
    "numeric_string": "a number written as a string",
}


def overflow_limit(dtype: str) -> float:
    """The smallest magnitude that rounds to inf when a float64 is cast to ``dtype``."""
    p, emax = _DTYPES[dtype]
    return (2.0 - 2.0 ** -(p + 1)) * 2.0**emax


class NumericParams(Params):
    min: StrictFloat | None = Field(
        None,
        allow_inf_nan=False,
        description="Smallest allowed value (inclusive, finite) in fields without `bounds`.",
    )
    max: StrictFloat | None = Field(
        None,
        allow_inf_nan=False,
        description="Largest allowed value (inclusive, finite) in fields without `bounds`.",
    )
    bounds: dict[str, tuple[StrictFloat | None, StrictFloat | None]] = Field(
        default_factory=dict,
        description="Per-field bounds, a (min, max) pair each (inclusive, null for none), "
        "overriding `min`/`max`.",
    )
    outlier_z: StrictFloat | None = Field(
        8.0,
        gt=0,
        allow_inf_nan=False,
        description="Flag values whose robust z-score |x - median| / (1.4826 MAD), over the "
        "whole column, exceeds this; null disables outliers.",
    )
    dtype: Literal["fp16", "bf16", "fp32"] | None = Field(
        None,
        description="Training dtype: flag values that round to inf in it after `scale` "
        "(fp16: |x| >= 65520).",
    )
    scale: StrictFloat = Field(
        1.0, allow_inf_nan=False, description="Factor applied to values before the dtype check."
    )
    allow_null: bool = Field(False, description="Accept null or missing values.")
    allow_numeric_strings: bool = Field(
        False, description='Accept finite numbers written as strings ("3.5").'
    )

    @model_validator(mode="after")
    def _bounds_are_ordered(self) -> NumericParams:
        pairs = {"min/max": (self.min, self.max), **{f"bounds.{k}": v
                                                     for k, v in self.bounds.items()}}
        for where, (lo, hi) in pairs.items():
            if any(b is not None and math.isnan(b) for b in (lo, hi)):
                raise ValueError(f"{where}: a bound cannot be NaN")
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"{where}: min {lo} is greater than max {hi}")
        return self


@dataclass
class _Elements:
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
        if self.text is None:
            return [None] * len(idx)
        return self.text.gather(idx).to_list()


@dataclass
class _Chunk:
    """Finite values of one field in one batch, with what locates them."""

    file_index: int
    rows: np.ndarray | int  # the batch's row numbers, or the first one when consecutive
    values: np.ndarray  # float64
    ends: np.ndarray | None = None  # cumulative values per record; None: value k is record k
    # Depth-1 lists: value k sits at position k - (first value of its record), except the
    # values listed here (a record that also holds non-finite elements).
    moved_k: np.ndarray | None = None
    moved_pos: np.ndarray | None = None
    levels: list[np.ndarray] | None = None  # deeper lists: each value's position per depth
    vector: bool = False  # a list field (values have positions)

    def records(self, k: np.ndarray) -> np.ndarray:
        """Record index in the batch of values ``k``."""
        return k if self.ends is None else np.searchsorted(self.ends, k, side="right")

    def row(self, i: np.ndarray) -> np.ndarray:
        return self.rows + i if isinstance(self.rows, int) else self.rows[i]

    def position(self, k: int, record: int) -> str:
        """Where value ``k`` sits in its record's list (``""`` for a scalar)."""
        if self.levels is not None:
            return "".join(f"[{lv[k]}]" for lv in self.levels if lv[k] >= 0)
        if not self.vector or self.ends is None:
            return ""
        if self.moved_k is not None and self.moved_pos is not None:
            j = int(np.searchsorted(self.moved_k, k))
            if j < len(self.moved_k) and self.moved_k[j] == k:
                return f"[{self.moved_pos[j]}]"
        return f"[{k - (int(self.ends[record - 1]) if record else 0)}]"


@dataclass
class _Stats:
    count: int = 0
    nulls: int = 0
    nan: int = 0
    inf: int = 0
    strings: int = 0
    not_numbers: int = 0
    outliers: int = 0
    min: float | None = None
    max: float | None = None
    median: float | None = None
    mad: float | None = None
    note: str | None = None
    histogram: dict[str, Any] | None = None

    def merged_with(self, other: _Stats) -> _Stats:
        """The counts of both scans (the rest is computed in ``finish``)."""
        lows = [v for v in (self.min, other.min) if v is not None]
        highs = [v for v in (self.max, other.max) if v is not None]
        return _Stats(count=self.count + other.count, nulls=self.nulls + other.nulls,
                      nan=self.nan + other.nan, inf=self.inf + other.inf,
                      strings=self.strings + other.strings,
                      not_numbers=self.not_numbers + other.not_numbers,
                      outliers=self.outliers + other.outliers,
                      min=min(lows) if lows else None, max=max(highs) if highs else None)


@register("numeric")
class Numeric(Check):
    """NaN, ±Inf, nulls and strings in numeric fields; bounds, robust outliers, and values
    that overflow the training dtype."""

    description = (
        "NaN/Inf/null/strings in numeric fields and vectors; bounds; robust outliers; "
        "training-dtype overflow."
    )
    Params = NumericParams
    fixes = ("quarantine", "drop", "none")
    merged = ("_chunks", "_absent", "_seen", "_stats")

    def __init__(self, params: NumericParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        declared = ctx.fields.declared()
        names = [*declared.get("numeric", []), *declared.get("target", []),
                 *declared.get("features", [])]
        self._fields = list(dict.fromkeys(names))
        self._scalar = set(declared.get("target", []))
        self._chunks: dict[str, list[_Chunk]] = {n: [] for n in self._fields}
        # Batches without the field: (file index, records, rows or first row).
        self._absent: dict[str, list[tuple[int, int, np.ndarray | int]]] = {
            n: [] for n in self._fields
        }
        self._seen: set[str] = set()
        self._stats = {n: _Stats() for n in self._fields}

    def config_problem(self) -> str | None:
        if not self._fields:
            return ("no numeric field declared; set fields.numeric (or fields.target / "
                    "fields.features) in the rules file")
        unknown = sorted(set(self.params.bounds) - set(self._fields))
        if unknown:
            return (f"bounds name field(s) {', '.join(unknown)} that are not numeric fields "
                    f"({', '.join(self._fields)}); add them to fields.numeric")
        return None

    def required_fields(self) -> list[str]:
        return list(self._fields)

    # -- per batch ---------------------------------------------------------------------

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        parts = []
        rows: np.ndarray | int | None = None
        for name in self._fields:
            if not batch.has(name):
                # Nulls only if the field turns up elsewhere: decided in finish.
                self._absent[name].append((batch.file_index, len(batch),
                                           _compact_rows(batch.rows)))
                continue
            self._seen.add(name)
            el = _elements(batch, name, scalar=name in self._scalar)
            parts.extend(self._judge(name, el, textual=batch.textual))
            self._defer_nulls(name, el, batch)
            if rows is None:
                rows = _compact_rows(batch.rows)
            self._keep(name, el, batch, rows)
        parts = [p for p in parts if p.height]
        return pl.concat(parts).sort("i", maintain_order=True) if parts else None

    def _defer_nulls(self, name: str, el: _Elements, batch: Batch) -> None:
        """Records whose field is null or missing are reported at the end, with the
        batches that lack the field, in read order: whether a batch has the column at all
        depends on where batches are cut, the finding must not."""
        if self.params.allow_null:
            return
        null = np.flatnonzero(el.kind == _NULL)
        if not len(null):
            return
        top = null[el.levels_depth()[null] == 0]
        if len(top):
            rows = batch.rows[np.unique(el.i[top])]
            self._absent[name].append((batch.file_index, len(rows), rows))

    def _judge(self, name: str, el: _Elements, *, textual: bool = False
               ) -> Iterator[pl.DataFrame]:
        """Findings per code for one field of a batch; counts go to the field's stats."""
        p = self.params
        kind, v = el.kind, el.value
        num = kind == _NUM
        with np.errstate(invalid="ignore", over="ignore"):
            masks: dict[str, np.ndarray | None] = {
                "null": kind == _NULL,
                "nan": num & np.isnan(v),
                "pos_inf": num & (v == np.inf),
                "neg_inf": num & (v == -np.inf),
                "nan_string": kind == _STR_NAN,
                "inf_string": kind == _STR_INF,
                "numeric_string": kind == _STR_NUM,
                "not_a_number": np.isin(kind, _NOT_A_NUMBER),
                "below_min": None,
                "above_max": None,
                "dtype_overflow": None,
            }
            finite = (num | masks["numeric_string"]) & np.isfinite(v)
            lo, hi = self._bounds(name)
            if lo is not None:
                masks["below_min"] = finite & (v < lo)
            if hi is not None:
                masks["above_max"] = finite & (v > hi)
            if p.dtype is not None:
                scaled = v if p.scale == 1.0 else v * p.scale
                masks["dtype_overflow"] = finite & (np.abs(scaled) >= overflow_limit(p.dtype))
        stats = self._stats[name]
        count = {code: int(np.count_nonzero(m)) for code, m in masks.items() if m is not None}
        if not p.allow_null:  # a whole value null is reported (and counted) at the end
            masks["null"] = masks["null"] & (el.levels_depth() > 0)
            count["null"] = int(np.count_nonzero(masks["null"]))
        stats.nulls += count["null"]
        stats.nan += count["nan"] + count["nan_string"]
        stats.inf += count["pos_inf"] + count["neg_inf"] + count["inf_string"]
        stats.strings += int(np.count_nonzero((kind >= _STR_NUM) & (kind <= _STR_BAD)))
        stats.not_numbers += count["not_a_number"]
        if p.allow_null:
            masks["null"] = None
        if p.allow_numeric_strings or textual:  # in CSV every value is written as text
            masks["numeric_string"] = None
        for code, mask in masks.items():
            if mask is not None and count[code]:
                yield self._findings(name, code, el, np.flatnonzero(mask))

    def _bounds(self, name: str) -> tuple[float | None, float | None]:
        if name in self.params.bounds:
            return self.params.bounds[name]
        return self.params.min, self.params.max

    def _findings(self, name: str, code: str, el: _Elements, idx: np.ndarray) -> pl.DataFrame:
        """One finding per record for the flagged elements ``idx`` of one code."""
        lo, hi = self._bounds(name)
        records, details, snippets = [], [], []
        for rec, members in _by_record(el, idx):
            pos = el.positions(members)
            texts = el.texts(members)
            values = el.value[members].tolist()
            kinds = el.kind[members].tolist()
            records.append(rec)
            if len(members) == 1:
                what = ("null or missing" if code == "null" and not pos[0]
                        else self._describe(code, values[0], kinds[0], texts[0], lo, hi))
                details.append(f"{name}{pos[0]}: {what}")
            else:
                details.append(_several(name, self._label(code, lo, hi), code, pos, values))
            # A non-numeric string may be any text: it goes to the snippet, which the
            # report redacts unless --show-text.
            bad = [t for t, k in zip(texts, kinds, strict=True) if k == _STR_BAD]
            snippets.append(bad[0] if bad else None)
        return findings({"i": pl.Series(records, dtype=pl.Int64)}, code, details,
                        snippet=pl.Series(snippets, dtype=pl.String))

    def _describe(self, code: str, value: float, kind: int, text: str | None,
                  lo: float | None, hi: float | None) -> str:
        """What is wrong with one element."""
        p = self.params
        if code in _STRING_NOTES:
            return f"{_quote(text)} ({_STRING_NOTES[code]})"
        if code == "not_a_number":
            if kind == _STR_BAD:
                return "a string, not a number"
            if kind == _BOOL:
                return f"{text} (a boolean, not a number)"
            if kind == _ARRAY:
                return "an array where a number is expected"
            return f"{text}, not a number"
        if code == "below_min":
            return f"{_fmt(value)} < min {_fmt(lo)}"
        if code == "above_max":
            return f"{_fmt(value)} > max {_fmt(hi)}"
        if code == "dtype_overflow":
            assert p.dtype is not None
            scaled = "" if p.scale == 1.0 else f" × scale {_fmt(p.scale)} = {_fmt(value * p.scale)}"
            limit = _fmt(overflow_limit(p.dtype))
            return f"{_fmt(value)}{scaled} overflows {p.dtype} (|x| >= {limit} rounds to inf)"
        return self._label(code, lo, hi)

    def _label(self, code: str, lo: float | None, hi: float | None) -> str:
        """What several flagged elements of a vector have in common."""
        p = self.params
        if code == "below_min":
            return f"below min {_fmt(lo)}"
        if code == "above_max":
            return f"above max {_fmt(hi)}"
        if code == "dtype_overflow":
            return f"overflow {p.dtype}" + ("" if p.scale == 1.0
                                            else f" after × scale {_fmt(p.scale)}")
        return _LABELS[code]

    def _keep(self, name: str, el: _Elements, batch: Batch, rows: np.ndarray | int) -> None:
        """Keep the field's finite values (and what locates them) for finish."""
        keep = ((el.kind == _NUM) | (el.kind == _STR_NUM)) & np.isfinite(el.value)
        values = el.value[keep]
        if not len(values):
            return
        n = len(batch)
        chunk = _Chunk(batch.file_index, rows, np.ascontiguousarray(values, np.float64),
                       vector=bool(el.levels))
        # A scalar field has one element per record: with all finite, value k is record k.
        if el.levels or len(values) != n:
            kept_i = el.i[keep]
            kept_per_record = np.bincount(kept_i, minlength=n)
            chunk.ends = np.cumsum(kept_per_record)
            if len(el.levels) == 1:
                # Where a record also holds non-finite elements, a value's position is not
                # its rank among the record's finite values: remember those few.
                per_record = np.bincount(el.i, minlength=n)
                first = np.cumsum(per_record) - per_record
                pos = (np.arange(len(el.i)) - first[el.i])[keep]
                rank = np.arange(len(values)) - (chunk.ends - kept_per_record)[kept_i]
                moved = np.flatnonzero(pos != rank)
                if len(moved):
                    chunk.moved_k, chunk.moved_pos = moved, pos[moved]
            elif len(el.levels) > 1:
                chunk.levels = [lv[keep].astype(np.int32) for lv in el.levels]
        self._chunks[name].append(chunk)
        stats = self._stats[name]
        stats.count += len(values)
        lo, hi = float(values.min()), float(values.max())
        stats.min = lo if stats.min is None else min(stats.min, lo)
        stats.max = hi if stats.max is None else max(stats.max, hi)

    # -- corpus-wide -------------------------------------------------------------------

    def finish(self) -> pl.DataFrame | None:
        parts = []
        for name in self._fields:
            parts.extend(self._missing(name))
            chunks, self._chunks[name] = self._chunks[name], []
            if chunks:
                parts.extend(self._outliers(name, chunks))
        parts = [p for p in parts if p.height]
        return pl.concat(parts) if parts else None

    def _missing(self, name: str) -> Iterator[pl.DataFrame]:
        absent, self._absent[name] = self._absent[name], []
        if self.params.allow_null or name not in self._seen:
            return
        for file_index, n, rows in absent:
            self._stats[name].nulls += n
            if isinstance(rows, int):
                rows = np.arange(rows, rows + n, dtype=np.int64)
            yield findings(
                {"file_index": pl.Series(np.full(n, file_index, np.int32)),
                 "row": pl.Series(rows, dtype=pl.Int64)},
                "null",
                f"{name}: null or missing",
            )

    def _outliers(self, name: str, chunks: list[_Chunk]) -> Iterator[pl.DataFrame]:
        stats = self._stats[name]
        values = np.concatenate([c.values for c in chunks])
        median = _median_in_place(values)
        with np.errstate(over="ignore"):  # deviations of values near ±1.8e308 may overflow
            np.subtract(values, median, out=values)
        np.abs(values, out=values)
        mad = _median_in_place(values)
        del values
        stats.median, stats.mad = median, mad
        z_max = self.params.outlier_z
        stats.histogram = _histogram(chunks, stats, z_max)
        if z_max is None:
            return
        if mad == 0 or not math.isfinite(mad):
            stats.note = (f"MAD is {_fmt(mad)}"
                          + (" (over half the values equal the median)" if mad == 0 else "")
                          + ": outliers skipped")
            return
        sigma = _MAD_SCALE * mad
        for c in chunks:
            with np.errstate(over="ignore"):
                z = np.abs(c.values - median) / sigma
            hit = np.flatnonzero(z > z_max)
            if not len(hit):
                continue
            stats.outliers += len(hit)
            owners = c.records(hit)
            starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
            ends = np.r_[starts[1:], len(hit)]
            center = f"median {_fmt(median)}, MAD {_fmt(mad)}"
            details = []
            for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
                rec, ks = int(owners[s]), hit[s:e].tolist()
                if len(ks) == 1:
                    k = ks[0]
                    details.append(
                        f"{name}{c.position(k, rec)}: {_fmt(float(c.values[k]))} is an outlier "
                        f"(z = {float(z[k]):.3g} > {_fmt(z_max)}; {center})"
                    )
                else:
                    shown = [f"{c.position(k, rec)}={_fmt(float(c.values[k]))} "
                             f"(z = {float(z[k]):.3g})" for k in ks[:_SHOWN]]
                    more = ", …" if e - s > _SHOWN else ""
                    details.append(f"{name}: {e - s}× outliers (z > {_fmt(z_max)}; {center}) "
                                   f"at {', '.join(shown)}{more}")
            recs = owners[starts]
            yield findings(
                {"file_index": pl.Series(np.full(len(recs), c.file_index, np.int32)),
                 "row": pl.Series(c.row(recs), dtype=pl.Int64)},
                "outlier",
                details,
            )

    def summary(self) -> dict[str, Any]:
        """Per field: count (finite values), nulls, nan, inf (strings such as "NaN" and
        "inf" included), strings, not_numbers, outliers, min, max, median, mad, note."""
        return {"fields": {name: _json_stats(s) for name, s in self._stats.items()}}


def _elements(batch: Batch, name: str, *, scalar: bool) -> _Elements:
    """The field's values in this batch as elements, from typed columns where possible."""
    if name in batch.raw:  # mixed JSON types in this batch: only Python values say what
        return _from_python(batch.raw[name], scalar=scalar)
    col = batch.frame.get_column(name)
    if scalar and isinstance(col.dtype, pl.List | pl.Array):
        null = col.is_null().to_numpy()
        kind = np.where(null, _NULL, _ARRAY).astype(np.int8)
        return _Elements(np.arange(len(col)), kind, np.full(len(col), np.nan))
    return _from_column(col)


def _from_column(col: pl.Series) -> _Elements:
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
            kind = np.concatenate([kind, np.full(len(ni), _NULL, np.int8)])
            value = np.concatenate([value, np.full(len(ni), np.nan)])
            if text is not None:
                text = pl.concat([text, pl.repeat(None, len(ni), eager=True, dtype=pl.String)])
        order = np.lexsort([*reversed(levels), i])
        i, kind, value = i[order], kind[order], value[order]
        levels = [lv[order] for lv in levels]
        text = text.gather(order) if text is not None else None
    return _Elements(i, kind, value, levels, text)


def _leaf(col: pl.Series) -> tuple[np.ndarray, np.ndarray, pl.Series | None]:
    """Kinds, float values and texts of a non-list column."""
    n = len(col)
    null = col.is_null().to_numpy()
    dtype = col.dtype
    if dtype.is_numeric():
        value = col.cast(pl.Float64).to_numpy().astype(np.float64, copy=False)
        kind = np.where(null, _NULL, _NUM).astype(np.int8) if null.any() \
            else np.zeros(n, np.int8)
        return kind, value, None
    if dtype == pl.String:
        kind, value = _classify_strings(col)
        return kind, value, col
    if dtype == pl.Null:
        return np.full(n, _NULL, np.int8), np.full(n, np.nan), None
    if dtype == pl.Boolean:
        text = col.cast(pl.String)
        return np.where(null, _NULL, _BOOL).astype(np.int8), np.full(n, np.nan), text
    what = "an object" if isinstance(dtype, pl.Struct) else f"a {dtype} value"
    text = pl.repeat(what, n, eager=True, dtype=pl.String)
    return np.where(null, _NULL, _OBJECT).astype(np.int8), np.full(n, np.nan), text


def _classify_strings(col: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Kinds and parsed values of strings: "NaN", "inf"/"1e400", "3.5", or not a number."""
    parsed = col.str.strip_chars().cast(pl.Float64, strict=False)
    value = parsed.to_numpy().astype(np.float64, copy=False)
    null = col.is_null().to_numpy()
    bad = parsed.is_null().to_numpy() & ~null
    kind = np.full(len(col), _STR_NUM, np.int8)
    kind[np.isnan(value)] = _STR_NAN
    kind[np.isinf(value)] = _STR_INF
    kind[bad] = _STR_BAD
    kind[null] = _NULL
    return kind, value


def _from_python(values: list[Any], *, scalar: bool) -> _Elements:
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
            add(i, path, _NULL)
        elif isinstance(v, bool):
            add(i, path, _BOOL, text="true" if v else "false")
        elif isinstance(v, int | float):
            try:
                add(i, path, _NUM, float(v))
            except OverflowError:  # an integer beyond float64 (copysign would convert it)
                add(i, path, _NUM, math.inf if v > 0 else -math.inf)
        elif isinstance(v, str):
            add(i, path, _STR_BAD, text=v)  # classified below, all strings at once
        elif isinstance(v, list):
            if scalar and not path:
                add(i, path, _ARRAY)
            for k, e in enumerate(v) if not (scalar and not path) else ():
                walk(i, e, (*path, k))
        else:
            add(i, path, _OBJECT, text="an object")

    for i, v in enumerate(values):
        walk(i, v, ())
    kind = np.asarray(kinds, np.int8)
    value = np.asarray(nums, np.float64)
    text = pl.Series(texts, dtype=pl.String)
    strings = np.flatnonzero((kind == _STR_BAD) & text.is_not_null().to_numpy())
    if len(strings):
        k, v = _classify_strings(text.gather(strings))
        kind[strings], value[strings] = k, v
    depth = max(map(len, paths), default=0)
    levels = [np.asarray([p[d] if d < len(p) else -1 for p in paths], np.int64)
              for d in range(depth)]
    return _Elements(np.asarray(out_i, np.int64), kind, value, levels, text)


def _by_record(el: _Elements, idx: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Flagged elements grouped by record, in record and position order."""
    if not el.levels:  # scalars: one element per record
        for k in idx.tolist():
            yield int(el.i[k]), np.asarray([k])
        return
    owners = el.i[idx]
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
    for s, e in zip(starts.tolist(), [*starts[1:].tolist(), len(idx)], strict=True):
        yield int(owners[s]), idx[s:e]


def _several(name: str, label: str, code: str, pos: list[str], values: list[float]) -> str:
    with_value = code in ("below_min", "above_max", "dtype_overflow")
    shown = [f"{p}={_fmt(v)}" if with_value else p
             for p, v in zip(pos[:_SHOWN], values[:_SHOWN], strict=True)]
    more = ", …" if len(pos) > _SHOWN else ""
    return f"{name}: {len(pos)}× {label} at {', '.join(shown)}{more}"


def _median_in_place(a: np.ndarray) -> float:
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


def _compact_rows(rows: np.ndarray) -> np.ndarray | int:
    """A batch's row numbers, or just the first when they are consecutive."""
    if len(rows) and int(rows[-1]) - int(rows[0]) == len(rows) - 1 and bool(
        np.all(np.diff(rows) == 1)
    ):
        return int(rows[0])
    return np.asarray(rows, np.int64).copy()


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


def _fmt(x: float | None) -> str:
    """A number as people write it: ``65520``, ``0.5``, ``1e+20``."""
    if x is None:
        return "none"
    if math.isfinite(x) and x == int(x) and abs(x) < 1e16:
        return str(int(x))
    return repr(float(x))


def _quote(text: str | None) -> str:
    text = text or ""
    return json.dumps(text if len(text) <= _TEXT_CHARS else text[:_TEXT_CHARS] + "…",
                      ensure_ascii=False)


def _json_stats(s: _Stats) -> dict[str, Any]:
    return {
        "count": s.count, "nulls": s.nulls, "nan": s.nan, "inf": s.inf, "strings": s.strings,
        "not_numbers": s.not_numbers, "outliers": s.outliers,
        "min": s.min, "max": s.max, "median": s.median, "mad": s.mad, "note": s.note,
        "histogram": s.histogram,
    }


def _histogram(chunks: list[_Chunk], stats: _Stats, z_max: float | None) -> dict[str, Any]:
    """The finite values' distribution for the report: ``_BINS`` bins over the range that
    holds the bulk (the outlier bounds widened by half, within min..max), with the values
    outside it counted as ``below``/``above``, and the outlier ``bounds`` themselves."""
    assert stats.min is not None and stats.max is not None and stats.median is not None
    lo, hi = stats.min, stats.max
    bounds = None
    if z_max is not None and stats.mad:
        sigma = _MAD_SCALE * stats.mad
        bounds = [stats.median - z_max * sigma, stats.median + z_max * sigma]
        lo = max(lo, stats.median - 1.5 * z_max * sigma)
        hi = min(hi, stats.median + 1.5 * z_max * sigma)
    lo, hi = _bin_range(lo, hi)
    counts = np.zeros(_BINS, dtype=np.int64)
    below = above = 0
    for c in chunks:
        v = c.values
        below += int((v < lo).sum())
        above += int((v > hi).sum())
        inside = v[(v >= lo) & (v <= hi)]
        counts += np.histogram(inside, bins=_BINS, range=(lo, hi))[0]
    edges = np.linspace(lo, hi, _BINS + 1)
    return {"edges": edges.tolist(), "counts": counts.tolist(), "below": below,
            "above": above, "bounds": bounds}


def _bin_range(lo: float, hi: float) -> tuple[float, float]:
    """``lo..hi`` as numpy can cut it into ``_BINS`` distinct finite bins: one value is
    given a width of 1, a range near or past what a float holds (-1e308..1e308) is kept
    within a sixteenth of the largest float each side (the plot's ticks, a step beyond
    it, stay finite too), and one too narrow for the floats' spacing there (2**64 - 1
    and 1.0 more are one float) is widened to a few steps of it per bin."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        lo, hi = (lo, lo + 1.0) if math.isfinite(lo) else (0.0, 1.0)
    bound = sys.float_info.max / 16
    lo, hi = min(max(lo, -bound), bound), min(max(hi, -bound), bound)
    least = 4 * _BINS * math.ulp(max(abs(lo), abs(hi)))
    return lo, max(hi, lo + least)
