"""A JSON file that is one object holding the records column by column.

``df.to_json("train.json")`` (pandas' default ``orient="columns"``: ``{"text": {"0": ...,
"1": ...}, "label": {...}}``), ``orient="index"`` (``{"0": {"text": ..., "label": ...}}``),
``orient="split"`` (``{"columns": [...], "index": [...], "data": [[...], ...]}``) and
``json.dump(df.to_dict("list"))`` or ``json.dump(dataset.to_dict())`` (``{"text": [...],
"label": [...]}``) all write one object. Read as one record, its labels were per-token
labels, its ``index`` a numeric field, and a ``-3`` label passed the gate. ``layout`` names
the layout and the ``jq`` filter that writes its records one per line. One column is a
layout too (``{"text": ["a", "b", "c"]}``, a one-column frame's ``{"text": {"0": ...}}``).

Lists of one length (``{"tokens": ["a", "b"], "tags": [0, 1]}``) may also be one record (an
NER sentence): the gate cannot tell, so it fails closed and says both readings (``ONE_RECORD``:
one record is checked wrapped in an array). Lists of different lengths, or a scalar beside
the lists, are one record and no layout.
"""

from __future__ import annotations

from typing import Any, NamedTuple

_SPLIT = {"columns", "data"}
_SPLIT_KEYS = {"columns", "index", "data"}
# What a list-per-field layout may also be, and how to check it as that.
ONE_RECORD = ("or it is one record whose fields are lists of one length, as tokens and their "
              "tags are: if so, wrap it in an array with {command} and check that")


class Layout(NamedTuple):
    """A layout by column: its ``name``, the ``jq`` filter that writes its records, and
    whether it may be one record instead (``ONE_RECORD``)."""

    name: str
    jq: str
    maybe_one_record: bool = False


def layout(whole: Any) -> Layout | None:
    """What one parsed JSON object holding the records by column is (``pandas
    orient='split'``...) and the jq filter that turns it into records; None when it is not
    one: fewer than two records, or members that do not line up. One member is a layout
    (one column) when it holds two or more values."""
    if not isinstance(whole, dict) or not whole:
        return None
    values = list(whole.values())
    if _SPLIT <= whole.keys() <= _SPLIT_KEYS and _is_split(whole):
        return Layout("pandas orient='split' (column names in 'columns', rows in 'data')",
                ".columns as $c | .data[] | [$c, .] | transpose | map({(.[0]): .[1]}) | add")
    if all(isinstance(v, list) for v in values):
        if len(whole) == 1 and any(isinstance(x, dict) for x in values[0]):
            return None  # {"data": [{...}, ...]}: the records, wrapped (``wrapped``)
        n = len(values[0])
        if n >= 2 and all(len(v) == n for v in values):
            return Layout(f"a list per field, {n:,} values each (json.dump(df.to_dict("
                          "'list')), a dataset's to_dict())",
                          ". as $d | range(0; (.[keys_unsorted[0]] | length)) as $i "
                          "| $d | map_values(.[$i])", maybe_one_record=True)
        return None
    if not all(isinstance(v, dict) and v for v in values):
        return None
    inner = list(values[0])
    if any(list(v) != inner for v in values[1:]):
        return None
    if len(whole) == 1 and (len(inner) < 2 or not _row_keys(inner)):
        return None  # one object member ({"meta": {"a": 1}}), or one row: one record
    # By column (pandas' default): the inner keys are the rows ("0", "1", ...); by row
    # (orient='index'): the outer ones are. Neither (one record of two objects with the
    # same keys, {"question": {"en": ...}, "answer": {"en": ...}}) is no such layout.
    by_row, by_column = _row_keys(list(whole)), _row_keys(inner)
    if by_column and (not by_row or len(inner) > len(whole)):
        return Layout("pandas orient='columns', df.to_json's default (each field an "
                      "object keyed by row)",
                ". as $d | (.[keys_unsorted[0]] | keys_unsorted[]) as $k "
                "| $d | map_values(.[$k])")
    if by_row:
        return Layout("pandas orient='index' (each record an object keyed by its row)", ".[]")
    return None


def _is_split(whole: dict[str, Any]) -> bool:
    columns, data = whole["columns"], whole["data"]
    return (isinstance(columns, list) and len(columns) >= 1
            and all(isinstance(c, str) for c in columns)
            and isinstance(data, list) and len(data) >= 2
            and all(isinstance(row, list) and len(row) == len(columns) for row in data))


def _row_keys(keys: list[str]) -> bool:
    """Whether the keys are row numbers (``"0"``, ``"1"``, ...)."""
    return all(k.isdigit() for k in keys)
