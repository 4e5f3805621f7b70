"""CSV reader: Python's C csv parser, a header row, then records numbered from 0.

The delimiter is chosen per file (``csv_dialect``: forced, ``.tsv``, or sniffed). Clean
stretches of records are read by Arrow (``csv_scan``), the rest by the exact reader.

Values arrive as strings; per batch, a column whose non-empty values all parse as integers
(or numbers) becomes that type, with empty cells as null. A row with the wrong number of
fields, with bytes that are not UTF-8, or with a quote that does not close where it should
(and so swallows the rows after it), is a ``malformed`` finding, never dropped silently.
``fix`` reads the same rows with ``csv_rows``, each with its text as written.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from preflight.batch import Batch, Malformed
from preflight.source import csv_scan
from preflight.source.csv_dialect import note_dialect
from preflight.source.tracked import Prefixed, Tracked, note_file, open_stream

BATCH_ROWS = 20_000
_BOM = b"\xef\xbb\xbf"
# Bytes that are not UTF-8, as the decoder (surrogateescape) leaves them in the text.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
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


def csv_rows(stream: Any, delimiter: str = ",", *, names: list[str] | None = None,
             row0: int = 0) -> tuple[list[str] | None, str, Iterator[CsvRow]]:
    """The header (names made unique), its text as written, and the data records of the CSV
    in binary ``stream``, split at ``delimiter``. Parsed strictly: a quote that does not
    close where it should (one that swallows the rows after it) is a ``malformed`` row
    holding every line it took. With ``names``, ``stream`` starts at the record numbered
    ``row0``, after a header already read."""
    if not isinstance(stream, io.BufferedIOBase):
        stream = io.BufferedReader(stream)
    text = io.TextIOWrapper(stream, encoding="utf-8-sig" if names is None else "utf-8",
                            errors="surrogateescape", newline="")
    taken: list[str] = []

    def lines() -> Iterator[str]:
        for line in text:
            taken.append(line)
            yield line

    reader = csv.reader(lines(), strict=True, delimiter=delimiter)
    header: list[str] | None = names
    if names is None:
        try:
            header = next(reader, None)
        except csv.Error:
            header = None
    head_raw = "".join(taken)
    taken.clear()
    if header is None:
        return None, head_raw, iter(())
    # Column names that are not text could not even be printed (they crashed the reader).
    bad = next(((i, m) for i, n in enumerate(header, 1) if (m := _ESCAPED_BYTE.search(n))), None)
    if bad is not None:
        byte = ord(bad[1].group()) - 0xDC00
        raise ValueError(f"the header row is not valid UTF-8 (byte 0x{byte:02x} in column "
                         f"{bad[0]}); save the file as UTF-8 and check again")
    names = _unique(header)

    def rows() -> Iterator[CsvRow]:
        row = row0
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
            elif not raw.isascii() and _ESCAPED_BYTE.search(raw):
                yield CsvRow(row, raw, malformed=Malformed(row, "invalid_utf8",
                                                           "row holds invalid UTF-8"))
            else:
                yield CsvRow(row, raw, fields=fields)
            row += 1

    return names, head_raw, rows()


def read_csv(path: Path, file_index: int, label: str | None, state: dict[str, Any]
             ) -> Iterator[Batch]:
    """Yield batches of a CSV file (plain, .gz or .zst); ``state["delimiter"]`` forces the
    delimiter (else see ``csv_dialect.delimiter_of``)."""
    delimiter = note_dialect(path, state)
    stream, raw = open_stream(path)
    with stream:
        yield from _read_records(stream, raw, delimiter, file_index, label)
    note_file(state, path, raw.hash.hexdigest(), raw.pos)


def _read_records(stream: Any, raw: Tracked, delimiter: str, file_index: int,
                  label: str | None) -> Iterator[Batch]:
    """Clean stretches of records by Arrow (``csv_scan``), the rest by the exact reader."""
    head = stream.read(csv_scan.CHUNK_BYTES)
    body = head.removeprefix(_BOM)
    header, data = _clean_header(body, delimiter)
    if header is None:  # the exact reader says what the header is
        yield from _exact(Prefixed(head, stream), raw, delimiter, file_index, label)
        return
    names, eof = _unique(header), False
    if len(head) < csv_scan.CHUNK_BYTES:  # a short read: at the end already? (then the
        chunk = stream.read(csv_scan.CHUNK_BYTES)  # last record needs no line end)
        eof, data = not chunk, data + chunk
    at = _At(raw, file_index, label)
    while True:
        found = csv_scan.clean_records(data, delimiter, eof=eof)
        # The first batch (fields are inferred from it) is the exact reader's first
        # BATCH_ROWS records unless a clean stretch holds them: a stray quote among them
        # leaves the whole file to the exact reader.
        if found.stop and not at.row and len(found.ends) < BATCH_ROWS:
            break
        if found.end:
            yield from _stretch(data[: found.end], found.ends, names, delimiter, at)
            data = data[found.end:]
        if found.stop:  # a stray quote: the exact reader reads on from this record
            break
        if eof or len(data) > csv_scan.MAX_PENDING:  # (a record too long for a block)
            break
        chunk = stream.read(csv_scan.CHUNK_BYTES)
        eof, data = not chunk, data + chunk
    if data or not eof:
        yield from _exact(Prefixed(data, stream), raw, delimiter, file_index, label,
                          names=names, row0=at.row, done=at.done)


class _At:
    """Where the fast path stands: the next record's number and the bytes read at the
    last batch; makes the batches."""

    def __init__(self, raw: Tracked, file_index: int, label: str | None) -> None:
        self.raw, self.file_index, self.label = raw, file_index, label
        self.row = self.done = 0

    def _progress(self) -> int:
        progress, self.done = self.raw.pos - self.done, self.raw.pos
        return progress

    def table(self, names: list[str], table: Any) -> Iterator[Batch]:
        if table.num_rows:
            cells = {name: pl.Series(name, table.column(name), dtype=pl.String)
                     for name in names}
            rows = np.arange(self.row, self.row + table.num_rows, dtype=np.int64)
            self.row += table.num_rows
            yield _frame_batch(cells, rows, [], self.file_index, self.label,
                               self._progress())

    def exact(self, names: list[str], units: list[CsvRow]) -> Iterator[Batch]:
        for start in range(0, len(units), BATCH_ROWS):
            part = units[start:start + BATCH_ROWS]
            pending = [(u.row, u.fields) for u in part if u.fields is not None]
            malformed = [u.malformed for u in part if u.malformed is not None]
            yield _batch(names, pending, malformed, self.file_index, self.label,
                         self._progress())
        if units:
            self.row = units[-1].row + 1


def _stretch(piece: bytes, ends: np.ndarray, names: list[str], delimiter: str, at: _At
             ) -> Iterator[Batch]:
    """A clean stretch by Arrow; one it refuses halved at line ends, down to a few records
    that the exact reader reads (the first stretch, which the first batch comes from, read
    whole by the exact reader)."""
    table = csv_scan.read_records(piece, names, delimiter)
    if table is not None:
        yield from at.table(names, table)
    elif len(ends) <= csv_scan.EXACT_RECORDS or not at.row:  # (the first batch: whole)
        yield from at.exact(names, _units(piece, names, delimiter, at.row))
    else:
        half = len(ends) // 2
        mid = int(ends[half - 1])
        yield from _stretch(piece[:mid], ends[:half], names, delimiter, at)
        yield from _stretch(piece[mid:], ends[half:] - mid, names, delimiter, at)


def _units(data: bytes, names: list[str], delimiter: str, row0: int) -> list[CsvRow]:
    """The exact reader's rows of ``data`` (whole records), numbered from ``row0``."""
    return list(csv_rows(io.BytesIO(data), delimiter, names=names, row0=row0)[2])


