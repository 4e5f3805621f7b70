"""Arrow-native readers (Parquet, Arrow IPC / Feather, ``datasets`` shards) and the one
conversion every reader ends in: an Arrow table to a ``Batch``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from preflight.batch import Batch
from preflight.errors import InputError
from preflight.source.tracked import hash_file, note_file

BATCH_ROWS = 65_536


def table_to_batch(table: pa.Table, rows: np.ndarray | int, file_index: int,
                   label: str | None) -> Batch:
    """Wrap an Arrow table as a batch; ``rows`` is the row array or the first row number."""
    frame = pl.from_arrow(table) if table.num_columns else pl.DataFrame()
    assert isinstance(frame, pl.DataFrame)
    categorical = [n for n, t in frame.schema.items() if isinstance(t, pl.Categorical | pl.Enum)]
    if categorical:  # dictionary-encoded strings are still text
        frame = frame.with_columns(pl.col(categorical).cast(pl.String))
    if isinstance(rows, int):
        rows = np.arange(rows, rows + table.num_rows, dtype=np.int64)
    return Batch(frame=frame, rows=rows, file=label, file_index=file_index)


def _rebatch(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Group record batches into tables of about BATCH_ROWS rows."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for rb in batches:
        pending.append(rb)
        count += rb.num_rows
        if count >= BATCH_ROWS:
            yield pa.Table.from_batches(pending)
            pending, count = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _emit(tables: Iterable[pa.Table], path: Path, file_index: int, label: str | None,
          state: dict[str, Any], total_rows: int) -> Iterator[Batch]:
    row = state.get("row", 0)
    size = path.stat().st_size
    for table in tables:
        batch = table_to_batch(table, row, file_index, label)
        batch.progress = size * table.num_rows // max(total_rows, 1)
        row += table.num_rows
        yield batch
    if "row" in state:  # rows continue across shards (a datasets folder)
        state["row"] = row
    note_file(state, path, hash_file(path), size)


def read_parquet(path: Path, file_index: int, label: str | None, state: dict[str, Any]
                 ) -> Iterator[Batch]:
    """Yield batches of a Parquet file; ``row`` is the record's position in the file."""
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"cannot read {path} as Parquet: {e}") from e
    tables = _rebatch(pf.iter_batches(batch_size=BATCH_ROWS))
    yield from _emit(tables, path, file_index, label, state, pf.metadata.num_rows)


def read_ipc(path: Path, file_index: int, label: str | None, state: dict[str, Any]
             ) -> Iterator[Batch]:
    """Yield batches of an Arrow IPC file or stream (Feather v2, ``datasets`` shards)."""
    # Memory-mapped: batches are views of the file, not copies.
    source = pa.memory_map(str(path))
    try:
        try:
            table = pa.ipc.open_file(source).read_all()
        except pa.ArrowInvalid:
            source.seek(0)
            table = pa.ipc.open_stream(source).read_all()
    except pa.ArrowInvalid as e:
        raise InputError(f"cannot read {path} as Arrow IPC: {e}") from e
    tables = _rebatch(table.to_batches(max_chunksize=BATCH_ROWS))
    yield from _emit(tables, path, file_index, label, state, table.num_rows)
