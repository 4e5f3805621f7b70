"""Class labels for ``label_range``: the declared classes, each record's label read as its
JSON kind and value, the details of a bad one, and stray labels among inferred classes.

A label is read the same way from every format: a whole float is an integer (``0.0`` is
class 0); CSV writes every value as text, so there ``"2"`` is the number 2 where integers
are declared and an empty cell is a missing label.

Classes inferred from the data are integer ids or names (strings), whichever the first
batch holds (``holds_names``): the check and field inference read it the same way.
"""

from __future__ import annotations

import polars as pl

from preflight.batch import Batch, positions
from preflight.checks.base import Context
from preflight.checks.token_lists import CLIP, NOUN, clip_int, show_value
from preflight.format_expr import format_str

SHOWN_CLASSES = 10
_NON_FINITE = {"nan", "inf", "infinity"}
# Class names, not ids, when at least this share of the records hold a string label (and
# fewer an integer: half integers are ids, as field inference reads them).
_MAJORITY = 0.5
# A class holding at least this share of the valid labels (and 2 of them) is part of the
# dense block a stray label sits past (``strays``).
_DENSE = 0.01


def dense_top(counts: dict[int, int], total: int) -> int:
    """The largest class holding at least 2 labels and at least ``_DENSE`` of them (-1
    when none does): the top of the block of classes the data is labelled with."""
    return max((k for k, n in counts.items() if n >= 2 and n >= _DENSE * total), default=-1)


def strays(counts: dict[int, int], total: int) -> list[str]:
    """Inferred classes that look like stray labels, not classes: a class ``k`` holding a
    single label, more than 1 past the dense block's top ``m`` (``dense_top``), with at most
    half of the classes ``m+1..k-1`` occurring. When every class 0..K occurs (a healthy
    set, however long its tail), the classes between always occur, so this never fires."""
    m = dense_top(counts, total)
    if m < 0:
        return []
    above = sorted(c for c in counts if c > m)  # the classes past the block, in order
    return [str(k) for occurring, k in enumerate(above)
            if counts[k] == 1 and k > m + 1 and occurring * 2 <= k - m - 1]


class Classes:
    """The declared classes: their kinds, the allowed values and their summary keys."""

    def __init__(self, num_classes: int | None, labels: list[str | int] | None, *,
                 inferred: bool = False, names: bool = False) -> None:
        self.num_classes = num_classes or 0
        self.inferred = inferred
        self.names = names  # inferred class names: the keys and strs are set at the end
        self.ints: list[int] | None = None
        self.strs: list[str] = []
        if labels is not None:
            self.ints = [v for v in labels if isinstance(v, int)]
            self.strs = [v for v in labels if isinstance(v, str)]
            self.keys = [str(v) for v in labels]
            self.kinds = {k for k, vs in (("integer", self.ints), ("string", self.strs)) if vs}
        else:  # inferred: the keys are set from the data at the end
            self.keys = [] if inferred else [str(k) for k in range(self.num_classes)]
            self.kinds = {"string"} if names else {"integer"}

    def expected(self) -> str:
        """What a valid label looks like, for details."""
        if self.names:
            return "a class name (a string, as most labels are)"
        if self.inferred:
            return "a non-negative integer class id"
        if self.ints is None:
            return f"an integer class id in [0, {self.num_classes})"
        shown = [repr(v) for v in [*self.ints, *self.strs][:SHOWN_CLASSES]]
        more = ", …" if len(self.keys) > SHOWN_CLASSES else ""
        return f"one of {', '.join(shown)}{more}"


def declared_classes(ctx: Context) -> Classes | None:
    m = ctx.model
    if m.labels is None and m.num_classes is None:
        return None  # config_problem says why
    return Classes(m.num_classes, m.labels)


def show_key(key: str, classes: Classes) -> str:
    return repr(key) if key in classes.strs else key


def label_detail(name: str, code: str, kind: str, shown: str, classes: Classes) -> str:
    if code == "label_null":
        if kind == "string":  # a blank class name
            what = "empty" if shown == "''" else "only whitespace"
            return f"{name}: {what} ({shown}), not a class name"
        return f"{name}: missing or null"
    if code == "label_wrong_type":
        if kind == "number" and shown.lstrip("+-").lower() in _NON_FINITE:
            what = "not a number" if shown.lstrip("+-").lower() == "nan" else "infinite"
            return f"{name}: expected {classes.expected()}, got {shown} ({what})"
        return f"{name}: expected {classes.expected()}, got {NOUN.get(kind, kind)} {shown}"
    if code == "label_out_of_range":
        if classes.inferred:
            why = "is negative; class ids start at 0" if shown.startswith("-") else "is too large"
            return f"{name}: {shown} {why}"
        return f"{name}: {shown} outside [0, {classes.num_classes})"
    return f"{name}: {shown} not in the declared labels ({classes.expected()})"


