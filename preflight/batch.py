"""A batch of records as the checks see it: typed columns plus each record's row number.

Sources produce batches; checks read them. Records are held column-wise in a polars frame.
A field whose values have mixed JSON types in a batch (a number here, a string there) cannot
be one typed column: the frame then holds its string values only, and ``raw`` keeps every
record's Python value so type-aware checks still see what was written. So does a field that
nests deeper than ``RAW_DEPTH`` levels (its frame column is then null).
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from preflight.arrow_values import strings_array, values_array
from preflight.text import as_text, fold

# Joins a record's text fields into one document; a private-use character, so folding
# (whitespace, case, format characters) can never merge two fields' words.
FIELD_SEPARATOR = "\ue000"
# A column nesting deeper than this many levels of lists and structs is kept as Python values
# (``raw``) beside a null column: polars converts such a column at a cost of rows x depth
# (a few records 200 levels deep among a block's 65,536 rows took seconds per block and GBs),
# and no check reads inside one.
RAW_DEPTH = 32
# Code points Arrow strings cannot carry; the reader replaces them and notes where.
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Malformed:
    """A line or element that is not a readable record."""

    row: int
    code: str
    detail: str


@dataclass
class _Slot:
    """One value shared by the checks of a batch, computed by whichever asks first."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    value: Any = None


