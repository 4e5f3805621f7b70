"""Reading the input unit by unit for ``fix``, each unit as written.

A unit is what the gate gave a row number: a JSON Lines line, a JSON-array element, a CSV data
row, an Arrow/Parquet row. Each keeps its native form so the writers can copy an untouched
record exactly (bytes for JSON Lines and CSV, Arrow values for Parquet/Arrow) and edit only the
field a fix changes. The row numbering is the gate's: the same readers (``jsonarray``,
``csv_rows``) or the same rule (the physical line for JSON Lines, the position for Arrow).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from preflight.batch import Malformed
from preflight.errors import ConfigError, InputError
from preflight.source import READ_ERRORS, format_of, open_source
from preflight.source.arrow import as_binary, not_utf8
from preflight.source.csv import csv_rows
from preflight.source.csv_dialect import delimiter_of
from preflight.source.json_line import parse_line
from preflight.source.jsonarray import elements, is_array
from preflight.source.tracked import open_stream

SYNTAX = {"jsonl": "json", "json": "json", "csv": "csv", "parquet": "arrow", "arrow": "arrow",
          "datasets": "arrow"}


@dataclass
class Unit:
    """One input unit. ``raw`` is its text as written (JSON text without the line end, or a
    CSV row with its line end); ``eol`` the JSON Lines line end; ``cells`` a CSV row's values;
    ``table``/``index`` an Arrow row."""

    file: str | None
    row: int
    syntax: str  # json | csv | arrow
    raw: bytes | None = None
    eol: bytes = b"\n"
    blank: bool = False
    malformed: Malformed | None = None
    cells: list[str] | None = None
    header: list[str] | None = None
    delimiter: str = ","
    table: pa.RecordBatch | None = None
    index: int = 0
    _record: dict[str, Any] | None = None

    def record(self) -> dict[str, Any] | None:
        """The record as Python values (None for a malformed unit)."""
        if self._record is None and self.malformed is None and not self.blank:
            if self.syntax == "json":
                assert self.raw is not None
                self._record, problem = parse_line(self.raw)
                if problem is not None:
                    self.malformed = Malformed(self.row, *problem)
            elif self.syntax == "csv":
                assert self.header is not None and self.cells is not None
                self._record = dict(zip(self.header, self.cells, strict=True))
            else:
                assert self.table is not None
                row = self.table.slice(self.index, 1)
                try:
                    self._record = row.to_pylist()[0]
                except UnicodeDecodeError:  # a string column holding bytes that are not UTF-8
                    self._record = _as_bytes(row)
        return self._record


def _as_bytes(row: pa.RecordBatch) -> dict[str, Any]:
    """A row whose string column holds bytes that are not UTF-8, those values as bytes, as a
    binary column's are (check reads them with U+FFFD); in a nested column, ``InputError``
    naming it, as check says."""
    table = pa.Table.from_batches([row])
    for i in not_utf8(table):
        column = pa.chunked_array([as_binary(c) for c in table.column(i).chunks])
        table = table.set_column(i, table.schema.field(i).name, column)
    return table.to_pylist()[0]


@dataclass
class Input:
    """What ``fix`` reads: the format, its files, and for Arrow the schema to keep."""

    path: str
    format: str
    syntax: str
    files: list[tuple[str | None, Path]]
    schema: pa.Schema | None = None
    schema_error: str | None = None  # why the shards have no shared schema
    header_raw: bytes | None = None  # the first CSV file's header line as written
    header: list[str] | None = None
    delimiter: str | None = None  # CSV: forced, else each file's own (the first one's here)
    forced: str | None = None
    limit: int | None = None  # read up to the limit-th record (what `check --limit` reads)


def open_input(path: Path, fmt: str | None = None, *, delimiter: str | None = None) -> Input:
    """Open ``path`` (a file or a folder) for unit-by-unit reading; ``delimiter`` forces a
    CSV input's delimiter (else it is sniffed per file, as the gate does)."""
    source = open_source(path)
    fmt = fmt or source.format
    files = [(source.file_label(i), p) for i, p in enumerate(source.files)]
    found = Input(path=str(path), format=fmt, syntax=SYNTAX[fmt], files=files)
    try:
        if found.syntax == "arrow":
            try:
                found.schema = _schema([p for _, p in files], fmt)
            except ConfigError as e:  # only an Arrow output needs one schema
                found.schema_error = str(e)
        elif found.syntax == "csv":
            found.forced = delimiter
            found.delimiter = delimiter_of(files[0][1], delimiter)
            with _open(files[0][1]) as f:
                bom = f.peek(3)[:3] == b"\xef\xbb\xbf" if hasattr(f, "peek") else False
                found.header, head, _ = csv_rows(f, found.delimiter)
                # the reader drops a byte-order mark; the CSV output keeps it
                found.header_raw = (b"\xef\xbb\xbf" if bom else b"") + head.encode(
                    "utf-8", "surrogateescape")
    except READ_ERRORS as e:
        raise InputError(f"cannot read {path}: {e}") from e
    return found


