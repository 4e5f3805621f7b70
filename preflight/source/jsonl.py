"""JSON Lines and JSON-array readers.

JSON Lines is read in blocks of about 8 MB cut at line ends. Each block first goes through
Arrow's multithreaded JSON reader (which also accepts Python's ``NaN``/``Infinity``
literals); when that reader rejects the block — a malformed line, a field whose type changes,
invalid UTF-8 — only that block is parsed again line by line, so every line gets its own
verdict and its physical line number (``row``), and nothing is dropped.
"""

from __future__ import annotations

import codecs
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.json as pj

from preflight.batch import Batch, Malformed, records_to_batch, replace_lone_surrogates
from preflight.source.arrow import table_to_batch
from preflight.source.tracked import note_file, open_stream

BLOCK_BYTES = 8 << 20
_SLOW_LINES = 64  # below this many lines, parse line by line
ARRAY_BATCH = 20_000
_BOM = b"\xef\xbb\xbf"
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


class _Fallback(Exception):
    """The fast reader's result cannot be trusted for this block."""


def read_jsonl(path: Path, file_index: int, label: str | None, state: dict[str, Any]
               ) -> Iterator[Batch]:
    """Yield batches of a JSON Lines file (plain, .gz or .zst)."""
    stream, raw = open_stream(path)
    with stream:
        row, carry, done, first = 0, b"", 0, True
        while True:
            chunk = stream.read(BLOCK_BYTES)
            if first:
                chunk, first = chunk.removeprefix(_BOM), False
            if not chunk:
                if carry.strip():
                    yield _block(carry + b"\n", row, file_index, label, raw.pos - done)
                break
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                carry = data
                continue
            block, carry = data[:cut], data[cut:]
            batch = _block(block, row, file_index, label, raw.pos - done)
            done = raw.pos
            row += block.count(b"\n")
            yield batch
    note_file(state, path, raw.hash.hexdigest(), raw.pos)


def _block(block: bytes, row0: int, file_index: int, label: str | None, progress: int) -> Batch:
    lines = block.split(b"\n")
    lines.pop()  # the block ends with a newline
    batch = _merge(list(_parse(lines, row0, valid_utf8=_is_utf8(block))))
    batch.file, batch.file_index, batch.progress = label, file_index, progress
    return batch


