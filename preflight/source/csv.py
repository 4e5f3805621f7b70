"""CSV reader: Python's C csv parser, a header row, then records numbered from 0.

Values arrive as strings; per batch, a column whose non-empty values all parse as integers
(or numbers) becomes that type, with empty cells as null. A row with the wrong number of
fields, or with bytes that are not UTF-8, is a ``malformed`` finding, never dropped silently.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from preflight.batch import Batch, Malformed
from preflight.source.tracked import note_file, open_stream

BATCH_ROWS = 20_000
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def read_csv(path: Path, file_index: int, label: str | None, state: dict[str, Any]
             ) -> Iterator[Batch]:
    """Yield batches of a CSV file (plain, .gz or .zst)."""
    stream, raw = open_stream(path)
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline="")
    with text:
        reader = csv.reader(text)
        header = next(reader, None)
        if header is not None:
            header = _unique(header)
            row, done = 0, 0
            pending: list[tuple[int, list[str]]] = []
            malformed: list[Malformed] = []
            for fields in reader:
                if not fields:  # a blank line is not a record
                    continue
                if len(fields) != len(header):
                    malformed.append(Malformed(row, "wrong_field_count",
                                               f"{len(fields)} fields, header has {len(header)}"))
                elif any(_has_escaped_bytes(f) for f in fields):
                    malformed.append(Malformed(row, "invalid_utf8", "row holds invalid UTF-8"))
                else:
                    pending.append((row, fields))
                row += 1
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
