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
