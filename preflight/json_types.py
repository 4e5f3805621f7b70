"""JSON types: of a Python value, of a polars column's values, and how details name them."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

# How a detail names each JSON type ("expected a list, got a string").
JSON_TYPE_NOUNS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def json_type(value: Any) -> str:
    """A Python value's JSON type; a whole finite float is an integer."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if math.isfinite(value) and value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def dtype_kind(dtype: pl.DataType) -> str:
    """The JSON type a polars column's values have."""
    if dtype == pl.String:
        return "string"
    if dtype == pl.Boolean:
        return "boolean"
    if dtype.is_integer():
        return "integer"
    if dtype.is_float():
        return "number"
    if isinstance(dtype, pl.List | pl.Array):
        return "array"
    if isinstance(dtype, pl.Struct):
        return "object"
    if dtype == pl.Null:
        return "null"
    return "string"