def _is_utf8(data: bytes) -> bool:
    """Fast UTF-8 validation (Arrow's JSON reader does not always check)."""
    if data.isascii():
        return True
    try:
        pl.Series([data], dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.InvalidOperationError:
        return False
    except pl.exceptions.ComputeError:
        return False
    return True


def _parse(lines: list[bytes], row0: int, *, valid_utf8: bool) -> Iterator[Batch]:
    """Parse lines with the fast reader; where it refuses, halve and retry, so one bad line
    costs a few re-reads of its neighbourhood, not a slow pass over the whole block."""
    if len(lines) <= _SLOW_LINES:
        yield _slow(lines, row0)
        return
    try:
        if not (valid_utf8 or _is_utf8(b"".join(lines))):
            raise _Fallback
        yield _fast(b"\n".join(lines) + b"\n", lines, row0)
        return
    except (pa.ArrowInvalid, _Fallback):
        pass
    half = len(lines) // 2
    yield from _parse(lines[:half], row0, valid_utf8=valid_utf8)
    yield from _parse(lines[half:], row0 + half, valid_utf8=valid_utf8)


def _merge(parts: list[Batch]) -> Batch:
    if len(parts) == 1:
        return parts[0]
    offsets = np.cumsum([0] + [len(p) for p in parts[:-1]])
    raw_names = {name for p in parts for name in p.raw}
    frames = [p.frame for p in parts]
    if raw_names or not _same_schema(frames) or any(p.frame.height != len(p) for p in parts):
        # Types differ between parts: rebuild from Python values so each field is typed once.
        records = []
        for p in parts:
            columns = {name: p.values(name) for name in p.frame.columns}
            records += [
                {name: v[i] for name, v in columns.items() if v[i] is not None}
                for i in range(len(p))
            ]
        merged = records_to_batch(records, np.concatenate([p.rows for p in parts]).tolist())
    else:
        merged = Batch(frame=pl.concat(frames, how="diagonal_relaxed"),
                       rows=np.concatenate([p.rows for p in parts]))
    merged.malformed = [m for p in parts for m in p.malformed]
    merged.lone_surrogates = {
        int(off) + i: n for p, off in zip(parts, offsets, strict=True)
        for i, n in p.lone_surrogates.items()
    }
    return merged


def _same_schema(frames: list[pl.DataFrame]) -> bool:
    types: dict[str, pl.DataType] = {}
    for frame in frames:
        for name, dtype in frame.schema.items():
            if dtype == pl.Null:
                continue
            if types.setdefault(name, dtype) != dtype:
                return False
    return True


def _fast(block: bytes, lines: list[bytes], row0: int) -> Batch:
    longest = max(map(len, lines), default=0)
    options = pj.ReadOptions(use_threads=True, block_size=max(1 << 20, longest + 2))
    table = pj.read_json(io.BytesIO(block), read_options=options)
    fixed = _without_timestamps(table.schema)
    if fixed is not None:  # Arrow guessed timestamps from strings: read them as strings
        table = pj.read_json(io.BytesIO(block), read_options=options,
                             parse_options=pj.ParseOptions(explicit_schema=fixed))
    nonblank = [k for k, line in enumerate(lines) if line.strip()]
    if table.num_rows != len(nonblank):  # e.g. two objects on one line
        raise _Fallback
    return table_to_batch(table, np.asarray(nonblank, dtype=np.int64) + row0, 0, None)


def _slow(lines: list[bytes], row0: int) -> Batch:
    records: list[dict[str, Any]] = []
    rows: list[int] = []
    malformed: list[Malformed] = []
    surrogates: dict[int, int] = {}
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        row = row0 + k
        obj, problem = parse_line(line)
        if problem is not None:
            malformed.append(Malformed(row, *problem))
            continue
        obj, n = replace_lone_surrogates(obj) if _may_have_surrogates(line) else (obj, 0)
        if n:
            surrogates[len(records)] = n
        records.append(obj)
        rows.append(row)
    batch = records_to_batch(records, rows)
    batch.malformed, batch.lone_surrogates = malformed, surrogates
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
            return None, ("invalid_json", "nested too deeply")
    if not isinstance(obj, dict):
        return None, ("not_an_object", f"a JSON {_json_kind(obj)}, not an object")
    return obj, None


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


def read_json(path: Path, file_index: int, label: str | None, state: dict[str, Any]
              ) -> Iterator[Batch]:
    """Yield batches of a ``.json`` file: a top-level array of records (streamed), or JSON
    Lines under a .json name."""
    stream, raw = open_stream(path)
    with stream:
        head = stream.peek(64)[:64] if hasattr(stream, "peek") else b""
        if not head.removeprefix(_BOM).lstrip().startswith(b"["):
            stream.close()
            yield from read_jsonl(path, file_index, label, state)
            return
        yield from _array(stream, raw, file_index, label)
    note_file(state, path, raw.hash.hexdigest(), raw.pos)


def _array(stream: Any, raw: Any, file_index: int, label: str | None) -> Iterator[Batch]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    scanner = json.JSONDecoder()
    buf, pos, index, eof, started = "", 0, 0, False, False
    records: list[dict[str, Any]] = []
    rows: list[int] = []
    malformed: list[Malformed] = []
    surrogates: dict[int, int] = {}
    done = 0

    def flush() -> Batch:
        nonlocal records, rows, malformed, surrogates, done
        batch = records_to_batch(records, rows, file=label, file_index=file_index)
        batch.malformed, batch.progress = malformed, raw.pos - done
        batch.lone_surrogates = surrogates
        done = raw.pos
        records, rows, malformed, surrogates = [], [], [], {}
        return batch

    while True:
        while pos < len(buf) and buf[pos] in " \t\r\n,\ufeff":
            pos += 1
        if not started and pos < len(buf):
            if buf[pos] != "[":
                raise ValueError("expected a JSON array")
            started, pos = True, pos + 1
            continue
        if pos < len(buf) and buf[pos] == "]":
            break
        try:
            if pos >= len(buf):
                raise json.JSONDecodeError("need more", buf, pos)
            obj, end = scanner.raw_decode(buf, pos)
            if end >= len(buf) and not eof:
                raise json.JSONDecodeError("need more", buf, pos)
        except json.JSONDecodeError as e:
            if not eof:
                chunk = stream.read(1 << 20)
                eof = not chunk
                buf = buf[pos:] + decoder.decode(chunk, final=eof)
                pos = 0
                continue
            if buf[pos:].strip():
                malformed.append(Malformed(index, "invalid_json",
                                           f"{e.msg}; the rest of the file from element "
                                           f"{index} could not be read"))
            break
        if _ESCAPED_BYTE.search(buf, pos, end):
            malformed.append(Malformed(index, "invalid_utf8", "element holds invalid UTF-8"))
        elif not isinstance(obj, dict):
            malformed.append(Malformed(index, "not_an_object",
                                       f"a JSON {_json_kind(obj)}, not an object"))
        else:
            obj, n = replace_lone_surrogates(obj)
            if n:
                surrogates[len(records)] = n
            records.append(obj)
            rows.append(index)
        index, pos = index + 1, end
        if len(records) >= ARRAY_BATCH:
            yield flush()
    if records or malformed:
        yield flush()
