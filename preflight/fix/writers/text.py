"""The text formats' writers: JSON Lines and CSV, keeping untouched lines byte for byte.

JSON Lines: an untouched JSON unit is copied as written; a changed one has only the changed
values replaced in its text (``jsonedit``). Units from CSV are written as their cells
(strings); from Arrow, as their values in JSON, under the struct field names a Parquet
output's schema would have (hidden characters mended: ``renames``). CSV (from CSV input
only): the header and untouched rows as written; a changed row re-quoted.
"""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import io
import os
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa

from preflight.errors import ConfigError
from preflight.fix.jsonedit import KeyOf, dumps, replace_values
from preflight.fix.units import Input, Unit
from preflight.fix.writers.base import Writer
from preflight.fix.writers.renames import Mend, renamed_record, renamed_schema


def json_default(value: Any) -> Any:
    """JSON for the Arrow values JSON has no type for."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.date | datetime.time | datetime.timedelta):
        return str(value) if isinstance(value, datetime.timedelta) else value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def json_line(value: Any) -> bytes:
    """One JSON line (NaN literals kept; lone surrogates as \\u escapes)."""
    return (dumps(value, json_default) + "\n").encode()


def changes(before: dict[str, Any], after: dict[str, Any]) -> dict[tuple[str | int, ...], Any]:
    """The paths whose values a fix changed, as deep as they go: a top-level field, a
    message's content, a string inside a list or an object (``("answers", "text", 0)``)."""
    out: dict[tuple[str | int, ...], Any] = {}
    _changes(before, after, (), out)
    return out


def _changes(old: Any, new: Any, path: tuple[str | int, ...],
             out: dict[tuple[str | int, ...], Any]) -> None:
    if old is new or old == new:  # the same object (a NaN is unequal to itself)
        return
    if isinstance(old, dict) and isinstance(new, dict) and len(old) == len(new):
        # keys renamed in place (a hidden character stripped: same order, same number), and
        # the values under them located by their keys as written
        for was, key in zip(old, new, strict=True):
            if was != key:
                out[(*path, KeyOf(was))] = key
            _changes(old[was], new[key], (*path, was), out)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for k, (a, b) in enumerate(zip(old, new, strict=True)):
            _changes(a, b, (*path, k), out)
    else:
        out[path] = new


class JsonlWriter(Writer):
    def __init__(self, path: Path | None, found: Input, *, rename: Mend | None = None
                 ) -> None:
        """``rename``: how the fix mends a struct field's name; from Arrow input the
        records' keys are renamed as a Parquet output's schema would be (``renames``)."""
        super().__init__(path, found)
        self._named: pa.Schema | None = None
        if found.syntax == "arrow" and found.schema is not None and rename is not None:
            named, self.renamed = renamed_schema(found.schema, rename)
            if named is not found.schema:
                self._named = named
        self._f: BinaryIO = open(path or os.devnull, "wb")  # noqa: SIM115 - closed in close()

    def keep(self, unit: Unit) -> None:
        if unit.syntax == "json":
            assert unit.raw is not None
            self._f.write(unit.raw + unit.eol)
        else:
            self._f.write(json_line(self._named_keys(unit.record())))

    def change(self, unit: Unit, after: dict[str, Any]) -> None:
        if unit.syntax != "json":
            self._f.write(json_line(self._named_keys(after)))
            return
        assert unit.raw is not None
        before = unit.record()
        assert before is not None
        text = replace_values(unit.raw.decode(), changes(before, after))
        self._f.write(text.encode() + unit.eol)

    def blank(self, unit: Unit) -> bool:
        assert unit.raw is not None
        self._f.write(unit.raw + unit.eol)
        return True

    def _named_keys(self, record: Any) -> Any:
        if self._named is None or not isinstance(record, dict):
            return record
        assert self.found.schema is not None
        return renamed_record(record, self.found.schema, self._named)

    def close(self) -> None:
        self._f.close()


class CsvWriter(Writer):
    def __init__(self, path: Path | None, found: Input) -> None:
        super().__init__(path, found)
        if found.syntax != "csv":
            raise ConfigError(f"CSV output needs CSV input ({found.format} given): "
                              "use --format jsonl or parquet")
        self._f: BinaryIO = open(path or os.devnull, "wb")  # noqa: SIM115 - closed in close()
        assert found.header_raw is not None
        self._f.write(found.header_raw)

    def keep(self, unit: Unit) -> None:
        self._check_header(unit)
        assert unit.raw is not None
        self._f.write(unit.raw)

    def change(self, unit: Unit, after: dict[str, Any]) -> None:
        self._check_header(unit)
        assert unit.raw is not None and unit.header is not None and unit.cells is not None
        cells = [after.get(name, cell) for name, cell in zip(unit.header, unit.cells,
                                                             strict=True)]
        ending = unit.raw[len(unit.raw.rstrip(b"\r\n")):].decode()
        text = io.StringIO()
        # The writer quotes a cell holding a character of its line terminator only: with
        # "\r\n", a CR or LF in any cell is quoted whatever this row's own ending.
        csv.writer(text, lineterminator="\r\n", delimiter=unit.delimiter).writerow(cells)
        row = text.getvalue().removesuffix("\r\n") + ending
        self._f.write(row.encode("utf-8", "surrogateescape"))

    def _check_header(self, unit: Unit) -> None:
        if unit.header != self.found.header:
            raise ConfigError(f"shard {unit.file} has another CSV header than the first; "
                              "write one format that needs none: --format jsonl")
        if unit.delimiter != self.found.delimiter:
            raise ConfigError(f"shard {unit.file} is split at {unit.delimiter!r}, the first at "
                              f"{self.found.delimiter!r}; one CSV output cannot keep both: "
                              "--format jsonl")

    def close(self) -> None:
        self._f.close()
