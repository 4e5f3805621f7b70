"""Every string field, for the character checks (``invisible_unicode``, ``encoding``).

A hidden character is one wherever it is: in an Alpaca-style record the instruction beside
the response (the longest field, inferred as the text) can carry a zero-width character or a
bidi control as well. With ``all_string_fields`` (the default) these checks read every other
top-level string field of a record too (an instruction, a url, an id), and every string
inside a top-level list (an NER corpus's ``tokens``, ``tags``, ``choices``, ``answers``:
a zero-width space inside one token passed unseen) or nested deeper in objects and lists
(``preflight.checks.nested_strings``), and ``fix`` mends them the same way, keeping each
list's length; the text-only checks (empty, duplicates, token length) keep ``fields.text``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import polars as pl
from pydantic import Field, StrictBool

from preflight.batch import Batch
from preflight.checks.base import Check, Context, Params
from preflight.checks.nested_strings import (
    KEY,
    Part,
    Path,
    exploded,
    holds_nested_strings,
    key_step,
    named,
    odd_key,
    raw_items,
    strings_in,
    turn_items,
    typed_parts,
)
from preflight.field_paths import split_path

_ITEMS = {"i": pl.UInt32, "name": pl.String, "k": pl.Int64, "text": pl.String}


class CharacterParams(Params):
    all_string_fields: StrictBool = Field(
        True,
        description="Also read every other top-level string field (an instruction beside the "
        "response, a url, an id) and the strings in top-level lists (tokens, choices), not "
        "only fields.text and messages.",
    )


def string_fields(batch: Batch, ctx: Context) -> tuple[str, ...]:
    """``ctx``'s text fields, then the batch's other string columns in their order (the
    messages field aside: its contents are read as messages)."""
    text = ctx.text_fields
    others = tuple(name for name, dtype in batch.schema.items()
                   if dtype == pl.String and name not in text and name != ctx.messages)
    return (*text, *others)


def string_lists(batch: Batch, text_fields: tuple[str, ...], messages: str | None
                 ) -> tuple[str, ...]:
    """The batch's top-level columns typed as lists of strings, messages aside (a text
    field holding lists is no text: schema's ``wrong_type``; its strings are read here)."""
    return tuple(name for name, dtype in batch.schema.items()
                 if name != messages and name not in batch.raw
                 and isinstance(dtype, pl.List | pl.Array) and _textual(dtype.inner))


def nested_columns(batch: Batch, text_fields: tuple[str, ...], messages: str | None
                   ) -> tuple[str, ...]:
    """The batch's top-level columns that hold strings deeper (objects, lists of objects or
    of lists; a column of mixed types with a list or an object in some record), messages
    aside. A text field's objects are read too: ``--text-field data`` where ``data`` holds
    ``{"text": ...}`` is schema's ``wrong_type``, and the hidden characters inside it are
    flagged (``data.text``) as any other object's."""
    out = []
    for name, dtype in batch.schema.items():
        if name == messages:
            continue
        if name in batch.raw:
            if any(isinstance(v, list | dict) for v in batch.raw[name]):
                out.append(name)
        elif holds_nested_strings(dtype):
            out.append(name)
    return tuple(out)


def nested_items(batch: Batch, names: tuple[str, ...], text: tuple[str, ...] = ()
                 ) -> list[Part]:
    """Every string inside the ``names`` columns (``nested_columns``), to be ``named`` (the
    path: ``answers.text[0]``) once filtered; the strings a text field nested in those
    objects names (``data.text``) aside, as they are read as the text."""
    parts: list[Part] = []
    for name in names:
        if name in batch.raw:
            parts.append((None, raw_items(name, batch.raw[name])))
        else:
            parts += typed_parts(batch.frame.get_column(name))
    # as ``named`` shows them: a column whose own name holds a dot is quoted (["a.b"].c)
    if skip := [_named(name, batch.frame.columns) for name in text if batch.path(name)]:
        parts = [(None, frame.filter(~pl.col("field").is_in(skip))) if pieces is None
                 else (pieces, frame) for pieces, frame in parts
                 if not (pieces is not None and len(pieces) == 1 and pieces[0] in skip)]
    return parts


def _textual(dtype: Any) -> bool:
    """Strings, or strings dictionary-encoded (a Parquet/Arrow ``list<dictionary<string>>``
    column reads as a list of ``Categorical``)."""
    return dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum)


def holds_strings(batch: Batch, text_fields: tuple[str, ...], messages: str | None) -> bool:
    """Whether ``batch`` holds a string column or a list of strings besides the text and
    the messages: what the character checks read when the data has no text field."""
    return any(dtype == pl.String and name not in text_fields and name != messages
               for name, dtype in batch.schema.items()) or bool(
        string_lists(batch, text_fields, messages) or nested_columns(batch, text_fields,
                                                                     messages))


