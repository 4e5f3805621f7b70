"""What a file's name says: its format (``data.jsonl.gz`` -> ``jsonl``), a compression no
reader reads and the command that unpacks it, and data inside a sub-folder of a shard
folder (which would go unchecked)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
    ".arrows": "arrow",  # the usual name of an Arrow IPC stream
}
COMPRESSED = {".gz", ".zst", ".zstd"}


def format_of(path: Path) -> str | None:
    """The format a file name says (``data.jsonl.gz`` -> ``jsonl``), or None."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSED:
        suffixes = suffixes[:-1]
        if suffixes and SUFFIXES.get(suffixes[-1]) in ("parquet", "arrow"):
            return None
    return SUFFIXES.get(suffixes[-1]) if suffixes else None


# Compressions no reader reads: the command that gives a file preflight reads.
_UNREAD = {".bz2": "bunzip2 -k", ".xz": "unxz -k", ".lzma": "unlzma -k", ".lz4": "unlz4",
           ".zip": "unzip", ".7z": "7z x", ".br": "brotli -d"}
_UNZIP = {".gz": "gunzip -k", ".zst": "unzstd", ".zstd": "unzstd"}
# In a shard folder the compressed file must go (a kept one is exit 3 again): commands that
# unpack in place, replacing it; the others are followed by its removal.
_IN_PLACE = {".bz2": "bunzip2", ".xz": "unxz", ".lzma": "unlzma", ".gz": "gunzip",
             ".zst": "unzstd --rm", ".zstd": "unzstd --rm"}


def recompress(path: Path, *, shard: bool = False) -> str:
    """For a data file in a compression that is not read (``x.jsonl.bz2``, a gzipped
    Parquet file): what to run first, naming ``path`` as given (the commands run from
    where preflight did); else "". For a ``shard`` of a folder: a command that leaves no
    compressed file there, and check the folder again."""
    suffixes = [s.lower() for s in path.suffixes]
    if len(suffixes) < 2 or suffixes[-2] not in SUFFIXES:
        return ""
    ext = suffixes[-1]
    columnar = SUFFIXES[suffixes[-2]] in ("parquet", "arrow")
    if ext not in _UNREAD and not (columnar and ext in _UNZIP):
        return ""
    name, inner = shlex.quote(str(path)), shlex.quote(str(path.with_suffix("")))
    if shard:
        run = (f"{_IN_PLACE[ext]} {name}" if ext in _IN_PLACE
               else f"{_unpack_beside(ext, path)} && rm {name}")
        then = f"check {shlex.quote(str(path.parent))} again"
    else:
        run = _unpack_beside(ext, path) if ext in _UNREAD else f"{_UNZIP[ext]} {name}"
        then = f"check {inner}"
    if columnar:
        # Parquet and Arrow compress inside: such a file is read as it is, never unpacked
        return (f" (a {suffixes[-2]} file is read uncompressed, its columns compress inside "
                f"it: {run}, then {then})")
    return (f" ({ext} is not read: decompress it first, e.g. {run}, then {then}, or "
            "recompress it with gzip or zstd)")


def _unpack_beside(ext: str, path: Path) -> str:
    """The command that writes the file ``path`` holds beside it (unzip and 7z write into
    the working directory unless told)."""
    name, folder = shlex.quote(str(path)), shlex.quote(str(path.parent))
    if ext == ".zip":
        return f"unzip -d {folder} {name}"
    if ext == ".7z":
        return f"7z x -o{folder} {name}"
    return f"{_UNREAD[ext]} {name}"


# Entries looked at for data inside a sub-folder of a shard folder (bounds a huge tree).
_PEEK = 10_000


def data_inside(folder: Path) -> str | None:
    """The first data file (by name) in ``folder`` or below it, relative to it; None when
    there is none among its first ``_PEEK`` entries. Hidden and ``_`` names are passed
    over, as in the folder itself."""
    seen = 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for name in sorted(names):
            seen += 1
            if seen > _PEEK:
                return None
            if not name.startswith((".", "_")) and format_of(Path(name)) is not None:
                return str((Path(root) / name).relative_to(folder))
    return None
