"""Data whose first bytes say it is not the text its name (or ``-``) promises: compressed
(bzip2 or xz piped into ``-``; gzip under a ``.jsonl`` name, as a download that lost its
``.gz`` leaves it) or columnar (a Parquet file named ``.json``). Read as text, every line
was a ``malformed`` finding (``invalid_utf8``), or a CSV header "not valid UTF-8", with no
word of why; the input is refused (exit 3) with what it is and the command that makes it
readable, as a file in UTF-16 is (``bom``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from preflight.errors import InputError

# (first bytes, what it is, the suffix preflight would read it under or that unpacks it)
_KINDS = (
    (re.compile(rb"\x1f\x8b"), "gzip", ".gz"),
    (re.compile(rb"\x28\xb5\x2f\xfd"), "zstd", ".zst"),
    (re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)", re.DOTALL), "bzip2", ".bz2"),
    (re.compile(rb"\xfd7zXZ\x00"), "xz", ".xz"),
    (re.compile(rb"PK\x03\x04"), "zip", ".zip"),
    (re.compile(rb"7z\xbc\xaf\x27\x1c"), "7z", ".7z"),
    (re.compile(rb"PAR1"), "Parquet", ".parquet"),
    (re.compile(rb"ARROW1\x00\x00"), "Arrow", ".arrow"),
    # An Arrow IPC stream (a `datasets` cache file): a continuation marker, then the first
    # message's length; text never starts with 0xFF.
    (re.compile(rb"\xff\xff\xff\xff", re.DOTALL), "Arrow stream", ".arrow"),
)
HEAD = 10  # bytes that tell every kind above
_UNPACK = {".bz2": "bunzip2", ".xz": "unxz"}
# Piped into ``-``: what writes the decompressed text into the pipe instead.
_PIPE = {"bzip2": "bzcat data.jsonl.bz2", "xz": "xzcat data.jsonl.xz",
         "zip": "unzip -p data.zip", "7z": "7z x -so data.7z"}


def kind_of(head: bytes) -> tuple[str, str] | None:
    """(what, suffix) when ``head`` starts as one of the compressions or columnar formats
    above, else None."""
    return next(((what, suffix) for pattern, what, suffix in _KINDS if pattern.match(head)),
                None)


def misnamed(path: Path, head: bytes, what: str) -> InputError | None:
    """The error for a file named as plain text (``what``: how to name it) whose ``head``
    is compressed or columnar data, else None. A ``PAR1`` head counts only when the file
    also ends with it (a CSV header may start ``PAR1,``)."""
    found = kind_of(head)
    if found is None:
        return None
    kind, suffix = found
    if kind == "Parquet" and not _ends_with(path, b"PAR1"):
        return None
    given = shlex.quote(str(path))
    if kind in ("gzip", "zstd"):
        return InputError(f"{what} is {kind}-compressed, but its name does not say so "
                          f"(preflight reads {suffix} files): rename it, e.g. mv {given} "
                          f"{shlex.quote(str(path) + suffix)}")
    if suffix in _UNPACK:
        packed = shlex.quote(str(path) + suffix)
        return InputError(f"{what} is {kind}-compressed, but its name does not say so; "
                          "preflight reads gzip and zstd: decompress it first, e.g. mv "
                          f"{given} {packed} && {_UNPACK[suffix]} {packed}")
    if kind in ("zip", "7z"):
        return InputError(f"{what} is a {kind} archive, not text: extract the data files "
                          "from it first")
    return InputError(f"{what} holds {kind} data, not text: rename it, e.g. mv {given} "
                      f"{shlex.quote(str(path.with_suffix(suffix)))}")


# JSON text under a CSV name: a first line that opens an object (``{"``, a lone ``{}``), an
# object pretty-printed (``{`` alone on its line) or an array (``[{``, a lone ``[]``);
# ``{id},text`` or ``[CLS],x`` is a CSV header. Read as CSV, the first record became the
# header and every other one a cell of JSON, its ``\u200b`` escapes plain ASCII: no text
# rule saw a character.
_JSON_START = re.compile(
    rb"(?:\xef\xbb\xbf)?[ \t\r\n]*(?:"
    rb"(?P<lines>\{[ \t]*(?:\"|\}[ \t]*(?:\r?\n|\Z)))"
    rb"|(?P<object>\{[ \t]*\r?\n[ \t\r\n]*[\"}])"
    rb"|(?P<array>\[[ \t\r\n]*(?:\{|\][ \t\r\n]*\Z)))")
JSON_HEAD = 256  # bytes read for that test: a few blank lines, then the opening
_CAT = {".gz": "gzip -dc", ".zst": "zstd -dc", ".zstd": "zstd -dc"}


def json_named_csv(path: Path, head: bytes, what: str) -> InputError | None:
    """The error for a file named ``.csv``/``.tsv`` (``what``: how to name it) whose
    ``head`` is JSON Lines or a JSON array, else None."""
    found = _JSON_START.match(head)
    if found is None:
        return None
    kind, suffix = (("JSON Lines", ".jsonl") if found["lines"] else
                    ("a JSON array", ".json") if found["array"] else ("JSON", ".json"))
    plain = path.with_suffix("") if path.suffix.lower() in (".gz", ".zst", ".zstd") else path
    target = plain.with_suffix(suffix).name + (path.suffix if plain != path else "")
    given, named = shlex.quote(str(path)), shlex.quote(str(path.with_name(target)))
    if found["object"]:  # objects across lines: one per line, as JSON Lines
        lines = shlex.quote(str(plain.with_suffix(".jsonl")))
        todo = (f"rewrite it as JSON Lines, e.g. jq -c . {given} > {lines}" if plain == path
                else f"rewrite it as JSON Lines, e.g. {_CAT[path.suffix.lower()]} {given} "
                     f"| jq -c . > {lines}")
    else:
        todo = f"rename it, e.g. mv {given} {named}"
    return InputError(f"{what} holds {kind}, not CSV: read as CSV its first record was "
                      "taken for the header and no text rule could see inside the JSON; "
                      + todo)


def unreadable(path: Path, expected: str, error: Exception) -> InputError:
    """The error for a file that failed to read as ``expected`` ("Parquet", "Arrow IPC"):
    when it is the other columnar format (an Arrow stream named ``.parquet``, a shard
    among Parquet files), what it is and the name to give it; else Arrow's reason."""
    try:
        with open(path, "rb") as f:
            found = kind_of(f.read(HEAD))
    except OSError:
        found = None
    if (found is not None and found[1] in (".parquet", ".arrow")
            and not found[0].startswith(expected.split()[0])
            and (found[0] != "Parquet" or _ends_with(path, b"PAR1"))):
        kind, suffix = found
        return InputError(f"{path} holds {kind} data, not {expected}: rename it, e.g. mv "
                          f"{shlex.quote(str(path))} "
                          f"{shlex.quote(str(path.with_suffix(suffix)))}")
    return InputError(f"cannot read {path} as {expected}: {error}")


