"""Parquet and Arrow IPC (file and stream formats, Feather)."""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from preflight.cli import main
from preflight.errors import InputError
from preflight.source import arrow
from tests.source.helpers import read, values


def _table() -> pa.Table:
    return pa.table({
        "text": ["a", "b", None, "d"],
        "label": pa.array(["pos", "neg", "pos", "neg"]).dictionary_encode(),
        "score": [0.5, 1.0, float("nan"), -2.0],
        "n": pa.array([1, 2, 3, 4], type=pa.int32()),
    })


def _write_ipc_file(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table, max_chunksize=2)


def _write_ipc_stream(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=2)


WRITERS = {
    "d.parquet": lambda p, t: pq.write_table(t, p, row_group_size=2),
    "d.arrow": _write_ipc_file,
    "s.arrow": _write_ipc_stream,
    "s.arrows": _write_ipc_stream,  # the usual name of a stream
    "d.feather": lambda p, t: feather.write_feather(t, p),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_columnar_files_read_with_rows_and_string_dictionary(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    WRITERS[name](path, _table())
    batches = read(path)
    assert np.concatenate([b.rows for b in batches]).tolist() == [0, 1, 2, 3]
    assert all(b.file is None for b in batches)
    assert all(b.frame.schema["label"] == pl.String for b in batches)
    assert values(batches, "label") == ["pos", "neg", "pos", "neg"]
    assert values(batches, "text") == ["a", "b", None, "d"]
    assert values(batches, "n") == [1, 2, 3, 4]
    assert [t for b in batches for t in b.json_types("label").to_list()] == ["string"] * 4


def test_parquet_rows_continue_across_batches(tmp_path: Path) -> None:
    n = 150_000
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"i": np.arange(n)}), path, row_group_size=10_000)
    batches = read(path)
    assert len(batches) >= 2
    assert np.concatenate([b.rows for b in batches]).tolist() == list(range(n))
    assert values(batches, "i") == list(range(n))


def test_corrupt_parquet_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1 this is not really parquet")
    with pytest.raises(InputError):
        read(path)


def test_corrupt_arrow_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.arrow"
    path.write_bytes(b"not arrow at all")
    with pytest.raises(InputError):
        read(path)


# -- Arrow types polars cannot take: the checks see a converted column, never a crash -------

D = decimal.Decimal
# (case, column, what the checks' view of it holds)
UNREADABLE: list[tuple[str, Callable[[], pa.Array], list[Any]]] = [
    ("decimal256", lambda: pa.array([D("1234567890123456789012345678901234567890.5"), None,
                                     D("-1"), D(0)], pa.decimal256(50, 10)),
     ["1234567890123456789012345678901234567890.5000000000", None, "-1.0000000000",
      "0E-10"]),
    ("month_day_nano_interval",
     lambda: pa.array([pa.MonthDayNano([1, 2, 3]), None, pa.MonthDayNano([-1, 0, 10**12]),
                       pa.MonthDayNano([0, 0, 0])], pa.month_day_nano_interval()),
     [{"months": 1, "days": 2, "nanoseconds": 3}, None,
      {"months": -1, "days": 0, "nanoseconds": 10**12},
      {"months": 0, "days": 0, "nanoseconds": 0}]),
    ("sparse_union",
     lambda: pa.UnionArray.from_sparse(pa.array([0, 1, 0, 1], pa.int8()),
                                       [pa.array([1, 2, None, 4]),
                                        pa.array(["w", "x", "y", "z"])], ["i", "s"]),
     ["1", "x", None, "z"]),
    ("dense_union",
     lambda: pa.UnionArray.from_dense(pa.array([0, 1, 0, 1], pa.int8()),
                                      pa.array([0, 0, 1, 1], pa.int32()),
                                      [pa.array([1, None]), pa.array(["x", "z"])], ["i", "s"]),
     ["1", "x", None, "z"]),
    ("list_view", lambda: pa.array([[1, 2], None, [], [3]], pa.list_view(pa.int64())),
     [[1, 2], None, [], [3]]),
    ("large_list_view",
     lambda: pa.array([["a"], None, [], ["b", "c"]], pa.large_list_view(pa.string())),
     [["a"], None, [], ["b", "c"]]),
    ("run_end_encoded",
     lambda: pa.RunEndEncodedArray.from_arrays(pa.array([2, 3, 4], pa.int32()),
                                               pa.array(["a", None, "b"])),
     ["a", "a", None, "b"]),
    ("struct_of_decimal256",
     lambda: pa.array([{"d": D(1)}, None, {"d": None}, {"d": D(2)}],
                      pa.struct([("d", pa.decimal256(50, 2))])),
     [{"d": "1.00"}, None, {"d": None}, {"d": "2.00"}]),
    ("list_of_decimal256",
     lambda: pa.array([[D(1)], None, [], [D(2), None]], pa.list_(pa.decimal256(50, 2))),
     [["1.00"], None, [], ["2.00", None]]),
]
UNREADABLE_IDS = [c[0] for c in UNREADABLE]


def _with_text(column: pa.Array) -> pa.Table:
    return pa.table({"id": ["a", "b", "c", "d"],
                     "text": ["One river.", "Two rivers.", "Three hills.", "Four lakes."],
                     "odd": column})


def _written(tmp_path: Path, name: str, table: pa.Table) -> Path:
    path = tmp_path / name
    try:
        WRITERS[name](path, table)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as e:
        pytest.skip(f"this pyarrow cannot write {table.schema.field('odd').type} "
                    f"to {path.suffix}: {e}")
    return path


