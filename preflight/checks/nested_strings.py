"""Strings nested in a record's objects and lists, at any depth.

A SQuAD record's ``answers`` is an object of lists (``{"text": ["Paris"], "answer_start":
[7]}``), a web crawl's ``meta`` an object (``{"title": ..., "url": ...}``), a QA corpus's
``passages`` a list of objects: a zero-width character or a bidi control in any of them
passed unseen, as only top-level strings and lists of strings were read. The character
checks read them all, named by their path (``answers.text[0]``, ``passages[2].title``), and
``fix`` mends them in place, every other value and every list's length kept.

A top-level list of strings (``tokens``) takes the fast path in ``string_fields``; this
module walks the rest: a typed column with polars (a struct's fields, a list's items, down
to the strings), a column of mixed JSON types value by value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl

Path = tuple[str | int, ...]
_NAMED = {"i": pl.UInt32, "field": pl.String, "text": pl.String}
_WIDE = 256  # string leaves past which (and past the rows) a column is read value by value


def shown(path: Path) -> str:
    """A path as the findings name it: ``answers.text[0]``."""
    out = str(path[0])
    for step in path[1:]:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


def holds_nested_strings(dtype: Any) -> bool:
    """Whether a column of ``dtype`` holds strings inside an object, a map or a list of
    lists (a plain list of strings is ``string_fields``')."""
    if isinstance(dtype, pl.Map):
        return _has_strings(dtype.key) or _has_strings(dtype.value)
    if isinstance(dtype, pl.Struct):
        return any(_has_strings(f.dtype) for f in dtype.fields)
    if isinstance(dtype, pl.List | pl.Array):
        inner = dtype.inner
        return isinstance(inner, pl.Struct | pl.List | pl.Array) and _has_strings(inner)
    return False


def _has_strings(dtype: Any) -> bool:
    if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum):
        return True
    if isinstance(dtype, pl.Struct):
        return any(_has_strings(f.dtype) for f in dtype.fields)
    if isinstance(dtype, pl.List | pl.Array):
        return _has_strings(dtype.inner)
    if isinstance(dtype, pl.Map):
        return _has_strings(dtype.key) or _has_strings(dtype.value)
    return False


def typed_items(col: pl.Series) -> pl.DataFrame:
    """``i`` (the record), ``field`` (the path) and ``text`` of every string in a typed
    column of objects and lists; nulls left out. A column holding maps (Parquet's
    ``map<string, string>``, metadata from Spark) is read value by value: a key names its
    value there (``meta.source``), as in the JSON the map stands for."""
    if _has_map(col.dtype) or _leaves(col.dtype) > max(len(col), _WIDE):
        # A wide object (pandas' df.to_json() read as one record: a field per row) is
        # read value by value too: each of its fields costs the typed walk polars calls
        # whatever the rows, minutes for 10,000 fields.
        return raw_items(col.name, col.to_list())
    n = len(col)
    parts = [pl.DataFrame(schema=_NAMED)]
    _walk(pl.Series("i", np.arange(n, dtype=np.uint32)),
          pl.Series("field", [col.name] * n, dtype=pl.String), col, parts)
    return pl.concat(parts)


def _leaves(dtype: Any) -> int:
    """How many strings a value of ``dtype`` holds at fixed paths (a list counts once)."""
    if isinstance(dtype, pl.Struct):
        return sum(_leaves(f.dtype) for f in dtype.fields)
    if isinstance(dtype, pl.List | pl.Array):
        return _leaves(dtype.inner)
    return 1


def _has_map(dtype: Any) -> bool:
    if isinstance(dtype, pl.Map):
        return True
    if isinstance(dtype, pl.Struct):
        return any(_has_map(f.dtype) for f in dtype.fields)
    if isinstance(dtype, pl.List | pl.Array):
        return _has_map(dtype.inner)
    return False


def _walk(i: pl.Series, field: pl.Series, col: pl.Series, parts: list[pl.DataFrame]) -> None:
    dtype = col.dtype
    if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum):
        part = pl.DataFrame({"i": i, "field": field, "text": col.cast(pl.String)})
        parts.append(part.filter(pl.col("text").is_not_null()))
    elif isinstance(dtype, pl.Struct):
        # All fields at once: struct.field looks a name up among all of them.
        for f, inner in zip(dtype.fields, col.struct.unnest().get_columns(), strict=True):
            if _has_strings(f.dtype):
                _walk(i, field + f".{f.name}", inner, parts)
    elif isinstance(dtype, pl.List | pl.Array) and _has_strings(dtype.inner):
        if isinstance(dtype, pl.Array):
            col = col.cast(pl.List(dtype.inner))
        at, k, items = exploded(col)
        rows = pl.Series(at)
        _walk(i.gather(rows), field.gather(rows) + "[" + pl.Series(k).cast(pl.String) + "]",
              items, parts)


