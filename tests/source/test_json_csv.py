"""JSON arrays (.json) and CSV: row numbers, malformed elements and rows, typing."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from preflight.cli import main
from tests.source.helpers import malformed, read, rows, values, write


def test_json_array_rows_are_element_indexes(tmp_path: Path) -> None:
    data = b'[\n  {"a": 0},\n\n  {"a": 1, "b": "x"},\n  {"a": 2}\n]\n'
    batches = read(write(tmp_path, "d.json", data))
    assert rows(batches) == [0, 1, 2]
    assert values(batches, "a") == [0, 1, 2]
    assert values(batches, "b") == [None, "x", None]
    assert malformed(batches) == []


def test_json_array_nan_literals_read_as_floats(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "d.json", b'[{"x": NaN}, {"x": Infinity}, {"x": -Infinity}]'))
    x = values(batches, "x")
    assert math.isnan(x[0]) and x[1] == math.inf and x[2] == -math.inf
    assert rows(batches) == [0, 1, 2]
    assert malformed(batches) == []


def test_json_array_non_object_elements_are_malformed(tmp_path: Path) -> None:
    data = b'[{"a": 0}, [1, 2], {"a": 2}, 3, "s", null, {"a": 6}]'
    batches = read(write(tmp_path, "d.json", data))
    assert rows(batches) == [0, 2, 6]
    assert values(batches, "a") == [0, 2, 6]
    assert malformed(batches) == [(1, "not_an_object"), (3, "not_an_object"),
                                  (4, "not_an_object"), (5, "not_an_object")]


def test_json_array_invalid_utf8_element_is_malformed(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "d.json", b'[{"a": 0}, {"a": "\xff"}, {"a": 2}]'))
    assert rows(batches) == [0, 2]
    assert malformed(batches) == [(1, "invalid_utf8")]


def test_truncated_json_array_keeps_earlier_records(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "d.json", b'[{"a": 0}, {"a": 1}, {"a": "tw'))
    assert rows(batches) == [0, 1]
    assert values(batches, "a") == [0, 1]
    assert [(r, c) for r, c in malformed(batches)] == [(2, "truncated")]


def test_json_file_holding_json_lines_is_read_as_lines(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "d.json", b'{"a": 0}\n\n{"a": 2}\nbroken\n{"a": 4}\n'))
    assert rows(batches) == [0, 2, 4]
    assert values(batches, "a") == [0, 2, 4]
    assert malformed(batches) == [(3, "invalid_json")]


def test_csv_rows_count_data_records_from_zero(tmp_path: Path) -> None:
    data = b'id,text,score\n1,plain,0.5\n2,"two\nlines",1.5\n3,"say ""hi""",2\n'
    batches = read(write(tmp_path, "d.csv", data))
    assert rows(batches) == [0, 1, 2]
    assert values(batches, "text") == ["plain", "two\nlines", 'say "hi"']
    assert malformed(batches) == []


def test_csv_embedded_newline_does_not_shift_later_rows(tmp_path: Path) -> None:
    data = b'a,b\n"x\ny\nz",1\n"p",2\n"q",3\n'
    batches = read(write(tmp_path, "d.csv", data))
    assert rows(batches) == [0, 1, 2]
    assert values(batches, "a") == ["x\ny\nz", "p", "q"]
    assert values(batches, "b") == [1, 2, 3]


def test_csv_wrong_field_count_is_malformed(tmp_path: Path) -> None:
    data = b"a,b,c\n1,2,3\n4,5\n6,7,8\n9,10,11,12\n13,14,15\n"
    batches = read(write(tmp_path, "d.csv", data))
    assert rows(batches) == [0, 2, 4]
    assert values(batches, "a") == [1, 6, 13]
    assert malformed(batches) == [(1, "wrong_field_count"), (3, "wrong_field_count")]


def test_csv_numeric_columns_are_typed(tmp_path: Path) -> None:
    data = b"n,x,s,gap\n1,1.5,a,\n2,-2,b,7\n3,3e2,c,\n"
    batches = read(write(tmp_path, "d.csv", data))
    (batch,) = batches
    assert batch.frame.schema["n"] == pl.Int64
    assert batch.frame.schema["x"] == pl.Float64
    assert batch.frame.schema["s"] == pl.String
    assert batch.values("n") == [1, 2, 3]
    assert batch.values("x") == [1.5, -2.0, 300.0]
    assert batch.values("gap") == [None, 7, None]
    assert batch.json_types("n").to_list() == ["integer"] * 3
    # A whole float reads as an integer, the same on every reading path.
    assert batch.json_types("x").to_list() == ["number", "integer", "integer"]


def test_empty_csv_has_zero_records(tmp_path: Path) -> None:
    assert sum(len(b) for b in read(write(tmp_path, "empty.csv", b""))) == 0


def test_header_only_csv_has_zero_records(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "head.csv", b"a,b\n"))
    assert sum(len(b) for b in batches) == 0
    assert malformed(batches) == []