@pytest.mark.parametrize("name", ["d.parquet", "d.arrow"])
@pytest.mark.parametrize(("case", "make", "seen"), UNREADABLE, ids=UNREADABLE_IDS)
def test_a_type_polars_cannot_take_is_converted_for_the_checks(
    tmp_path: Path, case: str, make: Callable[[], pa.Array], seen: list[Any], name: str
) -> None:
    path = _written(tmp_path, name, _with_text(make()))
    assert values(read(path), "odd") == seen  # was a Rust panic or a polars ComputeError
    # a slice (offset into the buffers) reads the same
    assert arrow.table_to_batch(_with_text(make()).slice(1), 1, 0, None).frame[
        "odd"].to_list() == seen[1:]


@pytest.mark.parametrize("name", ["d.parquet", "d.arrow"])
@pytest.mark.parametrize(("case", "make", "seen"), UNREADABLE, ids=UNREADABLE_IDS)
def test_check_on_a_type_polars_cannot_take_gives_a_verdict(
    tmp_path: Path, case: str, make: Callable[[], pa.Array], seen: list[Any], name: str
) -> None:
    path = _written(tmp_path, name, _with_text(make()))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(path), "--out", str(out)])
    assert result.exit_code in (0, 1), result.output
    assert "internal error" not in result.output
    assert json.loads((out / "report.json").read_text())["source"]["records"] == 4


def test_a_union_member_with_no_string_form_is_exit_3_naming_the_column(
    tmp_path: Path
) -> None:
    column = pa.UnionArray.from_sparse(pa.array([0, 1, 0, 1], pa.int8()),
                                       [pa.array([1, 2, 3, 4]), pa.array([[1], [2], [3], [4]])],
                                       ["i", "l"])
    path = tmp_path / "d.arrow"
    _write_ipc_file(path, _with_text(column))
    with pytest.raises(InputError) as e:
        read(path)
    assert e.value.exit_code == 3
    for part in ("column 'odd'", "sparse_union<i: int64=0, l: list<item: int64>=1>",
                 "member 'l'", "cast it to a plain type"):
        assert part in str(e.value)
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(path),
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert "internal error" not in result.output and "'odd'" in result.output


def _invalid_utf8_strings(values: list[bytes | None], large: bool = False) -> pa.Array:
    """A string array holding the bytes as they are, unchecked (as a writer that skips the
    UTF-8 check leaves them)."""
    raw = pa.array(values, pa.large_binary() if large else pa.binary())
    return pa.Array.from_buffers(pa.large_string() if large else pa.string(), len(raw),
                                 raw.buffers(), null_count=raw.null_count)


@pytest.mark.parametrize(("name", "kind"), [
    ("d.parquet", "string"), ("d.parquet", "large_string"), ("d.arrow", "string"),
    ("d.arrow", "large_string"), ("d.arrow", "dictionary")])  # (Parquet refuses a dictionary)
def test_invalid_utf8_in_a_string_column_is_an_encoding_finding(
    tmp_path: Path, name: str, kind: str
) -> None:
    # polars took the bytes unchecked: every text check passed them and the gate said nothing
    column = _invalid_utf8_strings([b"plain text", b"bad \xff byte", None, b"x\xe2\x80\x8by"],
                                   large=kind == "large_string")
    if kind == "dictionary":
        column = pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 2]), pa.Array.from_buffers(
            pa.string(), 3, _invalid_utf8_strings([b"plain text", b"bad \xff byte",
                                                   b"x\xe2\x80\x8by"]).buffers()))
    path = tmp_path / name
    WRITERS[name](path, pa.table({"text": column}))
    assert values(read(path), "text") == ["plain text", "bad \ufffd byte", None, "x\u200by"]
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(path), "--out", str(out)])
    assert result.exit_code == 1, result.output
    found = pl.read_parquet(out / "findings.parquet").select("row", "code").rows()
    assert (1, "replacement_character") in found and (3, "zero_width_space") in found


def test_invalid_utf8_in_a_nested_string_column_is_exit_3_naming_it(tmp_path: Path) -> None:
    inner = _invalid_utf8_strings([b"ok", b"bad \xff"])
    column = pa.ListArray.from_arrays(pa.array([0, 1, 2]), inner)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "tags": column}), path)
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(path),
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert "'tags'" in result.output and "not valid UTF-8" in result.output


@pytest.mark.parametrize("kind", ["parquet", "arrow", "shard"])
def test_two_columns_of_one_name_are_an_input_error_naming_the_file(tmp_path: Path,
                                                                     kind: str) -> None:
    """Parquet and Arrow allow two columns of one name; a record cannot hold a field twice.
    Exit 3 naming the file and the names (it blamed a column's type and said to cast it)."""
    table = pa.Table.from_arrays([pa.array(["a", "b"]), pa.array([1, 2]), pa.array(["c", "d"])],
                                 names=["text", "label", "text"])
    folder = tmp_path / "shards"
    folder.mkdir()
    if kind == "arrow":
        bad = tmp_path / "d.arrow"
        feather.write_feather(table, bad)
    else:
        bad = (folder if kind == "shard" else tmp_path) / "d.parquet"
        pq.write_table(table, bad)
    if kind == "shard":
        pq.write_table(pa.table({"text": ["x"], "label": [0]}), folder / "a.parquet")
    data = folder if kind == "shard" else bad
    for command in (["check", str(data), "--no-smoke", "--out", str(tmp_path / "o")],
                    ["fix", str(data), "--out", str(tmp_path / "c.jsonl"), "--quarantine",
                     str(tmp_path / "q.jsonl")]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 3, result.output
        assert (f"{bad}: 1 column(s) named like another ('text'): a record cannot hold a field "
                "twice; rename the columns") in " ".join(result.output.split())
    assert not (tmp_path / "c.jsonl").exists() and not (tmp_path / "q.jsonl").exists()