def piped(head: bytes, command: str = "check") -> InputError | None:
    """The error for standard input whose ``head`` is compressed in a way ``-`` does not
    read (bzip2, xz, zip, 7z), else None (gzip and zstd are read; Parquet and Arrow are
    refused by the caller)."""
    found = kind_of(head)
    if found is None or found[0] not in _PIPE:
        return None
    kind = found[0]
    return InputError(f"standard input is {kind}-compressed; '-' reads JSON Lines, plain or "
                      f"gzip/zstd: decompress it into the pipe, e.g. {_PIPE[kind]} | "
                      f"preflight {command} -")


def _ends_with(path: Path, tail: bytes) -> bool:
    with open(path, "rb") as f:
        f.seek(0, 2)
        if f.tell() < 2 * len(tail):
            return False
        f.seek(-len(tail), 2)
        return f.read() == tail


_TEXT = {"jsonl", "json", "csv"}
_COLUMNAR = {"Parquet": "parquet", "Arrow": "arrow", "Arrow stream": "arrow"}


def holds_other(path: Path, fmt: str) -> tuple[str, str] | None:
    """(what it holds, the suffix to name it with) when the first bytes of ``path``, named
    as format ``fmt``, say another format: Parquet or Arrow under a text name, or JSON text
    under a Parquet or Arrow name; else None (also when the bytes say nothing certain)."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD)
    except OSError:
        return None  # the reader says what is wrong with it
    found = kind_of(head)
    kind = found[0] if found else None
    if kind == "Parquet" and not _ends_with(path, b"PAR1"):
        kind = None
    if fmt in _TEXT:
        return (kind, f".{_COLUMNAR[kind]}") if kind in _COLUMNAR else None
    if kind in _COLUMNAR:
        return None if _COLUMNAR[kind] == fmt else (kind, f".{_COLUMNAR[kind]}")
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    return {b"{": ("JSON Lines", ".jsonl"), b"[": ("JSON", ".json")}.get(start)
