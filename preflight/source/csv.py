"""CSV reader: Python's C csv parser, a header row, then records numbered from 0.

Values arrive as strings; per batch, a column whose non-empty values all parse as integers
(or numbers) becomes that type, with empty cells as null. A row with the wrong number of
fields, with bytes that are not UTF-8, or with a quote that does not close where it should
(and so swallows the rows after it), is a ``malformed`` finding, never dropped silently.
``fix`` reads the same rows with ``csv_rows``, each with its text as written.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from preflight.batch import Batch, Malformed
from preflight.source.tracked import note_file, open_stream

BATCH_ROWS = 20_000
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass
class CsvRow:
    """One data record of a CSV file: its cells, or why it is not a record, and its text as
    written (all the physical lines it took, line ends included)."""

    row: int
    raw: str
    fields: list[str] | None = None
    malformed: Malformed | None = None

    def raw_bytes(self) -> bytes:
        """The row's bytes as they stand in the file (invalid UTF-8 restored)."""
        return self.raw.encode("utf-8", "surrogateescape")


def csv_rows(stream: Any) -> tuple[list[str] | None, str, Iterator[CsvRow]]:
    """The header (names made unique), its text as written, and the data records of the CSV
    in binary ``stream``. Parsed strictly: a quote that does not close where it should (one
    that swallows the rows after it) is a ``malformed`` row holding every line it took."""
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline="")
    taken: list[str] = []

    def lines() -> Iterator[str]:
        for line in text:
            taken.append(line)
            yield line

    reader = csv.reader(lines(), strict=True)
    try:
        header = next(reader, None)
    except csv.Error:
        header = None
    head_raw = "".join(taken)
    taken.clear()
    if header is None:
        return None, head_raw, iter(())
    names = _unique(header)

    def rows() -> Iterator[CsvRow]:
        row = 0
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                spans = sum(line.count("\n") for line in taken) or 1
                yield CsvRow(row, "".join(taken), malformed=Malformed(
                    row, "unbalanced_quote", f"{e} (a quoted field that does not close where it "
                    f"should; {spans} line(s) taken into this row)"))
                taken.clear()
                row += 1
                continue
            raw = "".join(taken)
            taken.clear()
            if not fields:  # a blank line is not a record
                continue
            if len(fields) != len(names):
                bad = Malformed(row, "wrong_field_count",
                                f"{len(fields)} fields, header has {len(names)}")
                yield CsvRow(row, raw, malformed=bad)
            elif any(_has_escaped_bytes(f) for f in fields):
                yield CsvRow(row, raw, malformed=Malformed(row, "invalid_utf8",
                                                           "row holds invalid UTF-8"))
            else:
                yield CsvRow(row, raw, fields=fields)
            row += 1

    return names, head_raw, rows()


def read_csv(path: Path, file_index: int, label: str | None, state: dict[str, Any]
             ) -> Iterator[Batch]:
    """Yield batches of a CSV file (plain, .gz or .zst)."""
    stream, raw = open_stream(path)
    with stream:
        header, _, units = csv_rows(stream)
        if header is not None:
            done = 0
            pending: list[tuple[int, list[str]]] = []
            malformed: list[Malformed] = []
            for unit in units:
                if unit.fields is None:
                    assert unit.malformed is not None
                    malformed.append(unit.malformed)
                else:
                    pending.append((unit.row, unit.fields))
                if len(pending) >= BATCH_ROWS:
                    yield _batch(header, pending, malformed, file_index, label, raw.pos - done)
                    done, pending, malformed = raw.pos, [], []
            if pending or malformed:
                yield _batch(header, pending, malformed, file_index, label, raw.pos - done)
    note_file(state, path, raw.hash.hexdigest(), raw.pos)


def _batch(header: list[str], pending: list[tuple[int, list[str]]], malformed: list[Malformed],
           file_index: int, label: str | None, progress: int) -> Batch:
    columns = list(zip(*(f for _, f in pending), strict=True)) if pending else [()] * len(header)
    frame = pl.DataFrame({name: _typed(list(col)) for name, col in zip(header, columns,
                                                                         strict=True)})
    return Batch(frame=frame, rows=np.asarray([r for r, _ in pending], dtype=np.int64),
                 file=label, file_index=file_index, malformed=malformed, progress=progress,
                 textual=True)


def _typed(values: list[str]) -> pl.Series:
    col = pl.Series(values, dtype=pl.String)
    present = col.filter(col != "")
    if present.len() == 0:
        return col
    for dtype in (pl.Int64, pl.Float64):
        cast = present.str.strip_chars().cast(dtype, strict=False)
        if cast.null_count() == 0:
            return col.replace("", None).str.strip_chars().cast(dtype)
    return col


def _has_escaped_bytes(value: str) -> bool:
    return any("\udc80" <= c <= "\udcff" for c in value) if not value.isascii() else False


def _unique(header: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in header:
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(name if n == 0 else f"{name}_{n}")
    return out
