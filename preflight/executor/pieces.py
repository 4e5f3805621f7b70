"""Cutting a source into pieces that workers read on their own, with the row numbers the
local reader would give.

A file is one piece, except a plain (uncompressed) JSON Lines file larger than
``PIECE_BYTES``: it is cut at line ends, and each piece's first row is the number of line
ends before it (counted by ``count``, which also hashes the piece for the fingerprint).
Compressed files, JSON arrays, CSV, Parquet and Arrow files are read whole.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from preflight.batch import Batch, record_key
from preflight.errors import ConfigError, InputError
from preflight.source import READ_ERRORS, READERS, Source
from preflight.source.jsonl import read_jsonl_range
from preflight.source.tracked import file_fingerprint

PIECE_BYTES = 64 << 20
_SCAN = 1 << 20


@dataclass(frozen=True)
class Piece:
    """A part of the source one worker reads: a whole file, or a byte range of one."""

    index: int  # position in read order
    file_index: int
    path: str
    label: str | None
    format: str
    start: int = 0
    end: int | None = None  # None: the whole file
    row0: int = 0
    delimiter: str | None = None  # CSV: forced by the caller (else sniffed)


@dataclass(frozen=True)
class Counted:
    """A piece's line ends, bytes and hash."""

    lines: int
    size: int
    xxh3_128: str


def plan(src: Source, *, piece_bytes: int | None = None) -> list[Piece]:
    """The pieces of ``src`` in read order, before counting (``row0`` not set yet);
    ``piece_bytes`` defaults to ``PIECE_BYTES``."""
    piece_bytes = piece_bytes or PIECE_BYTES
    if src.global_rows or not src.files or src.format not in READERS:
        raise ConfigError(
            f"the Ray executor reads files and folders of shards; {src.format} input "
            "(a datasets dataset) runs with the local executor: drop --executor ray")
    pieces: list[Piece] = []
    for file_index, path in enumerate(src.files):
        label = src.file_label(file_index)
        size = path.stat().st_size
        if (src.format != "jsonl" or path.suffix.lower() not in (".jsonl", ".ndjson")
                or size <= piece_bytes):
            pieces.append(Piece(len(pieces), file_index, str(path.resolve()), label, src.format,
                                delimiter=src.delimiter))
            continue
        for start, end in _cuts(path, size, piece_bytes):
            pieces.append(Piece(len(pieces), file_index, str(path.resolve()), label, src.format,
                                start=start, end=end))
    return pieces


def _cuts(path: Path, size: int, piece_bytes: int) -> list[tuple[int, int]]:
    """Byte ranges of about ``piece_bytes``, each ending just after a line end."""
    cuts = [0]
    with open(path, "rb") as f:
        while cuts[-1] + piece_bytes < size:
            f.seek(cuts[-1] + piece_bytes)
            at = f.tell()
            while chunk := f.read(_SCAN):
                nl = chunk.find(b"\n")
                if nl >= 0:
                    at += nl + 1
                    break
                at += len(chunk)
            if at >= size:
                break
            cuts.append(at)
    cuts.append(size)
    return list(itertools.pairwise(cuts))


def count(piece: Piece) -> Counted:
    """Line ends, bytes and xxh3-128 of a piece (the whole file for a file piece)."""
    h = xxhash.xxh3_128()
    lines = size = 0
    try:
        f = open(piece.path, "rb")  # noqa: SIM115 - closed below
    except OSError as e:
        raise InputError(f"cannot read {piece.path}: {e.strerror} (with --executor ray every "
                         "node needs the data at the same path: a shared file system)") from e
    with f:
        f.seek(piece.start)
        left = (piece.end - piece.start) if piece.end is not None else None
        while left is None or left > 0:
            chunk = f.read(_SCAN if left is None else min(_SCAN, left))
            if not chunk:
                break
            h.update(chunk)
            lines += chunk.count(b"\n")
            size += len(chunk)
            if left is not None:
                left -= len(chunk)
    return Counted(lines=lines, size=size, xxh3_128=h.hexdigest())


def numbered(pieces: list[Piece], counts: list[Counted]) -> list[Piece]:
    """The pieces with their first row: line ends before them in the same file."""
    out, row, last_file = [], 0, -1
    for piece, counted in zip(pieces, counts, strict=True):
        if piece.file_index != last_file:
            row, last_file = 0, piece.file_index
        out.append(replace(piece, row0=row))
        row += counted.lines
    return out


def fingerprint(pieces: list[Piece], counts: list[Counted]) -> dict[str, Any]:
    """The source's fingerprint; a file read in several pieces is hashed as the xxh3-128
    of its pieces' hashes (the local executor hashes it whole)."""
    files: dict[int, list[tuple[Piece, Counted]]] = {}
    for piece, counted in zip(pieces, counts, strict=True):
        files.setdefault(piece.file_index, []).append((piece, counted))
    hashes = []
    for parts in files.values():
        name = Path(parts[0][0].path).name
        if len(parts) == 1:
            hashes.append((name, parts[0][1].xxh3_128, parts[0][1].size))
            continue
        h = xxhash.xxh3_128()
        for _, counted in parts:
            h.update(f"{counted.xxh3_128}\0{counted.size}\n".encode())
        hashes.append((name, f"pieces:{h.hexdigest()}", sum(c.size for _, c in parts)))
    return file_fingerprint({"hashes": hashes, "bytes": sum(c.size for c in counts)})


def holding(pieces: list[Piece], keys: set[int]) -> list[Piece]:
    """The (numbered) pieces whose rows include one of the record keys."""
    wanted = np.array(sorted(keys), dtype=np.int64)
    out = []
    for k, piece in enumerate(pieces):
        after = pieces[k + 1] if k + 1 < len(pieces) else None
        last = (after.row0 if after is not None and after.file_index == piece.file_index
                else 1 << 40)
        lo, hi = record_key(np.array([piece.file_index] * 2), np.array([piece.row0, last]))
        if np.any((wanted >= lo) & (wanted < hi)):
            out.append(piece)
    return out


def read(piece: Piece) -> Iterator[Batch]:
    """The batches of one piece, with the rows and malformed-line findings the local
    reader gives."""
    path = Path(piece.path)
    try:
        if piece.end is not None:
            yield from read_jsonl_range(path, piece.file_index, piece.label, start=piece.start,
                                        end=piece.end, row0=piece.row0)
        else:
            yield from READERS[piece.format](path, piece.file_index, piece.label,
                                             {"delimiter": piece.delimiter})
    except InputError:
        raise
    except READ_ERRORS as e:
        raise InputError(f"cannot read {path}: {e}") from e
