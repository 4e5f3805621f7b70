"""Infer which fields hold what, from the first batch, when the rules do not say."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from preflight.batch import Batch
from preflight.config import Fields, RuleSet
from preflight.errors import ConfigError
from preflight.field_paths import TEXT_NAMES, nested_text_paths, path_problem
from preflight.infer_labels import LABEL_NAMES, candidates, infer_label
from preflight.jq import jq_extract

# The text inference's words for records whose text is in a list of objects inside them
# (``wrapped.wrapped_records`` reads them back).
LISTED_OBJECTS = "holds a list of objects"
# The inference's entry for the key of that list, the key itself (not a role: the pipeline
# moves it to the report's ``records_in``, which ``wrapped`` reads).
RECORDS_IN = "records_in"
_TEXT_NAMES = TEXT_NAMES
CHAT_NAMES = ("messages", "conversations", "conversation", "chat")
_ID_NAMES = ("id", "_id", "uid", "uuid", "doc_id", "key")
_TARGET_NAMES = ("target", "targets", "y")
_FEATURE_NAMES = ("features", "feature", "x")
# Pre-tokenized data (a `datasets.map(tokenizer)` output, a packed corpus): token ids are
# not features (per-position outliers of a Zipf-distributed vocabulary flagged every record)
# and the tokenizer's other outputs are not data to judge.
_TOKEN_ID_NAMES = ("input_ids", "token_ids")
_TOKEN_LABEL_NAMES = ("token_labels", "ner_tags", "pos_tags", "chunk_tags", "labels", "label")
_TOKENIZER_OUTPUTS = ("attention_mask", "token_type_ids", "position_ids",
                      "special_tokens_mask", "offset_mapping", "overflow_to_sample_mapping",
                      "word_ids")
# A label is integer-like (class ids) when at least half the records hold an integer there:
# a stray string or NaN must not hide it, and is then the label check's finding.
_MAJORITY = 0.5
# A column is numeric when nearly every record holds a number there: a field that some
# records carry on the side is not a column of the corpus (its absence would be a finding).
_NUMERIC = 0.9


def infers(rules: RuleSet) -> bool:
    """Whether a run infers its fields (those named on the command line kept): the rules
    declare none. True even where inference finds none in the first batch."""
    return rules.fields.is_empty() or bool(rules.given_fields)


def resolve_fields(rules: RuleSet, batch: Batch, *, shards: bool = False
                   ) -> tuple[Fields, dict[str, str]]:
    """The fields a run uses, given its first batch: the rules' own when they declare any;
    else inferred, keeping those named on the command line (``--text-field`` and the like),
    each of which must be a column of the data (a ``ConfigError`` listing the columns). In
    a folder of ``shards`` a later shard may hold a column the first lacks (a label only
    some shards have): there one no shard holds is the rules' error at the end, as for a
    field a rules file declares."""
    if not infers(rules):
        if not shards:
            _check_paths(rules.fields.text_fields(), batch, "fields.text")
        return rules.fields, {}
    frame = batch.frame
    given = rules.fields.model_dump(exclude_none=True)
    for role, option in rules.given_fields.items():
        named = _as_list(given.get(role))
        # A text field may name a string nested in objects (``data.text``).
        paths = [c for c in named if role == "text" and batch.path(c)]
        missing = [c for c in named if c not in frame.schema and c not in paths]
        if missing and not shards:
            shown = frame.columns[:20]  # a 5,000-column file's filled the console
            more = len(frame.columns) - len(shown)
            columns = (", ".join(shown) or "none") + (f" and {more:,} more" if more else "")
            raise ConfigError(f"{option}: no column {', '.join(map(repr, missing))} in the data; "
                              f"columns found: {columns}{nested_hint(missing[0], frame.schema)}")
        if not shards:
            _check_paths(paths, batch, option)
    return infer_fields(batch, given=given)


def _check_paths(names: list[str], batch: Batch, option: str) -> None:
    """A ``ConfigError`` for a text field's nested path that can name no string in the data
    (a field its object lacks, a list on the way), saying what is there."""
    for name in names:
        if (steps := batch.path(name)) is None:
            continue
        head = steps[0]
        values = batch.raw.get(head)
        if problem := path_problem(name, steps, batch.schema[head], values):
            raise ConfigError(f"{option}: {problem}")


def infer_fields(batch: Batch, *, given: dict[str, Any] | None = None
                 ) -> tuple[Fields, dict[str, str]]:
    """Guess the text/messages/id/label/numeric fields of ``batch`` that ``given`` (role ->
    column) does not name; return them all and why each guess was made.

    A label is inferred only when its values are integer-like (class ids) or class names
    (``preflight.infer_labels``); numeric fields are the other columns that hold numbers
    (or lists of numbers) in nearly every record."""
    frame = batch.frame
    schema = batch.schema
    batch.prime_types(frame.columns)
    found: dict[str, Any] = dict(given or {})
    taken = {c for v in found.values() for c in _as_list(v)}
    why: dict[str, str] = {}
    if "messages" not in found:
        for name in CHAT_NAMES:
            if (name in schema and name not in taken
                    and _share(batch, name, ("array",)) >= _MAJORITY):
                found["messages"], why["messages"] = name, f"{name!r} (a list, by name)"
                break
    if "label" not in found and (label := infer_label(batch, taken)) is not None:
        # Class ids or class names ("pos", "neg") by a label's name (``infer_labels``: a
        # free-text field by such a name, mostly unique values, is not a class set).
        found["label"], why["label"] = label
        taken.add(label[0])
    # An id or a label is never the text, however long its values are. Records that lack
    # the field do not make it less of a text field (their absence is the schema rule's
    # finding): what counts is that the values present are mostly strings.
    strings = [n for n, t in schema.items()
               if t == pl.String and n not in _ID_NAMES and n not in LABEL_NAMES
               and n not in taken and _share(batch, n, ("string",), present=True) >= _MAJORITY]
    named = next((n for n in _TEXT_NAMES if n in strings), None)
    # A column by a text name whose values are of mixed JSON types, strings among them (a
    # number, a list, an object where the text should be), is still the text: the others
    # are the schema rule's wrong_type findings, not a corpus with no text to check.
    mixed = next(((n, share) for n in _TEXT_NAMES if n in batch.raw and n not in taken
                  and (share := _share(batch, n, ("string",), present=True)) > 0), None)
    # A binary column by a text name is text written without the UTF-8 annotation (some
    # Spark and Hive writers): read as UTF-8, and what is not UTF-8 is the encoding check's.
    binary = next((n for n in _TEXT_NAMES
                   if schema.get(n) == pl.Binary and n not in taken), None)
    # A column by a text name holding no value at all (every record null) is still the text:
    # its records are the `empty` check's findings, not a corpus with no text to check.
    hollow = next((n for n in _TEXT_NAMES if len(batch) and n in schema and n not in taken
                   and _present(batch, n) == 0.0), None)
    nested: list[str] = []
    if "text" in found:
        pass
    elif named:
        found["text"], why["text"] = named, f"{named!r} (by name)"
    elif mixed and "messages" not in found:
        found["text"] = mixed[0]
        why["text"] = (f"{mixed[0]!r} (by name; {_percent(mixed[1])} of the values it holds "
                       "are strings, the others are not)")
    elif binary and "messages" not in found:
        found["text"], why["text"] = binary, f"{binary!r} (by name; bytes read as UTF-8)"
    elif hollow and "messages" not in found:
        found["text"], why["text"] = hollow, f"{hollow!r} (by name; every value null)"
    elif len(nested := _nested_text(batch)) == 1 and "messages" not in found:
        # A string by a text name inside an object column (``data.text``): read there.
        found["text"] = nested[0]
        why["text"] = f"{nested[0]!r} (nested in {(batch.path(nested[0]) or ('',))[0]!r})"
    elif strings and "messages" not in found:
        lengths = frame.select(pl.col(strings).str.len_chars().mean()).row(0)
        best = max(zip(lengths, strings, strict=True), key=lambda p: (p[0] or 0, p[1]))[1]
        # The others are not scanned at all: say so, or a prompt beside a longer response
        # would pass the text checks unseen.
        others = quoted_names([n for n in strings if n != best])  # a 3,000-column file's
        also = (f"; other string fields not checked: {others} (fields.text takes a list)"
                if others else "")
        found["text"] = best
        why["text"] = f"{best!r} (the string field with the longest values{also})"
    elif nested and "messages" not in found:
        # Several objects each hold a text by name: which is the text is the user's call.
        why["text"] = (f"none: {quoted_names(nested)} are each nested in an object; name "
                       f"the text with --text-field {nested[0]} (or a list in fields.text)")
    elif "messages" not in found and (listed := _listed_objects(schema)):
        # A .json file written as one object holding the records ({"data": [...]}, as
        # json.dump writes it, on one line) reads as one record: say so, not just "no text".
        why["text"] = (f"none: {listed!r} {LISTED_OBJECTS} (records wrapped in an "
                       "object?), and only top-level fields are read; extract them first "
                       f"(e.g. {jq_extract((listed,), 'FILE')})")
        why[RECORDS_IN] = listed
    if "id" not in found:
        name = next((n for n in _ID_NAMES if n in schema and n not in taken), None)
        if name:
            found["id"], why["id"] = name, f"{name!r} (by name)"
    _token_lists(batch, found, why)
    taken = {c for v in found.values() for c in _as_list(v)} | set(_TOKENIZER_OUTPUTS)
    numeric = [n for n in frame.columns if n not in taken and n not in _ID_NAMES
               and _is_numeric(batch, n)]
    for role, names in (("target", _TARGET_NAMES), ("features", _FEATURE_NAMES)):
        name = next((n for n in names if n in numeric), None)
        if name and role not in found:
            found[role], why[role] = name, f"{name!r} (by name, numbers)"
            numeric.remove(name)
    if numeric and "numeric" not in found:
        found["numeric"] = numeric[0] if len(numeric) == 1 else numeric
        why["numeric"] = quoted_names(numeric) + " (numbers in nearly every record)"
    if "numeric" not in found or "numeric" in why:
        # A column of numbers that only some records hold is not inferred (each record
        # without it would be a null finding), so its NaN would pass unseen: say so.
        taken = {c for v in found.values() for c in _as_list(v)}
        partly = [(n, share) for n in frame.columns if n not in taken and n not in _ID_NAMES
                  and (share := _partly_numeric(batch, n)) is not None]
        if partly:
            names = ", ".join(f"{n!r} ({_percent(share)} of records)"
                              for n, share in partly[:12])
            more = f" and {len(partly) - 12:,} more" if len(partly) > 12 else ""
            it = "it" if len(partly) == 1 else "them"
            why["numeric"] = (f"{why.get('numeric', 'none')}; not checked: numbers in only "
                              f"some records: {names}{more}; name {it} in fields.numeric to "
                              f"check {it}")
    if "label" not in found:
        # A field by a label's name whose values are no class set (a long tail of intents
        # each used once, booleans, a column only some records hold): say it was not
        # judged, or its null and typo pass with no word.
        taken = {c for v in found.values() for c in _as_list(v)}
        if left := candidates(frame.columns, taken):
            it = left[0]
            has = "has" if len(left) == 1 else "have"
            why["label"] = (f"none: {quoted_names(left)} {has} a label's name, but no class set "
                            "in the first records (neither integer ids nor names each used "
                            f"twice on average): not judged as labels; --label-field {it} "
                            "judges it as one")
    return Fields(**found), why


def _token_lists(batch: Batch, found: dict[str, Any], why: dict[str, str]) -> None:
    """``input_ids`` and ``token_labels`` by name, when they hold lists of numbers (a float
    there is label_range's finding, not a reason to read token ids as features)."""
    taken = {c for v in found.values() for c in _as_list(v)}
    for role, names, what in (("input_ids", _TOKEN_ID_NAMES, "token ids"),
                              ("token_labels", _TOKEN_LABEL_NAMES, "a label per token")):
        if role in found:
            continue
        name = next((n for n in names if n in batch.schema and n not in taken
                     and _number_lists(batch, n)), None)
        if name is None:
            continue
        found[role], why[role] = name, f"{name!r} (by name, {what})"
        taken.add(name)
        if role == "input_ids" and (left := [n for n in _TOKENIZER_OUTPUTS
                                             if n in batch.schema and n not in taken]):
            why[role] += f"; tokenizer outputs not checked: {quoted_names(left)}"


def _number_lists(batch: Batch, name: str) -> bool:
    """Whether ``name`` holds lists of numbers (one level) in at least half the records.
    With mixed JSON types in the batch (one ``"7"`` among the ids, one record holding a
    number or nested lists), the records holding a flat list of numbers count: one odd
    record made token ids features, judged per position, and hid its own fault."""
    if name in batch.raw:
        values = batch.raw[name]
        flat = sum(isinstance(v, list) and all(_is_number(e) for e in v) for v in values)
        return bool(values) and flat >= _MAJORITY * len(values)
    dtype = batch.schema[name]
    return (isinstance(dtype, pl.List | pl.Array) and dtype.inner.is_numeric()
            and _present(batch, name) >= _MAJORITY)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _nested_text(batch: Batch) -> list[str]:
    """The paths of the string fields by a text name inside object columns, one per column
    (``preflight.field_paths``): exactly one is the text zero-config inference reads."""
    return nested_text_paths(batch.schema, batch.raw, _TEXT_NAMES)


def _listed_objects(schema: Any) -> str | None:
    """The first column holding a list of objects with a string field, else None."""
    for column, dtype in schema.items():
        if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct) and any(
                f.dtype == pl.String for f in dtype.inner.fields):
            return str(column)
    return None


