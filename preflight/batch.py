"""A batch of records as the checks see it: typed columns plus each record's row number.

Sources produce batches; checks read them. Records are held column-wise in a polars frame.
A field whose values have mixed JSON types in a batch (a number here, a string there) cannot
be one typed column: the frame then holds its string values only, and ``raw`` keeps every
record's Python value so type-aware checks still see what was written. So does a field that
nests deeper than ``record_batches.RAW_DEPTH`` levels (its frame column is then null).
Batches are built from parsed records or Arrow tables in ``record_batches``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from preflight.field_paths import Steps, path_column, split_path, value_at
from preflight.format_expr import format_str
from preflight.json_types import dtype_kind, json_type
from preflight.text import as_text, fold

# Joins a record's text fields into one document; a private-use character, so folding
# (whitespace, case, format characters) can never merge two fields' words.
FIELD_SEPARATOR = "\ue000"


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

    @property
    def schema(self) -> pl.Schema:
        """The frame's schema, built once per frame (polars builds it again on every
        ``frame.schema`` or ``frame.columns``: per column of a 5,000-column file, quadratic)."""
        frame = self.frame
        cached = self._cache.get("schema")
        if cached is None or cached[0] is not frame:
            cached = self._cache["schema"] = (frame, frame.schema)
        return cached[1]

    def has(self, name: str) -> bool:
        """True when the field appears in this batch (in any record); a field nested in
        objects (``data.text``, ``preflight.field_paths``) when some record holds it."""
        if name in self.schema:
            return True
        return self.path(name) is not None and bool(self._nested(name).is_not_null().any())

    def seen(self, text_fields: tuple[str, ...]) -> list[str]:
        """The fields this batch shows for a rule's "not found in the data": its columns, and
        the text fields nested in objects that some record holds (``data.text``)."""
        return [*self.frame.columns,
                *(name for name in text_fields if name not in self.schema and self.has(name))]

    def path(self, name: str) -> Steps | None:
        """The steps of a field nested in objects (``data.text``), or None for a top-level
        one (or a name that is neither)."""
        return split_path(name, self.schema)

    def values(self, name: str) -> list[Any]:
        """The field's Python values per record (``None`` where absent)."""
        if name in self.raw:
            return self.raw[name]
        if name not in self.schema:
            return self._nested(name).to_list() if self.path(name) else [None] * len(self)
        return self.frame.get_column(name).to_list()

    def _nested(self, name: str) -> pl.Series:
        """The values of a field nested in objects, null where an object on the way is null,
        missing or not an object; Python objects for a column of mixed JSON types."""
        key = ("nested", name)
        if key not in self._cache:
            steps = self.path(name)
            assert steps is not None
            col = None
            if steps[0] in self.raw:
                values = [value_at(v, steps[1:]) for v in self.raw[steps[0]]]
                col = pl.Series(name, values, dtype=pl.Object)
            else:
                col = path_column(self.frame.get_column(steps[0]), steps)
                col = None if col is None else col.alias(name)  # data["a.b"], not data.a.b
            self._cache[key] = col if col is not None else repeated(None, len(self), pl.Null,
                                                                    name)
        return self._cache[key]

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
            if name in self.raw or (name not in self.schema and self.path(name)
                                    and self._nested(name).dtype == pl.Object):
                types = [json_type(v) for v in self.values(name)]
                self._cache[key] = pl.Series(name, types, dtype=pl.String)
            elif name not in self.schema and self.path(name):
                col = self._nested(name)
                kind = pl.lit(dtype_kind(col.dtype))
                self._cache[key] = pl.select(pl.when(col.is_null()).then(pl.lit("null"))
                                             .otherwise(kind)).to_series().alias(name)
            elif name not in self.schema:
                self._cache[key] = repeated("null", len(self), pl.String, name)
            else:
                typed = _json_type(self.frame, name, self.schema[name])
                self._cache[key] = self.frame.select(typed).to_series()
        return self._cache[key]

    def read_types(self, name: str) -> pl.Series:
        """``json_types``, where a textual format's cell that reads as a number counts as
        one ("7" an integer, "0.5" a number), as a JSON reader would have typed it."""
        if not (self.textual and self.schema.get(name) == pl.String):
            return self.json_types(name)
        key = ("read_types", name)
        if key not in self._cache:
            self._cache[key] = self.frame.select(_read_type(self.frame, name)).to_series()
        return self._cache[key]

    def prime_types(self, names: list[str]) -> None:
        """Compute ``read_types`` (and so ``json_types``) of many top-level columns in one
        polars pass: one select per column costs about a millisecond, minutes for a file
        of thousands of columns."""
        exprs = []
        for name in names:
            if name in self.raw or name not in self.schema:
                continue
            if self.textual and self.schema[name] == pl.String:
                key, expr = ("read_types", name), _read_type(self.frame, name)
            else:
                key = ("json_types", name)
                expr = _json_type(self.frame, name, self.schema[name])
            if key not in self._cache:
                exprs.append((key, expr))
        if exprs:
            typed = self.frame.select(expr for _, expr in exprs)
            for (key, _), column in zip(exprs, typed.get_columns(), strict=True):
                self._cache[key] = column

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
        col = (self.frame.get_column(name) if name in self.schema
               else self._nested(name) if self.path(name) else None)
        dtype = None if col is None else col.dtype
        if dtype == pl.Object:  # a column of mixed JSON types: its strings
            assert col is not None
            col = pl.Series(name, [v if isinstance(v, str) else None for v in col],
                            dtype=pl.String)
        elif dtype == pl.String:
            pass
        elif dtype == pl.Binary:
            col = binary_text(col)
        elif isinstance(dtype, pl.Categorical | pl.Enum) and name not in self.schema:
            col = col.cast(pl.String)
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
        dtype = self.schema.get(name)
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
                    format_str(f"{name}[{{}}].content", pl.col("turn")).alias("field"),
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


