"""One JSON line parsed on its own: a record, or why it is not one.

The line-by-line path of the JSON Lines reader, the JSON-array reader (each element read
one by one) and ``fix`` all judge a record's text here, so the same text gets the same
verdict (``invalid_json``, ``invalid_utf8``, ``not_an_object``, ``too_deep``,
``duplicate_key``) wherever it is read.
Python's ``NaN`` and ``Infinity`` literals and lone surrogate escapes are accepted.

A key given twice in one object (``{"text": "a", "text": "b"}``) is ``duplicate_key``: JSON
leaves its meaning open (Python keeps the last value, other readers the first, Arrow's
reader and so ``datasets`` refuse the file), so the checks could judge a value training
never sees.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# The deepest record read: deeper is a `too_deep` finding (preflight's own code walks
# records recursively).
MAX_DEPTH = 200
# A key's end: every key in a line's text matches, so a line with no more matches than its
# parsed objects have keys cannot hold a key twice (string values can match too: those
# lines are checked exactly).
_KEY_END = re.compile(rb'"[ \t\r\n]*:')
# 20 digits in a row may be an integer past what orjson reads exactly (it makes one past
# 64 bits a rounded float: a label 2**70 was shown as 1.1805916207174113e+21); Python's
# json reads it exactly.
_LONG_DIGITS = re.compile(rb"[0-9]{20}")


def parse_line(line: bytes) -> tuple[Any, tuple[str, str] | None]:
    """Parse one line: ``(record, None)`` or ``(None, (code, detail))`` for a malformed one."""
    try:
        if _LONG_DIGITS.search(line):  # orjson reads an integer past 64 bits as a float
            raise orjson.JSONDecodeError("", "", 0)
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
    if len(_KEY_END.findall(line)) > key_count(obj):
        key = duplicate_key(line)
        if key is not None:
            shown = key if len(key) <= 40 else key[:40] + "…"
            return None, ("duplicate_key", f"key {json.dumps(shown, ensure_ascii=False)} "
                                           "appears twice in one object")
    return obj, None


TOO_DEEP = ("too_deep", f"nested too deeply (more than {MAX_DEPTH} levels of objects "
                         "and arrays)")


class _Twice(Exception):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _Twice(key)
        obj[key] = value
    return obj


def duplicate_key(line: bytes) -> str | None:
    """The first key that one of the line's objects gives twice, or None."""
    try:
        json.loads(line.decode("utf-8"), object_pairs_hook=_unique_pairs)
    except _Twice as e:
        return str(e.args[0])
    except (ValueError, RecursionError):  # parsed already: not expected
        return None
    return None


def key_count(obj: Any) -> int:
    """How many keys the parsed value's objects hold, at every level, without recursion."""
    count, stack = 0, [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            count += len(value)
            stack.extend(v for v in value.values() if isinstance(v, dict | list))
        elif isinstance(value, list):
            stack.extend(v for v in value if isinstance(v, dict | list))
    return count


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

