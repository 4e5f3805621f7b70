"""How the numeric check words its findings: numbers as people write them, quoted strings,
what is wrong with one element, and several flagged elements of one vector in one detail."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from preflight.checks.numeric_values import ARRAY, BOOL, STR_BAD

if TYPE_CHECKING:
    from preflight.checks.numeric import NumericParams

SHOWN = 5  # element positions listed in one finding's detail
_TEXT_CHARS = 32  # longest string value quoted in a detail
LABELS = {
    "null": "null", "nan": "NaN", "pos_inf": "+Inf", "neg_inf": "-Inf",
    "nan_string": '"NaN" strings', "inf_string": "infinite strings",
    "numeric_string": "numbers written as strings", "not_a_number": "not numbers",
}
STRING_NOTES = {
    "nan_string": "a string",
    "inf_string": "a string; infinite as a number",
    "numeric_string": "a number written as a string",
}

# (mantissa bits, largest exponent): a float64 rounds to inf at (2 - 2**-(p+1)) * 2**emax.
_DTYPES = {"fp16": (10, 15), "bf16": (7, 127), "fp32": (23, 127)}


def overflow_limit(dtype: str) -> float:
    """The smallest magnitude that rounds to inf when a float64 is cast to ``dtype``."""
    p, emax = _DTYPES[dtype]
    return (2.0 - 2.0 ** -(p + 1)) * 2.0**emax


def describe(code: str, value: float, kind: int, text: str | None, lo: float | None,
             hi: float | None, p: NumericParams) -> str:
    """What is wrong with one element."""
    if code in STRING_NOTES:
        return f"{quote(text)} ({STRING_NOTES[code]})"
    if code == "not_a_number":
        if kind == STR_BAD:
            return "a string, not a number"
        if kind == BOOL:
            return f"{text} (a boolean, not a number)"
        if kind == ARRAY:
            return "an array where a number is expected"
        return f"{text}, not a number"
    if code == "below_min":
        return f"{fmt(value)} < min {fmt(lo)}"
    if code == "above_max":
        return f"{fmt(value)} > max {fmt(hi)}"
    if code == "dtype_overflow":
        assert p.dtype is not None
        scaled = "" if p.scale == 1.0 else f" × scale {fmt(p.scale)} = {fmt(value * p.scale)}"
        limit = fmt(overflow_limit(p.dtype))
        return f"{fmt(value)}{scaled} overflows {p.dtype} (|x| >= {limit} rounds to inf)"
    return label(code, lo, hi, p)


def label(code: str, lo: float | None, hi: float | None, p: NumericParams) -> str:
    """What several flagged elements of a vector have in common."""
    if code == "below_min":
        return f"below min {fmt(lo)}"
    if code == "above_max":
        return f"above max {fmt(hi)}"
    if code == "dtype_overflow":
        return f"overflow {p.dtype}" + ("" if p.scale == 1.0 else f" after × scale {fmt(p.scale)}")
    return LABELS[code]


def several(name: str, label: str, code: str, pos: list[str], values: list[float]) -> str:
    """One detail for several flagged elements of a record: the first positions (with
    values for bounds and overflow) and how many."""
    with_value = code in ("below_min", "above_max", "dtype_overflow")
    shown = [f"{p}={fmt(v)}" if with_value else p
             for p, v in zip(pos[:SHOWN], values[:SHOWN], strict=True)]
    more = ", …" if len(pos) > SHOWN else ""
    return f"{name}: {len(pos)}× {label} at {', '.join(shown)}{more}"


def fmt(x: float | None) -> str:
    """A number as people write it: ``65520``, ``0.5``, ``1e+20``."""
    if x is None:
        return "none"
    if math.isfinite(x) and x == int(x) and abs(x) < 1e16:
        return str(int(x))
    return repr(float(x))


def quote(text: str | None) -> str:
    """A string value as JSON, cut at ``_TEXT_CHARS`` characters."""
    text = text or ""
    return json.dumps(text if len(text) <= _TEXT_CHARS else text[:_TEXT_CHARS] + "…",
                      ensure_ascii=False)
