"""What a file's name says: its format (``data.jsonl.gz`` -> ``jsonl``), a compression no
reader reads and the command that unpacks it, and data inside a sub-folder of a shard
folder (which would go unchecked)."""

from __future__ import annotations

import os
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


def recompress(path: Path) -> str:
    """For a data file in a compression that is not read (``x.jsonl.bz2``, a gzipped
    Parquet file): what to run first; else ""."""
    suffixes = [s.lower() for s in path.suffixes]
    if len(suffixes) < 2 or suffixes[-2] not in SUFFIXES:
        return ""
    inner, tool = path.with_suffix("").name, _UNREAD.get(suffixes[-1])
    if SUFFIXES[suffixes[-2]] in ("parquet", "arrow") and (tool or suffixes[-1] in _UNZIP):
        # Parquet and Arrow compress inside: such a file is read as it is, never unpacked
        return (f" (a {suffixes[-2]} file is read uncompressed, its columns compress inside "
                f"it: {tool or _UNZIP[suffixes[-1]]} {path.name} and check {inner})")
    if tool:
        return (f" ({suffixes[-1]} is not read: decompress it first, e.g. {tool} "
                f"{path.name}, and check {inner}, or recompress it with gzip or zstd)")
    return ""


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
