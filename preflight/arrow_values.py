"""Python values (as ``json.loads`` gives them) as Arrow arrays, typed as ``pa.array`` types
them, built from numpy buffers (and polars, for strings).

``pa.array`` first asks pyarrow's pandas shim whether the values are a pandas object, which
imports pandas (0.3-0.5 s, ~600 modules) in each process on its first call. The reader types
Python values whenever a field's JSON type changes inside a block (a label written once as
``"2"``, a text as a number): the very faults the gate is for, planted in every sample corpus.

``values_array`` builds what ``pa.array`` would (same type, values and buffers) for the kinds JSON
has (None, bool, int, float, str, list, dict), and raises where ``pa.array`` would refuse the
values (they do not share one type) and where booleans meet numbers at one position (Arrow
would quietly make ``true`` 1.0); a property test holds the two equal. What it is not sure
of (integers past 2**53 beside floats, strings over 2 GB, other Python types) goes to
``pa.array``.
"""

from __future__ import annotations

import operator
from itertools import chain, repeat
from typing import Any

import numpy as np
import pyarrow as pa

_EXACT = 2**53  # beside a float, an integer further from 0 may not be a double exactly
_STRING_BYTES = 2**31 - 1  # past this pa.array makes a chunked array
_KINDS = {bool, int, float, str, list, dict}  # exactly: what json.loads gives
_NONE = type(None)
_EMPTY: dict[str, Any] = {}


class _Unsure(Exception):
    """The values hold something ``values_array`` does not type: ask ``pa.array``."""


def values_array(values: list[Any]) -> pa.Array | pa.ChunkedArray:
    """``pa.array(values)`` for JSON values, without pyarrow's pandas import.

    Raises ``TypeError``/``ValueError``/``OverflowError`` where the values share no Arrow
    type (``pa.array`` raises one of those or an ``ArrowException`` there) and where
    booleans and numbers meet at one position, at the top or nested."""
    try:
        return _array(values)
    except (_Unsure, RecursionError):
        if _bools_among_numbers(values):
            raise TypeError("booleans mixed with numbers") from None
        return pa.array(values)


def strings_array(values: list[str | None]) -> pa.Array | pa.ChunkedArray:
    """A string array of the values (None is null), as ``pa.array(values, pa.string())``."""
    if all(v is None for v in values):
        return pa.nulls(len(values), pa.string())
    try:
        return _strings(values, None in values, None)
    except _Unsure:
        return pa.array(values, pa.string())


def _array(values: list[Any], empty: np.ndarray | None = None) -> pa.Array:
    """``empty``: where a None stands in a null struct's slot, which ``pa.array`` fills with
    a valid empty value (0, "", false, [], a struct of such), not a null."""
    kinds = set(map(type, values))
    nulls = _NONE in kinds
    kinds.discard(_NONE)
    if not kinds:
        return pa.nulls(len(values))
    if not kinds <= _KINDS:  # not what json.loads gives
        raise _Unsure
    if kinds <= {int, float}:
        return _numbers(values, nulls, empty, float in kinds)
    if len(kinds) > 1:
        raise TypeError(f"values of {len(kinds)} JSON types share no Arrow type")
    kind = kinds.pop()
    if kind is bool:
        return _bools(values, nulls, empty)
    if kind is str:
        return _strings(values, nulls, empty)
    if kind is list:
        return _lists(values, nulls, empty)
    return _structs(values, nulls, empty)


