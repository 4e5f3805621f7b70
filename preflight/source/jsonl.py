"""JSON Lines reader: blocks of lines, each read by Arrow or line by line.

JSON Lines is read in blocks of about 8 MB cut at line ends, and each block in pieces of
about 512 KB parsed side by side. Each piece first goes through Arrow's JSON reader
(``jsonl_arrow``, which also accepts Python's ``NaN``/``Infinity`` literals); when that
reader rejects it — a malformed line, a field whose type changes, invalid UTF-8, a line
nested too deep for it — only those lines are parsed again line by line
(``json_line.parse_line``), so every line gets its own verdict and its physical line number
(``row``), and nothing is dropped. The parts are merged into one batch per block.

Nesting is bounded. A record nested deeper than ``MAX_DEPTH`` levels of objects and arrays
(which the rest of preflight walks recursively) is a ``malformed`` finding, ``too_deep``, on
either path: Arrow's inferred schema shows how deep a block goes, and the line-by-line path
measures the lines that have that many brackets.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from preflight.batch import Batch, Malformed
from preflight.cores import available_cores
from preflight.record_batches import records_table, records_to_batch, replace_lone_surrogates
from preflight.source.arrow import table_to_batch
from preflight.source.json_line import parse_line
from preflight.source.jsonl_arrow import Fallback, line_ends, read_lines
from preflight.source.tracked import note_file, open_range, open_stream
from preflight.threads import shared_pool

BLOCK_BYTES = 8 << 20
PIECE_BYTES = 512 << 10
_SLOW_LINES = 64  # below this many lines, parse line by line
_BOM = b"\xef\xbb\xbf"


def read_jsonl(path: Path, file_index: int, label: str | None, state: dict[str, Any]
               ) -> Iterator[Batch]:
    """Yield batches of a JSON Lines file (plain, .gz or .zst)."""
    stream, raw = open_stream(path)
    with stream:
        yield from _lines(stream, raw, file_index, label, row=0, at_start=True)
    note_file(state, path, raw.hash.hexdigest(), raw.pos)


def read_jsonl_range(path: Path, file_index: int, label: str | None, *, start: int, end: int,
                     row0: int) -> Iterator[Batch]:
    """Yield batches of the bytes ``[start, end)`` of a plain JSON Lines file, a range cut at
    line ends whose first line is row ``row0`` (a distributed executor reads a large file
    in such pieces)."""
    stream, raw = open_range(path, start, end)
    with stream:
        yield from _lines(stream, raw, file_index, label, row=row0, at_start=start == 0)


def _lines(stream: Any, raw: Any, file_index: int, label: str | None, *, row: int,
           at_start: bool) -> Iterator[Batch]:
    """Batches of the lines of ``stream``, numbered from ``row``."""
    carry, done, first = b"", 0, at_start
    while True:
        chunk = stream.read(BLOCK_BYTES)
        if first:
            chunk, first = chunk.removeprefix(_BOM), False
        if not chunk:
            if carry.strip():
                yield block_batch(carry + b"\n", row, file_index, label, raw.pos - done)[0]
            break
        data = carry + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            carry = data
            continue
        block, carry = data[:cut], data[cut:]
        batch, lines = block_batch(block, row, file_index, label, raw.pos - done)
        done = raw.pos
        row += lines
        yield batch


def parse_block(block: bytes, row0: int) -> tuple[Batch, int]:
    """A block of whole lines parsed as JSON Lines, its rows numbered from ``row0``: its
    batch and its number of lines."""
    return block_batch(block, row0, 0, None, 0)


def block_batch(block: bytes, row0: int, file_index: int, label: str | None, progress: int
                ) -> tuple[Batch, int]:
    """Parse a block of whole lines; return its batch and its number of lines."""
    valid = _is_utf8(block)
    pieces = list(_pool().map(lambda piece: _piece(piece, valid), _pieces(block)))
    parts, offset = [], row0
    for found, n_lines in pieces:
        for part in found:
            part.rows += offset
            part.malformed = [replace(m, row=m.row + offset) for m in part.malformed]
            parts.append(part)
        offset += n_lines
    batch = _merge(parts)
    batch.file, batch.file_index, batch.progress = label, file_index, progress
    return batch, offset - row0


def _pieces(block: bytes) -> list[bytes]:
    """Cut a block at line ends into pieces of about PIECE_BYTES, parsed in parallel and
    independently, so a malformed line only sends its own piece down the slow path."""
    pieces, start = [], 0
    while start < len(block):
        end = block.find(b"\n", start + PIECE_BYTES) + 1 or len(block)
        pieces.append(block[start:end])
        start = end
    return pieces


def _piece(piece: bytes, valid_utf8: bool) -> tuple[list[_Part], int]:
    ends = line_ends(piece)
    try:
        if not valid_utf8:
            raise Fallback
        rows, table = read_lines(piece, 0, ends)
        return [_Part(rows=rows, table=table)], len(ends)
    except (pa.ArrowInvalid, Fallback):
        lines = piece.split(b"\n")
        lines.pop()  # a piece ends with a newline
        return list(_parse(lines, 0, valid_utf8)), len(ends)


def _pool() -> ThreadPoolExecutor:
    # Arrow's parser releases the GIL: one thread per core parses pieces side by side (one
    # in a worker process of the pool, which has a core of its own: PREFLIGHT_THREADS=1).
    return shared_pool("jsonl", lambda: int(os.environ.get("PREFLIGHT_THREADS") or 0)
                       or available_cores())


def _is_utf8(data: bytes) -> bool:
    """Fast UTF-8 validation (Arrow's JSON reader does not always check)."""
    if data.isascii():
        return True
    try:
        pl.Series([data], dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.ComputeError:
        return False
    return True


@dataclass
class _Part:
    """Lines parsed one way or the other: an Arrow table, or records from the slow path."""

    rows: np.ndarray
    table: pa.Table | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)
    surrogates: dict[int, int] = field(default_factory=dict)


def _parse(lines: list[bytes], row0: int, valid_utf8: bool) -> Iterator[_Part]:
    """Parse lines with Arrow's reader; where it refuses, halve and retry, down to a few
    lines parsed one by one."""
    if len(lines) <= _SLOW_LINES:
        yield _slow(lines, row0)
        return
    try:
        if not (valid_utf8 or _is_utf8(b"".join(lines))):
            raise Fallback
        rows, table = read_lines(b"\n".join(lines) + b"\n", row0)
    except (pa.ArrowInvalid, Fallback):
        pass
    else:
        yield _Part(rows=rows, table=table)
        return
    half = len(lines) // 2
    yield from _parse(lines[:half], row0, valid_utf8)
    yield from _parse(lines[half:], row0 + half, valid_utf8)


def _slow(lines: list[bytes], row0: int) -> _Part:
    """Each line parsed on its own: its verdict, and the records of the good ones. Those are
    then read by Arrow together where it takes them (typed as on the fast path; typing the
    Python values with ``pa.array`` imports pandas, 0.3 s, in each process)."""
    part = _Part(rows=np.empty(0, dtype=np.int64))
    rows: list[int] = []
    good: list[bytes] = []
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        row = row0 + k
        obj, problem = parse_line(line)
        if problem is not None:
            part.malformed.append(Malformed(row, *problem))
            continue
        obj, n = replace_lone_surrogates(obj) if _may_have_surrogates(line) else (obj, 0)
        if n:
            part.surrogates[len(part.records)] = n
        part.records.append(obj)
        rows.append(row)
        good.append(line)
    part.rows = np.asarray(rows, dtype=np.int64)
    if good and not part.surrogates:
        # Each good line is one object: the table's rows are part.rows, in order.
        with contextlib.suppress(pa.ArrowInvalid, Fallback):
            part.table, part.records = read_lines(b"\n".join(good) + b"\n", 0)[1], []
    return part


def _merge(parts: list[_Part]) -> Batch:
    """One batch from the parts of a block, typed once at the Arrow level; when a field's
    types really differ between parts, the whole block is rebuilt from Python values so
    the schema check sees every record's own type."""
    tables = []
    for p in parts:
        table = p.table if p.table is not None else records_table(p.records)
        if table is None:
            break
        tables.append(table)
    merged = None
    if len(tables) == len(parts):
        try:
            merged = pa.concat_tables(tables, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            merged = None
    rows = np.concatenate([p.rows for p in parts])
    if merged is not None:
        batch = table_to_batch(merged, rows, 0, None)
    else:
        records = [
            r for p in parts
            for r in (p.table.to_pylist() if p.table is not None else p.records)
        ]
        batch = records_to_batch(records, rows.tolist())
    batch.malformed = [m for p in parts for m in p.malformed]
    offset = 0
    for p in parts:
        batch.lone_surrogates.update({offset + i: n for i, n in p.surrogates.items()})
        offset += len(p.rows)
    return batch


def _may_have_surrogates(line: bytes) -> bool:
    return b"\\ud" in line.lower()

