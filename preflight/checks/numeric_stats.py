"""The numeric check's corpus-wide state and what ``finish`` makes of it.

Per field, each batch's finite values are kept as a ``Chunk`` (float64, 8 bytes per value,
with what locates each value: row numbers, record ends, list positions), never records;
``Stats`` holds the counts, which merge across workers. At the end the median and MAD
(median absolute deviation) of all the chunks give the robust z-score of each value, the
``outlier`` findings, and the histogram of the report.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from preflight.checks.base import findings
from preflight.checks.numeric_details import SHOWN, fmt
from preflight.checks.numeric_positions import (
    centers,
    deviations,
    median_in_place,
    positions,
    whole,
)
from preflight.checks.numeric_shapes import ShapeCount, only_length

_BINS = 40  # histogram bins per field in the report
POSITIONS_SHOWN = 64  # per-position medians/MADs listed in the report up to this length
_MAD_SCALE = 1.4826  # MAD * 1.4826 estimates the standard deviation of a normal distribution


@dataclass
class Chunk:
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
    # The batch's records' shapes (``numeric_shapes.record_shapes``) while the field may be
    # a fixed-length vector: the records of another length are left out of its positions.
    shapes: np.ndarray | int | None = None

    def records(self, k: np.ndarray) -> np.ndarray:
        """Record index in the batch of values ``k``."""
        return k if self.ends is None else np.searchsorted(self.ends, k, side="right")

    def row(self, i: np.ndarray) -> np.ndarray:
        """Row numbers of the batch's records ``i``."""
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
class Stats:
    """One field's counts over the corpus; median, MAD, note and histogram come from
    ``finish``."""

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
    # What the records hold (``numeric_shapes``): a list length that nearly all hold makes
    # the field a fixed-length vector, judged per position.
    shapes: ShapeCount = field(default_factory=ShapeCount)
    # A fixed-length vector field: its length, the records of another shape (each a
    # ``wrong_length`` finding), and each position's median and MAD.
    length: int | None = None
    wrong_length: int = 0
    position_median: np.ndarray | None = None
    position_mad: np.ndarray | None = None

    def merged_with(self, other: Stats) -> Stats:
        """The counts of both scans (the rest is computed in ``finish``)."""
        lows = [v for v in (self.min, other.min) if v is not None]
        highs = [v for v in (self.max, other.max) if v is not None]
        return Stats(count=self.count + other.count, nulls=self.nulls + other.nulls,
                     nan=self.nan + other.nan, inf=self.inf + other.inf,
                     strings=self.strings + other.strings,
                     not_numbers=self.not_numbers + other.not_numbers,
                     outliers=self.outliers + other.outliers,
                     shapes=self.shapes.merged_with(other.shapes),
                     min=min(lows) if lows else None, max=max(highs) if highs else None)


def find_outliers(name: str, chunks: list[Chunk], stats: Stats,
                  z_max: float | None) -> Iterator[pl.DataFrame]:
    """``outlier`` findings of one field, robust z-score above ``z_max`` (None: none), from
    all its chunks; sets the field's median, MAD, note and histogram in ``stats``. A field
    of fixed-length lists is judged per position (``numeric_positions``), over the records
    of its length only (``numeric_shapes``): ``chunks`` is then emptied as each is cut to
    them, so the corpus's values are not held twice."""
    length = stats.shapes.modal_length()
    if length is not None:
        kept: list[Chunk] = []
        chunks.reverse()
        while chunks:
            if (c := only_length(chunks.pop(), length)) is not None:
                kept.append(c)
        yield from _per_position(name, kept, stats, z_max, length)
        return
    values = np.concatenate([c.values for c in chunks])
    median = median_in_place(values)
    with np.errstate(over="ignore"):  # deviations of values near ±1.8e308 may overflow
        np.subtract(values, median, out=values)
    np.abs(values, out=values)
    mad = median_in_place(values)
    del values
    stats.median, stats.mad = median, mad
    sigma = _MAD_SCALE * mad
    bounds = None
    if z_max is not None and mad:
        bounds = [median - z_max * sigma, median + z_max * sigma]
    spans = [(median - 1.5 * z_max * sigma, median + 1.5 * z_max * sigma)] if bounds else []
    stats.histogram = _histogram(chunks, stats, spans, bounds)
    if z_max is None:
        return
    if mad == 0 or not math.isfinite(mad):
        stats.note = (f"MAD is {fmt(mad)}"
                      + (" (over half the values equal the median)" if mad == 0 else "")
                      + ": outliers skipped")
        return
    center = f"median {fmt(median)}, MAD {fmt(mad)}"
    for c in chunks:
        with np.errstate(over="ignore"):
            z = np.abs(c.values - median) / sigma
        hit = np.flatnonzero(z > z_max)
        if len(hit):
            stats.outliers += len(hit)
            yield _flagged(name, c, hit, z, z_max, center=center)