def _validity(values: list[Any], nulls: bool, empty: np.ndarray | None) -> pa.Buffer | None:
    """The validity bitmap (padding bits 0, as pa.array leaves them), None when all valid."""
    if not nulls:
        return None
    valid = np.fromiter(map(operator.is_not, values, repeat(None)), bool, len(values))
    if empty is not None:
        valid |= empty
        if valid.all():
            return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _numbers(values: list[Any], nulls: bool, empty: np.ndarray | None, floats: bool
             ) -> pa.Array:
    present = [v for v in values if v is not None] if nulls else values
    if floats and any(type(v) is int and not -_EXACT <= v <= _EXACT for v in present):
        raise _Unsure
    dtype = np.float64 if floats else np.int64
    filled = [0 if v is None else v for v in values] if nulls else values
    data = np.array(filled, dtype=dtype)  # an int past int64: OverflowError, as pa.array
    arrow_type = pa.float64() if floats else pa.int64()
    return pa.Array.from_buffers(arrow_type, len(values),
                                 [_validity(values, nulls, empty), pa.py_buffer(data)])


def _bools(values: list[Any], nulls: bool, empty: np.ndarray | None) -> pa.Array:
    data = np.fromiter(map(operator.is_, values, repeat(True)), bool, len(values))
    return pa.Array.from_buffers(pa.bool_(), len(values), [
        _validity(values, nulls, empty), pa.py_buffer(np.packbits(data, bitorder="little"))])


def _strings(values: list[Any], nulls: bool, empty: np.ndarray | None) -> pa.Array:
    """Offsets and bytes built by polars (natively, as pa.array does), cast to Arrow's
    32-bit offsets; the validity is ours. A lone surrogate raises ``UnicodeEncodeError``,
    as in pa.array."""
    import polars as pl

    built = pl.Series(values, dtype=pl.String).to_arrow(compat_level=pl.CompatLevel.oldest())
    if isinstance(built, pa.ChunkedArray):
        built = built.combine_chunks()
    offsets = np.frombuffer(built.buffers()[1], np.int64, len(built) + 1, built.offset * 8)
    if offsets[-1] - offsets[0] > _STRING_BYTES:
        raise _Unsure
    cast = built.cast(pa.string())
    return pa.Array.from_buffers(pa.string(), len(values), [
        _validity(values, nulls, empty), *cast.buffers()[1:]], offset=cast.offset)


def _lists(values: list[Any], nulls: bool, empty: np.ndarray | None) -> pa.Array:
    rows = [() if v is None else v for v in values] if nulls else values
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, rows), np.int64, len(values)), out=offsets[1:])
    if offsets[-1] > _STRING_BYTES:
        raise _Unsure
    child = _array(list(chain.from_iterable(rows)))
    return pa.Array.from_buffers(pa.list_(child.type), len(values), [
        _validity(values, nulls, empty), pa.py_buffer(offsets.astype(np.int32))],
        children=[child])


def _structs(values: list[Any], nulls: bool, empty: np.ndarray | None) -> pa.Array:
    rows = [_EMPTY if v is None else v for v in values] if nulls else values
    names = dict.fromkeys(chain.from_iterable(rows))
    if not all(type(name) is str for name in names):
        raise _Unsure
    # Under a null struct (or an empty one) each field holds a valid empty value; a key
    # missing from a struct is a null.
    inside = (np.fromiter(map(operator.is_, values, repeat(None)), bool, len(values))
              if nulls else None)
    children = [_array(list(map(operator.methodcaller("get", name), rows)), inside)
                for name in names]
    fields = [pa.field(name, child.type) for name, child in zip(names, children, strict=True)]
    return pa.Array.from_buffers(pa.struct(fields), len(values),
                                 [_validity(values, nulls, empty)], children=children)


def _bools_among_numbers(values: list[Any]) -> bool:
    """True when booleans and numbers meet in one column or one nested position."""
    kinds: set[type] = set()
    items: list[Any] = []
    fields: dict[str, list[Any]] = {}
    for v in values:
        if isinstance(v, bool):
            kinds.add(bool)
        elif isinstance(v, int | float):
            kinds.add(float)
        elif isinstance(v, list):
            items.extend(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                fields.setdefault(k, []).append(x)
    if len(kinds) == 2:
        return True
    return (bool(items) and _bools_among_numbers(items)) or any(
        _bools_among_numbers(x) for x in fields.values()
    )
