"""Arrow-native readers (Parquet, Arrow IPC / Feather, ``datasets`` shards) and the one
conversion every reader ends in: an Arrow table to a ``Batch``.

Some Arrow types have no polars counterpart, and ``pl.from_arrow`` panics or fails on them,
so the checks' view of such a column is converted first (the data file is not touched):

- ``decimal256`` → string (every digit kept; polars' decimals stop at 38 digits);
- ``month_day_nano_interval`` → struct ``{months, days, nanoseconds}`` (what polars itself
  offers with ``POLARS_IMPORT_INTERVAL_AS_STRUCT``);
- a union → string, each value as its own member type casts to string;
- ``list_view`` / ``large_list_view`` → list / large list; run-end encoded → its values.

Inside structs and lists too. A column that still cannot be converted (a union member with no
string form, a map of such types) is an ``InputError`` naming the column and its type.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from polars.exceptions import PanicException, PolarsError

from preflight.batch import Batch
from preflight.errors import InputError
from preflight.record_batches import polars_frame, split_deep
from preflight.source.magic import unreadable
from preflight.source.tracked import hash_file, note_file

BATCH_ROWS = 65_536


def table_to_batch(table: pa.Table, rows: np.ndarray | int, file_index: int,
                   label: str | None) -> Batch:
    """Wrap an Arrow table as a batch; ``rows`` is the row array or the first row number."""
    unique_columns(table.column_names, label or "the data")
    table, raw = split_deep(polars_readable(valid_utf8(table)))
    try:
        frame = polars_frame(table) if table.num_columns else pl.DataFrame()
    except (PolarsError, PanicException) as e:  # a type this module does not know yet
        types = ", ".join(f"{f.name!r}: {f.type}" for f in table.schema)
        raise InputError(f"polars cannot take these Arrow columns ({types}): {e}; cast the "
                         "column it names to a plain type (string, int64, float64) or drop "
                         "it, and check again") from e
    assert isinstance(frame, pl.DataFrame)
    categorical = [n for n, t in frame.schema.items() if isinstance(t, pl.Categorical | pl.Enum)]
    if categorical:  # dictionary-encoded strings are still text
        frame = frame.with_columns(pl.col(categorical).cast(pl.String))
    if isinstance(rows, int):
        rows = np.arange(rows, rows + table.num_rows, dtype=np.int64)
    return Batch(frame=frame, rows=rows, file=label, file_index=file_index, raw=raw)


def unique_columns(names: list[str], where: str | Path) -> None:
    """An ``InputError`` when two columns share a name (Parquet and Arrow allow it; a
    record cannot hold a field twice)."""
    if repeated := sorted({n for n in names if names.count(n) > 1}):
        raise InputError(f"{where}: {len(names) - len(set(names))} column(s) named like "
                         f"another ({', '.join(map(repr, repeated))}): a record cannot hold "
                         "a field twice; rename the columns in the file and check again")


def polars_readable(table: pa.Table) -> pa.Table:
    """``table`` with each column of a type polars cannot take converted to one it can (see
    the module docstring); the same table when there is none. ``InputError`` naming the
    column when one cannot be converted."""
    if not any(_unreadable(f.type) for f in table.schema):
        return table
    columns = []
    for f, column in zip(table.schema, table.columns, strict=True):
        if not _unreadable(f.type):
            columns.append(column)
            continue
        try:
            chunks = [_readable(c) for c in column.chunks or [pa.nulls(0, f.type)]]
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, _NoPolarsType) as e:
            raise InputError(
                f"column {f.name!r} has the Arrow type {f.type}, which polars cannot read and "
                f"preflight cannot convert ({e}); cast it to a plain type (string, int64, "
                "float64, a list or struct of them) or drop it, and check again") from e
        columns.append(pa.chunked_array(chunks, type=chunks[0].type))
    fields = [pa.field(f.name, c.type, f.nullable) for f, c in zip(table.schema, columns,
                                                                   strict=True)]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata))


def valid_utf8(table: pa.Table) -> pa.Table:
    """``table`` with each string that is not valid UTF-8 decoded with U+FFFD (which the
    ``encoding`` check reports). A writer that skipped the check leaves such bytes in a string
    column; polars takes them unchecked and every text check passed them. The same table when
    all is valid; ``InputError`` naming the column when such bytes sit in a nested one."""
    bad = not_utf8(table)
    if not bad:
        return table
    columns = list(table.columns)
    for i in bad:
        t = _string_type(table.schema.field(i).type)
        columns[i] = pa.chunked_array([_mended(c, t) for c in columns[i].chunks], type=t)
    fields = [pa.field(f.name, c.type, f.nullable) for f, c in zip(table.schema, columns,
                                                                   strict=True)]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata))


def not_utf8(table: pa.Table) -> list[int]:
    """The string columns (dictionary-encoded too) holding bytes that are not valid UTF-8,
    by index; ``InputError`` naming the column when such bytes sit in a nested one."""
    try:
        table.validate(full=True)
        return []
    except pa.ArrowInvalid:
        pass
    bad = []
    for i, (f, column) in enumerate(zip(table.schema, table.columns, strict=True)):
        try:
            column.validate(full=True)
        except pa.ArrowInvalid as e:
            t = _string_type(f.type)
            if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
                raise InputError(f"column {f.name!r} ({f.type}) holds text that is not valid "
                                 f"UTF-8 ({e}): the file breaks its format; write it again with "
                                 "valid text, or as binary, and check again") from e
            bad.append(i)
    return bad


def as_binary(arr: pa.Array) -> pa.Array:
    """A string array's values as the bytes they are (a dictionary decoded first)."""
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())