def units(found: Input) -> Iterator[Unit]:
    """Every unit of the input in order; with ``found.limit``, those up to the limit-th
    record (the malformed and blank lines before it included, as the gate reads them)."""
    if found.limit is None:
        yield from _all_units(found)
        return
    records = 0
    after: list[Unit] = []  # past the limit-th record: kept only if no record follows
    for unit in _all_units(found):
        is_record = unit.malformed is None and not unit.blank and unit.record() is not None
        if records >= found.limit:
            if is_record:
                return  # the input goes on: the gate stopped at the limit-th record
            after.append(unit)
            continue
        yield unit
        records += is_record
    yield from after  # the input ended first: the gate read these lines too


def _all_units(found: Input) -> Iterator[Unit]:
    row0 = 0
    for label, path in found.files:
        try:
            if found.syntax == "json":
                yield from _json_units(path, label)
            elif found.syntax == "csv":
                yield from _csv_units(path, label, delimiter_of(path, found.forced))
            else:
                for unit in _arrow_units(path, label, found.format, row0):
                    yield unit
                    if found.format == "datasets":  # rows continue across its shards
                        row0 = unit.row + 1
        except InputError:
            raise
        except READ_ERRORS as e:
            raise InputError(f"cannot read {path}: {e}") from e


def _json_units(path: Path, label: str | None) -> Iterator[Unit]:
    if format_of(path) == "json" and is_array(path):
        with _open(path) as f:
            for e in elements(f):
                yield Unit(label, e.row, "json", raw=e.raw_bytes(), malformed=e.malformed)
        return
    with _open(path) as f:
        for row, line in enumerate(f):
            body = line.rstrip(b"\r\n")
            eol = line[len(body):] or b"\n"
            if row == 0:
                body = body.removeprefix(b"\xef\xbb\xbf")
            yield Unit(label, row, "json", raw=body, eol=eol, blank=not body.strip())


def _csv_units(path: Path, label: str | None, delimiter: str) -> Iterator[Unit]:
    with _open(path) as f:
        header, _, rows = csv_rows(f, delimiter)
        for r in rows:
            yield Unit(label, r.row, "csv", raw=r.raw_bytes(), malformed=r.malformed,
                       cells=r.fields, header=header, delimiter=delimiter)


def _arrow_units(path: Path, label: str | None, fmt: str, row0: int) -> Iterator[Unit]:
    row = row0
    for batch in _record_batches(path, fmt):
        for i in range(batch.num_rows):
            yield Unit(label, row, "arrow", table=batch, index=i)
            row += 1


def _record_batches(path: Path, fmt: str) -> Iterator[pa.RecordBatch]:
    if fmt == "parquet":
        yield from pq.ParquetFile(path).iter_batches(batch_size=65_536)
        return
    with pa.memory_map(str(path)) as source:
        try:
            reader: Any = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
        except pa.ArrowInvalid:
            source.seek(0)
            yield from pa.ipc.open_stream(source)


def _schema(paths: list[Path], fmt: str) -> pa.Schema:
    """The Arrow schema the output keeps: the input's (shards with other schemas are unified
    only when they must be)."""
    schemas = []
    for p in paths:
        if fmt == "parquet":
            schemas.append(pq.read_schema(p))
        else:
            with pa.memory_map(str(p)) as source:
                try:
                    schemas.append(pa.ipc.open_file(source).schema)
                except pa.ArrowInvalid:
                    source.seek(0)
                    schemas.append(pa.ipc.open_stream(source).schema)
    if all(s.equals(schemas[0]) for s in schemas):
        return schemas[0]
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowException, TypeError) as e:
        raise ConfigError(f"the shards' columns cannot be one table ({e}); write JSON Lines "
                          "(--format jsonl), which needs no shared schema") from e


def _open(path: Path) -> Any:
    """The file's bytes (.gz/.zst decompressed; a truncated zstd frame is an error), the
    same way the gate reads them."""
    return open_stream(path)[0]
