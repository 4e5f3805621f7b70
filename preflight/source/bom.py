"""A text input written in UTF-16 or UTF-32 (Windows tools, PowerShell's ``>``): read as
UTF-8 every line was malformed, or a CSV header not UTF-8, with no word of why. Its
byte-order mark says so: the input is refused (exit 3) with the command that converts it,
a file, a shard or standard input alike."""

from __future__ import annotations

from pathlib import Path

from preflight.errors import InputError

# Longest first: UTF-32 LE's mark starts with UTF-16 LE's.
_MARKS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
          (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))
# Read as text, uncompressed (a compressed file's first bytes are its compression's).
_TEXT = (".jsonl", ".ndjson", ".json", ".csv", ".tsv")


def wide_encoding(head: bytes) -> str | None:
    """``UTF-16`` or ``UTF-32`` when ``head`` starts with that byte-order mark, else None."""
    return next((name for mark, name in _MARKS if head.startswith(mark)), None)


def wide_text(head: bytes, what: str) -> InputError | None:
    """The error for ``what`` (a file name, "standard input") when ``head`` is UTF-16 or
    UTF-32 text, else None."""
    encoding = wide_encoding(head)
    if encoding is None:
        return None
    return InputError(f"{what} is {encoding} text (it starts with a byte-order mark); "
                      f"preflight reads UTF-8: convert it first, e.g. iconv -f {encoding} "
                      "-t UTF-8 (in PowerShell, Out-File -Encoding utf8)")


def refuse_wide_text(files: list[Path]) -> None:
    """An ``InputError`` for the first plain text file among ``files`` that is UTF-16 or
    UTF-32 text."""
    for path in files:
        if path.suffix.lower() not in _TEXT:
            continue
        try:
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError:
            continue  # the reader says what is wrong with it
        if (error := wide_text(head, str(path))) is not None:
            raise error
