"""Strings nested in objects and lists (SQuAD's ``answers.text``, a crawl's ``meta.title``,
a list of ``passages`` objects, lists of lists) were not read: a zero-width character or a
bidi override there passed the gate, and ``fix`` left it in. Now the character checks read
them by path and ``fix`` mends them in place, on every format."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from preflight import run_preflight
from preflight.checks.nested_strings import mended, named, typed_items, typed_parts
from preflight.cli import main
from preflight.executor import launch, pool
from tests.executor.cases import same_findings, same_report
from tests.outputs import fix_cleanly, fix_setting_aside, write_records

ZW = "\u200b"
MOJIBAKE = "caf\u00c3\u00a9"  # "café" as UTF-8 read as cp1252
# row -> (path, code): the faults planted by _records
PLANTED = {3: ("answers.text[0]", "zero_width_space"), 5: ("meta.title", "zero_width_space"),
           7: ("passages[1].title", "bidi_control"), 9: ("meta.tags[0][1]", "mojibake")}


def _records(n: int = 40) -> list[dict[str, Any]]:
    rows = [{"id": f"q{i}", "context": f"Item {i} is a thing in Paris, far from home.",
             "answers": {"text": [f"a thing {i}"], "answer_start": [8]},
             "meta": {"title": f"Title {i}", "tags": [["geo", "city"]]},
             "passages": [{"title": f"first {i}", "score": 0.5},
                          {"title": f"second {i}", "score": 0.25}]}
            for i in range(n)]
    rows[3]["answers"]["text"][0] = f"a{ZW} thing"
    rows[5]["meta"]["title"] = f"Ti{ZW}tle 5"
    rows[7]["passages"][1]["title"] = "\u202esecond 7"  # a bidi override: "Trojan Source"
    rows[9]["meta"]["tags"][0][1] = MOJIBAKE
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix:
        return write_records(path, rows)
    if path.name.endswith("dataset"):  # a datasets save_to_disk folder
        datasets = pytest.importorskip("datasets")
        datasets.Dataset.from_list(rows).save_to_disk(str(path))
        return path
    path.mkdir()  # a folder of two Parquet shards
    half = len(rows) // 2
    write_records(path / "part-0.parquet", rows[:half])
    write_records(path / "part-1.parquet", rows[half:])
    return path


def _found(report: Any) -> dict[int, tuple[str, str]]:
    frame = report.findings()
    picked = frame.filter(frame["check"].is_in(["invisible_unicode", "encoding"]))
    return {row: (detail.split(":")[0], code)
            for row, code, detail in zip(picked["row"], picked["code"], picked["detail"],
                                         strict=True)}


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet", ".arrow", "shards",
                                    "dataset"])
def test_nested_strings_are_read_by_path(tmp_path: Path, suffix: str) -> None:
    data = _write(tmp_path / f"d{suffix}", _records())
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    found = _found(report)
    if suffix == "shards":  # rows count within each shard
        found = {row + (20 if file == "part-1.parquet" else 0): v for (row, v), file in zip(
            found.items(), report.findings().filter(
                pl.col("check").is_in(["invisible_unicode", "encoding"]))["file"], strict=True)}
    assert found == PLANTED
    assert report.verdict == "fail"


def test_a_column_of_mixed_types_is_read_inside_its_objects(tmp_path: Path) -> None:
    # An object in some records and a string in others: read value by value.
    rows = [{"text": f"question {i}", "answers": {"text": [f"a{i}"]} if i % 2 else "plain"}
            for i in range(10)]
    rows[5]["answers"] = {"text": ["fine", f"hid{ZW}den"], "start": 3}
    data = _write(tmp_path / "mixed.jsonl", rows)
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert _found(report) == {5: ("answers.text[1]", "zero_width_space")}


@pytest.mark.parametrize(("suffix", "out"), [
    (".jsonl", "clean.jsonl"), (".json", "clean.jsonl"), (".parquet", "clean.parquet"),
    (".arrow", "clean.arrow"), (".parquet", "clean.jsonl"), ("shards", "clean.parquet"),
    ("dataset", "clean.parquet")])
def test_fix_mends_nested_strings_in_place(tmp_path: Path, suffix: str, out: str) -> None:
    rows = _records()
    data = _write(tmp_path / f"d{suffix}", rows)
    clean = tmp_path / out
    fixed = fix_cleanly(data, clean, tmp_path / "q.jsonl")
    want = copy.deepcopy(rows)
    want[3]["answers"]["text"][0] = "a thing"
    want[5]["meta"]["title"] = "Title 5"
    want[7]["passages"][1]["title"] = "second 7"
    want[9]["meta"]["tags"][0][1] = "café"
    assert fixed == want
    if suffix == ".jsonl":  # untouched lines byte for byte, a changed one only in its string
        before, after = data.read_bytes().splitlines(), clean.read_bytes().splitlines()
        assert [a for a, b in zip(after, before, strict=True) if a != b] == [
            after[i] for i in PLANTED]
        assert after[3] == before[3].replace(ZW.encode(), b"")
    if suffix != ".json" and out.endswith(".parquet"):
        if suffix == "dataset":  # the dataset's own Arrow schema, its features' metadata aside
            import datasets

            kept = datasets.load_from_disk(str(data)).data.schema.remove_metadata()
            assert pq.read_schema(clean).remove_metadata() == kept
        else:
            source = data if suffix != "shards" else data / "part-0.parquet"
            assert pq.read_schema(clean) == pq.read_schema(source)  # the schema kept
    again = run_preflight(clean, smoke=False, out=tmp_path / "again")
    assert again.verdict == "pass", again.reasons


@pytest.mark.parametrize("suffix", [".jsonl", ".arrow"])
def test_a_nested_list_item_a_fix_would_empty_goes_to_the_quarantine(tmp_path: Path,
                                                                     suffix: str) -> None:
    rows = _records()
    rows[6]["answers"]["text"][0] = ZW
    rows[8]["meta"]["title"] = ZW  # not in a list: emptied, kept (as a top-level string is)
    data = _write(tmp_path / f"d{suffix}", rows)
    fixed, [set_aside] = fix_setting_aside(data, tmp_path / f"clean{suffix}",
                                           tmp_path / "q.jsonl")
    assert set_aside["row"] == 6
    assert set_aside["reasons"][0]["code"] == "empty_after_fix"
    assert set_aside["reasons"][0]["detail"].startswith("answers.text[0]: empty")
    assert set_aside["record"]["answers"]["text"] == [ZW]  # as it was: nothing lost
    assert [r["id"] for r in fixed] == [f"q{i}" for i in range(40) if i != 6]
    assert fixed[7]["meta"]["title"] == ""
    assert fixed[3]["answers"]["text"] == ["a thing"]  # still mended


def test_dry_run_names_the_nested_path(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.jsonl", _records())
    result = CliRunner().invoke(main, ["fix", str(data), "--dry-run", "--show-text",
                                       "--out", str(tmp_path / "c.jsonl"),
                                       "--quarantine", str(tmp_path / "q.jsonl")])
    assert result.exit_code == 0, result.output
    assert "row 7 passages[1].title:" in result.output
    assert "row 9 meta.tags[0][1]:" in result.output
    assert not (tmp_path / "c.jsonl").exists()


def test_two_workers_equal_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 4_000)
    rows = _records(300)
    rows[250]["passages"][0]["title"] = f"fi{ZW}rst"
    data = _write(tmp_path / "d.jsonl", rows)
    one = run_preflight(data, smoke=False, out=tmp_path / "one", workers=1)
    two = run_preflight(data, smoke=False, out=tmp_path / "two", workers=2)
    assert "pool:scan" in two.timings
    assert sorted(_found(one)) == [*PLANTED, 250]
    same_findings(one, two, tmp_path / "one", tmp_path / "two")
    same_report(one, two)


def test_null_and_empty_objects_and_lists_keep_the_paths_right() -> None:
    col = pl.Series("p", [[{"t": "a"}], None, [], [None, {"t": None}, {"t": "b"}],
                          [{"t": "c"}, {"t": "d"}]])
    items = typed_items(col)
    assert items.rows() == [(0, "p[0].t", "a"), (3, "p[2].t", "b"), (4, "p[0].t", "c"),
                            (4, "p[1].t", "d")]
    assert items.schema["i"] == pl.UInt32
    fixed = pl.Series("a", np.array([["x", "y"], ["z", None]], dtype=object).tolist(),
                      dtype=pl.Array(pl.String, 2))
    assert typed_items(pl.Series("m", [{"a": ["x", "y"]}, {"a": ["z", None]}])).rows() == [
        (0, "m.a[0]", "x"), (0, "m.a[1]", "y"), (1, "m.a[0]", "z")]
    assert typed_items(pl.Series("f", [[r] for r in fixed.to_list()],
                                 dtype=pl.List(fixed.dtype))).rows() == [
        (0, "f[0][0]", "x"), (0, "f[0][1]", "y"), (1, "f[0][0]", "z")]


def test_mended_copies_only_what_changed() -> None:
    value = {"a": ["x", f"y{ZW}"], "b": {"c": "z"}, "n": 3}
    out = mended(value, lambda s: s.replace(ZW, ""))
    assert out == {"a": ["x", "y"], "b": {"c": "z"}, "n": 3}
    assert value["a"][1] == f"y{ZW}"  # the record as read is left alone
    assert out["b"] is value["b"]  # unchanged parts are the same objects
    assert mended(value["b"], str.upper) is not value["b"]
    assert mended(value["b"], lambda s: s) is value["b"]


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_a_map_column_is_read_and_mended_by_key(tmp_path: Path, suffix: str) -> None:
    # map<string, string> (Spark's metadata): a key names its value, as in the JSON.
    maps = [[("source", f"web {i}"), ("lang", "en")] for i in range(10)]
    maps[4] = [("source", f"we{ZW}b 4"), ("lang", "en")]
    table = pa.table({"text": [f"document {i} of ten" for i in range(10)],
                      "meta": pa.array(maps, type=pa.map_(pa.string(), pa.string()))})
    data = tmp_path / f"d{suffix}"
    (pq.write_table if suffix == ".parquet" else feather.write_feather)(table, data)
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert _found(report) == {4: ("meta.source", "zero_width_space")}
    clean = tmp_path / f"clean{suffix}"
    fixed = fix_cleanly(data, clean, tmp_path / "q.jsonl")
    assert [r["meta"] for r in fixed] == [
        [("source", f"web {i}"), ("lang", "en")] for i in range(10)]
    read = pq.read_schema if suffix == ".parquet" else (lambda p: feather.read_table(p).schema)
    assert read(clean) == read(data)


def _chats(n: int = 30) -> list[dict[str, Any]]:
    rows = [{"messages": [
        {"role": "user", "content": f"what is the weather in town {i}"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": f"Paris {i}"})}}]},
        {"role": "tool", "content": "sunny", "tool_calls": []}]} for i in range(n)]
    call = rows[3]["messages"][1]["tool_calls"][0]["function"]
    call["arguments"] = json.dumps({"city": f"Par{ZW}is"}, ensure_ascii=False)
    rows[8]["messages"][2]["content"] = f"sun{ZW}ny"
    return rows


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_the_other_strings_of_each_turn_are_read_and_mended(tmp_path: Path,
                                                             suffix: str) -> None:
    # A tool call's arguments (an injection hides there as well as in the content) passed.
    rows = _chats()
    data = _write(tmp_path / f"d{suffix}", rows)
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert report.rules_file.fields["messages"] == "messages"
    assert _found(report) == {
        3: ("messages[1].tool_calls[0].function.arguments", "zero_width_space"),
        8: ("messages[2].content", "zero_width_space")}  # the content once, as the text
    fixed = fix_cleanly(data, tmp_path / f"clean{suffix}", tmp_path / "q.jsonl")
    want = _chats()
    want[3]["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"city": "Paris"}'
    want[8]["messages"][2]["content"] = "sunny"
    if suffix == ".parquet":  # a struct holds every key: None where a turn had none
        want = pa.Table.from_pylist(want).to_pylist()
    assert fixed == want


def test_a_turn_of_mixed_types_is_read_value_by_value(tmp_path: Path) -> None:
    rows = _chats(10)
    rows[5]["messages"][0]["name"] = f"al{ZW}ice"
    rows[6]["messages"] = "not a list"  # the chat check's finding; no crash here
    data = _write(tmp_path / "d.jsonl", rows)
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    found = _found(report)
    assert found[5] == ("messages[0].name", "zero_width_space")
    assert found[3][0] == "messages[1].tool_calls[0].function.arguments"


def test_a_wide_object_is_read_value_by_value(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """pandas' df.to_json() read as one record is an object with a field per row: walked
    field by field with polars (struct.field looks a name up among all of them) 3,000 rows
    took 25 s and 10,000 rows 4 minutes. Read value by value, as a map is."""
    n = 2000
    value = {str(k): f"text {k}" for k in range(n)}
    value["7"] = f"te{ZW}xt 7"

    def no_walk(*args: Any) -> None:
        raise AssertionError("a wide object walked field by field")

    monkeypatch.setattr("preflight.checks.nested_strings._walk", no_walk)
    items = typed_items(pl.Series("text", [value]))
    assert items.height == n
    assert items.row(7) == (0, "text.7", f"te{ZW}xt 7")
    data = tmp_path / "train.json"
    data.write_text(json.dumps({"text": value, "label": dict.fromkeys(value, 1)}))
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert report.verdict == "fail"
    assert any("lays out its records" in r for r in report.reasons)


def test_paths_are_written_out_only_for_the_strings_kept() -> None:
    # A path string for each of 200 strings per record cost gigabytes (2.5 GB for 100k
    # Parquet records); the walk now keeps the list indexes, and names what a check keeps.
    col = pl.Series("p", [[{"t": f"a{i}", "u": ["x", f"y{ZW}"]}] for i in range(5)])
    parts = typed_parts(col)
    assert all(pieces is not None and "field" not in frame.columns for pieces, frame in parts)
    kept = named(parts, pl.col("text").str.contains(ZW))
    assert kept.rows() == [(i, "p[0].u[1]", f"y{ZW}") for i in range(5)]
    assert named(parts).height == 15