@dataclass
class Batch:
    """Records read from one file, in order, with everything the checks need."""

    frame: pl.DataFrame
    rows: np.ndarray
    file: str | None = None
    file_index: int = 0
    raw: dict[str, list[Any]] = field(default_factory=dict)
    malformed: list[Malformed] = field(default_factory=list)
    lone_surrogates: dict[int, int] = field(default_factory=dict)
    progress: int = 0
    # True when the format writes every value as text (CSV): "3.5" is then not a string
    # standing where a number belongs.
    textual: bool = False
    # For a textual format, each column typed as a number: its cells as written ("7", not
    # 7.0), for details that quote the value.
    written: dict[str, pl.Series] = field(default_factory=dict)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        # Sent to a worker process (the pool's one-reader inputs): without the lock and the
        # values the checks shared, which the worker computes again.
        return {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _cache={}, _lock=threading.Lock())

    def __len__(self) -> int:
        return len(self.rows)

    def head(self, n: int) -> Batch:
        """The first ``n`` records (and the malformed lines before the last of them)."""
        if n >= len(self):
            return self
        last = int(self.rows[n - 1]) if n else -1
        return Batch(
            frame=self.frame.head(n),
            rows=self.rows[:n],
            file=self.file,
            file_index=self.file_index,
            raw={k: v[:n] for k, v in self.raw.items()},
            malformed=[m for m in self.malformed if m.row <= last],
            lone_surrogates={i: c for i, c in self.lone_surrogates.items() if i < n},
            progress=self.progress,
            textual=self.textual,
            written={k: v.head(n) for k, v in self.written.items()},
        )

    def has(self, name: str) -> bool:
        """True when the field appears in this batch (in any record)."""
        return name in self.frame.columns

    def values(self, name: str) -> list[Any]:
        """The field's Python values per record (``None`` where absent)."""
        if name in self.raw:
            return self.raw[name]
        if name not in self.frame.columns:
            return [None] * len(self)
        return self.frame.get_column(name).to_list()

    def shared(self, key: Any, make: Any) -> Any:
        """``make()``, computed once per batch under ``key`` for every check that asks
        (checks scan a batch side by side: a second asker waits for the first's value)."""
        with self._lock:
            slot = self._cache.setdefault(("shared", key), _Slot())
        with slot.lock:
            if not slot.done:
                slot.value, slot.done = make(), True
        return slot.value

    def json_types(self, name: str) -> pl.Series:
        """Each record's JSON type for a field: string, integer, number, boolean, array,
        object or null (absent counts as null)."""
        key = ("json_types", name)
        if key not in self._cache:
            if name in self.raw:
                types = [json_type(v) for v in self.raw[name]]
                self._cache[key] = pl.Series(name, types, dtype=pl.String)
            elif name not in self.frame.columns:
                self._cache[key] = repeated("null", len(self), pl.String, name)
            else:
                col = self.frame.get_column(name)
                kind = pl.lit(dtype_kind(col.dtype))
                if col.dtype.is_float():  # a whole float is an integer, as on the slow path
                    whole = col.is_finite() & (col == col.floor())
                    kind = pl.when(whole).then(pl.lit("integer")).otherwise(kind)
                self._cache[key] = (
                    pl.select(pl.when(col.is_null()).then(pl.lit("null")).otherwise(kind))
                    .to_series()
                    .alias(name)
                )
        return self._cache[key]

    def texts(self, text_fields: tuple[str, ...], messages: str | None) -> pl.DataFrame:
        """All text of each record in long form: columns ``i`` (record index in the batch),
        ``field`` (``text`` or ``messages[2].content``) and ``text`` (null if not a string)."""
        key = ("texts", text_fields, messages)
        if key not in self._cache:
            # A CSV text field whose cells all read as numbers was typed as a number: its
            # text is the cells as written ("123", and "" for an empty one), as in any other
            # format, not a non-string (schema's wrong_type) or a missing value (empty's).
            typed = [name for name in text_fields if name in self.written]
            if typed:
                self.frame = self.frame.with_columns(self.written.pop(n) for n in typed)
                for name in typed:
                    self._cache.pop(("json_types", name), None)
            parts = [self._text_column(name) for name in text_fields]
            if messages:
                parts.append(self._message_contents(messages))
            empty = pl.DataFrame(schema={"i": pl.UInt32, "field": pl.String, "text": pl.String})
            self._cache[key] = pl.concat([empty, *parts]).sort("i", maintain_order=True)
        return self._cache[key]

    def _text_column(self, name: str) -> pl.DataFrame:
        dtype = self.frame.schema.get(name)
        if dtype == pl.String:
            col = self.frame.get_column(name)
        elif dtype == pl.Binary:
            col = binary_text(self.frame.get_column(name))
        else:
            col = pl.Series(name, [None] * len(self), dtype=pl.String)
        return pl.DataFrame(
            {
                "i": positions(len(self)),
                "field": repeated(name, len(self), pl.String),
                "text": col,
            }
        )

    def _message_contents(self, name: str) -> pl.DataFrame:
        schema = {"i": pl.UInt32, "field": pl.String, "text": pl.String}
        dtype = self.frame.schema.get(name)
        typed = (
            name not in self.raw
            and isinstance(dtype, pl.List)
            and isinstance(dtype.inner, pl.Struct)
            and dict(dtype.inner.to_schema()).get("content") == pl.String
        )
        if typed:
            return (
                self.frame.select(pl.col(name))
                .with_row_index("i")
                .explode(name)
                .with_columns(pl.int_range(pl.len()).over("i").alias("turn"))
                .filter(pl.col(name).is_not_null())
                .select(
                    pl.col("i").cast(pl.UInt32),
                    pl.format(f"{name}[{{}}].content", pl.col("turn")).alias("field"),
                    pl.col(name).struct.field("content").alias("text"),
                )
            )
        out: dict[str, list[Any]] = {"i": [], "field": [], "text": []}
        for i, turns in enumerate(self.values(name)):
            if not isinstance(turns, list):
                continue
            for t, turn in enumerate(turns):
                content = turn.get("content") if isinstance(turn, dict) else None
                out["i"].append(i)
                out["field"].append(f"{name}[{t}].content")
                out["text"].append(content if isinstance(content, str) else None)
        return pl.DataFrame(out, schema=schema)

    def folded(self, text_fields: tuple[str, ...], messages: str | None) -> pl.Series:
        """The documents in the folded view duplicates are judged on (computed once per
        batch, shared by exact and near duplicates)."""
        key = ("folded", text_fields, messages)
        with self._lock:
            if key not in self._cache:
                folded = fold(self.documents(text_fields, messages))
                if len(text_fields) > 1 or messages:
                    # Empty fields must not leave a separator behind: two records with only
                    # empty fields are not a document, and "x" + "" is the same as "x".
                    folded = folded.str.replace_all(r"( ?\x{E000} ?)+", FIELD_SEPARATOR)
                    folded = folded.str.strip_chars(FIELD_SEPARATOR + " ")
                self._cache[key] = folded
        return self._cache[key]

    def documents(self, text_fields: tuple[str, ...], messages: str | None) -> pl.Series:
        """One string per record: its text pieces joined by FIELD_SEPARATOR (null if none)."""
        key = ("documents", text_fields, messages)
        if key not in self._cache:
            if len(text_fields) == 1 and not messages:
                doc = self.texts(text_fields, messages).get_column("text")
            else:
                joined = (
                    self.texts(text_fields, messages)
                    .group_by("i", maintain_order=True)
                    .agg(pl.col("text").drop_nulls().str.join(FIELD_SEPARATOR))
                )
                doc = (
                    pl.DataFrame({"i": positions(len(self))})
                    .join(joined, on="i", how="left", maintain_order="left")
                    .get_column("text")
                )
            self._cache[key] = doc.alias("document")
        return self._cache[key]


