"""JSON Lines: the fast path (Arrow on pieces, halving around bad lines) gives the batch the
exact line-by-line path gives, on random mixes of good and bad lines."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.batch import Batch
from preflight.source import jsonl, jsonl_arrow

_TEXT = st.text(st.characters(codec="utf-8", exclude_characters='"\\\n\r',
                              exclude_categories=("Cs", "Cc")), max_size=12)
_GOOD = st.builds(lambda i, t: f'{{"i": {i}, "t": "{t}"}}'.encode(),
                  st.integers(-(10**6), 10**6), _TEXT)
# Every kind of line the readers treat specially, each with its own verdict.
_ODD_LINES = [
    b'{"i": 1, "t": ',               # invalid_json (truncated)
    b"{'i': 2}",                     # invalid_json (single quotes)
    b'{"i": 3, "t": "\xff\xfe"}',    # invalid_utf8
    b"[1, 2, 3]", b"42", b'"text"', b"null", b"true",  # not_an_object
    b"", b"   ", b"\t",              # blank lines: no record, no finding
    b'{"i": 4}{"i": 5}',             # two objects on one line
    b'{"i": 6, "i": 7}',             # a duplicate key
    b'{"i": 8, "x": NaN}', b'{"i": 9, "x": -Infinity}',  # Python literals
    b'{"i": 16, "x": Inf}', b'{"i": 17, "x": -NaN}',  # not Python's: malformed
    b'{"i": 10, "t": "crlf"}\r',     # a CRLF line end
    b'  {"i": 11, "t": "indented"}',  # an object after blanks
    b'{"i": "twelve"}',              # the field's type changes
    b'{"i": 13, "t": "lone \\ud800 surrogate"}',
    b'{"t": "2024-01-02"}',          # a date-like string
    b"{}",                           # an empty object
    b'{"i": 14, "n": {"a": [1, 2]}}',  # nested values
    b'{"i": 15, "l": [null, null]}',  # a list of only nulls (pyarrow 26 builds it invalid)
    # Integers past int64 (Arrow reads them as rounded floats): exact on both paths.
    b'{"i": 18, "x": 18446744073709551617}', b'{"i": 19, "x": 9223372036854775813}',
    b'{"i": 20, "n": {"a": [1.5, -9223372036854775809]}}',
    # Past what a float holds exactly, in a column with fractions: Arrow rounds it too.
    b'{"i": 21, "x": 9007199254740993}', b'{"i": 22, "x": 0.5}',
    b'{"i": 23, "n": {"a": [2.5, 1234567890123456789]}}',
]
_ODD = st.sampled_from(_ODD_LINES)
_LINES = st.lists(st.one_of(_GOOD, _GOOD, _ODD), min_size=1, max_size=60)


def _same(fast: Batch, slow: Batch) -> None:
    assert fast.rows.tolist() == slow.rows.tolist()
    assert fast.malformed == slow.malformed
    assert fast.lone_surrogates == slow.lone_surrogates
    assert fast.raw.keys() == slow.raw.keys()
    for name, values in fast.raw.items():
        assert [_nan(v) for v in values] == [_nan(v) for v in slow.raw[name]], name
    assert fast.frame.schema == slow.frame.schema
    for name in fast.frame.columns:
        a, b = fast.frame[name].to_list(), slow.frame[name].to_list()
        assert [_nan(v) for v in a] == [_nan(v) for v in b], name


def _nan(value: object) -> object:
    return "nan" if isinstance(value, float) and math.isnan(value) else value


@pytest.mark.parametrize("piece_bytes", [64, 1 << 20], ids=["many-pieces", "one-piece"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=_LINES, slow_lines=st.sampled_from([1, 4, 64]))
def test_fast_path_equals_the_line_by_line_path(piece_bytes: int, lines: list[bytes],
                                                slow_lines: int) -> None:
    block = b"\n".join(lines) + b"\n"
    saved = jsonl.PIECE_BYTES, jsonl._SLOW_LINES
    jsonl.PIECE_BYTES, jsonl._SLOW_LINES = piece_bytes, slow_lines
    try:
        fast, n_lines = jsonl.block_batch(block, 0, 0, None, 0)
    finally:
        jsonl.PIECE_BYTES, jsonl._SLOW_LINES = saved
    slow = jsonl._merge([jsonl._slow(lines, 0)])
    assert n_lines == len(lines)
    _same(fast, slow)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=_LINES)
def test_good_lines_beside_a_bad_one_are_typed_as_their_python_values(
        lines: list[bytes]) -> None:
    """The line-by-line path hands its good lines to Arrow together (typing the Python
    values imports pandas): the batch equals the one typed from the parsed values."""
    by_arrow = jsonl._merge([jsonl._slow(lines, 0)])

    def refuse(*_: object, **__: object) -> None:
        raise jsonl_arrow.Fallback

    saved, jsonl.read_lines = jsonl.read_lines, refuse  # as _slow looks it up
    try:
        by_values = jsonl._merge([jsonl._slow(lines, 0)])
    finally:
        jsonl.read_lines = saved
    _same(by_arrow, by_values)


def test_a_bad_line_leaves_its_neighbours_typed_by_arrow() -> None:
    lines = [b'{"i": 1, "t": "a", "x": 0.5}', b'{"i": 2, "t": ', b'{"i": 3, "t": "c"}']
    part = jsonl._slow(lines, 10)
    assert part.table is not None and part.records == []  # Arrow took the good lines
    assert part.rows.tolist() == [10, 12]
    assert [m.row for m in part.malformed] == [11]
    assert part.table.column("x").to_pylist() == [0.5, None]


def test_a_mix_of_every_odd_line_is_read_alike_on_both_paths() -> None:
    # One planted example of each odd line between good ones, in pieces of a few lines.
    lines = [b'{"i": 0, "t": "zero"}']
    for k, line in enumerate(_ODD_LINES):
        lines += [line, f'{{"i": {k}, "t": "ok"}}'.encode()]
    block = b"\n".join(lines) + b"\n"
    saved = jsonl.PIECE_BYTES, jsonl._SLOW_LINES
    jsonl.PIECE_BYTES, jsonl._SLOW_LINES = 48, 1
    try:
        fast, _ = jsonl.block_batch(block, 0, 0, None, 0)
    finally:
        jsonl.PIECE_BYTES, jsonl._SLOW_LINES = saved
    slow = jsonl._merge([jsonl._slow(lines, 0)])
    _same(fast, slow)
    codes = {m.code for m in slow.malformed}
    assert codes == {"invalid_json", "invalid_utf8", "not_an_object",
                     "duplicate_key"}  # really planted
    assert slow.lone_surrogates and slow.raw  # the surrogate and the changed type too


@pytest.mark.parametrize("deep", [b'{"a":' * 20_000,
                                  b'{"a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"],
                         ids=["unclosed", "valid-but-too-deep"])
def test_a_deep_line_among_objects_never_reaches_arrow(deep: bytes) -> None:
    # Every line starts with "{", so the block is judged by counting brackets alone: the
    # one deep line must still keep Arrow (which would crash) away, and be a finding.
    good = [f'{{"i": {k}, "t": "[{k}]"}}'.encode() for k in range(300)]
    lines = [*good[:150], deep, *good[150:]]
    batch, _ = jsonl.block_batch(b"\n".join(lines) + b"\n", 0, 0, None, 0)
    assert batch.rows.tolist() == [*range(150), *range(151, 301)]
    assert [(m.row, m.code) for m in batch.malformed] == [(150, "too_deep")]


def _nested(depth: int, leaf: object = 1) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("piece_bytes", [256, 1 << 20], ids=["many-pieces", "one-piece"])
def test_a_column_nested_past_raw_depth_is_kept_as_python_values(piece_bytes: int) -> None:
    # A few allowed records 150 levels deep among flat ones: polars would convert the
    # column at a cost of rows x depth (minutes, GBs at scale); the batch keeps their values.
    import json

    deep_at = {3, 40, 77}
    records = [{"i": k, "t": "x", **({"m": _nested(150)} if k in deep_at else {})}
               for k in range(100)]
    lines = [json.dumps(r).encode() for r in records]
    block = b"\n".join(lines) + b"\n"
    saved = jsonl.PIECE_BYTES
    jsonl.PIECE_BYTES = piece_bytes
    try:
        fast, _ = jsonl.block_batch(block, 0, 0, None, 0)
    finally:
        jsonl.PIECE_BYTES = saved
    slow = jsonl._merge([jsonl._slow(lines, 0)])
    for batch in (fast, slow):
        assert batch.malformed == []  # 151 levels is allowed (MAX_DEPTH 200)
        assert batch.frame.schema["m"] == pl.String and batch.frame["m"].null_count() == 100
        assert batch.values("m") == [r.get("m") for r in records]
        assert batch.values("i") == list(range(100))  # the other columns stay typed
    _same(fast, slow)


def test_a_deep_parquet_column_is_kept_as_python_values(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from preflight.record_batches import RAW_DEPTH
    from preflight.source import open_source

    values = [_nested(RAW_DEPTH + 1) if k % 7 == 0 else None for k in range(50)]
    shallow = [_nested(RAW_DEPTH) if k % 7 == 0 else None for k in range(50)]
    pq.write_table(pa.table({"deep": values, "shallow": shallow,
                             "t": ["a"] * 50}), tmp_path / "d.parquet")
    batch = next(open_source(tmp_path / "d.parquet").batches())
    assert batch.values("deep") == values and "deep" in batch.raw
    assert "shallow" not in batch.raw and batch.values("shallow") == shallow  # at the limit


def test_text_that_mentions_inf_stays_on_arrows_path() -> None:
    # The guard for Arrow-only literals (Inf, -NaN) must look at values, not at text: a
    # block whose strings say ", Information" is read by Arrow, not line by line.
    block = b'{"t": "tools, Information"}\n{"t": "a [Inference] engine"}\n'
    _, table = jsonl_arrow.read_lines(block, 0)
    assert table.num_rows == 2
    with pytest.raises(jsonl_arrow.Fallback):
        jsonl_arrow.read_lines(b'{"t": "ok"}\n{"x": -Inf}\n', 0)



# Bytes that make up Arrow-only literals and what stands around a value; the look at each
# mention must agree with one regex over the block (the guard's definition).
_AROUND = st.lists(st.sampled_from([b"Inf", b"-Inf", b"-NaN", b"NaN", b"Infinity", b"-",
                                    b" ", b"\t", b"\r", b":", b"[", b",", b"}", b"]", b"{",
                                    b'"', b"x", b"\n"]), max_size=30).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(block=_AROUND)
def test_the_literal_guard_agrees_with_its_regex(block: bytes) -> None:
    expected = jsonl_arrow._NOT_PYTHONS.search(block) is not None
    assert jsonl_arrow._may_hold_not_pythons(block) is expected


@pytest.mark.parametrize("value", [b"Inf", b"-Inf", b"-NaN", b" \t-Inf\r "])
@pytest.mark.parametrize("mentions", [0, 10, 1_000], ids=["alone", "some-text", "much-text"])
def test_a_literal_among_many_mentions_is_still_found(value: bytes, mentions: int) -> None:
    # Past _LOOKED_AT mentions the guard takes one regex pass; either way the value is found
    # and text that only mentions the word is not.
    text = b'{"t": "' + b", Information, Inference" * mentions + b'"}\n'
    assert not jsonl_arrow._may_hold_not_pythons(text * 3)
    assert jsonl_arrow._may_hold_not_pythons(text + b'{"x": [1,' + value + b"]}\n" + text)


@pytest.mark.parametrize("line", [b'{"x": -Inf}', b'{"x": [1, Inf]}', b'{"x": {"y": -NaN}}',
                                  b'{"x": [{"y": [Inf]}]}'])
def test_a_literal_nested_anywhere_sends_its_block_line_by_line(line: bytes) -> None:
    # Arrow reads the literals as floats, wherever they nest; the guard looks at blocks
    # with a float anywhere in their schema.
    with pytest.raises(jsonl_arrow.Fallback):
        jsonl_arrow.read_lines(b'{"t": "ok"}\n' + line + b"\n", 0)


def test_a_literal_inside_text_only_is_read_by_arrow_as_text() -> None:
    # No float column: what looks like a value is inside a string, and both paths read it
    # as that string.
    block = b'{"t": "a, -Inf]"}\n{"t": "[1, -NaN}"}\n'
    _, table = jsonl_arrow.read_lines(block, 0)
    assert table.column("t").to_pylist() == ["a, -Inf]", "[1, -NaN}"]


def test_large_floats_written_as_floats_stay_on_arrows_path() -> None:
    # Only an integer literal past int64 sends a block line by line, not a float that large
    # (a corpus of such floats would otherwise be read line by line throughout).
    block = b'{"x": 1e300}\n{"x": -9.3e18}\n{"x": 12345678901234567890.5}\n'
    _, table = jsonl_arrow.read_lines(block, 0)
    assert table.column("x").to_pylist() == [1e300, -9.3e18, 12345678901234567890.5]
    with pytest.raises(jsonl_arrow.Fallback):
        jsonl_arrow.read_lines(block + b'{"x": 12345678901234567890}\n', 0)


@pytest.mark.parametrize(("lines", "exact"), [
    ([b'{"x": 9007199254740993}', b'{"x": 0.5}'], 9007199254740993),  # beside a fraction
    ([b'{"x": [2.5, -1234567890123456789]}'], -1234567890123456789),   # in a list of floats
    ([b'{"x": {"y": 0.5}}', b'{"x": {"y": 4611686018427387905}}'], 4611686018427387905),
], ids=["column", "list", "struct"])
def test_an_integer_a_float_cannot_hold_stays_exact_beside_fractions(lines: list[bytes],
                                                                     exact: int) -> None:
    # Arrow makes every integer of a column with a fraction a float, rounding one past
    # 2**53 (9007199254740993 read as ...992); line by line it is kept as written.
    block = b"\n".join(lines) + b"\n"
    fast, _ = jsonl.block_batch(block, 0, 0, None, 0)
    _same(fast, jsonl._merge([jsonl._slow(lines, 0)]))
    assert str(exact) in repr(fast.raw["x"])
