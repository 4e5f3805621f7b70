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

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl

Path = tuple[str | int, ...]
_NAMED = {"i": pl.UInt32, "field": pl.String, "text": pl.String}
_WIDE = 256  # string leaves past which (and past the rows) a column is read value by value
_PLAIN = re.compile(r'[^.\[\]"\\]+')  # a key that a path names as it is


# Appended to a key's path (``meta["so\\u200burce"] (key)``): the finding is in the key,
# not in its value. A key may hide what a value may (a zero-width space, a bidi control):
# keys are read too, but only those that are not plain printable ASCII, so reading them
# costs nothing on ordinary data.
KEY = " (key)"


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def key_characters(detail: str) -> frozenset[str]:
    """The characters that make the quoted keys of a key finding's path odd (``odd_key``):
    ``meta["so\\u200burce"] (key): …`` holds U+200B."""
    path = detail.split(KEY, 1)[0]
    return frozenset(char for quoted in _QUOTED.findall(path)
                     for char in json.loads(f'"{quoted}"')
                     if not (char.isascii() and char.isprintable()))


def odd_key(key: Any) -> bool:
    """Whether a key may hold what the character checks flag: not printable ASCII."""
    return isinstance(key, str) and not (key.isascii() and key.isprintable())


def shown(path: Path) -> str:
    """A path as the findings name it: ``answers.text[0]``; a key that would make it name
    another place (``k.v[0]``) or hides characters is quoted (``m["k.v[0]"]``: ``key_step``)."""
    out = key_step(str(path[0]), first=True)
    for step in path[1:]:
        out += f"[{step}]" if isinstance(step, int) else key_step(step)
    return out


def key_step(key: str, *, first: bool = False) -> str:
    """One key of a path: ``.key`` (``key`` first), or ``["key"]`` — a JSON string, every
    character that is not printable escaped (``["k\\u200b"]``) — for a key that holds
    ``.``, ``[``, ``]``, ``"`` or ``\\``, is empty, or holds such a character."""
    if _PLAIN.fullmatch(key) and key.isprintable():
        return key if first else f".{key}"
    return f'["{escaped(key)}"]'


def escaped(key: str) -> str:
    """``key`` as the inside of a JSON string, every character that is not printable (a
    zero-width space, a bidi control, a tag character) as ``\\uXXXX`` (a pair past U+FFFF)."""
    out = []
    for ch in json.dumps(key, ensure_ascii=False)[1:-1]:
        if ch.isprintable():
            out.append(ch)
        else:
            out.append(json.dumps(ch)[1:-1])  # \u200b, \udb40\udc41
    return "".join(out)


def holds_nested_strings(dtype: Any) -> bool:
    """Whether a column of ``dtype`` holds strings inside an object, a map or a list of
    lists (a plain list of strings is ``string_fields``')."""
    if isinstance(dtype, pl.Map):
        return _has_strings(dtype.key) or _has_strings(dtype.value)
    if isinstance(dtype, pl.Struct):
        return _has_strings(dtype)
    if isinstance(dtype, pl.List | pl.Array):
        inner = dtype.inner
        return isinstance(inner, pl.Struct | pl.List | pl.Array) and _has_strings(inner)
    return False


def _has_strings(dtype: Any) -> bool:
    if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum):
        return True
    if isinstance(dtype, pl.Struct):  # a field's name is read too (``odd_key``)
        return any(odd_key(f.name) or _has_strings(f.dtype) for f in dtype.fields)
    if isinstance(dtype, pl.List | pl.Array):
        return _has_strings(dtype.inner)
    if isinstance(dtype, pl.Map):
        return _has_strings(dtype.key) or _has_strings(dtype.value)
    return False


def typed_items(col: pl.Series) -> pl.DataFrame:
    """``i`` (the record), ``field`` (the path) and ``text`` of every string in a typed
    column of objects and lists; nulls left out (``typed_parts``, named)."""
    return named(typed_parts(col))


# Strings found at one shape of path: the path's text around its list indexes, and a
# frame of ``i``, ``text`` and one index column (``k0``, ``k1`` ...) per list on the way;
# or, read value by value, None and a frame already named (``i``, ``field``, ``text``).
Part = tuple[tuple[str, ...] | None, pl.DataFrame]


