"""A key holding ``.``, ``[0]`` or a hidden character made a finding's path ambiguous:
``{"k.v[0]": "x\\u200b"}`` and ``{"k": {"v": ["x\\u200b"]}}`` were both ``k.v[0]``. Such a
key is quoted as a JSON string (``["k.v[0]"]``), its hidden characters escaped, so a path
names exactly one place, on every format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preflight import run_preflight
from preflight.checks.nested_strings import shown
from tests.outputs import fix_cleanly, write_shaped

ZW = "\u200b"


def _records(n: int = 8) -> list[dict[str, Any]]:
    rows = [{"text": f"document {i} here", "k.v[0]": f"x {i}", "k": {"v": [f"y {i}"]},
             "m": {"a.b": [f"z {i}"], "c": f"w {i}"}} for i in range(n)]
    rows[2]["k.v[0]"] = f"x{ZW} 2"
    rows[3]["k"]["v"][0] = f"y{ZW} 3"
    rows[4]["m"]["a.b"][0] = f"z{ZW} 4"
    return rows


PLANTED = {2: '["k.v[0]"]', 3: "k.v[0]", 4: 'm["a.b"][0]'}


def _paths(report: Any) -> dict[int, str]:
    frame = report.findings().filter(pl.col("code") == "zero_width_space")
    rows = frame["row"].to_list()
    if "file" in frame.columns and frame["file"].null_count() < len(frame):
        rows = [r + (4 if f == "part-1.parquet" else 0) for r, f in zip(
            rows, frame["file"], strict=True)]
    return {r: d.split(": ")[0] for r, d in zip(rows, frame["detail"], strict=True)}


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet", ".arrow", "shards",
                                    "dataset"])
def test_a_key_that_reads_as_a_path_is_quoted(tmp_path: Path, suffix: str) -> None:
    data = write_shaped(tmp_path / f"d{suffix}", _records())
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert _paths(report) == PLANTED
    fixed = fix_cleanly(data, tmp_path / "clean.jsonl", tmp_path / "q.jsonl")
    assert fixed[2]["k.v[0]"] == "x 2" and fixed[3]["k"]["v"] == ["y 3"]
    assert fixed[4]["m"]["a.b"] == ["z 4"]


def test_the_path_syntax() -> None:
    assert shown(("answers", "text", 0)) == "answers.text[0]"
    assert shown(("k.v[0]",)) == '["k.v[0]"]'
    assert shown(("m", "a]b", 1, "q\"")) == 'm["a]b"][1]["q\\""]'
    assert shown(("m", "", "x")) == 'm[""].x'
    assert shown(("m", f"k{ZW}", "t\U000e0041")) == 'm["k\\u200b"]["t\\udb40\\udc41"]'
    assert shown(("m", "café", "naïve key")) == "m.café.naïve key"
    # A quoted key reads back as the key: the inside of the brackets is a JSON string.
    assert json.loads(shown(("m", f"a.{ZW}b"))[1:][1:-1]) == f"a.{ZW}b"
