"""Cutting a source into pieces that workers read on their own, with the row numbers the
local reader would give.

A file is one piece, except a plain (uncompressed) JSON Lines file larger than
``PIECE_BYTES``: it is cut at line ends, and each piece's first row is the number of line
ends before it (counted by ``count``, which also hashes the piece for the fingerprint, or
by ``Survey``, which hashes whole files as the local reader does), and, with
``row_groups``, a Parquet file of several row groups: cut between row groups, numbered
from its metadata. Compressed files, JSON arrays, CSV and Arrow files are read whole.
Each piece notes its file as the plan found it (size, time written, inode): ``unchanged``,
which the pool and Ray both call, refuses a run whose file was written since.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from preflight.batch import Batch, record_key
from preflight.errors import ConfigError, InputError
from preflight.source import READ_ERRORS, READERS, Source
from preflight.source.arrow import read_parquet_groups
from preflight.source.jsonl import read_jsonl_range
from preflight.source.tracked import file_fingerprint

Identity = tuple[int, int, int]  # a file's size, time written (ns) and inode

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
    groups: tuple[int, int] | None = None  # Parquet: row groups [first, last), when cut
    planned: Identity | None = None  # the file as ``plan`` cut it (``unchanged``)


@dataclass(frozen=True)
class Counted:
    """A piece's line ends, bytes and hash, and the size of its whole file as the count found
    it (``unchanged`` compares it with the plan's)."""

    lines: int
    size: int
    xxh3_128: str
    file_size: int


def plan(src: Source, *, piece_bytes: int | None = None, row_groups: bool = False
         ) -> list[Piece]:
    """The pieces of ``src`` in read order, before counting (``row0`` not set yet, except
    for row groups); ``piece_bytes`` defaults to ``PIECE_BYTES``; with ``row_groups``, a
    Parquet file is cut between row groups too."""
    piece_bytes = piece_bytes or PIECE_BYTES
    if src.global_rows or not src.files or src.format not in READERS:
        raise ConfigError(
            f"the Ray executor reads files and folders of shards; {src.format} input "
            "(a datasets dataset) runs with the local executor: drop --executor ray")
    pieces: list[Piece] = []
    for file_index, path in enumerate(src.files):
        label = src.file_label(file_index)
        # Noted before the file is cut, from the same stat as the cuts' size: a file
        # written from here on is not the planned one.
        planned = _identity(path)
        size = planned[0]
        if row_groups and src.format == "parquet" and size > piece_bytes:
            for first, last, row0 in _groups(path, piece_bytes):
                pieces.append(Piece(len(pieces), file_index, str(path.resolve()), label,
                                    src.format, row0=row0, groups=(first, last),
                                    planned=planned))
            continue
        if (src.format != "jsonl" or path.suffix.lower() not in (".jsonl", ".ndjson")
                or size <= piece_bytes):
            pieces.append(Piece(len(pieces), file_index, str(path.resolve()), label, src.format,
                                delimiter=src.delimiter, planned=planned))
            continue
        for start, end in _cuts(path, size, piece_bytes):
            pieces.append(Piece(len(pieces), file_index, str(path.resolve()), label, src.format,
                                start=start, end=end, planned=planned))
    return pieces


def unchanged(pieces: list[Piece], counts: list[Counted] | None = None) -> None:
    """Raise ``InputError`` when a file is not the one ``plan`` cut: its size, time written
    or inode now, or the file size a count of its pieces found (``counts``, in the pieces'
    order), not the planned ones. Its pieces are cut, numbered and read at separate times
    (by the pool or on Ray), so its rows would be misnumbered, or its new lines left unread.
    Both executors call it once their reads are done."""
    if counts is not None:
        for piece, counted in zip(pieces, counts, strict=True):
            if piece.planned is not None and counted.file_size != piece.planned[0]:
                raise _changed(piece.path, piece.planned[0], counted.file_size)
    for path, planned in {p.path: p.planned for p in pieces if p.planned}.items():
        now = _identity(path)
        if now != planned:
            raise _changed(path, planned[0], now[0])


def _changed(path: str, planned: int, now: int) -> InputError:
    return InputError(f"{path} changed while it was read ({planned} bytes when the run began, "
                      f"{now} now): check it once whatever writes it is done")


def _groups(path: Path, piece_bytes: int) -> list[tuple[int, int, int]]:
    """Runs of row groups of about ``piece_bytes``: (first, last + 1, first row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from preflight.source.magic import unreadable

    try:
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowInvalid, OSError) as e:
        raise unreadable(path, "Parquet", e) from e
    out, first, row, size = [], 0, 0, 0
    for g in range(meta.num_row_groups):
        size += meta.row_group(g).total_byte_size
        if size >= piece_bytes or g == meta.num_row_groups - 1:
            rows = sum(meta.row_group(k).num_rows for k in range(first, g + 1))
            out.append((first, g + 1, row))
            first, row, size = g + 1, row + rows, 0
    return out or [(0, 0, 0)]


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
    counted = _read_counting(piece, h, hint=" (with --executor ray every node needs the data "
                                            "at the same path: a shared file system)")
    return replace(counted, xxh3_128=h.hexdigest())


class Survey:
    """The pieces numbered as the local reader numbers them, and the source's fingerprint as
    it gives it (each file hashed whole), from one pass over each file here.

    Iterating yields each piece as soon as its first row is known, before the piece itself
    is counted: a file's first piece at once, each later one once the line ends of those
    before it are counted. A pool hands the first pieces to its workers while the rest are
    still counted (counting all first held every worker back: 0.4 s at 250 MB).
    ``pieces`` and ``fingerprint`` are complete once the iteration is; ``unchanged`` tells
    whether a file was written since the plan cut it."""

    def __init__(self, pieces: list[Piece]) -> None:
        self._pieces = pieces
        self.pieces: list[Piece] = []
        self.fingerprint: dict[str, Any] = {}

    def unchanged(self) -> None:
        """Raise ``InputError`` when a file is not the one planned (``unchanged``)."""
        unchanged(self._pieces)

    def __iter__(self) -> Iterator[Piece]:
        files: dict[int, list[Piece]] = {}
        for piece in self._pieces:
            files.setdefault(piece.file_index, []).append(piece)
        hashes, total = [], 0
        for parts in files.values():
            h = xxhash.xxh3_128()
            if parts[0].end is not None:  # byte ranges, which cover the file in order
                row = size = 0
                for part in parts:
                    numbered = replace(part, row0=row)
                    self.pieces.append(numbered)
                    yield numbered
                    counted = _read_counting(part, h)
                    row, size = row + counted.lines, size + counted.size
            else:  # a whole file, or row groups (numbered from the metadata): hashed only
                self.pieces += parts
                yield from parts
                size = _read_counting(replace(parts[0], start=0, end=None), h).size
            hashes.append((Path(parts[0].path).name, h.hexdigest(), size))
            total += size
        self.fingerprint = file_fingerprint({"hashes": hashes, "bytes": total})


def _identity(path: str | Path) -> Identity:
    """A file's size, time written and inode (-1s for a file that is gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1, -1)
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _read_counting(piece: Piece, h: Any, *, hint: str = "") -> Counted:
    """Line ends and bytes of a piece, its bytes fed to ``h`` (``xxh3_128`` left empty)."""
    lines = size = 0
    try:
        f = open(piece.path, "rb")  # noqa: SIM115 - closed below
    except OSError as e:
        raise InputError(f"cannot read {piece.path}: {e.strerror}{hint}") from e
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
        file_size = os.fstat(f.fileno()).st_size  # after reading: a write meanwhile shows
    return Counted(lines=lines, size=size, xxh3_128="", file_size=file_size)


def numbered(pieces: list[Piece], counts: list[Counted]) -> list[Piece]:
    """The pieces with their first row: line ends before them in the same file."""
    out, row, last_file = [], 0, -1
    for piece, counted in zip(pieces, counts, strict=True):
        if piece.groups is not None:  # numbered from the Parquet metadata already
            out.append(piece)
            continue
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
        # Up to the next piece of the file, else to the next file's first key (a row of
        # 1 << 40 would overflow into the file index's bits).
        end = ((piece.file_index, after.row0)
               if after is not None and after.file_index == piece.file_index
               else (piece.file_index + 1, 0))
        lo, hi = record_key(np.array([piece.file_index, end[0]]),
                            np.array([piece.row0, end[1]]))
        if np.any((wanted >= lo) & (wanted < hi)):
            out.append(piece)
    return out


def read(piece: Piece) -> Iterator[Batch]:
    """The batches of one piece, with the rows and malformed-line findings the local
    reader gives."""
    path = Path(piece.path)
    try:
        if piece.groups is not None:
            yield from read_parquet_groups(path, piece.file_index, piece.label,
                                           groups=range(*piece.groups), row0=piece.row0)
        elif piece.end is not None:
            yield from read_jsonl_range(path, piece.file_index, piece.label, start=piece.start,
                                        end=piece.end, row0=piece.row0)
        else:
            yield from READERS[piece.format](path, piece.file_index, piece.label,
                                             {"delimiter": piece.delimiter})
    except InputError:
        raise
    except READ_ERRORS as e:
        raise InputError(f"cannot read {path}: {e}") from e


def firsts(batches: Iterator[Batch]) -> Iterator[tuple[Batch, bool]]:
    """Each batch with whether it is the first that holds records (its shard's shape is
    inferred from it: ``shards.ShardShapes``)."""
    seen = False
    for batch in batches:
        first = not seen and len(batch) > 0
        seen = seen or first
        yield batch, first