def nested_hint(name: str, schema: Any) -> str:
    """For a field name the data lacks: what to do when it names a field inside an object
    column (``data.label``): only a text field is read there."""
    column, dot, _ = name.partition(".")
    if dot and isinstance(schema.get(column), pl.Struct):
        return (f" ({column!r} is an object: only a text field may name a field inside "
                f"one; flatten it first, e.g. jq -c '. + {{{name.rpartition('.')[2]}: .{name}}}')")
    return ""


def quoted_names(names: list[str], shown: int = 12) -> str:
    """Column names for a message, the first ``shown`` of a long list and how many more (a
    5,000-column file's would fill the console)."""
    listed = ", ".join(map(repr, names[:shown]))
    return listed + (f" and {len(names) - shown:,} more" if len(names) > shown else "")


def _is_numeric(batch: Batch, name: str) -> bool:
    dtype = batch.schema[name]
    if name in batch.raw:  # mixed JSON types: a number among lists of numbers counts too
        return _raw_numbers(batch.raw[name])[0] >= _NUMERIC
    if isinstance(dtype, pl.List | pl.Array):
        inner = dtype.inner
        while isinstance(inner, pl.List | pl.Array):
            inner = inner.inner
        return inner.is_numeric() and _present(batch, name) >= _NUMERIC
    return _share(batch, name, ("integer", "number")) >= _NUMERIC


