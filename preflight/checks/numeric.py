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
bounds), ``dtype_overflow`` and, from ``finish``, ``outlier`` and ``wrong_length``.

``dtype_overflow``: a value overflows a training dtype when ``value * scale`` rounds to ±inf on
a cast from float64 (round to nearest even, one rounding), i.e. ``|x| >= (2 - 2**-(p+1)) *
2**emax``: 65520 for fp16 (65519 still rounds to 65504), about 3.3962e38 for bf16 and
3.4028235678e38 for fp32.

``outlier``: a robust z-score ``|x - median| / (1.4826 * MAD)`` above ``outlier_z``, with the
median and MAD (median absolute deviation) of the finite values over the whole corpus, not
per batch. A fixed-length vector (nearly every record that holds the list holds one of the
same length, one level deep: a feature vector) is judged per position, each element against
its own position's median and MAD (an age at ``[0]`` is not compared with 0/1 flags at
``[1]``; ``numeric_positions``), and a record of another shape there is a ``wrong_length``
finding, not judged against the positions (``numeric_shapes``); ragged lists (sequences)
and deeper nesting pool all their elements.
When a MAD is 0 (over half the values equal the median, e.g. sparse or binary features) the
z-score is undefined and no outlier is reported there; the field's stats say so. State is
compact: the finite values as float64 arrays (8 bytes per value) plus each batch's row
numbers and the records' list lengths (while the field may be a vector), never records.

Here the check judges; ``numeric_values`` reads a field into elements, ``numeric_stats`` keeps
the corpus-wide state and finds the outliers, ``numeric_details`` words the findings.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import Field, StrictBool, StrictFloat, model_validator

from preflight.batch import Batch
from preflight.checks.base import Check, Context, Params, findings
from preflight.checks.numeric_details import describe, label, overflow_limit, several
from preflight.checks.numeric_shapes import NONE, ShapeRun, record_shapes, wrong_lengths
from preflight.checks.numeric_stats import Chunk, Stats, compact_rows, find_outliers, json_stats
from preflight.checks.numeric_values import (
    NOT_A_NUMBER,
    NULL,
    NUM,
    STR_BAD,
    STR_INF,
    STR_NAN,
    STR_NUM,
    Elements,
    by_record,
    elements,
)
from preflight.checks.registry import register


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
        "whole column (per position for a fixed-length vector), exceeds this; null disables "
        "outliers.",
    )
    dtype: Literal["fp16", "bf16", "fp32"] | None = Field(
        None,
        description="Training dtype: flag values that round to inf in it after `scale` "
        "(fp16: |x| >= 65520).",
    )
    scale: StrictFloat = Field(
        1.0, allow_inf_nan=False, description="Factor applied to values before the dtype check."
    )
    allow_null: StrictBool = Field(False, description="Accept null or missing values.")
    allow_numeric_strings: StrictBool = Field(
        False, description='Accept finite numbers written as strings ("3.5").'
    )

    @model_validator(mode="after")
    def _bounds_are_ordered(self) -> NumericParams:
        pairs = {"min/max": (self.min, self.max), **{f"bounds.{k}": v
                                                     for k, v in self.bounds.items()}}
        if self.scale == 0:  # every value scales to 0: dtype_overflow could never fire
            raise ValueError("scale: 0 turns every value into 0, so no value could overflow "
                             "the dtype; give the factor your training applies (1 for none)")
        for where, (lo, hi) in pairs.items():
            if any(b is not None and math.isnan(b) for b in (lo, hi)):
                raise ValueError(f"{where}: a bound cannot be NaN")
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"{where}: min {lo} is greater than max {hi}")
        return self


