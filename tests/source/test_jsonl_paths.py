"""JSON Lines: the fast path (Arrow on pieces, halving around bad lines) gives the batch the
exact line-by-line path gives, on random mixes of good and bad lines."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.batch import Batch
from preflight.source import jsonl

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
    b'{"i": 10, "t": "crlf"}\r',     # a CRLF line end
    b'  {"i": 11, "t": "indented"}',  # an object after blanks
    b'{"i": "twelve"}',              # the field's type changes
    b'{"i": 13, "t": "lone \\ud800 surrogate"}',
    b'{"t": "2024-01-02"}',          # a date-like string
    b"{}",                           # an empty object
    b'{"i": 14, "n": {"a": [1, 2]}}',  # nested values
]
_ODD = st.sampled_from(_ODD_LINES)
_LINES = st.lists(st.one_of(_GOOD, _GOOD, _ODD), min_size=1, max_size=60)


def _same(fast: Batch, slow: Batch) -> None:
    assert fast.rows.tolist() == slow.rows.tolist()
    assert fast.malformed == slow.malformed
    assert fast.lone_surrogates == slow.lone_surrogates
    assert fast.raw == slow.raw
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
        fast, n_lines = jsonl._block(block, 0, 0, None, 0)
    finally:
        jsonl.PIECE_BYTES, jsonl._SLOW_LINES = saved
    slow = jsonl._merge([jsonl._slow(lines, 0)])
    assert n_lines == len(lines)
    _same(fast, slow)


def test_a_mix_of_every_odd_line_is_read_alike_on_both_paths() -> None:
    # One planted example of each odd line between good ones, in pieces of a few lines.
    lines = [b'{"i": 0, "t": "zero"}']
    for k, line in enumerate(_ODD_LINES):
        lines += [line, f'{{"i": {k}, "t": "ok"}}'.encode()]
    block = b"\n".join(lines) + b"\n"
    saved = jsonl.PIECE_BYTES, jsonl._SLOW_LINES
    jsonl.PIECE_BYTES, jsonl._SLOW_LINES = 48, 1
    try:
        fast, _ = jsonl._block(block, 0, 0, None, 0)
    finally:
        jsonl.PIECE_BYTES, jsonl._SLOW_LINES = saved
    slow = jsonl._merge([jsonl._slow(lines, 0)])
    _same(fast, slow)
    codes = {m.code for m in slow.malformed}
    assert codes == {"invalid_json", "invalid_utf8", "not_an_object"}  # really planted
    assert slow.lone_surrogates and slow.raw  # the surrogate and the changed type too


@pytest.mark.parametrize("deep", [b'{"a":' * 20_000,
                                  b'{"a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"],
                         ids=["unclosed", "valid-but-too-deep"])
def test_a_deep_line_among_objects_never_reaches_arrow(deep: bytes) -> None:
    # Every line starts with "{", so the block is judged by counting brackets alone: the
    # one deep line must still keep Arrow (which would crash) away, and be a finding.
    good = [f'{{"i": {k}, "t": "[{k}]"}}'.encode() for k in range(300)]
    lines = [*good[:150], deep, *good[150:]]
    batch, _ = jsonl._block(b"\n".join(lines) + b"\n", 0, 0, None, 0)
    assert batch.rows.tolist() == [*range(150), *range(151, 301)]
    assert [(m.row, m.code) for m in batch.malformed] == [(150, "too_deep")]