def typed_parts(col: pl.Series) -> list[Part]:
    """Every string in a typed column of objects and lists, its path not yet written out:
    a check keeps few of them (those it flags), so only those are named (``named``); a
    path string for each of 200 strings per record cost gigabytes. A column holding maps
    (Parquet's ``map<string, string>``, metadata from Spark) is read value by value: a key
    names its value there (``meta.source``), as in the JSON the map stands for."""
    if _has_map(col.dtype) or _leaves(col.dtype) > max(len(col), _WIDE):
        # A wide object (pandas' df.to_json() read as one record: a field per row) is
        # read value by value too: each of its fields costs the typed walk polars calls
        # whatever the rows, minutes for 10,000 fields.
        return [(None, raw_items(col.name, col.to_list()))]
    parts: list[Part] = []
    _walk(pl.Series("i", np.arange(len(col), dtype=np.uint32)), [],
          (key_step(col.name, first=True),), col, parts)
    return parts


def named(parts: list[Part], where: pl.Expr | None = None) -> pl.DataFrame:
    """``i``, ``field``, ``text`` of the strings in ``parts`` that ``where`` holds for."""
    out = [pl.DataFrame(schema=_NAMED)]
    for pieces, frame in parts:
        if where is not None:
            frame = frame.filter(where)
        if pieces is not None:
            path: list[pl.Expr] = [pl.lit(pieces[0])]
            for n, piece in enumerate(pieces[1:]):
                path += [pl.lit("["), pl.col(f"k{n}").cast(pl.String), pl.lit("]" + piece)]
            frame = frame.select("i", pl.concat_str(path).alias("field"), "text")
        out.append(frame)
    return pl.concat(out).sort("i", maintain_order=True)


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


