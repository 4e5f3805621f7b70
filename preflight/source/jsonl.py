"""JSON Lines and JSON-array readers.

JSON Lines is read in blocks of about 8 MB cut at line ends. Each block first goes through
Arrow's multithreaded JSON reader (which also accepts Python's ``NaN``/``Infinity``
literals); when that reader rejects the block — a malformed line, a field whose type changes,
invalid UTF-8 — only that block is parsed again line by line, so every line gets its own
verdict and its physical line number (``row``), and nothing is dropped.

Nesting is bounded. Arrow's reader recurses once per level and crashes the process (a
segfault, no report) on a line nested some thousands deep, so a line whose brackets may nest
``_ARROW_DEPTH`` deep never reaches it. A record nested deeper than ``MAX_DEPTH`` levels of
objects and arrays (which the rest of preflight walks recursively) is a ``malformed``
finding, ``too_deep``, on either path: Arrow's inferred schema shows how deep a block goes,
and the line-by-line path measures the lines that have that many brackets.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from preflight.batch import (
    Batch,
    Malformed,
    child_types,
    records_table,
    records_to_batch,
    replace_lone_surrogates,
    type_depth,
)
from preflight.cores import available_cores
from preflight.source.arrow import table_to_batch
from preflight.source.tracked import note_file, open_range, open_stream
from preflight.threads import shared_pool

BLOCK_BYTES = 8 << 20
PIECE_BYTES = 512 << 10
_SLOW_LINES = 64  # below this many lines, parse line by line
_BOM = b"\xef\xbb\xbf"
# The deepest record read: deeper is a `too_deep` finding (preflight's own code walks
# records recursively). Lines whose brackets may nest _ARROW_DEPTH deep are parsed one by
# one, never by Arrow, whose reader crashes some thousands of levels down.
MAX_DEPTH = 200
_ARROW_DEPTH = 1000
_NESTING = np.zeros(256, dtype=np.int8)
_NESTING[[ord("{"), ord("[")]] = 1
_NESTING[[ord("}"), ord("]")]] = -1
# Literals Arrow's reader takes and Python's json (the line-by-line path) refuses; a block
# that may hold one as a value (after ":", "[" or ",", before ",", "}" or "]") goes line by
# line, so it gets one verdict. (Text such as ", Information" does not match.)
_NOT_PYTHONS = re.compile(rb"[:\[,][ \t\r]*(?:-?Inf|-NaN)[ \t\r]*[,}\]]")
_VALUE_END = re.compile(rb"[ \t\r]*[,}\]]")
_BLANKS = frozenset(b" \t\r")
_VALUE_AFTER = frozenset(b":[,")
_LOOKED_AT = 256  # more mentions than this in a block: one regex pass instead
# An integer literal of 16 digits or more as a value: it may be past what a float holds
# exactly (2**53).
_LONG_INTEGER = re.compile(rb"[:\[,][ \t\r]*-?[0-9]{16,}[ \t\r]*[,}\]]")


class _Fallback(Exception):
    """The fast reader's result cannot be trusted for this block."""


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
                yield _block(carry + b"\n", row, file_index, label, raw.pos - done)[0]
            break
        data = carry + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            carry = data
            continue
        block, carry = data[:cut], data[cut:]
        batch, lines = _block(block, row, file_index, label, raw.pos - done)
        done = raw.pos
        row += lines
        yield batch


def parse_block(block: bytes, row0: int) -> tuple[Batch, int]:
    """A block of whole lines parsed as JSON Lines, its rows numbered from ``row0``: its
    batch and its number of lines."""
    return _block(block, row0, 0, None, 0)


def _block(block: bytes, row0: int, file_index: int, label: str | None, progress: int
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
    ends = _line_ends(piece)
    try:
        if not valid_utf8:
            raise _Fallback
        return [_fast(piece, 0, ends)], len(ends)
    except (pa.ArrowInvalid, _Fallback):
        lines = piece.split(b"\n")
        lines.pop()  # a piece ends with a newline
        return list(_parse(lines, 0, valid_utf8)), len(ends)


def _line_ends(block: bytes) -> np.ndarray:
    """The offsets of the line ends (``\n``) of ``block``."""
    return np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == ord("\n"))


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
            raise _Fallback
        yield _fast(b"\n".join(lines) + b"\n", row0)
        return
    except (pa.ArrowInvalid, _Fallback):
        pass
    half = len(lines) // 2
    yield from _parse(lines[:half], row0, valid_utf8)
    yield from _parse(lines[half:], row0 + half, valid_utf8)


