"""Token-level lists (``token_labels``, ``input_ids``) read as integer lists, with the
findings of ``label_range`` about them: wrong types, values out of range, lengths that
differ, labels all ignored. Also the value display shared with class labels."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from preflight.batch import Batch
from preflight.checks.base import findings
from preflight.format_expr import format_str
from preflight.json_types import JSON_TYPE_NOUNS, json_type

# Float token values are clipped into Int64 before the range test (1e30 stays out of range).
CLIP = 2**62
NOUN = JSON_TYPE_NOUNS | {"number": "a number with a fraction"}


def show_value(value: Any) -> str:
    """A value as a detail quotes it: strings quoted, JSON otherwise, at most 40 chars."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list | dict):
        return ""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


def clip_int(value: int) -> int:
    """``value`` clipped into ``[-CLIP, CLIP]`` (fits Int64)."""
    return max(-CLIP, min(CLIP, value))


def int_lists(batch: Batch, name: str, code: str) -> tuple[pl.Series, pl.DataFrame]:
    """A field of integer lists as ``List(Int64)`` (null where missing or of the wrong type)
    and findings (``code``) for records that are not lists of integers."""
    n = len(batch)
    if name in batch.raw:
        return _int_lists_raw(batch.raw[name], name, code)
    col = (batch.frame.get_column(name) if batch.has(name)
           else pl.Series(name, [None] * n, dtype=pl.Null))
    if isinstance(col.dtype, pl.Array):  # fixed length (datasets' Sequence(length=N))
        col = col.cast(pl.List(col.dtype.inner))
    dtype = col.dtype
    frame = pl.DataFrame({"v": col}).with_row_index("i")
    v, el = pl.col("v"), pl.element()
    if isinstance(dtype, pl.List) and (dtype.inner.is_numeric() or dtype.inner == pl.Null):
        bad_el, as_int = el.is_null(), el
        if dtype.inner.is_float():
            bad_el = bad_el | ~el.is_finite() | (el != el.floor())
            as_int = el.clip(-CLIP, CLIP)
        converted = v.list.eval(as_int.cast(pl.Int64, strict=False))
    elif isinstance(dtype, pl.List):  # strings, booleans, nested lists: every element is wrong
        bad_el = el.is_null() | el.is_not_null()
        converted = pl.lit([], dtype=pl.List(pl.Int64))  # only empty lists get this far
    else:
        bad_el, converted = None, pl.lit(None, pl.List(pl.Int64))
    if bad_el is not None:
        first = v.list.eval(bad_el).list.arg_max()
        bad = v.list.eval(bad_el).list.any().fill_null(False)
        frame = frame.with_columns(bad=bad, first=first)
    else:
        frame = frame.with_columns(bad=v.is_not_null(), first=pl.lit(None, pl.UInt32))
    ints = frame.select(
        pl.when(~pl.col("bad") & v.is_not_null()).then(converted).alias(name)
    ).to_series()
    flagged = frame.filter(pl.col("bad") | v.is_null())
    # Details for flagged records only; the offending value is a Python object of any type.
    kinds = batch.json_types(name).gather(flagged.get_column("i"))
    details = []
    for (value, first), kind in zip(flagged.select("v", "first").iter_rows(), kinds,
                                    strict=True):
        if value is None:
            details.append(f"{name}: missing or null, expected a list of integers")
        elif first is None:
            details.append(f"{name}: expected a list of integers, got {NOUN.get(kind, kind)}")
        else:
            details.append(_element_detail(name, first, value[first]))
    return ints, findings({"i": flagged.get_column("i")}, code, details)


