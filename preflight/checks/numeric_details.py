"""How the numeric check words its findings: numbers as people write them, quoted strings,
and several flagged elements of one vector in one detail."""

from __future__ import annotations

import json
import math

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
