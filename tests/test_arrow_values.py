"""``values_array`` types JSON values as ``pa.array`` does (same type, same values) and
refuses what ``pa.array`` refuses, and booleans beside numbers, without pyarrow's pandas
import."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.arrow_values import strings_array, values_array

_REFUSALS = (pa.ArrowException, TypeError, ValueError, OverflowError)

_INTS = st.one_of(
    st.integers(-5, 5),
    st.integers(-(2**64), 2**64),
    st.sampled_from([2**53, 2**53 + 1, -(2**53), -(2**53) - 1, 2**63 - 1, 2**63,
                     -(2**63), -(2**63) - 1]),
)
_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0.5, -0.0, 1e308, float("nan")]))
_STRINGS = st.one_of(st.text(max_size=6), st.sampled_from(["", "\ud800", "a\x00b", "é"]))
_SCALARS = st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, _STRINGS)
_KEYS = st.sampled_from(["a", "b", "c"])
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=12,
)


def _typed(values: list[Any]) -> tuple[str, Any]:
    """What a builder gives: ("array", type, values) or ("refused",)."""
    try:
        array = values_array(values)
    except _REFUSALS:
        return ("refused", None)
    array.validate(full=True)
    return ("array", (array.type, _comparable(array.to_pylist()), _layout(array)))


def _expected(values: list[Any]) -> tuple[str, Any]:
    if _bools_meet_numbers(values):  # refused on purpose: Arrow would make true 1.0
        return ("refused", None)
    try:
        array = pa.array(values)
    except _REFUSALS:
        return ("refused", None)
    return ("array", (array.type, _comparable(array.to_pylist()), _layout(array)))


def _layout(array: pa.Array) -> list[bytes | None]:
    """Every buffer of the array and its children (what `fix --format arrow` writes), so
    the validity of a field under a null struct too (pa.array makes it a valid empty value)."""
    return [None if b is None else b.to_pybytes() for b in array.buffers()]


def _bools_meet_numbers(values: list[Any]) -> bool:
    """Whether booleans and numbers meet at one position (top, list items, a key)."""
    kinds = {isinstance(v, bool) for v in values if isinstance(v, int | float)}
    items = [x for v in values if isinstance(v, list) for x in v]
    keys = {k for v in values if isinstance(v, dict) for k in v}
    return (len(kinds) == 2 or (bool(items) and _bools_meet_numbers(items))
            or any(_bools_meet_numbers([v[k] for v in values if isinstance(v, dict) and k in v])
                   for k in keys))


def _comparable(value: Any) -> Any:
    """NaN equal to NaN, -0.0 told from 0.0, 1 told from 1.0 and True."""
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    return (type(value).__name__, value)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_VALUES, max_size=8))
def test_values_typed_as_pa_array_types_them(values: list[Any]) -> None:
    assert _typed(values) == _expected(values)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3)), max_size=8))
def test_flat_and_one_level_values_as_pa_array(values: list[Any]) -> None:
    """Mixes of scalars (where type clashes are most likely) and one level of lists."""
    assert _typed(values) == _expected(values)


@pytest.mark.parametrize("values", [
    [1, 2.5], [2**53, 0.5], [2**53 + 1, 0.5], [2**63], [-(2**63)], [1, None, 2.0],
    [{"a": 1}, {"b": "x"}], [{"a": 1}, {"a": "x"}], [{}], [{}, None], [[], None],
    [[], [[]]], [[[]], [1]], [True, 1], [1, True], [[1], [True]], ["a", "\ud800"],
    [None], [], [{"a": {}}, {"a": {"b": 1}}], [None, {"a": [None, {"b": 2.5}]}],
    [None, {"a": 1}], [{"a": {"b": "x"}}, {"a": None}, None], [[None, {"a": [1], "b": {}}]],
])
def test_known_edges(values: list[Any]) -> None:
    assert _typed(values) == _expected(values)


def _nested(leaf: Any, depth: int, kind: str) -> Any:
    for level in range(depth):
        leaf = [leaf] if kind == "list" or (kind == "mixed" and level % 2) else {"k": leaf}
    return leaf


@pytest.mark.parametrize("kind", ["list", "struct", "mixed"])
def test_values_as_deep_as_the_reader_takes(kind: str) -> None:
    """200 levels (the reader's MAX_DEPTH), with an int beside a float and a null at the
    bottom: typed as pa.array types them (a RecursionError would go to pa.array)."""
    values = [_nested(1, 200, kind), None, _nested(2.5, 200, kind), _nested(None, 200, kind)]
    assert _typed(values) == _expected(values)
    assert _typed([_nested(True, 200, kind), _nested(1, 200, kind)]) == ("refused", None)


def test_strings_array_matches_a_typed_pa_array() -> None:
    for values in (["a", None, "é"], [None, None], [], ["x"]):
        got = strings_array(values)
        assert got.type == pa.string()
        assert got.equals(pa.array(values, pa.string()))


def test_strings_past_2gb_go_to_pa_array(monkeypatch: pytest.MonkeyPatch) -> None:
    """Strings over the 32-bit offsets' 2 GB (made small here) are left to ``pa.array``,
    which chunks them, for both builders: a raw column that large was an internal error."""
    from preflight import arrow_values

    monkeypatch.setattr(arrow_values, "_STRING_BYTES", 10)
    values = ["a" * 8, None, "b" * 8]
    assert strings_array(values).to_pylist() == values
    assert values_array(values).to_pylist() == values


def test_no_pandas_import(tmp_path: Any) -> None:
    """The point of the module: typing mixed values leaves pandas unloaded."""
    values = [{"a": 1, "b": [1.5, None]}, {"a": None, "c": "x"}, None]
    code = (
        "import sys, json\n"
        "from preflight.arrow_values import values_array, strings_array\n"
        f"values_array(json.loads({json.dumps(json.dumps(values))}))\n"
        "try:\n    values_array([1, 'a'])\nexcept TypeError:\n    pass\n"
        "strings_array(['a', None])\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
