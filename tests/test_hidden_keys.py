"""A hidden character in a key (a zero-width space, a bidi override, a tag character) was
never flagged: keys only named paths. Now a key that is not printable ASCII is read by the
character checks (its finding names the path, the key escaped: ``meta["so\\u200burce"]
(key)``), and ``fix: strip`` renames it where the format allows (JSON Lines, JSON, a
Parquet/Arrow map's keys); a struct field or column name is the schema's, so such a record
is set aside (``key_not_mendable``), as is one where two keys would become one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from preflight import FixOptions, run_preflight
from tests.outputs import fix_cleanly, fix_setting_aside, write_records

ZW, RLO, TAG = "\u200b", "\u202e", "\U000e0041"


def _records(n: int = 6) -> list[dict[str, Any]]:
    rows = [{"text": f"document {i} here", "meta": {"source": f"web {i}", "n": i}}
            for i in range(n)]
    rows[1]["meta"] = {f"so{ZW}urce": "web 1", "n": 1}
    rows[3]["meta"] = {"source": "web 3", "n": 3, "deep": [{f"t{TAG}": "x"}]}
    rows[4][f"sco{RLO}re"] = "5"
    return rows


def _found(report: Any) -> dict[int, tuple[str, str]]:
    frame = report.findings().filter(pl.col("check") == "invisible_unicode")
    return {r: (d.split(": ")[0], c) for r, d, c in zip(
        frame["row"], frame["detail"], frame["code"], strict=True)}


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_hidden_keys_are_flagged_and_renamed_in_json(tmp_path: Path, suffix: str) -> None:
    data = write_records(tmp_path / f"d{suffix}", _records())
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert _found(report) == {1: ('meta["so\\u200burce"] (key)', "zero_width_space"),
                              3: ('meta.deep[0]["t\\udb40\\udc41"] (key)', "tag_character"),
                              4: ('["sco\\u202ere"] (key)', "bidi_control")}
    fixed = fix_cleanly(data, tmp_path / "clean.jsonl", tmp_path / "q.jsonl")
    want = _records()
    want[1]["meta"] = {"source": "web 1", "n": 1}
    want[3]["meta"]["deep"] = [{"t": "x"}]
    del want[4][f"sco{RLO}re"]
    want[4]["score"] = "5"
    assert fixed == want
    if suffix == ".jsonl":  # the untouched lines byte for byte
        before = data.read_text().splitlines()
        after = (tmp_path / "clean.jsonl").read_text().splitlines()
        assert [a == b for a, b in zip(after, before, strict=True)] == [
            True, False, True, False, False, True]


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_keys_that_would_collide_send_the_record_to_the_quarantine(tmp_path: Path,
                                                                    suffix: str) -> None:
    rows = _records()
    rows[2]["meta"] = {f"a{ZW}": 1, "a": 2}
    data = write_records(tmp_path / f"d{suffix}", rows)
    fixed, [aside] = fix_setting_aside(data, tmp_path / "clean.jsonl", tmp_path / "q.jsonl")
    assert aside["row"] == 2 and aside["record"] == rows[2]  # nothing lost
    assert aside["reasons"][0]["code"] == "key_not_mendable"
    assert aside["reasons"][0]["detail"].startswith('meta["a\\u200b"] (key): would be another')
    assert len(fixed) == 5


def _map_table(maps: list[list[tuple[str, str]]]) -> pa.Table:
    return pa.table({"text": [f"document {i}" for i in range(len(maps))],
                     "meta": pa.array(maps, type=pa.map_(pa.string(), pa.string()))})


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_map_keys_are_flagged_and_renamed(tmp_path: Path, suffix: str) -> None:
    maps = [[("source", f"web {i}")] for i in range(4)]
    maps[1] = [(f"so{ZW}urce", "web 1")]
    maps[2] = [(f"a{ZW}", "x"), ("a", "y")]  # would collide: set aside
    data = tmp_path / f"d{suffix}"
    (pq.write_table if suffix == ".parquet" else feather.write_feather)(_map_table(maps), data)
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert _found(report) == {1: ('meta["so\\u200burce"] (key)', "zero_width_space"),
                              2: ('meta["a\\u200b"] (key)', "zero_width_space")}
    clean = tmp_path / f"clean{suffix}"
    fixed, [aside] = fix_setting_aside(data, clean, tmp_path / "q.jsonl")
    assert [r["meta"] for r in fixed] == [[("source", f"web {i}")] for i in (0, 1, 3)]
    assert aside["row"] == 2 and aside["reasons"][0]["code"] == "key_not_mendable"


def _struct_rows() -> list[dict[str, Any]]:
    rows = [{"text": f"document {i}", "meta": {f"so{ZW}urce": f"web {i}"}} for i in range(4)]
    rows[2]["meta"] = {f"so{ZW}urce": None}
    return rows


@pytest.mark.parametrize("suffix", [".parquet", ".arrow", "shards", "dataset"])
def test_a_struct_field_is_schema_so_its_records_are_set_aside(tmp_path: Path,
                                                               suffix: str) -> None:
    rows = _struct_rows()
    data = tmp_path / f"d{suffix}"
    if suffix == "shards":
        data.mkdir()
        write_records(data / "part-0.parquet", rows[:2])
        write_records(data / "part-1.parquet", rows[2:])
    elif suffix == "dataset":
        datasets = pytest.importorskip("datasets")
        datasets.Dataset.from_list(rows).save_to_disk(str(data))
    else:
        write_records(data, rows)
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert report.verdict == "fail"
    flagged = report.findings().filter(pl.col("code") == "zero_width_space")
    assert set(flagged["detail"].str.split(": ").list.first()) == {
        'meta["so\\u200burce"] (key)'}
    assert len(flagged) == 3  # the records that hold a value under it
    fixed, aside = fix_setting_aside(data, tmp_path / "clean.jsonl", tmp_path / "q.jsonl")
    assert len(aside) == 3 and len(fixed) == 1  # never silently kept with the key
    assert {a["reasons"][0]["code"] for a in aside} == {"key_not_mendable"}
    assert "schema" in aside[0]["reasons"][0]["detail"]
    # the JSON Lines output names the field as a Parquet one would (none holds a value)
    assert json.loads(json.dumps(fixed[0]))["meta"] == {"source": None}


def test_a_csv_header_name_is_schema_too(tmp_path: Path) -> None:
    # The header was kept with its hidden character and every record counted as changed.
    data = tmp_path / "d.csv"
    data.write_bytes(f"text,sco{ZW}re\nhello world,1\nbye now,2\n".encode())
    fixed, aside = fix_setting_aside(data, tmp_path / "clean.csv", tmp_path / "q.jsonl")
    assert fixed == [] and [a["row"] for a in aside] == [0, 1]
    assert aside[0]["reasons"][0]["code"] == "key_not_mendable"


def test_a_hidden_key_over_values_of_mixed_types_is_flagged_in_every_record(
        tmp_path: Path) -> None:
    """A key whose values are of two JSON types (a string, a number) is read value by value:
    its own name was read only where the typed frame held a value (row 1 passed, and fix
    wrote it with the key as it was)."""
    rows = [{"text": "one", f"note{ZW}": "x"}, {"text": "two", f"note{ZW}": 5}]
    data = write_records(tmp_path / "d.jsonl", rows)
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert sorted(_found(report)) == [0, 1]
    fixed = fix_cleanly(data, tmp_path / "clean.jsonl", tmp_path / "q.jsonl")
    assert fixed == [{"text": "one", "note": "x"}, {"text": "two", "note": 5}]


def test_a_renamed_key_over_a_list_is_fixed(tmp_path: Path) -> None:
    """The rename of a top-level key holding a list: the check for items a fix emptied
    looked the new key up in the record as read (internal error: KeyError 'note')."""
    rows = [{"text": "one", f"note{ZW}": ["a", ZW, "c"]}, {"text": "two", f"note{ZW}": ["b"]}]
    data = write_records(tmp_path / "d.jsonl", rows)
    fixed, [aside] = fix_setting_aside(data, tmp_path / "clean.jsonl", tmp_path / "q.jsonl")
    assert fixed == [{"text": "two", "note": ["b"]}]
    assert aside["record"] == rows[0]
    assert aside["reasons"][0]["code"] == "empty_after_fix"


def test_a_renamed_key_leaves_the_rest_of_the_line_as_written(tmp_path: Path) -> None:
    """The rename re-serialised the whole record: 1e400 became Infinity (no JSON), 1.10 became
    1.1, escapes and spacing changed; only the key is replaced now."""
    line = ('{"text": "hello", "meta": {"so\\u200burce" : "w\\u00e9b", "x":1.10}, '
            '"k\\u200b": 1, "big": 1e400, "n": 123456789012345678901234567890}')
    data = tmp_path / "d.jsonl"
    data.write_text(line + "\n")
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\nfields: {text: text}\nrules:\n"
                     "  - {id: hc, check: invisible_unicode, severity: error, fix: strip}\n")
    report = run_preflight(data, rules, smoke=False, out=tmp_path / "r",
                           fix=FixOptions(out=tmp_path / "c.jsonl",
                                          quarantine=tmp_path / "q.jsonl"))
    assert report is not None
    assert (tmp_path / "c.jsonl").read_text() == line.replace("\\u200b", "") + "\n"
