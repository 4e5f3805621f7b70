"""Python values (as ``json.loads`` gives them) as Arrow arrays, typed as ``pa.array`` types
them, built from numpy buffers.

``pa.array`` first asks pyarrow's pandas shim whether the values are a pandas object, which
imports pandas (0.3-0.5 s, ~600 modules) in each process on its first call. The reader types
Python values whenever a field's JSON type changes inside a block (a label written once as
``"2"``, a text as a number): the very faults the gate is for, planted in every sample corpus.

``values_array`` builds what ``pa.array`` would (same type, same values) for the kinds JSON
has (None, bool, int, float, str, list, dict), and raises where ``pa.array`` would refuse the
values (they do not share one type) and where booleans meet numbers at one position (Arrow
would quietly make ``true`` 1.0); a property test holds the two equal. What it is not sure
of (integers past 2**53 beside floats, strings over 2 GB, other Python types) goes to
``pa.array``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

_INT64 = (-(2**63), 2**63 - 1)
_EXACT = 2**53  # beside a float, an integer further from 0 may not be a double exactly
_STRING_BYTES = 2**31 - 1  # past this pa.array makes a chunked array
_KINDS = (bool, int, float, str, list, dict)  # bool first: a bool is an int too


class _Unsure(Exception):
    """The values hold something ``values_array`` does not type: ask ``pa.array``."""


def values_array(values: list[Any]) -> pa.Array:
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


def strings_array(values: list[str | None]) -> pa.Array:
    """A string array of the values (None is null), as ``pa.array(values, pa.string())``."""
    if all(v is None for v in values):
        return pa.nulls(len(values), pa.string())
    return _strings(values, _validity(values))


def _array(values: list[Any]) -> pa.Array:
    kinds = {_kind(v) for v in values if v is not None}
    validity = _validity(values)
    if not kinds:
        return pa.nulls(len(values))
    if kinds <= {int, float}:
        return _numbers(values, validity, float in kinds)
    if len(kinds) > 1:
        raise TypeError(f"values of {len(kinds)} JSON types share no Arrow type")
    kind = kinds.pop()
    if kind is bool:
        return _bools(values, validity)
    if kind is str:
        return _strings(values, validity)
    if kind is list:
        return _lists(values, validity)
    return _structs(values, validity)


def _kind(value: Any) -> type:
    for kind in _KINDS:
        if isinstance(value, kind):
            return kind
    raise _Unsure


def _validity(values: list[Any]) -> pa.Buffer | None:
    valid = np.fromiter((v is not None for v in values), bool, len(values))
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _numbers(values: list[Any], validity: pa.Buffer | None, floats: bool) -> pa.Array:
    if floats:
        if any(type(v) is int and not -_EXACT <= v <= _EXACT for v in values):
            raise _Unsure
        data = np.fromiter((0.0 if v is None else v for v in values), np.float64, len(values))
        return pa.Array.from_buffers(pa.float64(), len(values), [validity, pa.py_buffer(data)])
    low, high = _INT64
    if any(v is not None and not low <= v <= high for v in values):
        raise OverflowError("Python int too large to convert to C long")
    data = np.fromiter((0 if v is None else v for v in values), np.int64, len(values))
    return pa.Array.from_buffers(pa.int64(), len(values), [validity, pa.py_buffer(data)])


def _bools(values: list[Any], validity: pa.Buffer | None) -> pa.Array:
    data = np.fromiter((v is True for v in values), bool, len(values))
    return pa.Array.from_buffers(pa.bool_(), len(values),
                                 [validity, pa.py_buffer(np.packbits(data, bitorder="little"))])


def _strings(values: list[Any], validity: pa.Buffer | None) -> pa.Array:
    encoded = [b"" if v is None else v.encode("utf-8") for v in values]  # surrogates: raise
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, len(values)), out=offsets[1:])
    if offsets[-1] > _STRING_BYTES:
        raise _Unsure
    return pa.Array.from_buffers(pa.string(), len(values), [
        validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))])


def _lists(values: list[Any], validity: pa.Buffer | None) -> pa.Array:
    lengths = np.fromiter((0 if v is None else len(v) for v in values), np.int64, len(values))
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _STRING_BYTES:
        raise _Unsure
    child = _array([item for v in values if v is not None for item in v])
    return pa.Array.from_buffers(pa.list_(child.type), len(values),
                                 [validity, pa.py_buffer(offsets.astype(np.int32))],
                                 children=[child])


def _structs(values: list[Any], validity: pa.Buffer | None) -> pa.Array:
    names: dict[str, None] = {}
    for v in values:
        if v is not None:
            names.update(dict.fromkeys(v))
    if not all(type(name) is str for name in names):
        raise _Unsure
    children = [_array([None if v is None else v.get(name) for v in values]) for name in names]
    fields = [pa.field(name, child.type) for name, child in zip(names, children, strict=True)]
    return pa.Array.from_buffers(pa.struct(fields), len(values), [validity], children=children)


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