def _per_position(name: str, chunks: list[Chunk], stats: Stats, z_max: float | None,
                  length: int) -> Iterator[pl.DataFrame]:
    """``outlier`` findings of a fixed-length vector field, each element against its own
    position's median and MAD; the field's median and MAD stay None (one pooled value
    would describe none of the positions), the positions' go to ``stats``."""
    if not chunks:  # the records of that length hold no finite value
        med = mad = np.full(length, np.nan)
    else:
        med, mad = centers(chunks, length)
    stats.length, stats.position_median, stats.position_mad = length, med, mad
    usable = (mad > 0) & np.isfinite(mad)
    sigma = np.where(usable, _MAD_SCALE * mad, np.inf)
    spans: list[tuple[float, float]] = []
    if z_max is not None:
        spans = [(m - 1.5 * z_max * s, m + 1.5 * z_max * s) if u else (m, m)
                 for m, s, u in zip(med.tolist(), sigma.tolist(), usable.tolist(), strict=True)
                 if math.isfinite(m)]
    stats.histogram = _histogram(chunks, stats, spans, None)
    if z_max is None:
        return
    skipped = np.flatnonzero(~usable & np.isfinite(med)).tolist()
    if skipped:
        shown = ", ".join(map(str, skipped[:SHOWN])) + (", …" if len(skipped) > SHOWN else "")
        stats.note = (f"MAD is 0 or not finite at {len(skipped)} of {length} positions "
                      f"({shown}; e.g. binary flags or constants): outliers skipped there")
    if not usable.any():
        return
    for c in chunks:
        z = deviations(c, length, med, sigma)
        hit = np.flatnonzero(z > z_max)
        if len(hit):
            stats.outliers += len(hit)
            pos = hit % length if whole(c, length) else positions(c, length)[hit]
            yield _flagged(name, c, hit, z, z_max, at=(pos, med, mad))


def _flagged(name: str, c: Chunk, hit: np.ndarray, z: np.ndarray, z_max: float, *,
             center: str = "", at: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
             ) -> pl.DataFrame:
    """One finding per record for the chunk's outliers ``hit``: against the field's
    ``center``, or (``at``: each hit's position, the positions' medians and MADs) against
    its own position's."""
    owners = c.records(hit)
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
    ends = np.r_[starts[1:], len(hit)]

    def where(j: int, rec: int) -> tuple[str, str]:
        """Hit ``j``'s position (``[3]``) and, per position, its median and MAD."""
        if at is None:
            return c.position(int(hit[j]), rec), ""
        p = int(at[0][j])
        return f"[{p}]", f"median {fmt(float(at[1][p]))}, MAD {fmt(float(at[2][p]))}"

    details = []
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        rec, ks = int(owners[s]), hit[s:e].tolist()
        if len(ks) == 1:
            k = ks[0]
            pos, own = where(s, rec)
            against = center if at is None else f"position {pos[1:-1]}'s {own}"
            details.append(f"{name}{pos}: {fmt(float(c.values[k]))} is an outlier "
                           f"(z = {float(z[k]):.3g} > {fmt(z_max)}; {against})")
        else:
            shown = []
            for j, k in enumerate(ks[:SHOWN], start=s):
                pos, own = where(j, rec)
                shown.append(f"{pos}={fmt(float(c.values[k]))} (z = {float(z[k]):.3g}"
                             + (f"; {own})" if own else ")"))
            more = ", …" if e - s > SHOWN else ""
            against = center if at is None else "per position"
            details.append(f"{name}: {e - s}× outliers (z > {fmt(z_max)}; {against}) "
                           f"at {', '.join(shown)}{more}")
    recs = owners[starts]
    return findings(
        {"file_index": pl.Series(np.full(len(recs), c.file_index, np.int32)),
         "row": pl.Series(c.row(recs), dtype=pl.Int64)},
        "outlier",
        details,
    )


def compact_rows(rows: np.ndarray) -> np.ndarray | int:
    """A batch's row numbers, or just the first when they are consecutive."""
    if len(rows) and int(rows[-1]) - int(rows[0]) == len(rows) - 1 and bool(
        np.all(np.diff(rows) == 1)
    ):
        return int(rows[0])
    return np.asarray(rows, np.int64).copy()


def json_stats(s: Stats) -> dict[str, Any]:
    """One field's stats as the report's ``stats.fields`` holds them; a field judged per
    position adds ``per_position``, ``length``, ``wrong_length`` (the records of another
    shape) and, up to ``POSITIONS_SHOWN`` positions, ``positions`` (their medians and MADs,
    null where a position holds no finite value)."""
    out = {
        "count": s.count, "nulls": s.nulls, "nan": s.nan, "inf": s.inf, "strings": s.strings,
        "not_numbers": s.not_numbers, "outliers": s.outliers,
        "min": s.min, "max": s.max, "median": s.median, "mad": s.mad, "note": s.note,
        "histogram": s.histogram,
    }
    if s.length is not None:
        out["per_position"] = True
        out["length"] = s.length
        out["wrong_length"] = s.wrong_length
        out["positions"] = None
        if s.position_median is not None and s.position_mad is not None \
                and s.length <= POSITIONS_SHOWN:
            out["positions"] = {"median": _finite(s.position_median),
                                "mad": _finite(s.position_mad)}
    return out


def _finite(a: np.ndarray) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in a.tolist()]


def _histogram(chunks: list[Chunk], stats: Stats, spans: list[tuple[float, float]],
               bounds: list[float] | None) -> dict[str, Any]:
    """The finite values' distribution for the report: ``_BINS`` bins over the range that
    holds the bulk (``spans``: the outlier bounds widened by half, per position for a
    vector judged so; within min..max), with the values outside it counted as
    ``below``/``above``, and the outlier ``bounds`` themselves (None per position: each
    position has its own)."""
    assert stats.min is not None and stats.max is not None
    lo, hi = stats.min, stats.max
    if spans:
        lo = max(lo, min(a for a, _ in spans))
        hi = min(hi, max(b for _, b in spans))
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
