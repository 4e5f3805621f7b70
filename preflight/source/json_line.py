"""One JSON line parsed on its own: a record, or why it is not one.

The line-by-line path of the JSON Lines reader, the JSON-array reader (each element read
one by one) and ``fix`` all judge a record's text here, so the same text gets the same
verdict (``invalid_json``, ``invalid_utf8``, ``not_an_object``, ``too_deep``) wherever it
is read.
Python's ``NaN`` and ``Infinity`` literals and lone surrogate escapes are accepted.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# The deepest record read: deeper is a `too_deep` finding (preflight's own code walks
# records recursively).
MAX_DEPTH = 200


def parse_line(line: bytes) -> tuple[Any, tuple[str, str] | None]:
    """Parse one line: ``(record, None)`` or ``(None, (code, detail))`` for a malformed one."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            return None, ("invalid_utf8", f"byte 0x{line[e.start]:02X} at byte {e.start} "
                                          "is not valid UTF-8")
        try:
            obj = json.loads(text)  # accepts NaN/Infinity and lone surrogate escapes
        except json.JSONDecodeError as e:
            return None, ("invalid_json", f"{e.msg} (column {e.colno})")
        except RecursionError:
            return None, TOO_DEEP
    if not isinstance(obj, dict):
        return None, ("not_an_object", f"a JSON {json_kind_of(obj)}, not an object")
    if line.count(b"{") + line.count(b"[") > MAX_DEPTH and nesting_depth(obj) > MAX_DEPTH:
        return None, TOO_DEEP
    return obj, None


TOO_DEEP = ("too_deep", f"nested too deeply (more than {MAX_DEPTH} levels of objects "
                         "and arrays)")


def nesting_depth(obj: Any) -> int:
    """How deep a parsed value nests objects and arrays (``{"a": 1}`` is 1), without
    recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return deepest


def json_kind_of(obj: Any) -> str:
    if isinstance(obj, list):
        return "array"
    if isinstance(obj, str):
        return "string"
    if isinstance(obj, bool):
        return "boolean"
    return "null" if obj is None else "number"