def exploded(col: pl.Series) -> tuple[np.ndarray, np.ndarray, pl.Series]:
    """A list column's items in order, with the row each comes from and its index in its
    list. Only non-empty lists are exploded (an empty or null one gives a null row in some
    polars versions, none in others): an item's index is its place less its list's start."""
    lengths = col.list.len().fill_null(0).to_numpy().astype(np.int64)
    full = lengths > 0
    counts = lengths[full]
    starts = np.cumsum(counts) - counts
    k = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)
    return np.repeat(np.flatnonzero(full), counts), k, col.filter(pl.Series(full)).explode()


def turn_items(name: str, col: pl.Series | None, values: list[Any] | None) -> pl.DataFrame:
    """The strings of each turn of a messages field but its ``content`` (read as the text):
    its ``role``, ``name``, tool calls (``messages[2].tool_calls[0].function.arguments``), as
    ``typed_items``; ``values`` for a column of mixed types, else the typed ``col``."""
    if values is not None or col is None or _has_map(col.dtype) or not (
            isinstance(col.dtype, pl.List) and isinstance(col.dtype.inner, pl.Struct)):
        turns = values if values is not None else (col.to_list() if col is not None else [])
        out: dict[str, list[Any]] = {"i": [], "field": [], "text": []}
        for i, value in enumerate(turns):
            for path, text in turn_strings(value, name):
                out["i"].append(i)
                out["field"].append(shown(path))
                out["text"].append(text)
        return pl.DataFrame(out, schema=_NAMED)
    at, k, items = exploded(col)
    i = pl.Series(at.astype(np.uint32))
    field = (pl.Series([name] * len(at), dtype=pl.String) + "["
             + pl.Series(k).cast(pl.String) + "]")
    parts = [pl.DataFrame(schema=_NAMED)]
    for f in col.dtype.inner.fields:
        if f.name != "content" and _has_strings(f.dtype):
            _walk(i, field + f".{f.name}", items.struct.field(f.name), parts)
    return pl.concat(parts).sort("i", maintain_order=True)


def turn_strings(turns: Any, name: str) -> Iterator[tuple[Path, str]]:
    """``(path, string)`` of each string in a messages value but the turns' contents."""
    if not isinstance(turns, list):
        return
    for t, turn in enumerate(turns):
        if isinstance(turn, dict):
            for key, value in turn.items():
                if key != "content":
                    yield from strings_in(value, (name, t, key))


def raw_items(name: str, values: list[Any]) -> pl.DataFrame:
    """``typed_items`` for a column of mixed JSON types, read value by value: the strings
    inside its lists and objects (a top-level string is ``string_fields``')."""
    out: dict[str, list[Any]] = {"i": [], "field": [], "text": []}
    for i, value in enumerate(values):
        if isinstance(value, list | dict):
            for path, text in strings_in(value, (name,)):
                out["i"].append(i)
                out["field"].append(shown(path))
                out["text"].append(text)
    return pl.DataFrame(out, schema=_NAMED)


def strings_in(value: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """``(path, string)`` for each string inside ``value``'s lists and objects (and the
    ``(key, value)`` pairs a map reads as from Arrow)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list | tuple):
        for k, item in enumerate(value):
            yield from strings_in(item, (*path, k))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(item, (*path, key))


def value_at(value: Any, path: Path) -> Any:
    """The value at ``path`` inside ``value`` (a path of ``strings_in``)."""
    for step in path:
        value = value[step]
    return value


def mended(value: Any, mend: Callable[[str], str]) -> Any:
    """``value`` with every string inside it mended; the same object when nothing changed
    (so a record's unchanged values stay as read), else a copy of what changed."""
    if isinstance(value, str):
        new = mend(value)
        return value if new == value else new
    if isinstance(value, list | tuple):
        items = [mended(item, mend) for item in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        fields = {key: mended(item, mend) for key, item in value.items()}
        return value if all(fields[k] is v for k, v in value.items()) else fields
    return value
