"""A JSON Lines file that is not laid out one object per line: a JSON array under a
``.jsonl`` name, objects pretty-printed across lines (``jq .`` without ``-c``), or lines
that end with a bare carriage return (classic Mac OS). Each line is then a ``malformed``
finding and the gate fails, but "Expecting property name (column 2)" on every line said
nothing of why; ``layout_note`` says what the file holds and the command that fixes it."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

_HEAD = 1 << 16
# ``}`` then a carriage return with no line feed, then the next object: CR-only line ends
_CR_ONLY = re.compile(r"\}\r(?!\n)[ \t]*\{")


def layout_note(files: list[Path], fmt: str, *, records: int, malformed: int) -> str | None:
    """What the first plain JSON Lines file of ``files`` holds when most of its lines were
    malformed (``malformed`` > ``records``) because of its layout, with what to do; else
    None."""
    if fmt != "jsonl" or malformed <= records or not files:
        return None
    path = files[0]
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return None  # compressed (or standard input's copy, which says so itself)
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD).decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    except OSError:
        return None
    given = shlex.quote(str(path))
    first = head.split("\n", 1)[0]
    if _CR_ONLY.search(first):
        fixed = shlex.quote(str(path.with_name(f"{path.stem}.lf{path.suffix}")))
        return (f"{path} ends its lines with a bare carriage return (\\r, classic Mac OS), "
                f"so it reads as one line: convert them, e.g. tr '\\r' '\\n' < {given} > "
                f"{fixed}")
    if head.startswith("[") and not _values_per_line(head, first):
        return (f"{path} holds a JSON array, not JSON Lines (one object per line): rename "
                f"it, e.g. mv {given} {shlex.quote(str(path.with_suffix('.json')))}")
    if first.rstrip() == "{":
        fixed = shlex.quote(str(path.with_name(f"{path.stem}.compact{path.suffix}")))
        return (f"{path} holds JSON objects pretty-printed across lines, not one object per "
                f"line: rewrite it, e.g. jq -c . {given} > {fixed}")
    return None


def _values_per_line(head: str, first: str) -> bool:
    """Whether the file is JSON Lines of arrays (``[1, 2]`` a line: each a whole value, a
    ``not_an_object`` finding): its first line one JSON value and another line after it.
    Renamed ``.json`` it would be no JSON at all."""
    if not head[len(first):].strip():
        return False  # one line: a JSON array file written on one line
    try:
        json.loads(first)
    except ValueError:
        return False
    return True
