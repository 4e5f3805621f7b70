"""Infer which fields hold what, from the first batch, when the rules do not say."""

from __future__ import annotations

import polars as pl

from preflight.config import Fields

_TEXT_NAMES = ("text", "content", "document", "body", "article", "passage", "sentence")
_CHAT_NAMES = ("messages", "conversations", "conversation", "chat")
_ID_NAMES = ("id", "_id", "uid", "uuid", "doc_id", "key")
_LABEL_NAMES = ("label", "labels")


def infer_fields(frame: pl.DataFrame) -> tuple[Fields, dict[str, str]]:
    """Guess the text/messages/id/label fields of ``frame``; return them and why."""
    schema = frame.schema
    found: dict[str, str] = {}
    why: dict[str, str] = {}
    for name in _CHAT_NAMES:
        if isinstance(schema.get(name), pl.List):
            found["messages"], why["messages"] = name, f"{name!r} (a list, by name)"
            break
    # An id is never the text, however long its values are.
    strings = [n for n, t in schema.items() if t == pl.String and n not in _ID_NAMES]
    named = next((n for n in _TEXT_NAMES if n in strings), None)
    if named:
        found["text"], why["text"] = named, f"{named!r} (by name)"
    elif strings and "messages" not in found:
        lengths = frame.select(pl.col(strings).str.len_chars().mean()).row(0)
        best = max(zip(lengths, strings, strict=True), key=lambda p: (p[0] or 0, p[1]))[1]
        found["text"], why["text"] = best, f"{best!r} (the string field with the longest values)"
    for role, names in (("id", _ID_NAMES), ("label", _LABEL_NAMES)):
        name = next((n for n in names if n in schema), None)
        if name:
            found[role], why[role] = name, f"{name!r} (by name)"
    return Fields(**found), why
