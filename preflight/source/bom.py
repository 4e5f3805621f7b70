"""A text input written in UTF-16 or UTF-32 (Windows tools, PowerShell's ``>``): read as
UTF-8 every line was malformed, or a CSV header not UTF-8, with no word of why. Its
byte-order mark says so: the input is refused (exit 3) with the command that converts it,
a file, a shard or standard input alike."""

from __future__ import annotations

import shlex
from pathlib import Path

from preflight.errors import InputError
from preflight.source.magic import HEAD, JSON_HEAD, json_named_csv, misnamed

# Longest first: UTF-32 LE's mark starts with UTF-16 LE's.
_MARKS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
          (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))
# Without a mark (Python's encode("utf-16-le"), .NET): the zero bytes of two ASCII
# characters (RFC 4627's test; "{" or a CSV header's first letter), never UTF-8 text.
_ZEROS = ((lambda h: h[1:4] == b"\x00\x00\x00" and h[0], "UTF-32LE"),
          (lambda h: h[:3] == b"\x00\x00\x00" and h[3], "UTF-32BE"),
          (lambda h: h[1] == 0 and h[3] == 0 and h[0] and h[2], "UTF-16LE"),
          (lambda h: h[0] == 0 and h[2] == 0 and h[1] and h[3], "UTF-16BE"))
# Read as text: plain, or gzip/zstd around it (whose first bytes are the compression's).
_TEXT = (".jsonl", ".ndjson", ".json", ".csv", ".tsv")
_COMPRESSED = (".gz", ".zst", ".zstd")


def wide_encoding(head: bytes) -> str | None:
    """``UTF-16`` or ``UTF-32`` when ``head`` starts with that byte-order mark; with no mark,
    ``UTF-16LE`` (and so on) when its first two characters are ASCII in that encoding; else
    None."""
    if (marked := next((name for mark, name in _MARKS if head.startswith(mark)), None)):
        return marked
    if len(head) < 4:
        return None
    return next((name for test, name in _ZEROS if test(head)), None)


def wide_text(head: bytes, what: str, *, convert: str | None = None) -> InputError | None:
    """The error for ``what`` (a file name, "standard input") when ``head`` is UTF-16 or
    UTF-32 text, else None. ``convert`` is the command that converts it (``how_to_convert``);
    default: iconv's options alone."""
    encoding = wide_encoding(head)
    if encoding is None:
        return None
    how = ("it starts with a byte-order mark" if encoding in ("UTF-16", "UTF-32")
           else "no byte-order mark, but zero bytes between its characters")
    iconv = f"iconv -f {encoding} -t UTF-8"
    return InputError(f"{what} is {encoding} text ({how}); "
                      f"preflight reads UTF-8: convert it first, e.g. "
                      f"{convert.format(iconv=iconv) if convert else iconv} "
                      "(in PowerShell, Out-File -Encoding utf8)")


def how_to_convert(path: Path) -> str:
    """A shell command (``{iconv}`` left to fill) that writes ``path``'s text as UTF-8
    beside it: decompressed first where it is gzip or zstd, the result plain."""
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    packed = len(suffixes) == 2 and suffixes[1] in _COMPRESSED
    plain = path.with_suffix("") if packed else path
    target = shlex.quote(str(plain.with_name(f"{plain.stem}.utf8{plain.suffix}")))
    source = shlex.quote(str(path))
    if packed:
        unpack = "gzip" if suffixes[1] == ".gz" else "zstd"
        return f"{unpack} -dc {source} | {{iconv}} > {target}"
    return f"{{iconv}} {source} > {target}"


def refuse_wide_text(files: list[Path], what: str | None = None) -> None:
    """An ``InputError`` for the first text file among ``files`` (plain, gzip or zstd) that
    is UTF-16 or UTF-32 text, or, named as plain text, compressed or columnar data
    (``magic``), naming it ``what`` (default: its path)."""
    for path in files:
        suffixes = [s.lower() for s in path.suffixes[-2:]]
        packed = len(suffixes) == 2 and suffixes[1] in _COMPRESSED
        if (suffixes[0] if packed else suffixes[-1:] and suffixes[-1]) not in _TEXT:
            continue
        try:
            head = _head(path, suffixes[1] if packed else None, JSON_HEAD)
        except Exception:  # the reader says what is wrong with it
            continue
        convert = None if what else how_to_convert(path)
        if (error := wide_text(head, what or str(path), convert=convert)) is not None:
            raise error
        if not packed and (error := misnamed(path, head, what or str(path))) is not None:
            raise error  # gzip under a .jsonl name, Parquet under .json: not text
        if (suffixes[0] if packed else suffixes[-1]) in (".csv", ".tsv") and (
                error := json_named_csv(path, head, what or str(path))) is not None:
            raise error  # JSON Lines under a .csv name: its records unread


def _head(path: Path, compression: str | None, size: int = HEAD) -> bytes:
    """The first ``size`` bytes of ``path``'s text, decompressed."""
    if compression == ".gz":
        import gzip

        with gzip.open(path, "rb") as f:
            return f.read(size)
    if compression is not None:
        import zstandard

        with open(path, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as f:
            return f.read(size)
    with open(path, "rb") as f:
        return f.read(size)