def _partly_numeric(batch: Batch, name: str) -> float | None:
    """The share of records holding a number (or a list of numbers) in ``name`` when the
    values there are mostly numbers but too few records hold one for inference, else None."""
    dtype = batch.schema[name]
    if name in batch.raw:
        share, of_present = _raw_numbers(batch.raw[name])
        share = share if of_present >= _MAJORITY else 0.0
    elif isinstance(dtype, pl.List | pl.Array):
        inner = dtype.inner
        while isinstance(inner, pl.List | pl.Array):
            inner = inner.inner
        share = _present(batch, name) if inner.is_numeric() else 0.0
    elif _share(batch, name, ("integer", "number"), present=True) >= _MAJORITY:
        share = _share(batch, name, ("integer", "number"))
    else:
        share = 0.0
    return share if 0.0 < share < _NUMERIC else None


def _raw_numbers(values: list[Any]) -> tuple[float, float]:
    """Of a field with mixed JSON types: the share of records holding a number or a list
    of numbers (nulls and nested lists of numbers allowed in it), and the share of those
    holding any value that do."""

    def numbers(v: Any) -> bool:
        if isinstance(v, bool):
            return False
        if isinstance(v, int | float):
            return True
        if isinstance(v, list):
            return all(e is None or numbers(e) for e in v)
        return False

    hits = sum(numbers(v) for v in values)
    present = sum(v is not None for v in values)
    return (hits / len(values) if values else 0.0), (hits / present if present else 0.0)


def _percent(share: float) -> str:
    """A share below 1 as a whole percent, rounded down (89.9% is not 90%)."""
    return f"{math.floor(share * 100)}%" if share >= 0.01 else "<1%"


def _present(batch: Batch, name: str) -> float:
    return float((batch.json_types(name) != "null").mean() or 0.0) if len(batch) else 0.0


def _share(batch: Batch, name: str, kinds: tuple[str, ...], *,
           present: bool = False) -> float:
    """The share of records holding a value of one of ``kinds`` (JSON types; in CSV, text
    that reads as such a number counts) in ``name``; with ``present``, of the records that
    hold a value there at all (not null, not missing)."""
    if not len(batch):
        return 0.0
    types = batch.read_types(name).rename("types")  # a data name may read as a pattern
    if present:
        types = types.filter(types != "null")
    return float(types.is_in(list(kinds)).mean() or 0.0) if len(types) else 0.0


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])
