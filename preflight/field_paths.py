"""A text field nested in objects: ``data.text`` names the string at ``record["data"]["text"]``.

A corpus exported from a document store keeps its text one level (or more) down
(``{"id": 1, "data": {"text": ..., "lang": "en"}}``; a Parquet/Arrow struct column; a
``datasets`` struct feature). A text field may name it by its path, objects at any depth and
no list on the way (which item of a list would be *the* text?). A real top-level column whose
name holds the dot (a key ``"data.text"``) wins over the path; a column whose own name holds
a dot is found as the longest such prefix (``"a.b"`` then ``c`` for ``a.b.c``).

A record whose object is null, missing or not an object at all (a string where the others
hold an object) has no value there: the ``empty`` check's ``missing_field``, never a crash.
"""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl

from preflight.json_types import dtype_kind

Steps = tuple[str, ...]

# The names a text field goes by, in the order inference prefers them.
TEXT_NAMES = ("text", "content", "document", "body", "article", "passage", "sentence")


def split_path(name: str, columns: Any) -> Steps | None:
    """``name``'s steps when it names a field inside an object column, else None: it is not
    a top-level column (one by that very name wins) and a prefix of it up to a dot is. A key
    that holds a dot or a bracket is named as findings name it, quoted: ``data["a.b"]``."""
    if name in columns:
        return None
    if '["' in name:
        steps = quoted_steps(name)
        return steps if steps is not None and len(steps) > 1 and steps[0] in columns else None
    if "." not in name:
        return None
    parts = name.split(".")
    for k in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:k])
        if head in columns:
            return (head, *parts[k:])
    return None


_STEP = re.compile(r'\.?([^.\[\]"\\]+)|\[("(?:[^"\\]|\\.)*")\]')


def quoted_steps(name: str) -> Steps | None:
    """The keys of a path written as findings write it (``data["a.b"].c``, ``["k.v"].x``:
    ``key_step``), or None when ``name`` is not such a path."""
    steps, at = [], 0
    while at < len(name):
        m = _STEP.match(name, at)
        if m is None or (m[1] is not None and at > 0 and not m[0].startswith(".")):
            return None
        if m[1] is None:
            try:
                steps.append(json.loads(m[2]))
            except ValueError:
                return None
        else:
            steps.append(m[1])
        at = m.end()
    return tuple(steps) or None


def record_value(record: dict[str, Any], name: str) -> Any:
    """A record's value in the text field ``name``: its top-level key by that name when it has
    one, else the value at the nested path (None where the path breaks)."""
    if name in record:
        return record[name]
    steps = split_path(name, record)
    return value_at(record, steps) if steps else None


def value_at(value: Any, steps: Steps) -> Any:
    """The value at ``steps`` through objects, or None where one is null, missing or not an
    object (a list is not followed)."""
    for step in steps:
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def with_value(record: dict[str, Any], steps: Steps, new: Any) -> dict[str, Any]:
    """``record`` with the value at ``steps`` replaced: a copy of each object on the way, the
    rest shared (so the writers see only that value changed)."""
    out = dict(record)
    inner = out
    for step in steps[:-1]:
        inner[step] = dict(inner[step])
        inner = inner[step]
    inner[steps[-1]] = new
    return out


def path_column(col: pl.Series, steps: Steps) -> pl.Series | None:
    """The values at ``steps[1:]`` inside a typed column (``col`` is ``steps[0]``), null where
    an object on the way is; None when the column's type has no such field (a null column,
    a field the objects of this batch lack)."""
    for step in steps[1:]:
        dtype = col.dtype
        if not isinstance(dtype, pl.Struct) or step not in {f.name for f in dtype.fields}:
            return None
        col = col.struct.field(step)
    return col.alias(".".join(steps))


def path_problem(name: str, steps: Steps, dtype: Any, values: list[Any] | None) -> str | None:
    """Why the text field ``name`` (``steps``) can name no string in a column of ``dtype``
    (``values``: the Python values of a column of mixed JSON types), saying what is there;
    None when it can, or when this batch cannot tell (every object on the way null)."""
    if values is not None:
        return _raw_problem(name, steps, values)
    where = steps[0]
    for step in steps[1:]:
        if dtype == pl.Null:
            return None
        if isinstance(dtype, pl.List | pl.Array):
            return _listed(name, where)
        if not isinstance(dtype, pl.Struct):
            return f"{name}: {where!r} holds {_kind(dtype)}, not objects"
        fields = {f.name: f.dtype for f in dtype.fields}
        if step not in fields:
            return _no_field(name, where, step, list(fields))
        dtype, where = fields[step], f"{where}.{step}"
    if isinstance(dtype, pl.List | pl.Array):
        return _listed(name, where)
    return None