def list_items(batch: Batch, names: tuple[str, ...]) -> pl.DataFrame:
    """The strings inside the ``names`` list columns in long form: ``i`` (the record),
    ``name`` (the column), ``k`` (the index in its list) and ``text``; nulls left out."""
    parts = [pl.DataFrame(schema=_ITEMS)]
    for name in names:
        col = batch.frame.get_column(name)
        if isinstance(col.dtype, pl.Array) or col.dtype.inner != pl.String:
            col = col.cast(pl.List(pl.String))  # fixed size; dictionary-encoded items
        at, k, items = exploded(col)
        part = pl.DataFrame({"i": at.astype(np.uint32), "k": k, "text": items}
                            ).filter(pl.col("text").is_not_null())
        parts.append(part.select("i", pl.lit(key_step(name, first=True)).alias("name"), "k",
                                 "text"))
    return pl.concat(parts)


def other_strings(record: dict[str, Any], ctx: Context) -> list[str]:
    """The record's top-level string fields that are neither text fields nor messages."""
    return [name for name, value in record.items() if isinstance(value, str)
            and name not in ctx.text_fields and name != ctx.messages]


def inner_strings(record: dict[str, Any], ctx: Context) -> Iterator[tuple[Path, str]]:
    """``(path, string)`` for each string inside the record's top-level lists and objects
    (the text and messages fields aside), as the character checks read them:
    ``(("tokens", 3), ...)``, ``(("answers", "text", 0), ...)``."""
    for name in inner_fields(record, ctx):
        yield from strings_in(record[name], (name,))


def inner_fields(record: dict[str, Any], ctx: Context) -> list[str]:
    """The record's top-level lists and objects but the messages (a text field holding one
    is no text: its strings are read as any other object's): where ``inner_strings``
    reads."""
    return [name for name, value in record.items() if isinstance(value, list | dict)
            and name != ctx.messages]


def _column_keys(batch: Batch, names: list[str], where: pl.Expr | None) -> pl.DataFrame:
    """A record's own keys that may hide characters (``odd_key``), as strings to read: one
    per record that holds a value under it, named ``["te\\u200bxt"] (key)``."""
    parts = []
    for name in names:
        if name in batch.raw:  # mixed JSON types: the frame holds only some of them
            held = np.array([v is not None for v in batch.raw[name]], dtype=bool)
        else:
            held = batch.frame.get_column(name).is_not_null().to_numpy()
        frame = pl.DataFrame({"i": np.flatnonzero(held).astype(np.uint32)})
        frame = frame.with_columns(pl.lit(key_step(name, first=True) + KEY).alias("field"),
                                   pl.lit(name).alias("text"))
        parts.append(frame if where is None else frame.filter(where))
    return pl.concat(parts)


def _quoted_names(texts: pl.DataFrame, fields: tuple[str, ...], messages: str | None,
                  columns: list[str]) -> pl.DataFrame:
    """``texts`` with the top-level names that a path would misread (``k.v[0]``) quoted as
    the paths inside them are (``["k.v[0]"]``: ``key_step``). A text field nested in an
    object (``data.text``: ``field_paths``) is a path already: only its odd keys are quoted."""
    odd = {name: _named(name, columns) for name in (*fields, messages or "")
           if name and _named(name, columns) != name}
    if not odd or texts.is_empty():
        return texts
    field = pl.col("field")
    out = field
    for name, quoted in odd.items():
        if name == messages:  # messages[2].content
            out = (pl.when(field.str.starts_with(f"{name}["))
                   .then(pl.lit(quoted) + field.str.slice(len(name))).otherwise(out))
        else:
            out = pl.when(field == name).then(pl.lit(quoted)).otherwise(out)
    return texts.with_columns(out.alias("field"))


def _named(name: str, columns: list[str]) -> str:
    """A text field's name as a path names it: a top-level column's name as one key, a
    nested text field (``data.text``) step by step."""
    if (steps := split_path(name, columns)) is None:
        return key_step(name, first=True)
    return key_step(steps[0], first=True) + "".join(key_step(s) for s in steps[1:])


def schema_names(batch: Batch) -> dict[str, tuple[str, bool]]:
    """Each name in the batch's typed schema that may hide characters (``odd_key``: a
    column's, a struct field's at any depth, a list's items as ``[*]``; a chat turn's keys
    too), by its path, with whether a record of the batch holds a value under it."""
    out: dict[str, tuple[str, bool]] = {}
    for name, dtype in batch.schema.items():
        if name in batch.raw or not (odd_key(name) or _odd_names(dtype)):
            continue
        col, at = batch.frame.get_column(name), key_step(name, first=True)
        if odd_key(name):
            out[at] = (name, bool(col.is_not_null().any()))
        _struct_names(col, at, out)
    return out


def _odd_names(dtype: Any) -> bool:
    if isinstance(dtype, pl.Struct):
        return any(odd_key(f.name) or _odd_names(f.dtype) for f in dtype.fields)
    if isinstance(dtype, pl.List | pl.Array):
        return _odd_names(dtype.inner)
    return False


