"""A turn's content given as a list of parts (multimodal: ``[{"type": "text", "text": ...},
{"type": "image_url", ...}]``) was not read by the character checks: a zero-width space or
a bidi override in a text part passed (``chat_format`` flags the list, but a rules file
without it passed the record clean, hidden character and all). Now its strings are read as
the turn's other strings are (``messages[0].content[0].text``) and ``fix`` mends them in
place, on every format."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from preflight import run_preflight
from preflight.cli import main
from tests.outputs import read_records, write_shaped

ZW = "\u200b"
RULES = """version: 1
fields: {messages: messages}
rules:
  - {id: hidden, check: invisible_unicode, severity: error, fix: strip}
"""


def _chats(n: int = 8) -> list[dict[str, Any]]:
    rows = [{"messages": [
        {"role": "user", "content": [
            {"type": "text", "text": f"what is in picture {i}?", "image_url": None},
            {"type": "image_url", "text": None, "image_url": {"url": f"http://x/{i}.png"}}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": f"a cat {i}", "image_url": None}]}]} for i in range(n)]
    rows[2]["messages"][0]["content"][0]["text"] = f"what{ZW} is in picture 2?"
    rows[5]["messages"][1]["content"][0]["text"] = "a \u202ecat 5"
    return rows


SUFFIXES = [".jsonl", ".json", ".parquet", ".arrow", "shards", "dataset"]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_text_parts_are_read(tmp_path: Path, suffix: str) -> None:
    data = write_shaped(tmp_path / f"d{suffix}", _chats())
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    frame = report.findings().filter(pl.col("check") == "invisible_unicode")
    rows = frame["row"].to_list()
    if suffix == "shards":
        rows = [r + (4 if f == "part-1.parquet" else 0) for r, f in zip(
            rows, frame["file"], strict=True)]
    found = {r: (d.split(": ")[0], c) for r, d, c in zip(
        rows, frame["detail"], frame["code"], strict=True)}
    assert found == {2: ("messages[0].content[0].text", "zero_width_space"),
                     5: ("messages[1].content[0].text", "bidi_control")}


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_fix_mends_text_parts_in_place(tmp_path: Path, suffix: str) -> None:
    data = write_shaped(tmp_path / f"d{suffix}", _chats())
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    clean, quarantine = tmp_path / "clean.jsonl", tmp_path / "q.jsonl"
    result = CliRunner().invoke(main, ["fix", str(data), "--rules", str(rules), "--out",
                                       str(clean), "--quarantine", str(quarantine)])
    assert result.exit_code == 0, result.output
    assert quarantine.read_text() == ""
    want = copy.deepcopy(_chats())
    want[2]["messages"][0]["content"][0]["text"] = "what is in picture 2?"
    want[5]["messages"][1]["content"][0]["text"] = "a cat 5"
    assert read_records(clean) == want
