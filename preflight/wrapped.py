"""A ``.json`` file that is one object holding the records in a list (``{"data": [...]}``).

Read as JSON Lines it is one record, and on one line (as ``json.dump`` writes it) the gate
would pass having checked none of the records inside (with no text field, or with a
``"version"`` string beside the list as the text). The gate fails on it instead and ``fix``
refuses it, both saying how to extract the records.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from preflight.jq import jq_extract
from preflight.report.model import Report

# The source warning's words for a .json file that is one object (pipeline's note).
ONE_OBJECT = "holds one JSON object"
# Parsed whole to find the list only up to this size; past it, only a list that follows
# scalar members at the head of the file is found.
_PARSE_MAX = 256 << 20
# The rules that read no field: a record they pass was not checked.
_FORMAT_ONLY = {"malformed", "schema"}
# The character checks read every string, those in lists too: with no text field they read
# the wrapped texts ({"data": ["a", "b"]}) as one record's list, which checks no record.
_CHARACTERS = {"invisible_unicode", "encoding"}
_SCALAR = r'(?:"(?:[^"\\]|\\.)*"|-?[\d.eE+-]+|true|false|null)'
_KEY = r'"((?:[^"\\]|\\.)*)"'
_HEAD = re.compile(rf'\s*\{{\s*(?:{_KEY}\s*:\s*{_SCALAR}\s*,\s*)*{_KEY}\s*:\s*\[\s*\{{')


def wrapped_records(report: Report) -> str | None:
    """Why the gate fails on ``report``'s source when it is one JSON object holding a list
    of two or more objects (the records, wrapped), or one in which no rule read anything;
    else None. A chat record (a messages field found) is one record, whatever other lists
    it holds."""
    src = report.source
    if (src.records != 1 or src.format != "json" or report.rules_file.fields.get("messages")
            or not any(ONE_OBJECT in w for w in src.warnings)):
        return None
    keys = _wrapping_keys(Path(src.path))
    name = Path(src.path).name
    if keys is None:
        # No list of objects found, yet no rule read a thing in it ({"data": ["a", "b"]},
        # a list of one object): one record with nothing checked is no pass either.
        read = {r.check for r in report.rules} - _FORMAT_ONLY
        if "text" not in report.rules_file.fields:
            read -= _CHARACTERS
        if read:
            return None
        return (f"{name} is one JSON object and nothing in it was checked (no text, label or "
                "number among its top-level members); if it holds the records, extract them "
                f"first, e.g. {jq_extract(('data',), src.path)} (with the key that holds them)")
    where = ".".join(keys)
    return (f"{name} is one JSON object whose records are in a list inside it ({where!r}; "
            f"none of them was checked): extract them first, e.g. {jq_extract(keys, src.path)}")


def _wrapping_keys(path: Path) -> tuple[str, ...] | None:
    """The keys to the first list of two or more objects in the file's object: a member
    of it, or a member of an object member (``{"splits": {"train": [...]}}``)."""
    with open(path, "rb") as f:
        head = f.read(1 << 16).decode("utf-8", "replace").lstrip("\ufeff")
    if (m := _HEAD.match(head)) and _lists_objects(head[m.end() - 1:]):
        return (json.loads(f'"{m.group(2)}"'),)
    if path.stat().st_size > _PARSE_MAX:
        return None
    try:
        whole = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        return None
    if not isinstance(whole, dict):
        return None
    if (key := _records_member(whole)) is not None:
        return (key,)
    return next(((str(k), inner) for k, v in whole.items() if isinstance(v, dict)
                 and (inner := _records_member(v)) is not None), None)


def _records_member(obj: dict) -> str | None:
    """The first member of ``obj`` that is a list of two or more objects."""
    return next((str(k) for k, v in obj.items() if isinstance(v, list) and len(v) >= 2
                 and all(isinstance(x, dict) for x in v[:2])), None)


def _lists_objects(rest: str) -> bool:
    """Whether the list starting at ``rest`` (its first object's ``{``) holds a second
    object: one object is one record's list (tool calls, spans), not the records."""
    decoder = json.JSONDecoder()
    try:
        _, end = decoder.raw_decode(rest)
    except ValueError:
        return False  # the first object runs past the head: decided by the whole parse
    return bool(re.match(r"\s*,\s*\{", rest[end:]))
