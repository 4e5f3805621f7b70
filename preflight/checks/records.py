"""Record-level checks: ``malformed`` lines, ``schema`` (fields present, types), ``empty`` text."""

from __future__ import annotations

from typing import ClassVar, Literal

import polars as pl
from pydantic import Field

from preflight.batch import Batch
from preflight.checks.base import Check, Params, findings
from preflight.checks.registry import register
from preflight.field_paths import object_text_hint
from preflight.format_expr import format_str

JsonType = Literal["string", "integer", "number", "boolean", "array", "object"]


@register("malformed")
class Malformed(Check):
    """Lines or elements that are not readable records: not JSON, not UTF-8, not an object,
    a CSV row with the wrong number of fields. Reported by the reader, never dropped."""

    description = "Lines that are not valid JSON, not UTF-8, or not an object."
    fixes = ("quarantine", "none")

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        if not batch.malformed:
            return None
        return findings(
            {"row": pl.Series([m.row for m in batch.malformed], dtype=pl.Int64)},
            [m.code for m in batch.malformed],
            [m.detail for m in batch.malformed],
        )


class SchemaParams(Params):
    required: list[str] | None = Field(
        None,
        description="Fields every record must have (non-null). Default: the declared "
        "label, target and messages fields (missing text is the `empty` check's job; the "
        "id is optional: a record without one is known by its row).",
    )
    types: dict[str, JsonType | list[JsonType]] = Field(
        default_factory=dict,
        description="Expected JSON type(s) per field, on top of the defaults: text fields "
        "string, messages array, id string or integer.",
    )


@register("schema")
class Schema(Check):
    """Required fields present and non-null; declared fields of the declared JSON type."""

    description = "Required fields present; fields of the declared JSON types."
    Params = SchemaParams
    fixes = ("quarantine", "none", "drop")

    def _required(self) -> list[str]:
        if self.params.required is not None:
            return list(self.params.required)
        f = self.ctx.fields
        return [name for name in (f.messages, f.label, f.target) if name]

    def _types(self) -> dict[str, list[str]]:
        types: dict[str, list[str]] = {name: ["string"] for name in self.ctx.text_fields}
        if self.ctx.messages:
            types[self.ctx.messages] = ["array"]
        if self.ctx.fields.id:
            types[self.ctx.fields.id] = ["string", "integer"]
        for name, want in self.params.types.items():
            types[name] = [want] if isinstance(want, str) else list(want)
        return types

    def required_fields(self) -> list[str]:
        # A field given a type must occur somewhere: `types: {lable: integer}` (a typo, or
        # the wrong corpus) would otherwise check nothing and pass.
        return list(dict.fromkeys([*self._required(), *self.params.types]))

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        parts = []
        for name in self._required():
            missing = batch.json_types(name) == "null"
            if missing.any():
                idx = missing.arg_true()
                parts.append(findings({"i": idx}, "missing_field", f"{name}: missing or null"))
        for name, want in self._types().items():
            got = batch.json_types(name)
            accepted = [*want, "null"] + (["integer"] if "number" in want else [])
            bad = ~got.is_in(accepted)
            if bad.any():
                idx = bad.arg_true()
                detail = format_str(
                    "{}: expected {}, got {}", pl.lit(name), pl.lit(" or ".join(want)), got
                )
                details = pl.select(detail).to_series().gather(idx)
                if name in self.ctx.text_fields and name in batch.schema:
                    # an object where the text is expected: say how to name the text in it
                    hint = object_text_hint(batch, name)
                    details = pl.Series([d + hint if d.endswith("got object") else d
                                         for d in details], dtype=pl.String)
                parts.append(findings({"i": idx}, "wrong_type", details))
        return pl.concat(parts).sort("i", maintain_order=True) if parts else None


@register("empty")
class Empty(Check):
    """Empty or whitespace-only text, or a record with no value in a text field."""

    description = "Empty or whitespace-only text, or a missing text field."
    fixes = ("drop", "quarantine", "none")
    needs_text = True

    _LABEL: ClassVar[dict[str, str]] = {
        "missing_field": "missing or null",
        "empty_text": "empty string",
        "whitespace_only": "whitespace only",
    }

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        parts = []
        texts = self.texts(batch)
        for name in self.ctx.text_fields:
            frame = (
                texts.filter(pl.col("field") == name)
                .with_columns(missing=batch.json_types(name) == "null",
                              why=_not_an_object(batch, name))
                .select(
                    "i", "why",
                    code=pl.when(pl.col("missing"))
                    .then(pl.lit("missing_field"))
                    .when(pl.col("text") == "")
                    .then(pl.lit("empty_text"))
                    .when(pl.col("text").str.contains(r"^\s+$"))
                    .then(pl.lit("whitespace_only")),
                )
                .drop_nulls("code")
            )
            if frame.height:
                codes = frame.get_column("code")
                details = [f"{name}: {self._LABEL[c]}{why or ''}"
                           for c, why in zip(codes, frame.get_column("why"), strict=True)]
                parts.append(findings({"i": frame.get_column("i")}, codes, details))
        return pl.concat(parts).sort("i", maintain_order=True) if parts else None


_A = {"string": "a string", "integer": "an integer", "number": "a number",
      "boolean": "a boolean", "array": "a list"}


def _not_an_object(batch: Batch, name: str) -> pl.Series:
    """For a text field nested in objects (``data.text``): per record, where the path meets
    a value that is not an object (``" ('data' is a string, not an object)"``), else null."""
    out = pl.Series("why", [None] * len(batch), dtype=pl.String)
    steps = batch.path(name) or ()
    for k in range(1, len(steps)):
        prefix = ".".join(steps[:k])
        kinds = batch.json_types(prefix)
        said = format_str(f" ({prefix!r} is {{}}, not an object)", pl.lit(kinds.replace(_A)))
        out = pl.select(pl.when(out.is_null() & ~kinds.is_in(["object", "null"]))
                        .then(said).otherwise(out)).to_series().alias("why")
    return out