def _fast(block: bytes, row0: int, ends: np.ndarray | None = None) -> _Part:
    """Arrow's reading of a block of whole lines (``ends``: its line ends, when known)."""
    ends = _line_ends(block) if ends is None else ends
    starts = np.zeros(len(ends), dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts
    # Only objects go to Arrow: a line such as `null` is not a record (and pyarrow 26 can
    # crash on a block that starts with one). Lines that start with "{" (nearly always all
    # of them) are non-blank objects as they stand; otherwise each line is looked at.
    if np.all(np.frombuffer(block, dtype=np.uint8)[starts] == ord("{")):
        nonblank = np.arange(len(ends), dtype=np.int64)
    else:
        stripped = [block[a:b].strip() for a, b in zip(starts.tolist(), ends.tolist(),
                                                        strict=True)]
        if any(line and not line.startswith(b"{") for line in stripped):
            raise _Fallback
        nonblank = np.asarray([k for k, line in enumerate(stripped) if line], dtype=np.int64)
    longest = int(lengths.max()) if len(lengths) else 0
    if longest >= _ARROW_DEPTH and _may_nest_deeper(block, starts, lengths, _ARROW_DEPTH):
        raise _Fallback
    options = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, longest + 2))
    table = pj.read_json(io.BytesIO(block), read_options=options)
    if _schema_depth(table.schema) > MAX_DEPTH:  # the lines that deep are findings
        raise _Fallback
    if _holds_floats(table.schema) and (
            _may_hold_not_pythons(block)
            or (_any_beyond_exact(table) and _LONG_INTEGER.search(block) is not None)):
        raise _Fallback
    fixed = _without_timestamps(table.schema)
    if fixed is not None:  # Arrow guessed timestamps from strings: read them as strings
        table = pj.read_json(io.BytesIO(block), read_options=options,
                             parse_options=pj.ParseOptions(explicit_schema=fixed))
    # pyarrow 26 builds an invalid array for a list of only nulls (offsets past the
    # values): such a block goes line by line (ArrowInvalid).
    table.validate()
    if table.num_rows != len(nonblank):  # e.g. two objects on one line
        raise _Fallback
    return _Part(rows=nonblank + row0, table=table)


def _may_hold_not_pythons(block: bytes) -> bool:
    """Whether ``block`` may hold ``Inf``, ``-Inf`` or ``-NaN`` as a value
    (``_NOT_PYTHONS``). Each mention is looked at where it stands: English text mentions
    "Inf" in most blocks, and a regex over the whole block cost a third of Arrow's parse of
    it, under the GIL. (Arrow reads those literals as floats: only blocks with a float
    column are looked at.)"""
    looked = 0
    for literal in (b"Inf", b"-NaN"):
        at = block.find(literal)
        while at >= 0:
            looked += 1
            if looked > _LOOKED_AT:
                return _NOT_PYTHONS.search(block) is not None
            end = at + len(literal)
            if _VALUE_END.match(block, end):
                k = at - 1
                if literal == b"Inf" and k >= 0 and block[k] == ord("-"):
                    k -= 1
                while k >= 0 and block[k] in _BLANKS:
                    k -= 1
                if k >= 0 and block[k] in _VALUE_AFTER:
                    return True
            at = block.find(literal, end)
    return False