def test_csv_with_bom_and_crlf(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "d.csv", b"\xef\xbb\xbfa,b\r\n1,x\r\n2,y\r\n"))
    assert rows(batches) == [0, 1]
    assert values(batches, "a") == [1, 2]
    assert values(batches, "b") == ["x", "y"]


def test_csv_invalid_utf8_row_is_malformed(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "d.csv", b"a,b\n1,ok\n2,\xff\xfe\n3,fine\n"))
    assert rows(batches) == [0, 2]
    assert values(batches, "b") == ["ok", "fine"]
    assert malformed(batches) == [(1, "invalid_utf8")]


def test_csv_invalid_utf8_in_the_header_is_exit_3_saying_so(tmp_path: Path) -> None:
    # was exit 3 all the same, but with polars' "'utf-8' codec can't encode character
    # '\udcff' ... surrogates not allowed" from inside the reader
    data = write(tmp_path, "d.csv", b"id,te\xffxt\n1,hello\n2,world\n")
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(data),
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert "header row is not valid UTF-8 (byte 0xff in column 2)" in result.output
    assert "surrogates" not in result.output


def test_json_array_lone_surrogate_keeps_the_record_and_is_noted(tmp_path: Path) -> None:
    batches = read(write(tmp_path, "d.json", b'[{"t": "ok"}, {"t": "a\\ud800b"}]'))
    assert rows(batches) == [0, 1]
    assert malformed(batches) == []
    noted = [(int(b.rows[i]), n) for b in batches for i, n in b.lone_surrogates.items()]
    assert noted == [(1, 1)]


def test_a_stray_byte_before_an_array_element_does_not_end_the_array(tmp_path: Path) -> None:
    # "\x0b" is not JSON whitespace: it is one malformed unit, the list after it another,
    # and the records after them are still read (the "]" of [1,2] used to close the array,
    # and every later element was trailing data).
    data = b'[{"a": 0},\x0b[1,2], {"a": 3}, 7}, {"a": 6}]'
    batches = read(write(tmp_path, "d.json", data))
    assert rows(batches) == [0, 3, 6]
    assert malformed(batches) == [(1, "invalid_json"), (2, "invalid_json"),
                                  (4, "not_an_object"), (5, "invalid_json")]


def test_a_json_file_starting_with_a_form_feed_is_read_as_lines(tmp_path: Path) -> None:
    # Not JSON whitespace, so not an array: read as JSON Lines, its line malformed (it was
    # taken for an array, then refused with "expected a JSON array", exit 3).
    batches = read(write(tmp_path, "d.json", b'\x0c[{"a": 1}]\n{"a": 2}\n'))
    assert rows(batches) == [1] and malformed(batches) == [(0, "invalid_json")]


@pytest.mark.parametrize("stray", [b"", b'4,c,"open\n'])
def test_csv_empty_header_name_is_kept(tmp_path: Path, stray: bytes) -> None:
    # polars renamed an empty name to "column_0" when the frame was built from a list of
    # Series, and the reader then looked the column up by "" (KeyError: an internal error);
    # both the Arrow path and the exact reader (after a stray quote) build the frame.
    batches = read(write(tmp_path, "d.csv", b"id,,text\n1,a,one\n2,b,two\n" + stray))
    assert values(batches, "")[:2] == ["a", "b"]
    assert values(batches, "text")[:2] == ["one", "two"]


def test_csv_repeated_header_names_never_collide(tmp_path: Path) -> None:
    # "a,a_1,a" named its third column a_1 too: a frame with one name twice (internal error)
    batches = read(write(tmp_path, "d.csv", b"a,a_1,a,b,b\n1,2,3,4,5\n"))
    assert list(batches[0].frame.columns) == ["a", "a_1", "a_2", "b", "b_1"]
    assert [values(batches, n) for n in ("a", "a_1", "a_2", "b", "b_1")] == [[1], [2], [3],
                                                                              [4], [5]]


def test_a_csv_text_field_of_numbers_reads_as_text_like_json_lines(tmp_path: Path) -> None:
    # Every cell of `text` reads as a number, so the batch typed it Int64: schema said
    # "expected string, got integer" on rows 0, 2 and 3 and empty said "missing or null" on
    # row 1, where the same records in JSON Lines give one empty_text and one duplicate.
    csv_path = write(tmp_path, "d.csv", b"id,text\nr0,123\nr1,\nr2,456\nr3,123\n")
    jsonl_path = write(tmp_path, "d.jsonl", b'{"id":"r0","text":"123"}\n{"id":"r1","text":""}\n'
                       b'{"id":"r2","text":"456"}\n{"id":"r3","text":"123"}\n')
    seen = []
    for path in (csv_path, jsonl_path):
        out = tmp_path / f"out-{path.suffix[1:]}"
        result = CliRunner().invoke(main, ["check", "--no-smoke", str(path), "--out", str(out),
                                           "--text-field", "text"])
        assert result.exit_code == 1, result.output
        seen.append(set(pl.read_parquet(out / "findings.parquet").select("row", "code").rows()))
    assert seen[0] == seen[1] == {(1, "empty_text"), (3, "exact_duplicate_of")}