def _walk(i: pl.Series, ks: list[pl.Series], pieces: tuple[str, ...], col: pl.Series,
          parts: list[Part]) -> None:
    dtype = col.dtype
    if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum):
        frame = pl.DataFrame({"i": i, "text": col.cast(pl.String),
                              **{f"k{n}": k for n, k in enumerate(ks)}})
        parts.append((pieces, frame.filter(pl.col("text").is_not_null())))
    elif isinstance(dtype, pl.Struct):
        # All fields at once: struct.field looks a name up among all of them.
        for f, inner in zip(dtype.fields, col.struct.unnest().get_columns(), strict=True):
            at = (*pieces[:-1], pieces[-1] + key_step(f.name))
            if odd_key(f.name):  # the key, where a value is held under it
                held = inner.is_not_null()
                frame = pl.DataFrame({"i": i, "text": pl.Series([f.name] * len(inner)),
                                      **{f"k{n}": k for n, k in enumerate(ks)}})
                parts.append(((*at[:-1], at[-1] + KEY), frame.filter(held)))
            if _has_strings(f.dtype):
                _walk(i, ks, at, inner, parts)
    elif isinstance(dtype, pl.List | pl.Array) and _has_strings(dtype.inner):
        if isinstance(dtype, pl.Array):
            col = col.cast(pl.List(dtype.inner))
        at, k, items = exploded(col)
        rows = pl.Series(at)
        _walk(i.gather(rows), [*(x.gather(rows) for x in ks), pl.Series(k)], (*pieces, ""),
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


def turn_items(name: str, col: pl.Series | None, values: list[Any] | None) -> list[Part]:
    """The strings of each turn of a messages field but its ``content`` (read as the text),
    and its keys that may hide characters (``messages[0]["ro\\u200ble"] (key)``): its
    ``role``, ``name``, tool calls (``messages[2].tool_calls[0].function.arguments``), a
    content's parts when it is a list of them (``messages[0].content[1].text``), as
    ``typed_parts``; ``values`` for a column of mixed types, else the typed ``col``."""
    if values is not None or col is None or _has_map(col.dtype) or not (
            isinstance(col.dtype, pl.List) and isinstance(col.dtype.inner, pl.Struct)):
        turns = values if values is not None else (col.to_list() if col is not None else [])
        out: dict[str, list[Any]] = {"i": [], "field": [], "text": []}
        for i, value in enumerate(turns):
            for path, text in turn_strings(value, name):
                out["i"].append(i)
                out["field"].append(shown(path))
                out["text"].append(text)
            if isinstance(value, list):  # the turns' keys, their own and deeper
                for path, key in keys_in(value, (name,)):
                    out["i"].append(i)
                    out["field"].append(shown(path) + KEY)
                    out["text"].append(key)
        return [(None, pl.DataFrame(out, schema=_NAMED))]
    at, k, items = exploded(col)
    i, ks = pl.Series(at.astype(np.uint32)), [pl.Series(k)]
    parts: list[Part] = []
    inner = items.struct.unnest().get_columns()
    for f, values_of in zip(col.dtype.inner.fields, inner, strict=True):
        if odd_key(f.name):  # a turn's own key, where a value is held under it
            frame = pl.DataFrame({"i": i, "text": pl.Series([f.name] * len(values_of)),
                                  "k0": ks[0]})
            parts.append(((key_step(name, first=True), key_step(f.name) + KEY),
                          frame.filter(values_of.is_not_null())))
        if (f.name != "content" or _is_parts(f.dtype)) and _has_strings(f.dtype):
            _walk(i, ks, (key_step(name, first=True), key_step(f.name)), values_of, parts)
    return parts


def turn_strings(turns: Any, name: str) -> Iterator[tuple[Path, str]]:
    """``(path, string)`` of each string in a messages value but the turns' contents read
    as the text: a content given as a list of parts (multimodal, ``[{"type": "text",
    "text": ...}, {"type": "image_url", ...}]``) is read inside, as a turn's other strings
    (``messages[0].content[0].text``)."""
    if not isinstance(turns, list):
        return
    for t, turn in enumerate(turns):
        if isinstance(turn, dict):
            for key, value in turn.items():
                if key != "content" or isinstance(value, list):
                    yield from strings_in(value, (name, t, key))


def _is_parts(dtype: Any) -> bool:
    """Whether a typed ``content`` is a list of parts (not the string read as the text)."""
    return isinstance(dtype, pl.List | pl.Array)


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
            for path, key in keys_in(value, (name,)):
                out["i"].append(i)
                out["field"].append(shown(path) + KEY)
                out["text"].append(key)
    return pl.DataFrame(out, schema=_NAMED)


def keys_in(value: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """``(path, key)`` for each ``odd_key`` of an object inside ``value`` (``path`` names
    the value the key holds)."""
    if isinstance(value, list | tuple):
        for k, item in enumerate(value):
            yield from keys_in(item, (*path, k))
    elif isinstance(value, dict):
        for key, item in value.items():
            if odd_key(key):
                yield (*path, key), key
            yield from keys_in(item, (*path, key))


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
    """The value at ``path`` inside ``value`` (a path of ``strings_in``); None where a key
    on the way is gone (renamed by a fix: a hidden character stripped from it)."""
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def mended(value: Any, mend: Callable[[str], str], *, keys: bool = False) -> Any:
    """``value`` with every string inside it mended (with ``keys``, objects' keys too, but
    in an object where two would become one: ``key_clash``); the same object when nothing
    changed (so a record's unchanged values stay as read), else a copy of what changed."""
    if isinstance(value, str):
        new = mend(value)
        return value if new == value else new
    if isinstance(value, list | tuple):
        items = [mended(item, mend, keys=keys) for item in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        fields = {key: mended(item, mend, keys=keys) for key, item in value.items()}
        if keys and any(odd_key(k) for k in value):
            renamed = {(mend(k) if odd_key(k) else k): v for k, v in fields.items()}
            if len(renamed) == len(fields):
                fields = renamed
        if list(fields) == list(value) and all(fields[k] is v for k, v in value.items()):
            return value
        return fields
    return value


def key_clash(value: Any, mend: Callable[[str], str], path: Path, *, schema: bool
              ) -> str | None:
    """Why the keys inside ``value`` cannot be mended, naming the first such place: two
    keys of one object (or map) that ``mend`` makes one (a value would be lost), or with
    ``schema`` (Parquet, Arrow: an object is a struct) a struct field ``mend`` changes —
    its name is the schema's; else None."""
    if isinstance(value, dict):
        olds = list(value)
        news = [mend(k) if odd_key(k) else k for k in olds]
        # A struct field holding no value in this record: the clean output's schema has
        # its name mended (``fix.writers.renames``), losing nothing; a column's is kept.
        if schema and (changed := [o for o, n in zip(olds, news, strict=True)
                                   if o != n and (not path or value[o] is not None)]):
            at = changed[0]
            return (f"{shown((*path, at)) if path else key_step(at, first=True)}{KEY}: a "
                    "struct field or column name, which is the schema's: not renamed")
        if len(set(news)) < len(news):
            at = next(o for o, n in zip(olds, news, strict=True) if o != n and news.count(n) > 1)
            return (f"{shown((*path, at)) if path else key_step(at, first=True)}{KEY}: "
                    "would be another key of the same object once mended")
        items: Iterator[tuple[Any, Any]] = iter(value.items())
    elif isinstance(value, list | tuple):
        pairs = [p for p in value if isinstance(p, tuple) and len(p) == 2
                 and isinstance(p[0], str)]
        if schema and pairs and len(pairs) == len(value):  # a map's entries
            news = [mend(k) if odd_key(k) else k for k, _ in pairs]
            if len(set(news)) < len(news) and any(odd_key(k) for k, _ in pairs):
                return (f"{shown(path)}: two keys of a map would be one once mended")
        items = enumerate(value)
    else:
        return None
    for step, item in items:
        if why := key_clash(item, mend, (*path, step), schema=schema):
            return why
    return None