def _column(frame: pl.DataFrame, name: str) -> pl.Expr:
    """Column ``name`` of ``frame`` by its position: ``pl.col`` reads a name such as
    ``^.*$`` as a pattern of names, and a data file's column may be called anything."""
    return pl.nth(frame.get_column_index(name))


def _json_type(frame: pl.DataFrame, name: str, dtype: pl.DataType) -> pl.Expr:
    """Each record's JSON type of a top-level column (``Batch.json_types``)."""
    col = _column(frame, name)
    kind: pl.Expr = pl.lit(dtype_kind(dtype))
    if dtype.is_float():  # a whole float is an integer, as on the slow path
        kind = pl.when(col.is_finite() & (col == col.floor())).then(pl.lit("integer")
                                                                     ).otherwise(kind)
    return pl.when(col.is_null()).then(pl.lit("null")).otherwise(kind).alias(name)


def _read_type(frame: pl.DataFrame, name: str) -> pl.Expr:
    """Each record's JSON type of a textual format's string column (``Batch.read_types``)."""
    col = _column(frame, name)
    number = col.str.strip_chars().cast(pl.Float64, strict=False)
    whole = number.is_finite() & (number == number.floor())
    return (pl.when(whole).then(pl.lit("integer"))
            .when(number.is_not_null()).then(pl.lit("number"))
            .when(col.is_null()).then(pl.lit("null"))
            .otherwise(pl.lit("string")).alias(name))


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


def binary_text(col: pl.Series) -> pl.Series:
    """A binary column's values as text: a Parquet or Arrow text column written without the
    UTF-8 annotation (some Spark and Hive writers) holds text all the same. Invalid UTF-8
    is decoded with U+FFFD, which the ``encoding`` check reports."""
    try:
        return col.cast(pl.String)
    except pl.exceptions.ComputeError:  # invalid UTF-8 somewhere: decode value by value
        return pl.Series(col.name, [as_text(v) for v in col.to_list()], dtype=pl.String)