def _string_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _mended(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """A string array's values, bytes that are not UTF-8 decoded with U+FFFD."""
    return pa.array([None if v is None else v.decode("utf-8", "replace")
                     for v in as_binary(arr).to_pylist()], type=t)


class _NoPolarsType(Exception):
    """A value of this Arrow type has no conversion to a polars type."""


def _unreadable(t: pa.DataType) -> bool:
    """Whether ``t`` is, or holds, a type ``pl.from_arrow`` cannot take."""
    if (pa.types.is_decimal256(t) or pa.types.is_interval(t) or pa.types.is_union(t)
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t)
            or pa.types.is_run_end_encoded(t)):
        return True
    if pa.types.is_dictionary(t):
        return _unreadable(t.value_type)
    if pa.types.is_map(t):
        return _unreadable(t.key_type) or _unreadable(t.item_type)
    return any(_unreadable(t.field(i).type) for i in range(t.num_fields))


_INTERVAL = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanoseconds", "<i8")])


def _readable(arr: pa.Array) -> pa.Array:
    """``arr`` converted to types polars can take (the module docstring says which)."""
    t = arr.type
    if not _unreadable(t):
        return arr
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_decimal256(t):
        return arr.cast(pa.string())
    if pa.types.is_interval(t):  # month_day_nano: 16 bytes a value, split into its parts
        parts = np.frombuffer(arr.buffers()[1], dtype=_INTERVAL, count=arr.offset + len(arr))
        parts = parts[arr.offset:]
        return pa.StructArray.from_arrays([pa.array(parts[n]) for n in _INTERVAL.names],
                                          names=list(_INTERVAL.names), mask=mask)
    if pa.types.is_run_end_encoded(t):
        return _readable(pc.run_end_decode(arr))
    if pa.types.is_dictionary(t):
        return _readable(arr.dictionary_decode())
    if pa.types.is_union(t):
        return _union_as_string(arr)
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        # (pyarrow 26's list_view -> list cast writes an invalid array: rebuild the offsets)
        lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy()
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        cls = pa.ListArray if pa.types.is_list_view(t) else pa.LargeListArray
        return cls.from_arrays(pa.array(offsets.astype(np.int32 if cls is pa.ListArray
                                                       else np.int64)),
                               _readable(pc.list_flatten(arr)), mask=mask)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        # Offsets rebased to 0 and children cut to match (a null mask with the offsets of
        # a slice is refused by from_arrays).
        offsets = arr.offsets.to_numpy(zero_copy_only=False)
        start, end = int(offsets[0]), int(offsets[-1])
        rebased = pa.array(offsets - start)
        if pa.types.is_map(t):
            return pa.MapArray.from_arrays(rebased, _readable(arr.keys.slice(start, end - start)),
                                           _readable(arr.items.slice(start, end - start)),
                                           mask=mask)
        cls = pa.ListArray if pa.types.is_list(t) else pa.LargeListArray
        return cls.from_arrays(rebased, _readable(arr.values.slice(start, end - start)),
                               mask=mask)
    if pa.types.is_fixed_size_list(t):
        size = t.list_size
        values = arr.values.slice(arr.offset * size, len(arr) * size)
        return pa.FixedSizeListArray.from_arrays(_readable(values), size, mask=mask)
    if pa.types.is_struct(t):  # flatten(): children sliced like the parent
        children = [_readable(c) for c in arr.flatten()]
        fields = [pa.field(t.field(i).name, c.type, t.field(i).nullable)
                  for i, c in enumerate(children)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    raise _NoPolarsType(f"no conversion for {t}")


def _union_as_string(arr: pa.UnionArray) -> pa.Array:
    """Each value of a union as a string, from the member it holds."""
    t = arr.type
    dense = t.mode == "dense"
    # From the buffers: pyarrow's type_codes and offsets ignore a slice's offset.
    window = slice(arr.offset, arr.offset + len(arr))
    type_codes = np.frombuffer(arr.buffers()[1], dtype=np.int8)[window]
    offsets = np.frombuffer(arr.buffers()[2], dtype=np.int32)[window] if dense else None
    index = np.zeros(len(arr), dtype=np.int8)  # type code -> member position
    members = []
    for pos, code in enumerate(t.type_codes):
        try:
            as_text = _readable(arr.field(pos)).cast(pa.string())
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as e:
            raise _NoPolarsType(f"union member {t.field(pos).name!r} of type "
                                f"{t.field(pos).type} has no string form") from e
        held = type_codes == code
        index[held] = pos
        if offsets is not None:  # a dense member holds only its own values, by offset
            as_text = as_text.take(pa.array(np.where(held, offsets, 0), mask=~held))
        members.append(as_text)
    return pc.choose(pa.array(index), *members)


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
        raise unreadable(path, "Parquet", e) from e
    unique_columns(pf.schema_arrow.names, path)
    tables = _rebatch(pf.iter_batches(batch_size=BATCH_ROWS))
    yield from _emit(tables, path, file_index, label, state, pf.metadata.num_rows)


def read_parquet_groups(path: Path, file_index: int, label: str | None, *, groups: range,
                        row0: int) -> Iterator[Batch]:
    """Yield batches of some row groups of a Parquet file, the first of them at row
    ``row0`` (the pool reads a large file in such pieces; the file's hash is taken apart)."""
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise unreadable(path, "Parquet", e) from e
    unique_columns(pf.schema_arrow.names, path)
    size = path.stat().st_size
    total = max(pf.metadata.num_rows, 1)
    row = row0
    for table in _rebatch(pf.iter_batches(batch_size=BATCH_ROWS, row_groups=list(groups))):
        batch = table_to_batch(table, row, file_index, label)
        batch.progress = size * table.num_rows // total
        row += table.num_rows
        yield batch


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
        raise unreadable(path, "Arrow IPC", e) from e
    unique_columns(table.column_names, path)
    tables = _rebatch(table.to_batches(max_chunksize=BATCH_ROWS))
    yield from _emit(tables, path, file_index, label, state, table.num_rows)