def _clean_header(body: bytes, delimiter: str) -> tuple[list[str] | None, bytes]:
    """The header read from the start of ``body`` when it is clean and ends in it (as the
    exact reader reads it), and the bytes after it; else ``(None, b"")``."""
    found = csv_scan.clean_records(body, delimiter, eof=False)
    end = body.find(b"\n")
    while 0 <= end < found.end and body.count(b'"', 0, end) % 2:
        end = body.find(b"\n", end + 1)
    if not 0 <= end < found.end:
        return None, b""
    try:
        text = body[: end + 1].decode("utf-8")
        header = next(csv.reader(io.StringIO(text, newline=""), strict=True,
                                 delimiter=delimiter), None)
    except (UnicodeDecodeError, csv.Error):
        return None, b""
    return (header, body[end + 1:]) if header else (None, b"")


def _exact(stream: Any, raw: Tracked, delimiter: str, file_index: int, label: str | None,
           *, names: list[str] | None = None, row0: int = 0, done: int = 0
           ) -> Iterator[Batch]:
    """Batches of the exact reader from where ``stream`` stands."""
    header, _, units = csv_rows(stream, delimiter, names=names, row0=row0)
    if header is None:
        return
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


def _batch(header: list[str], pending: list[tuple[int, list[str]]], malformed: list[Malformed],
           file_index: int, label: str | None, progress: int) -> Batch:
    columns = list(zip(*(f for _, f in pending), strict=True)) if pending else [()] * len(header)
    cells = {name: pl.Series(name, list(col), dtype=pl.String)
             for name, col in zip(header, columns, strict=True)}
    rows = np.asarray([r for r, _ in pending], dtype=np.int64)
    return _frame_batch(cells, rows, malformed, file_index, label, progress)


def _frame_batch(cells: dict[str, pl.Series], rows: np.ndarray, malformed: list[Malformed],
                 file_index: int, label: str | None, progress: int) -> Batch:
    """A batch of string cells, each column typed (``_typed``) with its text kept."""
    # by name: a list of Series would rename an empty header name to "column_0"
    # (typed under a plain name: a Series method runs as an expression on a column of the
    # series' name, and pl.col reads a header such as "^t.*$" as a pattern)
    frame = pl.DataFrame({name: _typed(col.rename("cell")) for name, col in cells.items()})
    schema = frame.schema  # polars builds it on every access: once per column was quadratic
    written = {name: col for name, col in cells.items() if schema[name] != pl.String}
    return Batch(frame=frame, rows=rows, file=label, file_index=file_index,
                 malformed=malformed, progress=progress, textual=True, written=written)


def _typed(col: pl.Series) -> pl.Series:
    present = col.filter(col != "")
    if present.len() == 0:
        return col
    for dtype in (pl.Int64, pl.Float64):
        cast = present.str.strip_chars().cast(dtype, strict=False)
        if cast.null_count() == 0:
            return col.replace("", None).str.strip_chars().cast(dtype)
    return col


def _unique(header: list[str]) -> list[str]:
    """The header's names, a repeated one as ``name_1``, ``name_2``… skipping any name the
    header already holds (``a,a_1,a`` reads as ``a, a_1, a_2``)."""
    used = set(header)
    seen: set[str] = set()
    out = []
    for name in header:
        unique, n = name, 0
        while unique in seen or (n and unique in used):
            n += 1
            unique = f"{name}_{n}"
        seen.add(unique)
        out.append(unique)
    return out
