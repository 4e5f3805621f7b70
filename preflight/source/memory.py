"""Data already in memory, passed from Python: a polars or pandas DataFrame, a pyarrow Table
or RecordBatch, or a list of dicts.

Each record's ``row`` is its 0-based position (for pandas, the position, not the index
label). Column names must be strings: a DataFrame built from a bare array (columns 0, 1, …)
is an ``InputError`` that says how to name them. A list of dicts becomes one Arrow table when
its values allow; when they do not (a field that is a string in one record and a number in
another, an item that is not a dict), each record is read as the JSON Lines reader reads a
line, so a mixed type is a ``schema`` finding and a non-dict a ``malformed`` one, with its
position as the row — as they would be in a file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from preflight.batch import Batch
from preflight.errors import ConfigError, InputError
from preflight.source import Source
from preflight.source.arrow import BATCH_ROWS, table_to_batch
from preflight.source.jsonl import block_batch


def in_memory(obj: Any) -> Source:
    """A Source over a DataFrame, an Arrow table or a list of dicts (see the module)."""
    kind = _kind(obj)
    if isinstance(obj, list):
        return _records(obj)
    table = _table(obj, kind)
    _check_names([f.name for f in table.schema], kind)
    source = Source(format=kind, path=f"<{kind}>", total=table.num_rows, unit="records",
                    global_rows=True)

    def batches() -> Iterator[Batch]:
        for start in range(0, table.num_rows, BATCH_ROWS):
            part = table.slice(start, BATCH_ROWS)
            batch = table_to_batch(part, start, 0, None)
            batch.progress = part.num_rows
            yield batch
        source._fingerprint = {"records": table.num_rows}

    source._batches = batches
    return source


def _kind(obj: Any) -> str:
    module = type(obj).__module__.split(".")[0]
    name = type(obj).__name__
    if isinstance(obj, list):
        return "list"
    if (module, name) in (("polars", "DataFrame"), ("pandas", "DataFrame"),
                          ("pyarrow", "Table"), ("pyarrow", "RecordBatch")):
        return f"{module}.{name}"
    if (module, name) == ("polars", "LazyFrame"):
        raise InputError("a polars LazyFrame is a query, not data: pass lf.collect()")
    if name in ("DatasetDict", "IterableDatasetDict"):
        raise InputError("a DatasetDict holds several splits: pick one, e.g. ds['train']")
    # Not data preflight could fail to read but the wrong argument: a usage error (exit 2).
    raise ConfigError(
        f"source must be a path, a hub dataset name, a datasets.Dataset, a polars or pandas "
        f"DataFrame, a pyarrow Table or a list of dicts; got {obj!r:.60} "
        f"({type(obj).__module__}.{name})")


def _table(obj: Any, kind: str) -> pa.Table:
    if kind == "pandas.DataFrame":
        _check_names(list(obj.columns), kind)
        try:
            return pa.Table.from_pandas(obj, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise InputError(f"cannot turn the pandas DataFrame into Arrow columns ({e}); give "
                             "each column one type (e.g. df[col].astype(str))") from e
    if kind == "polars.DataFrame":
        return _polars_table(obj)
    if kind == "pyarrow.RecordBatch":
        return pa.Table.from_batches([obj])
    return obj


def _polars_table(frame: Any) -> pa.Table:
    """A polars DataFrame as Arrow. An ``Object`` column (Python values polars did not type)
    goes to Arrow as the 8-byte addresses of its objects (``fixed_size_binary[8]``): its
    strings were read as control characters and U+FFFD, and a zero-width space in them
    passed; its values are typed by Arrow instead, as a pandas column's are."""
    import polars as pl

    table = frame.to_arrow()
    for name in [n for n, dtype in frame.schema.items() if dtype == pl.Object]:
        try:
            column = pa.array(frame.get_column(name).to_list())
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise InputError(f"cannot turn the polars DataFrame's Object column {name!r} into "
                             f"Arrow values ({e}); give it one type, e.g. df.with_columns(pl.col("
                             f"{name!r}).map_elements(str, return_dtype=pl.String))") from e
        table = table.set_column(table.schema.get_field_index(name), name, column)
    return table


def _check_names(names: list[Any], kind: str) -> None:
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        shown = ", ".join(f"{n!r} ({type(n).__name__})" for n in bad[:5])
        raise InputError(
            f"the {kind}'s column names must be strings; got {shown}{' …' if len(bad) > 5 else ''}"
            ": name the columns, e.g. df.columns = [str(c) for c in df.columns], or build it "
            "with names (pd.DataFrame(rows, columns=['text', 'label']))")
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise InputError(f"the {kind} has repeated column names ({', '.join(dupes)}); "
                         "rename them so each field has one column")


def _records(items: list[Any]) -> Source:
    for i, item in enumerate(items[:1000]):
        if isinstance(item, dict):
            _check_keys(item, i)
    try:
        table = pa.Table.from_pylist(items)
        if len(items) > 1000:
            for i, item in enumerate(items):
                _check_keys(item, i)
    except (pa.ArrowException, TypeError, AttributeError):  # mixed types, non-dict items
        return _as_json_lines(items)
    source = in_memory(table)
    source.format, source.path = "list", "<list of dicts>"
    return source


def _check_keys(item: dict[Any, Any], index: int) -> None:
    bad = [k for k in item if not isinstance(k, str)]
    if bad:
        raise InputError(f"record {index} of the list has a key that is not a string "
                         f"({bad[0]!r}, {type(bad[0]).__name__}); use string field names")


def _as_json_lines(items: list[Any]) -> Source:
    """Read each item as the JSON Lines reader reads a line (position = row)."""
    source = Source(format="list", path="<list of dicts>", total=len(items), unit="records",
                    global_rows=True)

    def line(index: int, item: Any) -> bytes:
        if isinstance(item, dict):
            _check_keys(item, index)
        try:
            return json.dumps(item, ensure_ascii=False, default=_refuse).encode(
                "utf-8", "surrogatepass") + b"\n"
        except (TypeError, ValueError) as e:
            raise InputError(f"record {index} of the list: {e}; its fields mix types, so it is "
                             "read as JSON, and JSON has no such value: convert it (e.g. to "
                             "str) first") from e

    def batches() -> Iterator[Batch]:
        for start in range(0, len(items), BATCH_ROWS):
            part = items[start:start + BATCH_ROWS]
            block = b"".join(line(start + i, item) for i, item in enumerate(part))
            batch, _ = block_batch(block, start, 0, None, len(part))
            yield batch
        source._fingerprint = {"records": len(items)}

    source._batches = batches
    return source


def _refuse(value: Any) -> Any:
    raise TypeError(f"a {type(value).__name__} value ({value!r:.60})")
