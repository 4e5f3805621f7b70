"""Where findings go: counted per rule, a few kept as examples, all spilled to Parquet.

Memory stays bounded whatever the number of findings: counts and up to ``MAX_EXAMPLES``
examples per rule live in memory, the rest is spilled to a temporary Parquet file, one row
group per rule's chunk. ``close`` writes ``findings.parquet`` rule by rule (in the order the
rules run), each rule's rows in read order, in row groups of ``ROW_GROUP`` rows: how the
scan was scheduled (``--workers``, piece sizes) changes when rows arrive, not the file,
which is byte-identical for the same input and rules. Temporary files are renamed into place
when complete; ``abort`` deletes them when the run stops short.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from preflight.batch import Batch, arrow_numbers, record_key, repeated
from preflight.config import Rule
from preflight.report.model import Example, utf8_safe
from preflight.sampling import FlaggedKeys
from preflight.tempfiles import temp_path, write_error
from preflight.text import redact, visible

MAX_EXAMPLES = 20
ROW_GROUP = 65_536  # rows per row group of findings.parquet (and of the spill)
_EXACT_FLOAT = 2**53  # floats below this hold every whole number exactly
PARQUET_SCHEMA = pa.schema(
    [
        ("row", pa.int64()),
        ("file", pa.string()),
        ("rule", pa.string()),
        ("check", pa.string()),
        ("code", pa.string()),
        ("detail", pa.string()),
        ("id", pa.string()),
        ("cluster", pa.int64()),
        ("partner", pa.int64()),
    ]
)


class Tally:
    """Counts and examples collected for one rule."""

    def __init__(self) -> None:
        self.violations = 0
        self.findings = 0
        self.codes: dict[str, int] = {}
        self.examples: list[Example] = []
        self.seen: list[np.ndarray] = []  # record keys found during the scan (if remembered)


class FindingsSink:
    """Collects the findings of every rule for one run."""

    def __init__(self, out_dir: Path | None, *, show_text: bool,
                 flagged: FlaggedKeys | None = None) -> None:
        self._out_dir = out_dir
        self.flagged = flagged  # flagged record keys, bounded, for the smoke test's sample
        self._show_text = show_text
        self._tallies: dict[str, Tally] = {}
        # Rows not spilled yet, per rule; spilled rows: the spill's row groups per rule.
        self._pending: dict[str, list[pl.DataFrame]] = {}
        self._pending_rows = 0
        self._spilled: dict[str, list[int]] = {}
        self._groups = 0
        self._writer: pq.ParquetWriter | None = None  # the spill
        self._tmp: Path | None = None  # findings.parquet's temporary name
        self._spill_path: Path | None = None
        self._labels: dict[int, str | None] = {}
        # Ids of every record, kept only when corpus-wide findings will need them: a sorted
        # int64 key per record (file index and row) and the ids as Arrow string chunks.
        self._id_keys: list[np.ndarray] = []
        self._ids: list[pa.Array] = []
        self._batch_ids: pl.Series | None = None
        if out_dir is not None:
            with self._writing(out_dir):
                out_dir.mkdir(parents=True, exist_ok=True)
            self._tmp = temp_path(out_dir / "findings.parquet")
            self._spill_path = temp_path(out_dir / "findings.parquet", "spill")

    def open_batch(self, batch: Batch, id_field: str | None, *, keep_ids: bool) -> None:
        """Start a batch: remember its file label and the records' ids (kept for the whole
        run only when corpus-wide findings will need them)."""
        self.label(batch.file_index, batch.file)
        self._batch_ids = batch_ids(batch, id_field)
        if keep_ids and self._batch_ids is not None:
            self.keep_ids(record_key(np.full(len(batch), batch.file_index), batch.rows),
                          self._batch_ids)

    def keep_ids(self, keys: np.ndarray, ids: pl.Series) -> None:
        """Remember records' ids (by record key, in read order) for corpus-wide findings."""
        self._id_keys.append(keys)
        self._ids.append(ids.to_arrow(compat_level=pl.CompatLevel.oldest()))

    def label(self, file_index: int, file: str | None) -> None:
        """The ``file`` value of findings in file ``file_index`` (a name that is not UTF-8
        shows its bytes escaped: Arrow strings are UTF-8)."""
        self._labels[file_index] = None if file is None else utf8_safe(file)

    def add(self, rule: Rule, *, frame: pl.DataFrame | None, batch: Batch | None = None,
            remember: bool = False) -> None:
        """Add one rule's findings from ``scan`` (with ``batch``) or ``finish``. With
        ``remember`` (a check that also reports in ``finish``), the records found during the
        scan are kept, so a record found again at the end is not a second violation."""
        if frame is not None and frame.height:
            frame = locate(frame, batch, self._batch_ids) if batch is not None else (
                frame.with_columns(pl.col("file_index").cast(pl.Int32),
                                   id=self._lookup_ids(frame)))
        self.add_located(rule, frame, scan=batch is not None, remember=remember)

    def add_located(self, rule: Rule, frame: pl.DataFrame | None, *, scan: bool,
                    remember: bool = False) -> None:
        """Add findings that already carry ``file_index``, ``row`` and ``id`` (``scan``:
        found by a batch's scan, else at the end of the run)."""
        tally = self._tallies.setdefault(rule.id, Tally())
        if frame is None or frame.height == 0:
            return
        tally.findings += frame.height
        # Records with a finding; a corpus-level finding (row null: "class 3 never occurs")
        # counts as one violation of its own. Few polars calls per batch: each one hands the
        # GIL over and waits to get it back while other threads read and scan.
        row = frame.get_column("row")
        file_index = frame.get_column("file_index")
        if row.has_nulls():
            row, file_index = row.drop_nulls(), file_index.filter(frame.get_column("row")
                                                                  .is_not_null())
        keys = np.unique(record_key(file_index.to_numpy(), row.to_numpy()))
        if not scan and tally.seen:
            keys = keys[~np.isin(keys, np.concatenate(tally.seen))]
        elif remember:
            tally.seen.append(keys)
        tally.violations += len(keys) + frame.height - len(row)
        if self.flagged is not None:
            self.flagged.add(keys)
        for code, n in Counter(frame.get_column("code").to_list()).items():
            tally.codes[code] = tally.codes.get(code, 0) + n
        room = MAX_EXAMPLES - len(tally.examples)
        if room > 0:
            for f in frame.head(room).iter_rows(named=True):
                snip = f["snippet"]
                if snip is not None:
                    snip = visible(snip) if self._show_text else redact(snip)
                tally.examples.append(
                    Example(row=f["row"], file=self._labels.get(f["file_index"]), id=f["id"],
                            code=f["code"], detail=f["detail"], snippet=snip)
                )
        if self._tmp is not None:
            self._spill(frame, rule)

    def _lookup_ids(self, frame: pl.DataFrame) -> pl.Series:
        """The ids of records found by file index and row (null where unknown)."""
        if not self._ids:
            return repeated(None, frame.height, pl.String)
        keys = np.concatenate(self._id_keys)
        rows = frame.get_column("row").fill_null(-1).to_numpy()
        wanted = record_key(frame.get_column("file_index").fill_null(0).to_numpy(), rows)
        pos = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        found = keys[pos] == wanted
        ids = pl.Series(pa.chunked_array(self._ids, type=pa.large_string())
                        .take(arrow_numbers(pos)))
        return ids.set(pl.Series(~found), None) if not found.all() else ids

    def _spill(self, frame: pl.DataFrame, rule: Rule) -> None:
        n = frame.height
        file_index = frame.get_column("file_index")
        if file_index.null_count() == 0 and file_index.min() == file_index.max():
            file = repeated(self._labels.get(file_index[0]), n, pl.String, "file")  # one file
        else:
            file = pl.Series("file", [None if k is None else self._labels.get(k)
                                      for k in file_index.to_list()], dtype=pl.String)
        rows = pl.DataFrame([  # columns, not a query (see ``locate``)
            frame.get_column("row").cast(pl.Int64),
            file,
            repeated(rule.id, n, pl.String, "rule"),
            repeated(rule.check, n, pl.String, "check"),
            frame.get_column("code"),
            frame.get_column("detail"),
            frame.get_column("id").cast(pl.String),
            frame.get_column("cluster").cast(pl.Int64),
            frame.get_column("partner").cast(pl.Int64),
        ])
        self._pending.setdefault(rule.id, []).append(rows)
        self._pending_rows += rows.height
        if self._pending_rows >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        """Spill every rule's pending rows, one row group per ``ROW_GROUP`` rows of a rule."""
        assert self._spill_path is not None and self._out_dir is not None
        with self._writing(self._out_dir / "findings.parquet"):
            for rule_id, frames in self._pending.items():
                table = _table(frames)
                if self._writer is None:
                    self._writer = pq.ParquetWriter(self._spill_path, PARQUET_SCHEMA)
                for start in range(0, table.num_rows, ROW_GROUP):
                    self._writer.write_table(table.slice(start, ROW_GROUP),
                                             row_group_size=ROW_GROUP)
                    self._spilled.setdefault(rule_id, []).append(self._groups)
                    self._groups += 1
        self._pending, self._pending_rows = {}, 0

    def close(self) -> dict[str, str]:
        """Write ``findings.parquet`` (rule by rule, renamed into place) and return the
        files written."""
        if self._out_dir is None or self._tmp is None:
            return {}
        final = self._out_dir / "findings.parquet"
        with self._writing(final):
            spill = None
            if self._writer is not None:
                self._writer.close()
                self._writer = None
                assert self._spill_path is not None
                spill = pq.ParquetFile(self._spill_path)
            with pq.ParquetWriter(self._tmp, PARQUET_SCHEMA) as writer:
                grouped = _RowGroups(writer)
                for rule_id in self._tallies:
                    for group in self._spilled.get(rule_id, []):
                        assert spill is not None
                        grouped.write(spill.read_row_group(group))
                    if frames := self._pending.get(rule_id):
                        grouped.write(_table(frames))
                grouped.finish()
            if spill is not None:
                spill.close()
                assert self._spill_path is not None
                self._spill_path.unlink()
            os.replace(self._tmp, final)
        self._tmp = self._spill_path = None
        self._pending, self._spilled = {}, {}
        return {"findings": str(final)}

    def abort(self) -> None:
        """Stop without a findings file: close the spill and delete the temporary files
        (a run that failed or was interrupted leaves nothing half-written)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
        for path in (self._tmp, self._spill_path):
            if path is not None:
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _writing(self, path: Path) -> Iterator[None]:
        """A failed write (disk full, read-only folder) is an ``OutputError``, and leaves
        no temporary file behind."""
        try:
            yield
        except OSError as e:
            self.abort()
            raise write_error(path, e) from e

    def tally(self, rule_id: str) -> Tally:
        """What was collected for one rule."""
        return self._tallies.get(rule_id, Tally())


def _table(frames: list[pl.DataFrame]) -> pa.Table:
    return pl.concat(frames).to_arrow().cast(PARQUET_SCHEMA)


class _RowGroups:
    """Writes tables to a Parquet writer in row groups of exactly ``ROW_GROUP`` rows (the
    last one shorter), however the tables come cut."""

    def __init__(self, writer: pq.ParquetWriter) -> None:
        self._writer = writer
        self._held: list[pa.Table] = []
        self._rows = 0

    def write(self, table: pa.Table) -> None:
        self._held.append(table)
        self._rows += table.num_rows
        if self._rows >= ROW_GROUP:
            whole = pa.concat_tables(self._held)
            cut = self._rows - self._rows % ROW_GROUP
            self._writer.write_table(whole.slice(0, cut), row_group_size=ROW_GROUP)
            self._held, self._rows = [whole.slice(cut)], self._rows - cut

    def finish(self) -> None:
        if self._rows:
            self._writer.write_table(pa.concat_tables(self._held), row_group_size=ROW_GROUP)
        self._held, self._rows = [], 0


def locate(frame: pl.DataFrame, batch: Batch, ids: pl.Series | None) -> pl.DataFrame:
    """Give a batch's scan findings their row, file index and id (``ids``: the batch's).
    Built from columns, not by a query (see ``batch.repeated``): the gate adds a few
    findings per rule and batch, and the queries' waits for the GIL were most of their
    cost (0.4 s of a 3 s gate)."""
    n = frame.height
    file_index = repeated(batch.file_index, n, pl.Int32, "file_index")
    if "i" in frame.columns:
        i = frame.get_column("i").to_numpy().astype(np.int64, copy=False)
        kept = [frame.get_column(c) for c in frame.columns if c != "i"]
        located = [pl.Series("row", batch.rows[i]), file_index,
                   ids.gather(i).alias("id") if ids is not None
                   else repeated(None, n, pl.String, "id")]
    else:  # reader findings: rows of this batch's file
        kept = [frame.get_column(c) for c in frame.columns if c not in ("file_index", "id")]
        located = [file_index, repeated(None, n, pl.String, "id")]
    return pl.DataFrame([*kept, *located])


def batch_ids(batch: Batch, id_field: str | None) -> pl.Series | None:
    """The records' ids as strings, or None when no id field is known. A whole number reads
    "7" even where its batch typed the column as floats (beside a ``1.5``) or kept Python
    values (beside a string): a record's id must not depend on the records read with it
    (``--workers N`` batches them otherwise)."""
    if not id_field or not batch.has(id_field):
        return None
    if id_field in batch.raw:
        return pl.Series([None if v is None else _id_text(v) for v in batch.raw[id_field]],
                         dtype=pl.String)
    col = batch.frame.get_column(id_field)
    if col.dtype.is_float():
        whole = col.is_finite() & (col == col.round()) & (col.abs() < _EXACT_FLOAT)
        return pl.select(pl.when(whole).then(col.cast(pl.Int64, strict=False).cast(pl.String))
                         .otherwise(col.cast(pl.String))).to_series().alias(id_field)
    return col if col.dtype == pl.String else col.cast(pl.String, strict=False)


def _id_text(value: Any) -> str:
    """One id as text (a whole float as its integer)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_FLOAT:
        return str(int(value))
    return str(value)
