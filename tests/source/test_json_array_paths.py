"""JSON arrays: the fast path (element boundaries by numpy, elements read as JSON Lines) gives
the rows, records, malformed units and notes the structural scanner gives, on random arrays
of good and odd elements, pretty-printed or not, cut anywhere."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.batch import Batch
from preflight.source import array_scan, jsonarray
from preflight.source.jsonl import MAX_DEPTH
from preflight.source.tracked import open_stream

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=10)
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32) | _TEXT,
    # (a NUL in a member's name: polars cuts a struct field's name there, on every path)
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        _TEXT.map(lambda k: k.replace("\x00", "")), inner, max_size=3),
    max_leaves=6,
)
_RECORD = st.dictionaries(st.sampled_from(["i", "t", "x", "n", "[k,]"]), _VALUE, max_size=4)
_GOOD = st.builds(
    lambda r, indent, ascii_: json.dumps(r, indent=indent, ensure_ascii=ascii_).encode(),
    _RECORD, st.sampled_from([None, 2, "\t"]), st.booleans())
# Every kind of element the scanner treats specially, each with its own verdict.
_ODD_ELEMENTS = [
    b"{oops}", b"[1, 2]", b"5", b'"text"', b"null", b"true",  # malformed units
    b'{"a": 1}}', b'{"a": [1}', b'{"a": {"b": 2]}',          # brackets that do not match
    b'{"a": "x\ty"}', b'{"a": "line\nbreak"}',                # control characters in strings
    b'{"a": "\xff\xfe"}',                                     # invalid UTF-8
    b'{"a": "lone \\ud800 surrogate"}', b'{"a": "\\\\ud800 not one"}',
    b'{"a": NaN, "b": -Infinity}', b'{"a": 1, "a": 2}', b"{}",
    b'{"a": Inf}', b'{"b": -NaN}',                           # Arrow's, not Python's
    b'{"t": "2024-01-02"}', b'{"i": "a string now"}', b'{"q": "\\"}, {\\""}',
    b"", b'{"a": 1} {"b": 2}', b'x', b"\xef\xbb\xbf{}",        # empty, no comma, junk, BOM
    b'{"a": 1} 7', b'true {"b": 2}', b'{"c": 3} "s"', b'{"e": 4}\x0c',  # values with no comma
    b'{"d": ' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"}",
]
_ELEMENTS = st.lists(st.one_of(_GOOD, _GOOD, _GOOD, st.sampled_from(_ODD_ELEMENTS)),
                     max_size=25)
_SEPARATORS = st.sampled_from([b",", b", ", b",\n  ", b"\r\n,\t", b" ,"])
_ENDINGS = st.sampled_from([b"]", b"]\n", b"\n]  \n", b"] [{}]", b"]x", b""])


def _array(elements: list[bytes], sep: bytes, lead: bytes, ending: bytes) -> bytes:
    return lead + b"[" + sep.join(elements) + ending


def _read(path: Path, *, fast: bool, chunk: int, stretch: int = 1000) -> list[Batch]:
    """The batches of ``read_json`` (fast stretches in blocks of ``chunk`` bytes; with
    ``stretch`` 0 the scanner hands back at its first clean comma, every time), or of the
    structural scanner alone over the whole file."""
    if not fast:
        stream, raw = open_stream(path)
        with stream:
            return list(jsonarray._batches(jsonarray.elements(stream), raw, 0, "d.json",
                                           done=0))
    saved = array_scan.CHUNK_BYTES, jsonarray._FAST_STRETCH
    array_scan.CHUNK_BYTES, jsonarray._FAST_STRETCH = chunk, stretch
    try:
        return list(jsonarray.read_json(path, 0, "d.json", {}))
    finally:
        array_scan.CHUNK_BYTES, jsonarray._FAST_STRETCH = saved


def _records(batches: list[Batch]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for b in batches:
        columns = {name: (b.json_types(name).to_list(), b.values(name))
                   for name in b.frame.columns}
        for k, row in enumerate(b.rows.tolist()):
            out[row] = {name: (types[k], _same_nan(values[k]))
                        for name, (types, values) in columns.items() if types[k] != "null"}
    return out


def _same_nan(value: Any) -> Any:
    """A value as compared: NaN equal to itself, and objects without their null members (a
    batch types an object column as one struct of every member seen in the batch, so
    ``{}`` reads as ``{"k": None}`` beside ``{"k": 1}``: batches cut elsewhere differ so)."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, dict):
        return {k: _same_nan(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_same_nan(v) for v in value]
    return value


def _notes(batches: list[Batch]) -> tuple[list[Any], dict[int, int], int]:
    malformed = [(m.row, m.code, m.detail) for b in batches for m in b.malformed]
    surrogates = {int(b.rows[i]): n for b in batches for i, n in b.lone_surrogates.items()}
    return malformed, surrogates, sum(b.progress for b in batches)


@pytest.mark.parametrize("stretch", [0, 1000], ids=["hand-back-often", "back-off"])
@pytest.mark.parametrize("chunk", [16, 200, 1 << 20], ids=["tiny-blocks", "blocks", "one"])
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(elements=_ELEMENTS, sep=_SEPARATORS, ending=_ENDINGS,
       lead=st.sampled_from([b"", b"\xef\xbb\xbf", b"\n  "]), cut_at=st.none() | st.floats(0, 1))
def test_fast_path_equals_the_scanner(tmp_path: Path, chunk: int, stretch: int,
                                      elements: list[bytes], sep: bytes, ending: bytes,
                                      lead: bytes, cut_at: float | None) -> None:
    data = _array(elements, sep, lead, ending)
    if cut_at is not None:  # a file cut off anywhere after its "["
        keep = len(lead) + 1
        data = data[: keep + int(cut_at * (len(data) - keep))]
    path = tmp_path / "d.json"
    path.write_bytes(data)
    fast = _read(path, fast=True, chunk=chunk, stretch=stretch)
    slow = _read(path, fast=False, chunk=chunk)
    assert [r for b in fast for r in b.rows.tolist()] == [r for b in slow for r in b.rows.tolist()]
    assert _records(fast) == _records(slow)
    assert _notes(fast) == _notes(slow)
    assert all(b.file == "d.json" and b.file_index == 0 for b in fast)


def test_a_clean_array_goes_fast_up_to_its_last_element(tmp_path: Path) -> None:
    # Pretty-printed, with strings full of brackets, commas, escaped quotes and backslashes.
    records = [{"i": k, "t": f'[{k}], {{"no": "split"}} \\" \\\\', "n": {"a": [k, None]}}
               for k in range(500)]
    path = tmp_path / "d.json"
    path.write_text(json.dumps(records, indent=2))
    seen: list[int] = []
    real = jsonarray.elements

    def scanner(stream: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("index", 0))
        return real(stream, **kwargs)

    jsonarray.elements = scanner
    saved = array_scan.CHUNK_BYTES
    array_scan.CHUNK_BYTES = 4096
    try:
        batches = list(jsonarray.read_json(path, 0, None, {}))
    finally:
        jsonarray.elements, array_scan.CHUNK_BYTES = real, saved
    assert seen == [499]  # the scanner read only the last element (and the closing "]")
    assert [r for b in batches for r in b.rows.tolist()] == list(range(500))
    assert [v for b in batches for v in b.values("t")] == [r["t"] for r in records]
    assert [v for b in batches for v in b.values("n")] == [r["n"] for r in records]
    assert len(batches) > 2 and not any(b.malformed for b in batches)


def test_an_odd_element_hands_the_rest_to_the_scanner(tmp_path: Path) -> None:
    good = [json.dumps({"i": k}).encode() for k in range(50)]
    path = tmp_path / "d.json"
    path.write_bytes(b"[" + b",".join([*good[:20], b"{oops}", *good[20:]]) + b"]")
    batches = list(jsonarray.read_json(path, 0, None, {}))
    assert [(m.row, m.code) for b in batches for m in b.malformed] == [(20, "invalid_json")]
    assert [r for b in batches for r in b.rows.tolist()] == [*range(20), *range(21, 51)]
    assert [v for b in batches for v in b.values("i")] == list(range(50))


def test_an_element_that_never_closes_at_the_arrays_level_is_not_read_whole(
        tmp_path: Path) -> None:
    # ``{"a": [1}``: its "}" closes the "[" by count, so numpy never sees the element end;
    # the scanner finds the mismatch at once. The fast path must not hold the rest of the
    # file while it waits (memory is bounded by the largest element, not the file).
    good = [json.dumps({"i": k, "t": "x" * 50}).encode() for k in range(4000)]
    path = tmp_path / "d.json"
    path.write_bytes(b"[" + b",".join([*good[:10], b'{"a": [1}', *good[10:]]) + b"]")
    sizes: list[int] = []
    real = array_scan.cut

    def spy(data: bytes, *, eof: bool) -> array_scan.Cut:
        sizes.append(len(data))
        return real(data, eof=eof)

    array_scan.cut = spy  # type: ignore[assignment]
    try:
        fast = _read(path, fast=True, chunk=4096)
    finally:
        array_scan.cut = real
    assert max(sizes) < 3 * 4096 < path.stat().st_size // 10
    slow = _read(path, fast=False, chunk=4096)
    assert [r for b in fast for r in b.rows.tolist()] == [r for b in slow for r in b.rows.tolist()]
    assert _notes(fast) == _notes(slow)
    assert [(m.row, m.code) for b in fast for m in b.malformed][:1] == [(10, "invalid_json")]
