"""JSON arrays: the fast path (element boundaries by numpy, elements read as JSON Lines) gives
the rows, records, malformed units and notes the structural scanner gives, on random arrays
of good and odd elements, pretty-printed or not, cut anywhere."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.batch import Batch
from preflight.cli import main
from preflight.source import array_scan, jsonarray
from preflight.source.json_line import MAX_DEPTH
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
    b'{"x": 9223372036854775813}', b'{"n": [1.5, 18446744073709551615]}',  # past int64
    b'{"r": "never closed', b'{"s": [1, {"t": 2}', b'{"u": ["v"}',  # quotes, brackets open
    b'{"w": 1]}', b"]",                                       # a ] that closes nothing
    b'{"m": "x\n{}\n"}', b'{"m": "x\n  {\n"}',                # a closed string with a { line
    b'{\n  "o": "open,\n  "n": [\n    {\n      "k": 1\n    }\n  ]\n}',  # runaways, nested
    b'{\n  "o": 1]\n  "n": [\n    {\n      "k": 1\n    }\n  ]\n}',
    b'{"t": "2024-01-02"}', b'{"i": "a string now"}', b'{"q": "\\"}, {\\""}',
    b"", b'{"a": 1} {"b": 2}', b'x', b"\xef\xbb\xbf{}",        # empty, no comma, junk, BOM
    b'{"a": 1} 7', b'true {"b": 2}', b'{"c": 3} "s"', b'{"e": 4}\x0c',  # values with no comma
    b"\x0b[1, 2]", b"5}", b'{"f": 5} ]',                    # stray bytes, brackets
    b'{"d": ' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"}",
]
_ELEMENTS = st.lists(st.one_of(_GOOD, _GOOD, _GOOD, st.sampled_from(_ODD_ELEMENTS)),
                     max_size=25)
_SEPARATORS = st.sampled_from([b",", b", ", b",\n  ", b"\r\n,\t", b" ,", b"\n, ",
                              b"\n  ,  "])  # the last: comma-first
_ENDINGS = st.sampled_from([b"]", b"]\n", b"\n]  \n", b"] [{}]", b"]x", b""])


def _array(elements: list[bytes], sep: bytes, lead: bytes, ending: bytes) -> bytes:
    return lead + b"[" + sep.join(elements) + ending


def _read(path: Path, *, fast: bool, chunk: int, stretch: int = 1000,
          first: int = jsonarray.ARRAY_BATCH) -> list[Batch]:
    """The batches of ``read_json`` (fast stretches in blocks of ``chunk`` bytes; with
    ``stretch`` 0 the scanner hands back at its first clean comma, every time), or of the
    structural scanner alone over the whole file; ``first`` units to a batch."""
    saved = array_scan.CHUNK_BYTES, jsonarray._FAST_STRETCH, jsonarray.ARRAY_BATCH
    array_scan.CHUNK_BYTES, jsonarray._FAST_STRETCH, jsonarray.ARRAY_BATCH = (
        chunk, stretch, first)
    try:
        if fast:
            return list(jsonarray.read_json(path, 0, "d.json", {}))
        stream, raw = open_stream(path)
        with stream:
            return list(jsonarray._batches(jsonarray.elements(stream), raw, 0, "d.json",
                                           done=0))
    finally:
        array_scan.CHUNK_BYTES, jsonarray._FAST_STRETCH, jsonarray.ARRAY_BATCH = saved


def _first(batches: list[Batch]) -> tuple[list[int], list[int]]:
    """The rows and malformed rows of the first batch (which fields are inferred from)."""
    if not batches:
        return [], []
    return batches[0].rows.tolist(), [m.row for m in batches[0].malformed]


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


@pytest.mark.parametrize("first", [3, 20_000], ids=["small-batches", "one-batch"])
@pytest.mark.parametrize("stretch", [0, 1000], ids=["hand-back-often", "back-off"])
@pytest.mark.parametrize("chunk", [16, 200, 1 << 20], ids=["tiny-blocks", "blocks", "one"])
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(elements=_ELEMENTS, sep=_SEPARATORS, ending=_ENDINGS,
       lead=st.sampled_from([b"", b"\xef\xbb\xbf", b"\n  "]), cut_at=st.none() | st.floats(0, 1))
def test_fast_path_equals_the_scanner(tmp_path: Path, chunk: int, stretch: int, first: int,
                                      elements: list[bytes], sep: bytes, ending: bytes,
                                      lead: bytes, cut_at: float | None) -> None:
    data = _array(elements, sep, lead, ending)
    if cut_at is not None:  # a file cut off anywhere after its "["
        keep = len(lead) + 1
        data = data[: keep + int(cut_at * (len(data) - keep))]
    path = tmp_path / "d.json"
    path.write_bytes(data)
    fast = _read(path, fast=True, chunk=chunk, stretch=stretch, first=first)
    slow = _read(path, fast=False, chunk=chunk, first=first)
    assert [r for b in fast for r in b.rows.tolist()] == [r for b in slow for r in b.rows.tolist()]
    assert _records(fast) == _records(slow)
    assert _notes(fast) == _notes(slow)
    assert _first(fast) == _first(slow)
    assert all(b.file == "d.json" and b.file_index == 0 for b in fast)


def test_a_clean_array_goes_fast_to_its_end(tmp_path: Path) -> None:
    # Pretty-printed, with strings full of brackets, commas, escaped quotes and backslashes.
    records = [{"i": k, "t": f'[{k}], {{"no": "split"}} \\" \\\\', "n": {"a": [k, None]}}
               for k in range(500)]
    path = tmp_path / "d.json"
    path.write_text(json.dumps(records, indent=2) + "\n")
    seen: list[int] = []
    real = jsonarray.elements

    def scanner(stream: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("index", 0))
        return real(stream, **kwargs)

    jsonarray.elements = scanner
    try:
        batches = _read(path, fast=True, chunk=4096, first=100)
    finally:
        jsonarray.elements = real
    assert seen == []  # not even the last element and the closing "]" needed the scanner
    assert [r for b in batches for r in b.rows.tolist()] == list(range(500))
    assert [v for b in batches for v in b.values("t")] == [r["t"] for r in records]
    assert [v for b in batches for v in b.values("n")] == [r["n"] for r in records]
    assert batches[0].rows.tolist() == list(range(100))
    assert len(batches) > 2 and not any(b.malformed for b in batches)
    assert sum(b.progress for b in batches) == path.stat().st_size


@pytest.mark.parametrize("odd_at", [None, 0, 1, 29, 30, 31, 59])
def test_the_first_batch_is_the_scanners_first_batch(tmp_path: Path, odd_at: int | None
                                                     ) -> None:
    # Fields are inferred from the first batch (and each shard's shape from its first):
    # an odd element early on must not leave it with a record or none.
    elements = [json.dumps({"text": f"t{k}", "label": k % 2}).encode() for k in range(60)]
    if odd_at is not None:
        elements[odd_at] = b"5"
    path = tmp_path / "d.json"
    path.write_bytes(b"[" + b",".join(elements) + b"]")
    for chunk in (64, 1 << 20):
        fast = _read(path, fast=True, chunk=chunk, first=30)
        slow = _read(path, fast=False, chunk=chunk, first=30)
        assert _first(fast) == _first(slow)
        assert len(fast[0].rows) + len(fast[0].malformed) == 30
        assert [r for b in fast for r in b.rows.tolist()] == [
            r for b in slow for r in b.rows.tolist()]


def test_fields_are_inferred_past_an_odd_element_at_the_start(tmp_path: Path) -> None:
    # A first record without the text field, then a bare number: the text field is still
    # inferred from the records after them, so the hidden characters there are found.
    texts = [json.dumps({"text": f"doc {k} \u200b hidden", "label": k % 2}).encode()
             for k in range(40)]
    path = tmp_path / "d.json"
    path.write_bytes(b'[{"id": 7}, 5, ' + b", ".join(texts) + b"]")
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out", str(out),
                                       "--quiet", "--no-progress"])
    assert result.exit_code == 1, result.output
    found = pl.read_parquet(out / "findings.parquet")
    hidden = found.filter(pl.col("code") == "zero_width_space")
    assert hidden.get_column("row").to_list() == list(range(2, 42))
    assert found.filter(pl.col("check") == "malformed").get_column("row").to_list() == [1]


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


@pytest.mark.parametrize("joint", ["\n, ", ", "], ids=["comma-first", "brace-comma-brace"])
@pytest.mark.parametrize("stretch", [0, 1000], ids=["hand-back-often", "back-off"])
@pytest.mark.parametrize("chunk", [64, 1 << 20], ids=["blocks", "one"])
def test_the_fast_path_hands_the_scanner_a_comma_first_elements_column(
        tmp_path: Path, chunk: int, stretch: int, joint: str) -> None:
    # Comma-first (", {") or shared lines ("}, {"): the column of that "{" bounds where a
    # runaway element is cut; read fast up to it, the scanner must know it as well (else a
    # nested object became a record).
    records = [{"id": k, "items": [{"k": 1}, {"k": 2}]} for k in range(8)]
    text = "[ " + joint.join(json.dumps(r, indent=2) for r in records) + "\n]\n"
    path = tmp_path / "d.json"
    path.write_bytes(text.replace('"id": 7,', '"id": 7, "o": "never closed,', 1).encode())
    fast = _read(path, fast=True, chunk=chunk, stretch=stretch, first=2)
    slow = _read(path, fast=False, chunk=chunk, first=2)
    assert _records(fast) == _records(slow)
    assert _notes(fast) == _notes(slow)
    assert [r for b in fast for r in b.rows.tolist()] == list(range(7))