def _int_lists_raw(values: list[Any], name: str, code: str) -> tuple[pl.Series, pl.DataFrame]:
    # Mixed JSON types in this batch: only Python values exist, one record at a time.
    ints: list[list[int] | None] = []
    rows: list[int] = []
    details: list[str] = []
    for i, value in enumerate(values):
        out = None
        if value is None:
            details.append(f"{name}: missing or null, expected a list of integers")
        elif not isinstance(value, list):
            details.append(f"{name}: expected a list of integers, got "
                           f"{NOUN.get(json_type(value), 'a value')}")
        else:
            first = next((k for k, e in enumerate(value) if json_type(e) != "integer"), None)
            if first is None:
                out = [clip_int(int(e)) for e in value]
            else:
                details.append(_element_detail(name, first, value[first]))
        if out is None:
            rows.append(i)
        ints.append(out)
    series = pl.Series(name, ints, dtype=pl.List(pl.Int64))
    return series, findings({"i": pl.Series(rows, dtype=pl.UInt32)}, code, details)


def _element_detail(name: str, index: int, value: Any) -> str:
    shown = "null" if value is None else show_value(value) or NOUN.get(json_type(value), "a value")
    return f"{name}[{index}]: {shown} is not an integer"


# With no bound declared, ids from here on are out of range all the same: no vocabulary
# or class set reaches 2**31 (token ids are int32 in tokenizers and many pipelines), so
# such an id is a corrupted value (the smoke test's own model would map it to a row).
NO_VOCABULARY_PAST = 2**31


def out_of_range(ints: pl.Series, name: str, bound: int | None, ignore: int | None,
                  code: str) -> pl.DataFrame:
    """Findings for lists with values outside ``[0, bound)`` (the ignore index excepted);
    with no ``bound``, ``[0, 2**31)``."""
    el = pl.element()
    bad_el = (el < 0) | (el >= (bound if bound is not None else NO_VOCABULARY_PAST))
    if ignore is not None:
        bad_el = bad_el & (el != ignore)
    flags = pl.col("v").list.eval(bad_el)
    frame = (
        pl.DataFrame({"v": ints})
        .with_row_index("i")
        .with_columns(count=flags.list.sum(), first=flags.list.arg_max())
        .filter(pl.col("count") > 0)
    )
    where = (f"[0, {bound})" if bound is not None
             else "[0, 2^31), past any vocabulary (no vocab_size declared)")
    also = f" and not the ignore index {ignore}" if ignore is not None else ""
    value = pl.col("v").list.get(pl.col("first"))
    # Values are clipped into Int64 on reading (``clip_int``): one at the clip was larger.
    shown = (pl.when(value >= CLIP).then(pl.lit("2^62 or more"))
             .when(value <= -CLIP).then(pl.lit("-2^62 or less"))
             .otherwise(value.cast(pl.String)))
    detail = format_str(
        f"{name}[{{}}]: {{}} outside {where}{also} (out-of-range values: {{}})",
        "first", shown, "count",
    )
    return findings({"i": frame.get_column("i")}, code, frame.select(detail).to_series())


def length_mismatch(labels: pl.Series, ids: pl.Series, labels_name: str,
                     ids_name: str) -> pl.DataFrame:
    frame = (
        pl.DataFrame({"a": labels.list.len(), "b": ids.list.len()})
        .with_row_index("i")
        .filter(pl.col("a") != pl.col("b"))
    )
    detail = format_str(f"{labels_name} has {{}} values, {ids_name} has {{}}", "a", "b")
    return findings({"i": frame.get_column("i")}, "token_labels_length_mismatch",
                    frame.select(detail).to_series())


def all_ignored(labels: pl.Series, name: str, ignore: int) -> pl.DataFrame:
    """Findings for token label lists whose labels are all ``ignore`` (or that are empty):
    nothing to learn from, so the record's mean loss is 0/0 = NaN."""
    frame = pl.DataFrame({"labels": labels}).with_row_index("i").filter(
        pl.col("labels").is_not_null()
        & ~pl.col("labels").list.eval(pl.element() != ignore).list.any()
    )
    n = frame.get_column("labels").list.len()
    detail = pl.select(
        pl.when(n == 0)
        .then(pl.lit(f"{name}: empty, no token to learn from (its mean loss is NaN)"))
        .otherwise(format_str(f"{name}: all {{}} labels are the ignore index {ignore} "
                             "(its mean loss is NaN)", n))
    ).to_series()
    return findings({"i": frame.get_column("i")}, "all_labels_ignored", detail)