def label_values(batch: Batch, name: str, *, textual: bool = False,
                  numbers: bool = False) -> pl.DataFrame:
    """Each record's label as ``i``, ``kind`` (its JSON type), ``int`` (for integers, whole
    floats included), ``str`` (for strings) and ``shown`` (for details). With ``textual``
    an empty string is null; with ``numbers`` a string that reads as a number is one."""
    kind = batch.json_types(name)
    n = len(batch)
    if name in batch.raw:
        # Mixed JSON types in this batch: Python values, one at a time.
        raw = batch.raw[name]
        ints = [clip_int(int(v)) if k == "integer" else None
                for v, k in zip(raw, kind, strict=True)]
        strs = [v if isinstance(v, str) else None for v in raw]
        shown = [show_value(v) for v in raw]
        return pl.DataFrame(
            {"i": positions(n), "kind": kind,
             "int": pl.Series(ints, dtype=pl.Int64), "str": pl.Series(strs, dtype=pl.String),
             "shown": pl.Series(shown, dtype=pl.String)}
        )
    if batch.has(name):
        col = batch.frame.get_column(name)
        if isinstance(col.dtype, pl.Categorical | pl.Enum):  # a pandas category column
            col = col.cast(pl.String)
    else:
        col = pl.Series(name, [None] * n, dtype=pl.Null)
    dtype = col.dtype
    frame = pl.DataFrame({"i": positions(n), "kind": kind,
                          "v": col})
    v = pl.col("v")
    numbers_shown = v.cast(pl.String)
    if textual and name in batch.written:  # CSV: the number as written ("7", not 7.0)
        frame = frame.with_columns(w=batch.written[name].str.strip_chars())
        numbers_shown = pl.col("w")
    if dtype.is_integer():  # a value beyond Int64 becomes null: out of range
        as_int, shown = v.cast(pl.Int64, strict=False), numbers_shown
    elif dtype.is_float():
        whole = pl.col("kind") == "integer"
        as_int = pl.when(whole).then(v.clip(-CLIP, CLIP).cast(pl.Int64, strict=False))
        shown = numbers_shown
    elif dtype == pl.String and textual:
        text = v.str.strip_chars()
        number = text.cast(pl.Float64, strict=False) if numbers else pl.lit(None, pl.Float64)
        whole = number.is_finite() & (number == number.floor())
        frame = frame.with_columns(
            kind=pl.when(v.is_null() | (text == "")).then(pl.lit("null"))
            .when(whole).then(pl.lit("integer"))
            .when(number.is_not_null()).then(pl.lit("number"))
            .otherwise(pl.lit("string"))
        )
        as_int = pl.when(whole).then(number.clip(-CLIP, CLIP).cast(pl.Int64, strict=False))
        shown = pl.when(pl.col("kind") == "string").then(format_str("'{}'", v)).otherwise(text)
    elif dtype == pl.String:
        as_int, shown = pl.lit(None, pl.Int64), format_str("'{}'", v)
    elif dtype == pl.Boolean:
        as_int = pl.lit(None, pl.Int64)
        shown = pl.when(v).then(pl.lit("true")).otherwise(pl.lit("false"))
    else:  # null, lists, objects: the kind says enough
        as_int, shown = pl.lit(None, pl.Int64), pl.lit("")
    return frame.select(
        "i", "kind", as_int.alias("int"),
        (v if dtype == pl.String else pl.lit(None, pl.String)).alias("str"),
        shown.cast(pl.String).alias("shown"),
    )


def holds_names(batch: Batch, name: str) -> bool:
    """True when the labels in ``batch`` are class names, not ids: at least half the records
    that hold a label hold a string and fewer than half an integer (in CSV, a cell that
    reads as a number is one, as for ids). Missing and null labels do not count either way:
    they are the check's findings, and a corpus with most labels missing is still named."""
    kinds = _kinds(batch, name)
    kinds = kinds.filter(kinds != "null")
    n = len(kinds)
    return bool(n) and (kinds == "string").sum() >= _MAJORITY * n > (kinds == "integer").sum()


def class_names(batch: Batch, name: str) -> str | None:
    """The class names in ``batch``'s ``name`` field, for the note on inferred fields; None
    when they are not class names: mostly no strings (``holds_names``), or free text (fewer
    than two labels per distinct value on average, e.g. mostly unique values)."""
    if not holds_names(batch, name):
        return None
    textual = getattr(batch, "textual", False)
    values = label_values(batch, name, textual=textual, numbers=textual)
    strings = values.filter((pl.col("kind") == "string")
                            & (pl.col("str").str.strip_chars() != "")).get_column("str")
    distinct = sorted(strings.unique().to_list())
    if len(distinct) * 2 > len(strings):
        return None
    shown = ", ".join(map(repr, distinct[:SHOWN_CLASSES]))
    more = f", … ({len(distinct):,} names)" if len(distinct) > SHOWN_CLASSES else ""
    return shown + more


def _kinds(batch: Batch, name: str) -> pl.Series:
    textual = getattr(batch, "textual", False)
    return label_values(batch, name, textual=textual, numbers=textual).get_column("kind")