def _raw_problem(name: str, steps: Steps, values: list[Any]) -> str | None:
    level = list(values)
    where = steps[0]
    for step in steps[1:]:
        objects = [v for v in level if isinstance(v, dict)]
        if not objects:
            if any(isinstance(v, list) for v in level):
                return _listed(name, where)
            if all(v is None for v in level):
                return None
            return f"{name}: {where!r} holds no object in the first records"
        keys = list(dict.fromkeys(k for v in objects for k in v))
        if step not in keys:
            return _no_field(name, where, step, keys)
        level, where = [v.get(step) for v in objects], f"{where}.{step}"
    if all(isinstance(v, list) for v in level if v is not None) and any(
            isinstance(v, list) for v in level):
        return _listed(name, where)
    return None


def _listed(name: str, where: str) -> str:
    return (f"{name}: {where!r} holds lists, and a text field's path is not followed into "
            "a list (which item would be the text?); name a string reached through objects "
            "only")


def _no_field(name: str, where: str, step: str, keys: list[str]) -> str:
    shown = ", ".join(map(repr, keys[:20])) or "none"
    more = f" and {len(keys) - 20:,} more" if len(keys) > 20 else ""
    return (f"{name}: no field {step!r} in object {where!r}; fields found in that object: "
            f"{shown}{more}")


def _kind(dtype: Any) -> str:
    kind = dtype_kind(dtype)
    return {"string": "strings", "integer": "integers", "number": "numbers",
            "boolean": "booleans"}.get(kind, kind)


def nested_text_paths(schema: Any, raw: dict[str, list[Any]], names: tuple[str, ...],
                      *, depth: int = 8) -> list[str]:
    """For zero-config inference: per object column, the path of its string field by a text
    name (the first of ``names`` found, through objects at any depth, lists not followed);
    a column of mixed JSON types (``raw``) counts the objects its records hold."""
    out = []
    for column, dtype in schema.items():
        if column in raw:
            found = _raw_text_path(raw[column], (column,), names, depth)
        else:
            found = _typed_text_path(dtype, (column,), names, depth)
        if found is not None:
            out.append(".".join(found))
    return out


def _typed_text_path(dtype: Any, at: Steps, names: tuple[str, ...], depth: int
                     ) -> Steps | None:
    if not isinstance(dtype, pl.Struct) or not depth:
        return None
    fields = {f.name: f.dtype for f in dtype.fields}
    name = next((n for n in names if fields.get(n) == pl.String), None)
    if name is not None:
        return (*at, name)
    for key, inner in fields.items():
        if (found := _typed_text_path(inner, (*at, key), names, depth - 1)) is not None:
            return found
    return None


def _raw_text_path(values: list[Any], at: Steps, names: tuple[str, ...], depth: int
                   ) -> Steps | None:
    objects = [v for v in values if isinstance(v, dict)]
    if not objects or not depth:
        return None
    for name in names:
        held = [v[name] for v in objects if v.get(name) is not None]
        if held and sum(isinstance(v, str) for v in held) * 2 >= len(held):
            return (*at, name)
    for key in dict.fromkeys(k for v in objects for k in v):
        inner = [v.get(key) for v in objects]
        if (found := _raw_text_path(inner, (*at, key), names, depth - 1)) is not None:
            return found
    return None


def object_text_hint(batch: Any, name: str) -> str:
    """For a text field ``name`` that holds objects (schema's ``wrong_type``): how to name
    the string inside them (``; name the string inside it: --text-field data.text``)."""
    raw = {name: batch.raw[name]} if name in batch.raw else {}
    found = nested_text_paths({name: batch.schema[name]}, raw, TEXT_NAMES)
    if found:
        return f"; name the string inside it by its path: --text-field {found[0]}"
    return f"; name the string inside it by its path: --text-field {name}.KEY"
