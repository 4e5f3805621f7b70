"""``-``: JSON Lines piped into standard input, spooled to a temporary file.

Every input is read more than once (near-duplicate confirmation, the smoke sample, ``fix``'s
rounds), and a pipe can be read only once, so what arrives is copied to a file in a
``preflight-stdin-*`` temporary folder (removed when the run ends, or by the next run if this
one was killed) and read from there. Row numbers are line numbers minus one, as for a file.
gzip or zstd input is recognised by its magic bytes and decompressed as a ``.gz``/``.zst``
file would be. What cannot be JSON Lines is refused with what to do: nothing piped (a
terminal), nothing at all, UTF-16 (PowerShell's default), Parquet or Arrow bytes.
A line that is not valid UTF-8 is, as in a file, a ``malformed`` finding with its row.
CSV or a JSON array piped in is read as JSON Lines too (nearly every line ``malformed``);
``stdin_note`` says so once, with what to do.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from preflight.errors import InputError, OutputError
from preflight.source.bom import refuse_wide_text, wide_text
from preflight.source.magic import piped
from preflight.tempfiles import temp_dir

STDIN = "-"
_CHUNK = 1 << 20
_MAGIC = {b"\x1f\x8b": ".jsonl.gz", b"\x28\xb5\x2f\xfd": ".jsonl.zst"}
_REFUSED = {
    b"PAR1": "a Parquet file; give its path instead of -",
    b"ARROW1": "an Arrow file; give its path instead of -",
    b"\xff\xff\xff\xff": "an Arrow stream; save it as a .arrow file and give its path "
                         "instead of -",
}


# A first line that looks like a CSV header: a delimiter, and no JSON object.
_CSV_DELIMITERS = (",", ";", "\t")
CSV_NOTE = "standard input is read as JSON Lines only; save CSV to a file and pass its path"
ARRAY_NOTE = ("standard input is read as JSON Lines only (one object per line); if it holds a "
              "JSON array, save it to a .json file and pass its path")


def is_stdin(source: object) -> bool:
    """True when ``source`` is ``-`` (a string or a path)."""
    return isinstance(source, str | Path) and str(source) == STDIN


def is_spooled(path: Path) -> bool:
    """Whether ``path`` is standard input's copy (``spooled_stdin``), as ``fix`` reads it."""
    return path.name.startswith("stdin.jsonl") and path.parent.name.startswith(
        "preflight-stdin-")


@contextlib.contextmanager
def spooled_stdin(stream: BinaryIO | None = None, *, command: str = "check"
                  ) -> Iterator[Path]:
    """Copy ``stream`` (default: standard input, as bytes) to a temporary JSON Lines file;
    yield its path; remove it on exit. ``command`` (check, fix) is the one the messages'
    examples pipe into."""
    pipe = f"cat data.jsonl | preflight {command} -"
    if stream is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("'-' reads JSON Lines from standard input, but nothing is piped "
                             f"in: {pipe}")
        stream = sys.stdin.buffer
    first = stream.read(_CHUNK)
    if not first:
        raise InputError(f"standard input is empty: pipe JSON Lines into it, e.g. {pipe}")
    if (error := wide_text(first, "standard input")) is not None:
        raise error
    for magic, what in _REFUSED.items():
        if first.startswith(magic):
            raise InputError(f"standard input holds {what}; '-' reads JSON Lines (UTF-8)")
    if (error := piped(first, command)) is not None:  # bzip2, xz, zip: every line invalid UTF-8
        raise error
    suffix = next((s for m, s in _MAGIC.items() if first.startswith(m)), ".jsonl")
    folder = temp_dir("stdin")
    try:
        path = folder / f"stdin{suffix}"
        try:
            with open(path, "wb") as f:
                f.write(first)
                shutil.copyfileobj(stream, f, _CHUNK)
            if suffix != ".jsonl":  # the mark is inside the compression
                refuse_wide_text([path], "standard input")
        except OSError as e:
            raise OutputError(
                f"cannot copy standard input to {path}: {e.strerror or e} (it is read more "
                "than once, so it is copied first: free some space there, set TMPDIR to a "
                "folder with room, or save the data to a file and pass its path)") from e
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def stdin_note(spooled: Path, *, records: int, malformed: int) -> str | None:
    """What to do when most lines of the spooled standard input were not JSON objects
    (``malformed`` > ``records``): ``ARRAY_NOTE`` when it starts with ``[`` (a JSON array,
    one line or pretty-printed), ``CSV_NOTE`` when its first line looks like a CSV header
    (a ``,`` ``;`` or tab, no ``{``); else None."""
    if malformed <= records or spooled.suffix != ".jsonl":  # compressed: no line to look at
        return None
    with open(spooled, "rb") as f:
        head = f.read(1 << 16).decode("utf-8", "replace")
    if head.lstrip("\ufeff \t\r\n").startswith("["):
        return ARRAY_NOTE
    first = head.split("\n", 1)[0]
    if "{" in first or not any(d in first for d in _CSV_DELIMITERS):
        return None
    return CSV_NOTE
