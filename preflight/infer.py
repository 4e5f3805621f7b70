"""Infer which fields hold what, from the first batch, when the rules do not say."""

from __future__ import annotations

from typing import Any

import polars as pl

from preflight.config import Fields, RuleSet
from preflight.errors import ConfigError

_TEXT_NAMES = ("text", "content", "document", "body", "article", "passage", "sentence")
CHAT_NAMES = ("messages", "conversations", "conversation", "chat")
_ID_NAMES = ("id", "_id", "uid", "uuid", "doc_id", "key")
_LABEL_NAMES = ("label", "labels")


def resolve_fields(rules: RuleSet, frame: pl.DataFrame) -> tuple[Fields, dict[str, str]]:
    """The fields a run uses, given its first batch: the rules' own when they declare any;
    else inferred, keeping those named on the command line (``--text-field`` and the like),
    each of which must be a column of the data (a ``ConfigError`` listing the columns)."""
    if not rules.fields.is_empty() and not rules.given_fields:
        return rules.fields, {}
    given = rules.fields.model_dump(exclude_none=True)
    for role, option in rules.given_fields.items():
        missing = [c for c in _as_list(given.get(role)) if c not in frame.schema]
        if missing:
            columns = ", ".join(frame.columns) or "none"
            raise ConfigError(f"{option}: no column {', '.join(map(repr, missing))} in the data; "
                              f"columns found: {columns}")
    return infer_fields(frame, given=given)


def infer_fields(frame: pl.DataFrame, *, given: dict[str, Any] | None = None
                 ) -> tuple[Fields, dict[str, str]]:
    """Guess the text/messages/id/label fields of ``frame`` that ``given`` (role -> column)
    does not name; return them all and why each guess was made."""
    schema = frame.schema
    found: dict[str, Any] = dict(given or {})
    taken = {c for v in found.values() for c in _as_list(v)}
    why: dict[str, str] = {}
    if "messages" not in found:
        for name in CHAT_NAMES:
            if isinstance(schema.get(name), pl.List) and name not in taken:
                found["messages"], why["messages"] = name, f"{name!r} (a list, by name)"
                break
    # An id is never the text, however long its values are.
    strings = [n for n, t in schema.items()
               if t == pl.String and n not in _ID_NAMES and n not in taken]
    named = next((n for n in _TEXT_NAMES if n in strings), None)
    if "text" in found:
        pass
    elif named:
        found["text"], why["text"] = named, f"{named!r} (by name)"
    elif strings and "messages" not in found:
        lengths = frame.select(pl.col(strings).str.len_chars().mean()).row(0)
        best = max(zip(lengths, strings, strict=True), key=lambda p: (p[0] or 0, p[1]))[1]
        found["text"], why["text"] = best, f"{best!r} (the string field with the longest values)"
    for role, names in (("id", _ID_NAMES), ("label", _LABEL_NAMES)):
        name = next((n for n in names if n in schema and n not in taken), None)
        if name and role not in found:
            found[role], why[role] = name, f"{name!r} (by name)"
    return Fields(**found), why


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])
