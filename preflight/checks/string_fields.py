"""Every string field, for the character checks (``invisible_unicode``, ``encoding``).

A hidden character is one wherever it is: in an Alpaca-style record the instruction beside
the response (the longest field, inferred as the text) can carry a zero-width character or a
bidi control as well. With ``all_string_fields`` (the default) these checks read every other
top-level string field of a record too (an instruction, a url, an id), and every string
inside a top-level list (an NER corpus's ``tokens``, ``tags``, ``choices``, ``answers``:
a zero-width space inside one token passed unseen), and ``fix`` mends them the same way,
keeping each list's length; the text-only checks (empty, duplicates, token length) keep
``fields.text``. Lists are read one level deep: a list of lists or of objects is not text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl
from pydantic import Field, StrictBool

from preflight.batch import Batch
from preflight.checks.base import Check, Context, Params

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
    """The batch's top-level columns that hold lists of strings (typed as such, or, for a
    column of mixed types, holding a list in some record), text and messages aside."""
    out = []
    for name, dtype in batch.schema.items():
        if name == messages or name in text_fields:
            continue
        if name in batch.raw:
            if any(isinstance(v, list) for v in batch.raw[name]):
                out.append(name)
        elif isinstance(dtype, pl.List | pl.Array) and _textual(dtype.inner):
            out.append(name)
    return tuple(out)


def _textual(dtype: Any) -> bool:
    """Strings, or strings dictionary-encoded (a Parquet/Arrow ``list<dictionary<string>>``
    column reads as a list of ``Categorical``)."""
    return dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum)


def holds_strings(batch: Batch, text_fields: tuple[str, ...], messages: str | None) -> bool:
    """Whether ``batch`` holds a string column or a list of strings besides the text and
    the messages: what the character checks read when the data has no text field."""
    return any(dtype == pl.String and name not in text_fields and name != messages
               for name, dtype in batch.schema.items()) or bool(
        string_lists(batch, text_fields, messages))


def list_items(batch: Batch, names: tuple[str, ...]) -> pl.DataFrame:
    """The strings inside the ``names`` list columns in long form: ``i`` (the record),
    ``name`` (the column), ``k`` (the index in its list) and ``text``; nulls left out."""
    parts = [pl.DataFrame(schema=_ITEMS)]
    for name in names:
        if name in batch.raw:  # mixed types: Python values, only such columns pay for it
            out: dict[str, list[Any]] = {"i": [], "k": [], "text": []}
            for i, value in enumerate(batch.raw[name]):
                if isinstance(value, list):
                    for k, item in enumerate(value):
                        if isinstance(item, str):
                            out["i"].append(i)
                            out["k"].append(k)
                            out["text"].append(item)
            part = pl.DataFrame(out, schema={c: _ITEMS[c] for c in ("i", "k", "text")})
        else:
            col = batch.frame.get_column(name)
            if isinstance(col.dtype, pl.Array) or col.dtype.inner != pl.String:
                col = col.cast(pl.List(pl.String))  # fixed size; dictionary-encoded items
            # Only non-empty lists are exploded (what an empty or null list gives differs
            # between polars versions): each gives its items in order, so an item's index
            # in its list is its position less where its list starts.
            lengths = col.list.len().fill_null(0).to_numpy().astype(np.int64)
            full = lengths > 0
            counts = lengths[full]
            starts = np.cumsum(counts) - counts
            part = pl.DataFrame({
                "i": np.repeat(np.flatnonzero(full).astype(np.uint32), counts),
                "k": np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts),
                "text": col.filter(pl.Series(full)).explode(),
            }).filter(pl.col("text").is_not_null())
        parts.append(part.select("i", pl.lit(name).alias("name"), "k", "text"))
    return pl.concat(parts)


def other_strings(record: dict[str, Any], ctx: Context) -> list[str]:
    """The record's top-level string fields that are neither text fields nor messages."""
    return [name for name, value in record.items() if isinstance(value, str)
            and name not in ctx.text_fields and name != ctx.messages]


def listed_strings(record: dict[str, Any], ctx: Context) -> Iterator[tuple[str, int, str]]:
    """``(field, index, string)`` for each string inside the record's top-level lists (the
    messages field aside), as the character checks read them."""
    for name, value in record.items():
        if isinstance(value, list) and name != ctx.messages and name not in ctx.text_fields:
            for k, item in enumerate(value):
                if isinstance(item, str):
                    yield name, k, item


class CharacterCheck(Check):
    """A check of characters: reads ``string_fields`` and ``string_lists`` with
    ``all_string_fields``, and then needs no text field (a corpus of ``tokens`` lists and
    ``ner_tags`` has none)."""

    needs_text = True  # without all_string_fields

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
        texts = batch.texts(fields, messages)
        if where is not None:
            texts = texts.filter(where)
        lists = string_lists(batch, self.ctx.text_fields, messages)
        if not lists:  # the common case costs one look at the schema
            return texts
        items = batch.shared(("list items", lists), lambda: list_items(batch, lists))
        if where is not None:
            items = items.filter(where)
        named = items.select("i", pl.format("{}[{}]", "name", "k").alias("field"), "text")
        return pl.concat([texts, named]).sort("i", maintain_order=True)