def _any_beyond_exact(table: pa.Table) -> bool:
    """Whether a float of ``table`` is an integer's size past what a float holds exactly
    (2**53 or more). Arrow reads an integer too large for int64 as a float, rounded, and
    turns its whole column in the block into floats, as it does with any integer in a column
    that also holds a fraction (``9007199254740993`` beside ``0.5``); the line-by-line path
    keeps such an integer exact, so a block with such a float and an integer literal that
    long (``_LONG_INTEGER``) goes there. (A float written so large, 1e300, is a float on
    both paths: its block stays on Arrow's.)"""
    stack: list[pa.Array] = [chunk for column in table.columns for chunk in column.chunks]
    while stack:
        array = stack.pop()
        t = array.type
        if pa.types.is_floating(t):
            # Compared here: a Python scalar in an Arrow call imports pandas (arrow_numbers).
            largest = pc.max(pc.abs(array)).as_py()  # NaN skipped, as >= skipped it
            if largest is not None and largest >= 2**53:
                return True
        elif pa.types.is_struct(t):
            stack.extend(array.field(i) for i in range(t.num_fields))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            stack.append(array.flatten())
    return False


def _holds_floats(schema: pa.Schema) -> bool:
    """Whether a float type appears anywhere in ``schema``, inside lists and structs too."""
    stack = [f.type for f in schema]
    while stack:
        t = stack.pop()
        if pa.types.is_floating(t):
            return True
        stack.extend(child_types(t))
    return False


def _may_nest_deeper(block: bytes, starts: np.ndarray, lengths: np.ndarray, limit: int
                     ) -> bool:
    """Whether a line of ``block`` (at ``starts``, ``lengths`` bytes long) may be nested
    ``limit`` deep. Brackets inside strings count too, so this errs on the safe side. Cheap
    first: a line needs ``limit`` opening brackets to get that deep (so ``limit`` bytes);
    only such lines get their depth measured."""
    for k in np.flatnonzero(lengths >= limit).tolist():
        line = block[starts[k]:starts[k] + lengths[k]]
        if line.count(b"{") + line.count(b"[") < limit:
            continue
        nesting = _NESTING[np.frombuffer(line, dtype=np.uint8)]
        if np.cumsum(nesting, dtype=np.int32).max() >= limit:
            return True
    return False


def _schema_depth(schema: pa.Schema) -> int:
    """How deep the records of a table nest (a flat record is 1), from its types alone."""
    return 1 + max((type_depth(f.type) for f in schema), default=0)


def nesting_depth(obj: Any) -> int:
    """How deep a parsed value nests objects and arrays (``{"a": 1}`` is 1), without
    recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return deepest


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
        with contextlib.suppress(pa.ArrowInvalid, _Fallback):
            part.table, part.records = _fast(b"\n".join(good) + b"\n", 0).table, []
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


def parse_line(line: bytes) -> tuple[Any, tuple[str, str] | None]:
    """Parse one line: ``(record, None)`` or ``(None, (code, detail))`` for a malformed one."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            return None, ("invalid_utf8", f"byte 0x{line[e.start]:02X} at byte {e.start} "
                                          "is not valid UTF-8")
        try:
            obj = json.loads(text)  # accepts NaN/Infinity and lone surrogate escapes
        except json.JSONDecodeError as e:
            return None, ("invalid_json", f"{e.msg} (column {e.colno})")
        except RecursionError:
            return None, TOO_DEEP
    if not isinstance(obj, dict):
        return None, ("not_an_object", f"a JSON {_json_kind(obj)}, not an object")
    if line.count(b"{") + line.count(b"[") > MAX_DEPTH and nesting_depth(obj) > MAX_DEPTH:
        return None, TOO_DEEP
    return obj, None


TOO_DEEP = ("too_deep", f"nested too deeply (more than {MAX_DEPTH} levels of objects "
                         "and arrays)")


def _may_have_surrogates(line: bytes) -> bool:
    return b"\\ud" in line.lower()


def _json_kind(obj: Any) -> str:
    if isinstance(obj, list):
        return "array"
    if isinstance(obj, str):
        return "string"
    if isinstance(obj, bool):
        return "boolean"
    return "null" if obj is None else "number"


def _without_timestamps(schema: pa.Schema) -> pa.Schema | None:
    def fix(t: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
            return pa.string()
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(fix(f.type)) for f in t])
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return pa.list_(t.value_field.with_type(fix(t.value_type)))
        return t

    fixed = pa.schema([f.with_type(fix(f.type)) for f in schema])
    return None if fixed.equals(schema) else fixed
