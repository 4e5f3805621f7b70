"""JSON Lines: row numbers, malformed lines, literal and encoding quirks, compression, batching."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zstandard
from click.testing import CliRunner

from preflight.batch import Batch
from preflight.cli import main
from preflight.errors import InputError
from tests.source.helpers import malformed, read, rows, values, write


def test_rows_are_physical_lines_with_blank_lines_kept_in_the_count(tmp_path: Path) -> None:
    path = write(tmp_path, "d.jsonl", b'{"a": 1}\n\n{"a": 2}\n   \n\n{"a": 3}\n')
    batches = read(path)
    assert rows(batches) == [0, 2, 5]
    assert values(batches, "a") == [1, 2, 3]
    assert malformed(batches) == []


@pytest.mark.parametrize("name", ["d.jsonl", "d.json"])
def test_lists_of_only_nulls_are_read_not_an_error(tmp_path: Path, name: str) -> None:
    # pyarrow 26's JSON reader builds [null, null] as an invalid array (offsets past its
    # values), which stopped the whole check with exit 3.
    lines = [b'{"i": 0, "tags": [null, null]}', b'{"i": 1, "tags": []}',
             b'{"i": 2, "m": {"l": [null]}}', b'{"i": 3, "tags": [null]}']
    data = (b"[" + b",\n".join(lines) + b"]") if name.endswith(".json") else b"\n".join(lines)
    batches = read(write(tmp_path, name, data))
    assert rows(batches) == [0, 1, 2, 3] and malformed(batches) == []
    assert values(batches, "tags") == [[None, None], [], None, [None]]
    assert values(batches, "i") == [0, 1, 2, 3]
    result = CliRunner().invoke(main, ["check", str(tmp_path / name), "--no-smoke", "--out",
                                       str(tmp_path / "report"), "--quiet"])
    assert result.exit_code == 0, result.output


def test_every_kind_of_malformed_line_is_a_finding_and_good_records_keep_rows(
    tmp_path: Path,
) -> None:
    lines = [
        b'{"a": 0, "t": "zero"}',
        b'{"a": 1, "t": ',          # 1 invalid_json (truncated)
        b'{"a": 2, "t": "two"}',
        b'{"a": 3, "t": "\xff\xfe"}',  # 3 invalid_utf8
        b"[1, 2, 3]",                # 4 not_an_object (array)
        b"42",                       # 5 not_an_object (number)
        b'"just a string"',          # 6 not_an_object (string)
        b"null",                     # 7 not_an_object (null)
        b"",                         # 8 blank: no finding, no record
        b"{'a': 9}",                 # 9 invalid_json (single quotes)
        b'{"a": 10, "t": "ten"}',
    ]
    batches = read(write(tmp_path, "bad.jsonl", b"\n".join(lines) + b"\n"))
    assert rows(batches) == [0, 2, 10]
    assert values(batches, "a") == [0, 2, 10]
    assert values(batches, "t") == ["zero", "two", "ten"]
    assert malformed(batches) == [
        (1, "invalid_json"),
        (3, "invalid_utf8"),
        (4, "not_an_object"),
        (5, "not_an_object"),
        (6, "not_an_object"),
        (7, "not_an_object"),
        (9, "invalid_json"),
    ]


def _assert_non_finite(batches: list[Batch]) -> None:
    x = values(batches, "x")
    assert x[0] == 1.5
    assert isinstance(x[1], float) and math.isnan(x[1])
    assert x[2] == math.inf
    assert x[3] == -math.inf
    assert [m for m in malformed(batches) if m[0] in (0, 1, 2, 3)] == []


def test_python_nan_and_infinity_literals_read_as_floats(tmp_path: Path) -> None:
    data = b'{"x": 1.5}\n{"x": NaN}\n{"x": Infinity}\n{"x": -Infinity}\n'
    batches = read(write(tmp_path, "nan.jsonl", data))
    assert rows(batches) == [0, 1, 2, 3]
    assert malformed(batches) == []
    _assert_non_finite(batches)


def test_nan_literals_read_as_floats_next_to_a_malformed_line(tmp_path: Path) -> None:
    data = b'{"x": 1.5}\n{"x": NaN}\n{"x": Infinity}\n{"x": -Infinity}\n{"x": \n'
    batches = read(write(tmp_path, "nan.jsonl", data))
    assert rows(batches) == [0, 1, 2, 3]
    assert malformed(batches) == [(4, "invalid_json")]
    _assert_non_finite(batches)


@pytest.mark.parametrize("literal", [b"Inf", b"-Inf", b"-NaN"])
def test_literals_python_does_not_read_are_malformed_on_either_path(tmp_path: Path,
                                                                     literal: bytes) -> None:
    # Arrow's reader takes Inf, -Inf and -NaN too; Python's json (the line-by-line path, and
    # the JSON array scanner) does not: one verdict, whichever path a block takes.
    line = b'{"x": ' + literal + b"}"
    alone = read(write(tmp_path, "alone.jsonl", b'{"x": 1.5}\n' + line + b"\n"))
    beside = read(write(tmp_path, "beside.jsonl", b'{"x": 1.5}\n' + line + b'\n{"x": \n'))
    assert malformed(alone) == [(1, "invalid_json")]
    assert malformed(beside) == [(1, "invalid_json"), (2, "invalid_json")]
    assert rows(alone) == rows(beside) == [0]


@pytest.mark.parametrize("line", [b'{"a": 1}{"a": 2}', b'{"a": 1} {"a": 2}'])
def test_two_objects_on_one_line_are_malformed_not_two_records(tmp_path: Path, line: bytes
                                                               ) -> None:
    batches = read(write(tmp_path, "two.jsonl", b'{"a": 0}\n' + line + b'\n{"a": 3}\n'))
    assert rows(batches) == [0, 2]
    assert values(batches, "a") == [0, 3]
    assert malformed(batches) == [(1, "invalid_json")]


@pytest.mark.parametrize("line", [
    b'{"t": "clean", "t": "zero\\u200bwidth"}', b'{"t": "zero\\u200bwidth", "t": "clean"}',
    b'{"a": {"b": 1, "b": 2}}', b'{"a": [{"b": 1}, {"b": 2, "c": 3, "b": 4}]}',
    b'{"t": 1, "t" : 1}', b'{"\\u0074": 1, "t": 2}'])
def test_a_key_given_twice_is_malformed_on_either_path(tmp_path: Path, line: bytes) -> None:
    # Python keeps the last value, other readers the first, Arrow (so `datasets`) refuses
    # the file: the checks would judge a value training may not see.
    alone = read(write(tmp_path, "alone.jsonl", b'{"t": "ok"}\n' + line + b"\n"))
    beside = read(write(tmp_path, "beside.jsonl", b'{"t": "ok"}\n' + line + b'\n{"t": \n'))
    assert malformed(alone) == [(1, "duplicate_key")]
    assert malformed(beside) == [(1, "duplicate_key"), (2, "invalid_json")]
    assert rows(alone) == rows(beside) == [0]


@pytest.mark.parametrize("line", [b'{"t": "a\\": b", "u": "\\":"}', b'{"t": "{\\"k\\": 1}"}',
                                  b'{"a": {"b": 1}, "b": {"a": 2}}'])
def test_keys_that_only_look_repeated_are_not_malformed(tmp_path: Path, line: bytes) -> None:
    batches = read(write(tmp_path, "ok.jsonl", b'{"x": "ok"}\n' + line + b"\n"))
    assert malformed(batches) == []
    assert rows(batches) == [0, 1]


def test_field_whose_type_changes_keeps_both_records(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "mixed.jsonl", b'{"v": 1}\n{"v": "one"}\n{"v": null}\n'))
    assert rows(batches) == [0, 1, 2]
    assert values(batches, "v") == [1, "one", None]
    types = [t for b in batches for t in b.json_types("v").to_list()]
    assert types == ["integer", "string", "null"]
    assert malformed(batches) == []


def test_lone_surrogate_escape_keeps_the_record_and_is_noted(tmp_path: Path) -> None:
    data = b'{"t": "ok"}\n{"t": "a\\ud800b"}\n{"t": "fine"}\n'
    batches = read(write(tmp_path, "sur.jsonl", data))
    assert rows(batches) == [0, 1, 2]
    assert malformed(batches) == []
    texts = values(batches, "t")
    assert texts[0] == "ok" and texts[2] == "fine"
    assert texts[1].startswith("a") and texts[1].endswith("b")
    noted = [(int(b.rows[i]), n) for b in batches for i, n in b.lone_surrogates.items()]
    assert noted == [(1, 1)]


def test_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "d.jsonl", b'{"a": 1}\n\n{"a": 2}'))
    assert rows(batches) == [0, 2]
    assert values(batches, "a") == [1, 2]


def test_malformed_last_line_without_newline_is_a_finding(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "d.jsonl", b'{"a": 1}\n{"a": 2'))
    assert rows(batches) == [0]
    assert malformed(batches) == [(1, "invalid_json")]


def test_utf8_bom_at_file_start_is_not_a_problem(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "bom.jsonl", b'\xef\xbb\xbf{"a": 1}\n{"a": 2}\n'))
    assert rows(batches) == [0, 1]
    assert values(batches, "a") == [1, 2]
    assert malformed(batches) == []


def test_crlf_line_endings(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "crlf.jsonl", b'{"a": 1}\r\n\r\n{"a": 2}\r\n'))
    assert rows(batches) == [0, 2]
    assert values(batches, "a") == [1, 2]
    assert malformed(batches) == []


def test_crlf_line_endings_next_to_a_malformed_line(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "crlf.jsonl", b'{"a": 1}\r\nnope\r\n{"a": 2}\r\n'))
    assert rows(batches) == [0, 2]
    assert values(batches, "a") == [1, 2]
    assert malformed(batches) == [(1, "invalid_json")]


def test_date_like_strings_stay_strings(tmp_path: Path) -> None:
    data = (b'{"d": "2024-01-31", "ts": "2024-01-31T12:30:00", "n": {"d": "2023-12-01"}}\n'
            b'{"d": "2024-02-01", "ts": "2024-02-01 08:00:00", "n": {"d": "2023-12-02"}}\n')
    batches = read(write(tmp_path, "dates.jsonl", data))
    assert values(batches, "d") == ["2024-01-31", "2024-02-01"]
    assert values(batches, "ts") == ["2024-01-31T12:30:00", "2024-02-01 08:00:00"]
    assert values(batches, "n") == [{"d": "2023-12-01"}, {"d": "2023-12-02"}]
    assert [t for b in batches for t in b.json_types("ts").to_list()] == ["string", "string"]


def test_a_line_longer_than_2_mb_parses(tmp_path: Path) -> None:
    long = "x" * (2_500_000)
    data = b'{"t": "a"}\n' + json.dumps({"t": long}).encode() + b'\n{"t": "b"}\n'
    batches = read(write(tmp_path, "long.jsonl", data))
    assert rows(batches) == [0, 1, 2]
    assert malformed(batches) == []
    assert [len(t) for t in values(batches, "t")] == [1, len(long), 1]


SAMPLE = b'{"a": 0, "t": "x"}\n\n{"a": 2, "t": "y"}\nbroken\n{"a": 4, "t": NaN}\n[5]\n{"a": 6}'


def _summary(batches: list[Batch]) -> tuple[Any, ...]:
    t = values(batches, "t")
    return (rows(batches), values(batches, "a"), t[:2], math.isnan(t[2]), t[3],
            malformed(batches))


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst"])
def test_compressed_jsonl_reads_like_plain(tmp_path: Path, suffix: str) -> None:
    plain = _summary(read(write(tmp_path, "p.jsonl", SAMPLE)))
    packed = (gzip.compress(SAMPLE) if suffix.endswith(".gz")
              else zstandard.ZstdCompressor().compress(SAMPLE))
    assert _summary(read(write(tmp_path, "c" + suffix, packed))) == plain
    assert plain == ([0, 2, 4, 6], [0, 2, 4, 6], ["x", "y"], True, None,
                     [(3, "invalid_json"), (5, "not_an_object")])


@pytest.mark.parametrize(
    "data",
    [b"this is not gzip at all\n", gzip.compress(b'{"a": 1}\n' * 1000)[:-40]],
    ids=["not_gzip", "truncated"],
)
def test_corrupt_gz_is_an_input_error(tmp_path: Path, data: bytes) -> None:
    path = write(tmp_path, "bad.jsonl.gz", data)
    with pytest.raises(InputError):
        read(path)


_ZST = zstandard.ZstdCompressor().compress(
    b"".join(b'{"i": %d, "t": "%x"}\n' % (i, i * 2654435761) for i in range(20_000)))


@pytest.mark.parametrize(
    "data", [b"this is not zstd at all\n", _ZST[: len(_ZST) // 2]], ids=["not_zstd", "truncated"]
)
def test_corrupt_zst_is_an_input_error(tmp_path: Path, data: bytes) -> None:
    path = write(tmp_path, "bad.jsonl.zst", data)
    with pytest.raises(InputError):
        read(path)


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst"])
def test_a_truncated_compressed_file_is_named_truncated(tmp_path: Path, suffix: str) -> None:
    data = b"".join(b'{"i": %d, "t": "%x"}\n' % (i, i * 2654435761) for i in range(20_000))
    packed = (gzip.compress(data) if suffix.endswith(".gz")
              else zstandard.ZstdCompressor().compress(data))
    path = write(tmp_path, "cut" + suffix, packed[: len(packed) // 2])
    with pytest.raises(InputError, match=r"truncated file\?"):
        read(path)


def test_corrupt_gz_exits_3_from_the_cli(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.jsonl.gz", b"this is not gzip at all\n")
    result = CliRunner().invoke(main, ["check", str(path), "--out", str(tmp_path / "r"),
                                       "--no-progress", "--quiet"])
    assert result.exit_code == 3


def _big_file(tmp_path: Path, n: int, bad: set[int]) -> tuple[Path, list[int], list[int]]:
    """``n`` records of ~500 bytes, a blank line before every 997th, ``bad`` ones broken;
    returns the path, the good records' rows and the broken ones' rows."""
    filler = "y" * 480
    lines: list[str] = []
    good: list[int] = []
    broken: list[int] = []
    for i in range(n):
        if i % 997 == 0:
            lines.append("")
        if i in bad:
            broken.append(len(lines))
            lines.append('{"i": ' + str(i))
        else:
            good.append(len(lines))
            lines.append(f'{{"i": {i}, "t": "{filler}"}}')
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, good, broken


@pytest.mark.parametrize("bad", [set(), {5, 29_999, 59_000}], ids=["clean", "malformed"])
def test_big_file_streams_in_bounded_batches_with_continuous_rows(tmp_path: Path, bad: set[int]
                                                                   ) -> None:
    n = 60_000
    path, good, broken = _big_file(tmp_path, n, bad)
    assert path.stat().st_size > 29_000_000
    batches = read(path)
    assert len(batches) >= 3
    for b in batches:
        assert len(b) * 500 <= 16 << 20
    assert np.concatenate([b.rows for b in batches]).tolist() == good
    assert values(batches, "i") == [i for i in range(n) if i not in bad]
    assert malformed(batches) == [(r, "invalid_json") for r in broken]


@pytest.mark.parametrize("bad", [set(), {5, 29_999, 59_000}], ids=["clean", "malformed"])
def test_big_gz_file_keeps_rows_continuous_across_batches(tmp_path: Path, bad: set[int]) -> None:
    n = 60_000
    path, good, broken = _big_file(tmp_path, n, bad)
    packed = tmp_path / "big.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes(), compresslevel=1))
    batches = read(packed)
    assert len(batches) >= 3
    assert np.concatenate([b.rows for b in batches]).tolist() == good
    assert malformed(batches) == [(r, "invalid_json") for r in broken]


@pytest.mark.parametrize("data", [b"{}\n{}\n", b'{}\n{"a": 1}\n', b"{}\nbroken\n{}\n"],
                         ids=["only_empty", "empty_then_field", "slow_path"])
def test_empty_objects_are_records(tmp_path: Path, data: bytes) -> None:
    # A frame with no columns has height 0 in polars, so records are counted by `rows`;
    # every field of an empty object reads as null.
    batches = read(write(tmp_path, "e.jsonl", data))
    n = sum(len(b) for b in batches)
    assert n == data.count(b"{}") + data.count(b'{"a"')
    for b in batches:
        assert b.frame.height in (0, len(b.rows))
        assert b.json_types("text").to_list() == ["null"] * len(b)


def _nested(depth: int) -> str:
    """A record nested ``depth`` levels deep (the record itself is level 1)."""
    return '{"text": "t", "a": ' + '{"a": ' * (depth - 2) + "[1]" + "}" * (depth - 2) + "}"


def test_records_nested_up_to_the_limit_are_read_deeper_ones_are_findings(
    tmp_path: Path,
) -> None:
    from preflight.source.json_line import MAX_DEPTH

    good = [json.dumps({"text": f"r{i}", "a": {"b": [i]}}) for i in range(200)]
    # only objects: Arrow's reader takes the block, its schema shows the depth
    at_limit = write(tmp_path, "a.jsonl", "\n".join([*good, _nested(MAX_DEPTH)]).encode())
    batches = read(at_limit)
    assert rows(batches) == list(range(201)) and malformed(batches) == []
    deeper = write(tmp_path, "b.jsonl",
                   "\n".join([*good[:100], _nested(MAX_DEPTH + 1), *good[100:]]).encode())
    batches = read(deeper)
    assert rows(batches) == [*range(100), *range(101, 201)]
    assert malformed(batches) == [(100, "too_deep")]


@pytest.mark.parametrize("neighbour", ["", "broken"])
def test_lines_that_would_crash_arrow_are_too_deep_findings(
    tmp_path: Path, neighbour: str
) -> None:
    from preflight.source.json_line import MAX_DEPTH

    good = [json.dumps({"text": f"r{i}", "a": {"b": [i]}}) for i in range(100)]
    lines = [*good, _nested(MAX_DEPTH), _nested(MAX_DEPTH + 1), "[" * 20_000,
             '{"a":' * 20_000, json.dumps({"text": "[" * 5000 + "{" * 5000}), neighbour]
    path = write(tmp_path, "d.jsonl", ("\n".join(lines) + "\n").encode())
    batches = read(path)
    assert rows(batches) == [*range(100), 100, 104]  # brackets in a string are only text
    expected = [(101, "too_deep"), (102, "too_deep"), (103, "too_deep")]
    assert malformed(batches) == expected + ([(105, "invalid_json")] if neighbour else [])