def repeated(value: Any, n: int, dtype: Any, name: str = "") -> pl.Series:
    """A column of ``n`` copies of ``value``. Built directly: ``pl.repeat(eager=True)`` runs a
    query, and each query hands the GIL over and waits to get it back while the reader's and
    the checks' threads run (3-4 ms a call in the gate, not 4 us)."""
    return pl.Series(name, [value], dtype=dtype).new_from_index(0, n)


def positions(n: int, name: str = "i") -> pl.Series:
    """``0 .. n - 1`` as a UInt32 column (a batch's record index), built directly (see
    ``repeated``)."""
    return pl.Series(name, np.arange(n, dtype=np.uint32))


def arrow_numbers(values: np.ndarray) -> pa.Array:
    """A 1-D numeric numpy array as an Arrow array, sharing its memory. ``pa.array`` first
    asks pyarrow's pandas shim whether the values are a pandas object, which imports pandas
    (0.3 s) in each process on its first call."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


def record_key(file_index: np.ndarray, row: np.ndarray) -> np.ndarray:
    """One sortable int64 per record: file index in the high bits, row in the low 40."""
    return (file_index.astype(np.int64) << 40) | row.astype(np.int64)


def records_table(records: list[dict[str, Any]]) -> pa.Table | None:
    """Parsed JSON objects as an Arrow table, or None when a field's types disagree."""
    columns = _columns(records)
    if not columns:  # only empty objects: no columns, but still len(records) rows
        return pa.table({"_": pa.nulls(len(records))}).drop(["_"])
    try:
        return pa.table({name: values_array(values) for name, values in columns.items()})
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
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
    frame = pl.from_arrow(pa.table(arrays)) if arrays else pl.DataFrame()
    assert isinstance(frame, pl.DataFrame)
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


# How a detail names each JSON type ("expected a list, got a string").
JSON_TYPE_NOUNS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def json_type(value: Any) -> str:
    """A Python value's JSON type; a whole finite float is an integer."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if math.isfinite(value) and value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def binary_text(col: pl.Series) -> pl.Series:
    """A binary column's values as text: a Parquet or Arrow text column written without the
    UTF-8 annotation (some Spark and Hive writers) holds text all the same. Invalid UTF-8
    is decoded with U+FFFD, which the ``encoding`` check reports."""
    try:
        return col.cast(pl.String)
    except pl.exceptions.ComputeError:  # invalid UTF-8 somewhere: decode value by value
        return pl.Series(col.name, [as_text(v) for v in col.to_list()], dtype=pl.String)


def dtype_kind(dtype: pl.DataType) -> str:
    """The JSON type a polars column's values have."""
    if dtype == pl.String:
        return "string"
    if dtype == pl.Boolean:
        return "boolean"
    if dtype.is_integer():
        return "integer"
    if dtype.is_float():
        return "number"
    if isinstance(dtype, pl.List | pl.Array):
        return "array"
    if isinstance(dtype, pl.Struct):
        return "object"
    if dtype == pl.Null:
        return "null"
    return "string"
