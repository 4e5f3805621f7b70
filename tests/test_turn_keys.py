"""A chat turn's own keys (``{"messages": [{"ro\\u200ble": "user", ...}]}``) were never read
for hidden characters (a turn's values were, and every other object's keys). They are now
flagged (``messages[0]["na\\u200bme"] (key)``), and ``fix: strip`` treats them as any other
key: renamed in place in JSON Lines and JSON (a turn where two keys would become one set
aside), the record set aside where the key is a struct field (Parquet, Arrow, ``datasets``:
``key_not_mendable``), the clean schema's field then renamed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest

from preflight import run_preflight
from tests.outputs import fix_setting_aside, write_shaped

ZW = "\u200b"
SHAPES = ["d.jsonl", "d.json", "d.parquet", "d.arrow", "shards", "dataset"]


def _rows() -> list[dict[str, Any]]:
    """Six chats, every turn holding the same keys (a table can hold them): row 1's first
    turn has a value under a key that hides a zero-width space."""
    rows = [{"messages": [{"role": "user", "content": f"question {i} here", f"na{ZW}me": None},
                          {"role": "assistant", "content": f"answer {i} here",
                           f"na{ZW}me": None}]} for i in range(6)]
    rows[1]["messages"][0][f"na{ZW}me"] = "bob"
    return rows


@pytest.mark.parametrize("shape", SHAPES)
def test_a_turns_own_key_is_flagged(tmp_path: Path, shape: str) -> None:
    data = write_shaped(tmp_path / shape, _rows())
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    frame = report.findings().filter(pl.col("check") == "invisible_unicode")
    rows = [r + (4 if f == "part-1.parquet" else 0)
            for r, f in zip(frame["row"], frame["file"], strict=True)]
    assert rows == [1]
    assert frame["detail"][0].startswith('messages[0]["na\\u200bme"] (key): 1× U+200B')


@pytest.mark.parametrize("shape", ["d.jsonl", "d.json"])
def test_fix_renames_a_turns_key_in_json(tmp_path: Path, shape: str) -> None:
    rows = [{"messages": [{"role": "user", "content": f"question {i}"},
                          {"role": "assistant", "content": f"answer {i}"}]} for i in range(4)]
    rows[1]["messages"][0][f"na{ZW}me"] = "bob"
    rows[2]["messages"][1][f"na{ZW}me"] = "x"
    rows[2]["messages"][1]["name"] = "y"  # would be two keys once mended: set aside
    data = write_shaped(tmp_path / shape, rows)
    fixed, aside = fix_setting_aside(data, tmp_path / "c.jsonl", tmp_path / "q.jsonl")
    want = copy.deepcopy([rows[0], rows[1], rows[3]])
    want[1]["messages"][0] = {"role": "user", "content": "question 1", "name": "bob"}
    assert fixed == want
    assert [a["row"] for a in aside] == [2] and aside[0]["record"] == rows[2]
    assert aside[0]["reasons"][0]["code"] == "key_not_mendable"
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text())
    assert manifest["renamed_keys"] == [
        {"key": 'messages[*]["na\\u200bme"]', "to": "name", "records": 1}]
    again = run_preflight(tmp_path / "c.jsonl", smoke=False, out=tmp_path / "again")
    assert again.verdict == "pass", again.reasons


@pytest.mark.parametrize(("shape", "out"), [("d.parquet", "c.parquet"),
                                            ("dataset", "c.parquet")])
def test_a_turns_struct_field_sets_its_records_aside(tmp_path: Path, shape: str,
                                                     out: str) -> None:
    rows = [{"messages": [{"role": "user", "content": f"question {i}", f"na{ZW}me": None},
                          {"role": "assistant", "content": f"answer {i}", f"na{ZW}me": None}]}
            for i in range(4)]
    rows[1]["messages"][0][f"na{ZW}me"] = "bob"
    data = write_shaped(tmp_path / shape, rows)
    fixed, aside = fix_setting_aside(data, tmp_path / out, tmp_path / "q.jsonl")
    assert [a["row"] for a in aside] == [1] and aside[0]["record"] == rows[1]
    assert aside[0]["reasons"][0]["code"] == "key_not_mendable"
    assert len(fixed) == 3 and ZW not in str(pq.read_schema(tmp_path / out))


def _later_rows(key: str) -> list[dict[str, Any]]:
    """Eight chats; row 5 (a shard folder's second shard, its row 1) has the turn key
    ``key`` hiding a zero-width space, under a value; no other record has that key."""
    rows: list[dict[str, Any]] = [
        {"messages": [{"role": "user", "content": f"question {i} here"},
                      {"role": "assistant", "content": f"answer {i} here"}]} for i in range(8)]
    turn = rows[5]["messages"][0]
    if key == "role":
        del turn["role"]
    turn[f"{key[:2]}{ZW}{key[2:]}"] = "user" if key == "role" else "bob"
    return rows


def _without_null_names(record: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{k: v for k, v in t.items() if not (k == "name" and v is None)}
                         for t in record["messages"]]}


def _found_rows(frame: pl.DataFrame) -> list[tuple[str | None, int]]:
    return frame.select("file", "row").rows()


@pytest.mark.parametrize("key", ["name", "role"])
@pytest.mark.parametrize("shape", SHAPES)
def test_a_turns_key_is_flagged_at_its_row_on_every_format(tmp_path: Path, shape: str,
                                                           key: str) -> None:
    data = write_shaped(tmp_path / shape, _later_rows(key))
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    frame = report.findings().filter(pl.col("check") == "invisible_unicode")
    assert _found_rows(frame) == [("part-1.parquet", 1) if shape == "shards" else (None, 5)]
    assert frame["detail"][0].startswith(f'messages[0]["{key[:2]}\\u200b{key[2:]}"] (key)')


@pytest.mark.parametrize("out", ["c.jsonl", "c.parquet"])
@pytest.mark.parametrize("shape", SHAPES)
def test_fix_mends_a_turns_key_on_every_format(tmp_path: Path, shape: str, out: str) -> None:
    """JSON: the key renamed in its record. Tables (the key a struct field): its record set
    aside, and the field renamed in the clean output, JSON Lines too. Either way nothing is
    lost, no other value changes, and the clean output checks clean."""
    rows = _later_rows("name")
    data = write_shaped(tmp_path / shape, rows)
    fixed, aside = fix_setting_aside(data, tmp_path / out, tmp_path / "q.jsonl")
    assert len(fixed) + len(aside) == len(rows)
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text())
    want = copy.deepcopy(rows)
    if shape.endswith((".json", ".jsonl")):
        assert aside == []
        want[5]["messages"][0] = {"role": "user", "content": "question 5 here", "name": "bob"}
        assert manifest["renamed_keys"] == [
            {"key": 'messages[*]["na\\u200bme"]', "to": "name", "records": 1}]
    else:
        assert [(a["row"], a["reasons"][0]["code"]) for a in aside] == [
            (1 if shape == "shards" else 5, "key_not_mendable")]
        assert aside[0]["record"]["messages"][0][f"na{ZW}me"] == "bob"
        del want[5]
        assert manifest["renamed_fields"] == [{"field": 'messages[*]["na\\u200bme"]',
                                               "to": "name"}]
    # a table's turns all hold the union of their keys: a null "name" where none was
    assert [_without_null_names(r) for r in fixed] == want
    assert ZW not in json.dumps(fixed, ensure_ascii=False)
    again = run_preflight(tmp_path / out, smoke=False, out=tmp_path / "again")
    assert again.verdict == "pass", again.reasons


@pytest.mark.parametrize("shape", SHAPES)
def test_a_turn_whose_role_key_hides_a_character_is_set_aside(tmp_path: Path,
                                                              shape: str) -> None:
    """As read, the turn has no role: ``chat_format`` sets the record aside whole (the
    fix does not guess that the mended key would have been its role). A table's struct
    field keeps its name (``role`` is another field of the turn), and the manifest says so;
    a check of the clean output then flags that name, which no record holds a value under
    (as any struct field kept so), where it passed unread."""
    rows = _later_rows("role")
    data = write_shaped(tmp_path / shape, rows)
    fixed, aside = fix_setting_aside(data, tmp_path / "c.jsonl", tmp_path / "q.jsonl")
    assert [(a["row"], a["reasons"][0]["code"]) for a in aside] == [
        (1 if shape == "shards" else 5, "missing_role")]
    assert [r["messages"][0]["content"] for r in fixed] == [
        f"question {i} here" for i in range(8) if i != 5]
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text())
    if shape.endswith((".json", ".jsonl")):
        assert ZW not in json.dumps(fixed, ensure_ascii=False)
        assert manifest["renamed_fields"] == []
    else:
        [kept] = manifest["renamed_fields"]
        assert kept["field"] == 'messages[*]["ro\\u200ble"]' and "another field" in kept["kept"]
    again = run_preflight(tmp_path / "c.jsonl", smoke=False, out=tmp_path / "again")
    if shape.endswith((".json", ".jsonl")):
        assert again.verdict == "pass", again.reasons
        return
    flagged = again.findings().filter(pl.col("check") == "invisible_unicode")
    assert flagged["row"].to_list() == [None]
    assert flagged["detail"][0].startswith('messages[*]["ro\\u200ble"] (key)')
    assert "no record holds a value under it" in flagged["detail"][0]
