"""Every string field, for the character checks (``invisible_unicode``, ``encoding``).

A hidden character is one wherever it is: in an Alpaca-style record the instruction beside
the response (the longest field, inferred as the text) can carry a zero-width character or a
bidi control as well. With ``all_string_fields`` (the default) these checks read every other
top-level string field of a record too (an instruction, a url, an id), and ``fix`` mends them
the same way; the text-only checks (empty, duplicates, token length) keep ``fields.text``.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from pydantic import Field, StrictBool

from preflight.batch import Batch
from preflight.checks.base import Check, Context, Params


class CharacterParams(Params):
    all_string_fields: StrictBool = Field(
        True,
        description="Also read every other top-level string field (an instruction beside the "
        "response, a url, an id), not only fields.text and messages.",
    )


def string_fields(batch: Batch, ctx: Context) -> tuple[str, ...]:
    """``ctx``'s text fields, then the batch's other string columns in their order (the
    messages field aside: its contents are read as messages)."""
    text = ctx.text_fields
    others = tuple(name for name, dtype in batch.schema.items()
                   if dtype == pl.String and name not in text and name != ctx.messages)
    return (*text, *others)


def other_strings(record: dict[str, Any], ctx: Context) -> list[str]:
    """The record's top-level string fields that are neither text fields nor messages."""
    return [name for name, value in record.items() if isinstance(value, str)
            and name not in ctx.text_fields and name != ctx.messages]


class CharacterCheck(Check):
    """A check of characters: reads ``string_fields`` with ``all_string_fields``."""

    def texts(self, batch: Batch) -> pl.DataFrame:
        if not getattr(self.params, "all_string_fields", False):
            return super().texts(batch)
        return batch.texts(string_fields(batch, self.ctx), self.ctx.messages)
