"""Parsed records and Arrow tables made into typed batches.

A field's values become one Arrow column when their types agree (``values_array``); when
they do not (a number here, a string there), the batch keeps the field's Python values in
``raw`` beside a column of its strings, so type-aware checks still see what was written. So
does a field that nests deeper than ``RAW_DEPTH`` levels (its column is then null). Lone
surrogates, which Arrow strings cannot carry, are replaced and counted by the readers.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from preflight.arrow_values import strings_array, values_array
from preflight.batch import Batch

# A column nesting deeper than this many levels of lists and structs is kept as Python values
# (``raw``) beside a null column: polars converts such a column at a cost of rows x depth
# (a few records 200 levels deep among a block's 65,536 rows took seconds per block and GBs),
# and no check reads inside one.
RAW_DEPTH = 32
# Code points Arrow strings cannot carry; the reader replaces them and notes where.
_SURROGATE = re.compile("[\ud800-\udfff]")


def records_table(records: list[dict[str, Any]]) -> pa.Table | None:
    """Parsed JSON objects as an Arrow table, or None when a field's types disagree."""
    columns = _columns(records)
    if not columns:  # only empty objects: no columns, but still len(records) rows
        return pa.table({"_": pa.nulls(len(records))}).drop(["_"])
    try:
        return pa.table({name: values_array(values) for name, values in columns.items()})
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None


def clashing_field(records: list[dict[str, Any]]) -> str | None:
    """The first field whose values no one Arrow type holds (``records_table`` gave None)."""
    for name, values in _columns(records).items():
        try:
            values_array(values)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return name
    return None


def records_to_batch(records: list[dict[str, Any]], rows: list[int], **kwargs: Any) -> Batch:
    """Build a batch from parsed JSON objects, typing each column where its values agree
    and keeping the Python values of those where they do not."""
    arrays: dict[str, pa.Array] = {}
    raw: dict[str, list[Any]] = {}
    for name, values in _columns(records).items():
        try:
            array: pa.Array | None = values_array(values)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            array = None
        if array is None or type_depth(array.type) > RAW_DEPTH:
            raw[name] = values
            array = strings_array([v if isinstance(v, str) else None for v in values])
        arrays[name] = array
    frame = polars_frame(pa.table(arrays)) if arrays else pl.DataFrame()
    return Batch(frame=frame, rows=np.asarray(rows, dtype=np.int64), raw=raw, **kwargs)


def type_depth(t: pa.DataType) -> int:
    """How many levels of lists and structs an Arrow type nests (a scalar is 0)."""
    deepest, stack = 0, [(t, 0)]
    while stack:
        t, depth = stack.pop()
        children = child_types(t)
        if children:
            deepest = max(deepest, depth + 1)
            stack.extend((c, depth + 1) for c in children)
    return deepest


def child_types(t: pa.DataType) -> list[pa.DataType]:
    """The types one level inside a struct or list type (none for any other)."""
    if pa.types.is_struct(t):
        return [t.field(i).type for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [t.value_type]
    return []


def split_deep(table: pa.Table) -> tuple[pa.Table, dict[str, list[Any]]]:
    """``table`` with each column nesting deeper than ``RAW_DEPTH`` levels replaced by a
    null string column, and those columns' Python values (a batch's ``raw``)."""
    deep = [i for i, f in enumerate(table.schema) if type_depth(f.type) > RAW_DEPTH]
    raw: dict[str, list[Any]] = {}
    for i in deep:
        name = table.schema.field(i).name
        raw[name] = table.column(i).to_pylist()
        table = table.set_column(i, pa.field(name, pa.string()), pa.nulls(len(table),
                                                                          pa.string()))
    return table, raw


def _columns(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    names: dict[str, None] = {}
    for rec in records:
        names.update(dict.fromkeys(rec))
    return {name: [rec.get(name) for rec in records] for name in names}


def replace_lone_surrogates(value: Any) -> tuple[Any, int]:
    """Replace lone surrogates (which Arrow cannot hold) with U+FFFD; return the count."""
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value, 0
        return _SURROGATE.subn("\ufffd", value)
    if isinstance(value, list):
        out, total = [], 0
        for v in value:
            v, n = replace_lone_surrogates(v)
            out.append(v)
            total += n
        return out, total
    if isinstance(value, dict):
        fixed, total = {}, 0
        for k, v in value.items():
            k, m = replace_lone_surrogates(k)  # a key can hold one too ("\udc00key")
            v, n = replace_lone_surrogates(v)
            fixed[k] = v
            total += m + n
        return fixed, total
    return value, 0


def polars_frame(table: pa.Table) -> pl.DataFrame:
    """``pl.from_arrow`` keeping every column's name: it renames an empty one (``{"": …}``
    in JSON, a Parquet column named "") to ``column_0``, which the rules and ``fix`` would
    then look for in the records in vain (or which clashes with a real ``column_0``)."""
    names = table.column_names
    if "" in names:
        table = table.rename_columns([n or "\0preflight-empty-name" for n in names])
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    if "" in names:
        frame.columns = names
    return frame