@register("numeric")
class Numeric(Check):
    """NaN, ±Inf, nulls and strings in numeric fields; bounds, robust outliers, feature
    vectors of another length, and values that overflow the training dtype."""

    description = (
        "NaN/Inf/null/strings in numeric fields and vectors; bounds; robust outliers; "
        "feature vectors of another length; training-dtype overflow."
    )
    Params = NumericParams
    fixes = ("quarantine", "drop", "none")
    merged = ("_chunks", "_absent", "_seen", "_stats", "_runs")

    def __init__(self, params: NumericParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        declared = ctx.fields.declared()
        names = [*declared.get("numeric", []), *declared.get("target", []),
                 *declared.get("features", [])]
        self._fields = list(dict.fromkeys(names))
        self._scalar = set(declared.get("target", []))
        self._chunks: dict[str, list[Chunk]] = {n: [] for n in self._fields}
        # Batches without the field: (file index, records, rows or first row).
        self._absent: dict[str, list[tuple[int, int, np.ndarray | int]]] = {
            n: [] for n in self._fields
        }
        self._seen: set[str] = set()
        self._stats = {n: Stats() for n in self._fields}
        self._runs: dict[str, list[ShapeRun]] = {n: [] for n in self._fields}

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
                                           compact_rows(batch.rows)))
                continue
            self._seen.add(name)
            el = elements(batch, name, scalar=name in self._scalar)
            parts.extend(self._judge(name, el, textual=batch.textual))
            self._defer_nulls(name, el, batch)
            if rows is None:
                rows = compact_rows(batch.rows)
            self._keep(name, el, batch, rows, self._shapes(name, el, batch, rows))
        parts = [p for p in parts if p.height]
        return pl.concat(parts).sort("i", maintain_order=True) if parts else None

    def _shapes(self, name: str, el: Elements, batch: Batch, rows: np.ndarray | int
                ) -> np.ndarray | int | None:
        """Count what the batch's records hold in the field; keep their shapes while the
        field may be a fixed-length vector (``numeric_shapes``)."""
        count = self._stats[name].shapes
        if name in self._scalar or count.ragged:
            return None
        shapes = record_shapes(el, batch, name)
        count.add(shapes, len(batch))
        if count.ragged:  # a sequence field: no record is of a wrong length
            self._runs[name] = []
            for c in self._chunks[name]:
                c.shapes = None
            return None
        if not isinstance(shapes, int) or shapes != NONE:
            self._runs[name].append(ShapeRun(batch.file_index, rows, len(batch), shapes))
        return shapes

    def _defer_nulls(self, name: str, el: Elements, batch: Batch) -> None:
        """Records whose field is null or missing are reported at the end, with the
        batches that lack the field, in read order: whether a batch has the column at all
        depends on where batches are cut, the finding must not."""
        if self.params.allow_null:
            return
        null = np.flatnonzero(el.kind == NULL)
        if not len(null):
            return
        top = null[el.levels_depth()[null] == 0]
        if len(top):
            rows = batch.rows[np.unique(el.i[top])]
            self._absent[name].append((batch.file_index, len(rows), rows))

    def _judge(self, name: str, el: Elements, *, textual: bool = False
               ) -> Iterator[pl.DataFrame]:
        """Findings per code for one field of a batch; counts go to the field's stats."""
        p = self.params
        kind, v = el.kind, el.value
        num = kind == NUM
        with np.errstate(invalid="ignore", over="ignore"):
            masks: dict[str, np.ndarray | None] = {
                "null": kind == NULL,
                "nan": num & np.isnan(v),
                "pos_inf": num & (v == np.inf),
                "neg_inf": num & (v == -np.inf),
                "nan_string": kind == STR_NAN,
                "inf_string": kind == STR_INF,
                "numeric_string": kind == STR_NUM,
                "not_a_number": np.isin(kind, NOT_A_NUMBER),
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
        stats.strings += int(np.count_nonzero((kind >= STR_NUM) & (kind <= STR_BAD)))
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

    def _findings(self, name: str, code: str, el: Elements, idx: np.ndarray) -> pl.DataFrame:
        """One finding per record for the flagged elements ``idx`` of one code."""
        lo, hi = self._bounds(name)
        records, details, snippets = [], [], []
        for rec, members in by_record(el, idx):
            pos = el.positions(members)
            texts = el.texts(members)
            values = el.value[members].tolist()
            kinds = el.kind[members].tolist()
            records.append(rec)
            if len(members) == 1:
                what = ("null or missing" if code == "null" and not pos[0]
                        else describe(code, values[0], kinds[0], texts[0], lo, hi, self.params))
                details.append(f"{name}{pos[0]}: {what}")
            else:
                details.append(several(name, label(code, lo, hi, self.params), code, pos,
                                       values))
            # A non-numeric string may be any text: it goes to the snippet, which the
            # report redacts unless --show-text.
            bad = [t for t, k in zip(texts, kinds, strict=True) if k == STR_BAD]
            snippets.append(bad[0] if bad else None)
        return findings({"i": pl.Series(records, dtype=pl.Int64)}, code, details,
                        snippet=pl.Series(snippets, dtype=pl.String))

    def _keep(self, name: str, el: Elements, batch: Batch, rows: np.ndarray | int,
              shapes: np.ndarray | int | None) -> None:
        """Keep the field's finite values (and what locates them) for finish."""
        keep = ((el.kind == NUM) | (el.kind == STR_NUM)) & np.isfinite(el.value)
        values = el.value[keep]
        if not len(values):
            return
        n = len(batch)
        chunk = Chunk(batch.file_index, rows, np.ascontiguousarray(values, np.float64),
                       vector=bool(el.levels), shapes=shapes)
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
            parts.extend(self._wrong_lengths(name))
            chunks, self._chunks[name] = self._chunks[name], []
            if chunks:
                parts.extend(find_outliers(name, chunks, self._stats[name],
                                           self.params.outlier_z))
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

    def _wrong_lengths(self, name: str) -> Iterator[pl.DataFrame]:
        runs, self._runs[name] = self._runs[name], []
        stats = self._stats[name]
        if (length := stats.shapes.modal_length()) is not None:
            for found in wrong_lengths(name, runs, stats.shapes, length,
                                       empty_ok=self.params.allow_null):
                stats.wrong_length += found.height
                yield found

    def summary(self) -> dict[str, Any]:
        """Per field: count (finite values), nulls, nan, inf (strings such as "NaN" and
        "inf" included), strings, not_numbers, outliers, min, max, median, mad, note; for a
        vector judged per position also per_position, length, wrong_length and positions."""
        return {"fields": {name: json_stats(s) for name, s in self._stats.items()}}
