"""What each record of a list field holds, and which list length makes it a feature vector.

A feature vector field is judged per position (``numeric_positions``) over its **modal
length** L: when a list of L >= 2 elements is what at least ``MODAL_SHARE`` (90%) of the
records holding a non-empty list or a number hold (``[]``, as null, does not count), and
the field holds at most ``MAX_SHAPES`` (16) distinct shapes in all. One record of another
shape (a truncated ``[44, 1]``, a lone ``[NaN, NaN]``, ``[]``, a number or a nested list
among the lists; ``[]`` passes with ``allow_null``, as null does) then neither
turns the field back into one pooled median/MAD, against which every age among 0/1 flags
is an outlier, nor passes silently: it is a ``wrong_length`` finding, and its values are
left out of the positions' statistics (position 1 of a truncated record need not be the
feature at position 1). A ragged field (token ids, series of varying length) has no such
majority, or more shapes than ``MAX_SHAPES``: it keeps the pooled statistics, with no
length findings.

The counts are exact and merge across workers in any grouping: a count per shape, and past
``MAX_SHAPES`` distinct shapes only the fact that the field is ragged (the union of all the
shapes has more than ``MAX_SHAPES`` exactly when some partial union has). Per batch, the
records' shapes are kept (one number when the batch's records all hold the same shape,
else 4 bytes a record) until the field is known to be ragged, to name the records of
another length at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from preflight.checks.base import findings
from preflight.checks.numeric_values import NUM, STR_INF, STR_NUM

if TYPE_CHECKING:
    from preflight.batch import Batch
    from preflight.checks.numeric_stats import Chunk
    from preflight.checks.numeric_values import Elements

# A record's shape: the length of its list (1 and up), or one of these; NONE (null,
# missing, a non-numeric scalar) is no shape: such a record is a finding of its own.
NONE, NUMBER, NESTED, EMPTY = 0, -1, -2, -3
MAX_SHAPES = 16  # more distinct shapes than this: a ragged field
# The share of the records holding a non-empty list or a number that one length must hold.
MODAL_SHARE = Fraction(9, 10)


@dataclass
class ShapeCount:
    """How many records of a field hold each shape, over the corpus (merges exactly)."""

    counts: dict[int, int] = field(default_factory=dict)
    ragged: bool = False  # more than MAX_SHAPES distinct shapes: counts dropped

    def add(self, shapes: np.ndarray | int, n: int) -> None:
        """Count a batch's records' shapes (``int``: all ``n`` records hold that one)."""
        if self.ragged:
            return
        if isinstance(shapes, int):
            seen = {shapes: n} if shapes != NONE else {}
        else:
            vals, cnt = np.unique(shapes[shapes != NONE], return_counts=True)
            seen = dict(zip(vals.tolist(), cnt.tolist(), strict=True))
        self._take(seen)

    def merged_with(self, other: ShapeCount) -> ShapeCount:
        """Both scans' counts (any grouping of the scans gives the same)."""
        if self.ragged or other.ragged:
            return ShapeCount(ragged=True)
        out = ShapeCount(dict(self.counts))
        out._take(other.counts)
        return out

    def _take(self, seen: dict[int, int]) -> None:
        for shape, k in seen.items():
            self.counts[shape] = self.counts.get(shape, 0) + k
        if len(self.counts) > MAX_SHAPES:
            self.ragged, self.counts = True, {}

    def modal_length(self) -> int | None:
        """L when the field is a fixed-length vector of L >= 2 (see the module), else None."""
        # ``[]`` does not count here (a vector left empty, as null: the field's sparse
        # presence does not make it a sequence); it is a finding all the same.
        held = [p for p in self.counts.items() if p[0] != EMPTY]
        if self.ragged or not held:
            return None
        total = sum(k for _, k in held)
        shape, k = max(held, key=lambda p: (p[1], p[0]))
        if shape >= 2 and k >= MODAL_SHARE * total:  # exact: a Fraction
            return shape
        return None

    def held(self, shape: int) -> tuple[int, int]:
        """How many records hold ``shape``, and how many hold any shape (``[]`` too)."""
        return self.counts.get(shape, 0), sum(self.counts.values())


@dataclass
class ShapeRun:
    """The shapes of one batch's records: ``shapes`` one int for all ``n`` records, or one
    per record."""

    file_index: int
    rows: np.ndarray | int  # the batch's row numbers, or the first one when consecutive
    n: int
    shapes: np.ndarray | int


