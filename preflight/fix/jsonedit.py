"""Editing values inside JSON text in place, so everything else stays as written.

A fix changes text fields only. Re-serialising the whole record would rewrite its other
values (an integer past 64 bits, ``1e400``, ``1.10``, key order, spacing); instead the spans
of the changed values are located in the original text and only they are replaced.
The text must be valid JSON (the record was parsed from it); Python's ``NaN`` and
``Infinity`` literals are accepted. The scan is iterative, so depth cannot overflow it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from preflight.source.array_values import STRING_BODY

_SPACE = re.compile(r"[ \t\r\n]*")
_STRING = re.compile('"' + STRING_BODY, re.S)
_STRUCT = re.compile(r'["\[\]{}]')
_SCALAR = re.compile(r"[^,\]}\s]+")


class KeyOf(str):
    """A path's last step naming an object's key itself (``(*path, KeyOf("k\\u200b"))``), not
    its value: a key renamed in place (a hidden character stripped)."""


Path = tuple[str | int, ...]


def replace_values(text: str, changes: dict[Path, Any]) -> str:
    """``text`` with the value at each path (keys and list indexes from the top-level object)
    replaced by the JSON encoding of the new value."""
    spans = []
    for path, value in changes.items():
        start, end = _locate(text, path)
        spans.append((start, end, dumps(value)))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def dumps(value: Any, default: Any = None) -> str:
    """JSON for a value (NaN literals kept); a lone surrogate (which UTF-8 cannot hold) as
    its \\u escape."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=True, default=default)
    try:
        text.encode()
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, allow_nan=True, default=default)
    return text


def _locate(text: str, path: Path) -> tuple[int, int]:
    start = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    end = _end(text, start)
    for step in path:
        if isinstance(step, KeyOf):
            return _members(text, start, keys=True)[step]
        children = _members(text, start) if isinstance(step, str) else _items(text, start)
        start, end = children[step]  # type: ignore[index]
    return start, end


def _members(text: str, start: int, keys: bool = False) -> dict[str, tuple[int, int]]:
    """The spans of an object's values by key (the last of a repeated key, as parsers do);
    with ``keys``, of the keys themselves."""
    out: dict[str, tuple[int, int]] = {}
    pos = _SPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    while text[pos] != "}":
        key_match = _STRING.match(text, pos)
        assert key_match is not None, "a key must be a string"
        key = json.loads(key_match.group())
        pos = _SPACE.match(text, key_match.end()).end()  # type: ignore[union-attr]
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]  # the colon
        end = _end(text, pos)
        out[key] = key_match.span() if keys else (pos, end)
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        if text[pos] == ",":
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    return out


def _items(text: str, start: int) -> list[tuple[int, int]]:
    out = []
    pos = _SPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    while text[pos] != "]":
        end = _end(text, pos)
        out.append((pos, end))
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        if text[pos] == ",":
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    return out


def _end(text: str, pos: int) -> int:
    """Where the value starting at ``pos`` ends."""
    first = text[pos]
    if first == '"':
        return _STRING.match(text, pos).end()  # type: ignore[union-attr]
    if first not in "[{":
        return _SCALAR.match(text, pos).end()  # type: ignore[union-attr]
    depth, p = 1, pos + 1
    while depth:
        m = _STRUCT.search(text, p)
        assert m is not None, "unbalanced JSON"
        if m.group() == '"':
            p = _STRING.match(text, m.start()).end()  # type: ignore[union-attr]
            continue
        depth += 1 if m.group() in "[{" else -1
        p = m.end()
    return p