def _struct_names(col: pl.Series, at: str, out: dict[str, tuple[str, bool]]) -> None:
    dtype = col.dtype
    if isinstance(dtype, pl.Struct) and _odd_names(dtype):
        for f, inner in zip(dtype.fields, col.struct.unnest().get_columns(), strict=True):
            where = at + key_step(f.name)
            if odd_key(f.name):
                held = bool(inner.is_not_null().any())
                out[where] = (f.name, held or out.get(where, (f.name, False))[1])
            _struct_names(inner, where, out)
    elif isinstance(dtype, pl.List | pl.Array) and _odd_names(dtype.inner):
        if isinstance(dtype, pl.Array):
            col = col.cast(pl.List(dtype.inner))
        _struct_names(col.explode(), at + "[*]", out)


class CharacterCheck(Check):
    """A check of characters: reads ``string_fields`` and ``string_lists`` with
    ``all_string_fields``, and then needs no text field (a corpus of ``tokens`` lists and
    ``ner_tags`` has none).

    A key is read in the records that hold a value under it; a column or struct field name
    that no record holds a value under (null throughout the corpus) is still the schema's,
    so it is read once at the end: a corpus-level finding (no row), its path with ``[*]``
    for a list's items. A subclass flags strings in ``flag``."""

    needs_text = True  # without all_string_fields
    merged: ClassVar[tuple[str, ...]] = ("names", "held")
    # The odd names of the typed schemas read (path -> name), and the paths held a value
    names: dict[str, str]
    held: set[str]

    def __init__(self, params: Any, ctx: Context) -> None:
        super().__init__(params, ctx)
        self.names, self.held = {}, set()

    def flag(self, texts: pl.DataFrame) -> pl.DataFrame | None:
        """Findings (``i``-indexed) for the strings of ``texts`` (``i``, ``field``,
        ``text``) already filtered to those the check may flag."""
        raise NotImplementedError

    def finish(self) -> pl.DataFrame | None:
        # (a name may be None here: a worker's state after export keeps its keys, emptied)
        never = [(path, name) for path, name in self.names.items()
                 if path not in self.held and name is not None]
        if not never:
            return None
        texts = pl.DataFrame({"i": pl.Series(range(len(never)), dtype=pl.UInt32),
                              "field": [f"{path}{KEY}" for path, _ in never],
                              "text": [name for _, name in never]})
        found = self.flag(texts)
        if found is None or not found.height:
            return None
        note = " (no record holds a value under it: the schema's name)"
        return found.drop("i").with_columns(
            pl.lit(None, dtype=pl.Int32).alias("file_index"),
            pl.lit(None, dtype=pl.Int64).alias("row"),
            pl.col("detail") + note).select(
            "file_index", "row", *[c for c in found.columns if c != "i"])

    def _note_names(self, batch: Batch) -> None:
        names = batch.shared("schema names", lambda: schema_names(batch))
        for path, (name, held) in names.items():
            if self.names.get(path) is None:
                self.names[path] = name
            if held:
                self.held.add(path)

    @classmethod
    def reads_without_text(cls, params: dict[str, Any]) -> bool:
        return bool(cls.Params(**params).all_string_fields)  # type: ignore[attr-defined]

    def config_problem(self) -> str | None:
        problem = super().config_problem()
        if problem is None or not getattr(self.params, "all_string_fields", False):
            return problem
        if self.ctx.strings:
            return None  # no text field, but other strings to read
        return ("no text field declared or inferred, and the data holds no other string; set "
                "fields.text in the rules file")

    def texts(self, batch: Batch, where: pl.Expr | None = None) -> pl.DataFrame:
        """``i``, ``field``, ``text`` of every string the check reads (those ``where`` holds
        for): the strings in lists are named (``tokens[3]``) only once filtered, as the
        checks keep few of them."""
        if not getattr(self.params, "all_string_fields", False):
            texts = super().texts(batch)
            return texts if where is None else texts.filter(where)
        fields, messages = string_fields(batch, self.ctx), self.ctx.messages
        self._note_names(batch)
        texts = batch.texts(fields, messages)
        if where is not None:
            texts = texts.filter(where)
        texts = _quoted_names(texts, fields, messages, batch.frame.columns)
        if odd := [name for name in batch.schema if odd_key(name)]:
            texts = pl.concat([texts, _column_keys(batch, odd, where)])
        lists = string_lists(batch, self.ctx.text_fields, messages)
        nested = nested_columns(batch, self.ctx.text_fields, messages)
        if not lists and not nested and not messages:  # the common case: one look at the schema
            return texts
        parts = [texts]
        if lists:
            items = batch.shared(("list items", lists), lambda: list_items(batch, lists))
            if where is not None:
                items = items.filter(where)
            parts.append(items.select("i", pl.format("{}[{}]", "name", "k").alias("field"),
                                      "text"))
        if nested:
            text = self.ctx.text_fields
            deep = batch.shared(("nested items", nested, text),
                                lambda: nested_items(batch, nested, text))
            parts.append(named(deep, where))
        if messages and batch.has(messages):
            turns = batch.shared(("turn items", messages), lambda: turn_items(
                messages, batch.frame.get_column(messages), batch.raw.get(messages)))
            parts.append(named(turns, where))
        return pl.concat(parts).sort("i", maintain_order=True)