def record_shapes(el: Elements, batch: Batch, name: str) -> np.ndarray | int:
    """What each record of the batch holds in the field: its list's length (elements of
    any kind counted), ``NUMBER`` for a number outside a list, ``NESTED`` for a list holding
    lists, ``EMPTY`` for ``[]``, ``NONE`` for anything else; one int when all are alike."""
    n = len(batch)
    col = batch.frame.get_column(name) if name not in batch.raw else None
    if (
        col is not None
        and isinstance(col.dtype, pl.List)
        and not isinstance(col.dtype.inner, pl.List | pl.Array)
    ):  # a typed vector column: from its lengths
        lens = col.list.len()
        shape = lens.fill_null(NONE).to_numpy().astype(np.int32)
        shape[(lens == 0).fill_null(False).to_numpy()] = EMPTY
        return _compact(shape)
    # NUM, then STR_NUM, STR_NAN, STR_INF (consecutive): the kinds that are a number
    number = (el.kind == NUM) | ((el.kind >= STR_NUM) & (el.kind <= STR_INF))
    if not el.levels and len(number) == n and bool(number.all()):
        return NUMBER if n else NONE  # a number per record: a scalar field's batch
    shape = np.zeros(n, np.int32)
    inlist = el.levels[0] >= 0 if el.levels else np.zeros(len(number), bool)
    if el.levels:
        counts = np.bincount(el.i[inlist], minlength=n)
        shape[counts > 0] = counts[counts > 0]
    if len(el.levels) > 1:
        shape[el.i[el.levels[1] >= 0]] = NESTED
    shape[el.i[~inlist & number]] = NUMBER
    empty = _empty_lists(batch, name)
    if empty is not None:
        shape[empty] = EMPTY
    return _compact(shape)


def _compact(shape: np.ndarray) -> np.ndarray | int:
    """One int when every record holds the same shape."""
    if len(shape) and bool((shape == shape[0]).all()):
        return int(shape[0])
    return shape


def _empty_lists(batch: Batch, name: str) -> np.ndarray | None:
    """The records holding ``[]`` (they have no element to be seen by), or None."""
    if name in batch.raw:
        return np.asarray([isinstance(v, list) and not v for v in batch.raw[name]], bool)
    col = batch.frame.get_column(name)
    if not isinstance(col.dtype, pl.List):
        return None
    return (col.list.len() == 0).fill_null(False).to_numpy()


def wrong_lengths(
    name: str, runs: list[ShapeRun], count: ShapeCount, length: int, *, empty_ok: bool = False
) -> Iterator[pl.DataFrame]:
    """``wrong_length`` findings: the records of a ``length``-vector field that hold
    another shape (``[]`` passes with ``empty_ok``, as null does with ``allow_null``)."""
    k, total = count.held(length)
    where = f"({k:,} of {total:,} records hold {length})"
    fine = (NONE, length, EMPTY) if empty_ok else (NONE, length)
    for run in runs:
        if isinstance(run.shapes, int):
            if run.shapes in fine:
                continue
            idx = np.arange(run.n)
            shapes = np.full(run.n, run.shapes, np.int32)
        else:
            idx = np.flatnonzero(~np.isin(run.shapes, fine))
            shapes = run.shapes[idx]
        if not len(idx):
            continue
        rows = run.rows + idx if isinstance(run.rows, int) else run.rows[idx]
        details = [f"{name}: {_held(int(s), length)} {where}" for s in shapes.tolist()]
        yield findings(
            {
                "file_index": pl.Series(np.full(len(idx), run.file_index, np.int32)),
                "row": pl.Series(rows, dtype=pl.Int64),
            },
            "wrong_length",
            details,
        )


def _held(shape: int, length: int) -> str:
    """What a record of another shape holds, against the vector's ``length``."""
    if shape >= 1:
        return f"{shape} value{'s' if shape != 1 else ''}, not {length}"
    what = {NUMBER: "a single number", NESTED: "nested lists", EMPTY: "an empty list"}
    return f"{what[shape]}, not {length} values"


def only_length(c: Chunk, length: int) -> Chunk | None:
    """The chunk's values of the records holding a list of ``length`` (``c.shapes``), as a
    one-level chunk with the same records (the others hold no value in it); None when no
    value is left."""
    from preflight.checks.numeric_stats import Chunk

    shapes = c.shapes
    assert shapes is not None  # kept while the field may be a vector
    if isinstance(shapes, int):
        if shapes != length:
            return None
        if c.levels is None:
            return c
    assert c.ends is not None  # a value per record only when each record holds a number
    counts = np.diff(c.ends, prepend=0)
    keep_rec = np.full(len(counts), True) if isinstance(shapes, int) else shapes == length
    owners = np.repeat(np.arange(len(counts)), counts)
    keep = keep_rec[owners]
    if not keep.any():
        return None
    if c.levels is None and keep.all():
        return c
    if c.levels is not None:  # a nested record in the batch: positions from the top level
        pos = c.levels[0][keep]
    else:
        pos = np.arange(len(c.values)) - (c.ends - counts)[owners]
        if c.moved_k is not None and c.moved_pos is not None:
            pos[c.moved_k] = c.moved_pos
        pos = pos[keep]
    kept = np.where(keep_rec, counts, 0)
    ends = np.cumsum(kept)
    rank = np.arange(len(pos)) - (ends - kept)[owners[keep]]
    moved = np.flatnonzero(pos != rank)
    return Chunk(
        c.file_index,
        c.rows,
        c.values[keep],
        ends,
        moved_k=moved if len(moved) else None,
        moved_pos=pos[moved] if len(moved) else None,
        vector=True,
    )
