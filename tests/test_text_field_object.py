"""``--text-field data`` where ``data`` holds an object (``{"data": {"text": "a\\u200bb"}}``):
the gate failed on schema's ``wrong_type``, but the hidden characters inside the object were
read by no check (a text field was left out of the strings read inside objects), so the
report never showed them. Now they are flagged as in any other object (``data.text``), and
``wrong_type`` says how to name the text inside it (``--text-field data.text``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.outputs import write_shaped
from tests.test_cli import flat, invoke

ZW = "\u200b"
SHAPES = ["d.jsonl", "d.json", "d.parquet", "d.arrow", "shards", "dataset"]


def _rows() -> list[dict[str, Any]]:
    rows = [{"id": i, "data": {"text": f"document {i} here", "lang": "en"}} for i in range(6)]
    rows[1]["data"]["text"] = f"docu{ZW}ment 1 here"
    rows[5]["data"]["lang"] = f"e{ZW}n"
    return rows


@pytest.mark.parametrize("shape", SHAPES)
def test_hidden_characters_inside_an_object_text_field_are_flagged(tmp_path: Path,
                                                                   shape: str) -> None:
    data = write_shaped(tmp_path / shape, _rows())
    result = invoke("check", data, "--text-field", "data", "--no-smoke", "--out",
                    tmp_path / "r")
    assert result.exit_code == 1, result.output
    frame = pl.read_parquet(tmp_path / "r" / "findings.parquet")
    # a shard folder numbers rows per file: the second shard starts at the fifth record
    rows = [r + (4 if f == "part-1.parquet" else 0)
            for r, f in zip(frame["row"], frame["file"], strict=True)]
    found = {(c, row, d.split(":")[0]) for c, row, d in zip(
        frame["check"], rows, frame["detail"], strict=True)}
    assert ("invisible_unicode", 1, "data.text") in found
    assert ("invisible_unicode", 5, "data.lang") in found
    schema = frame.filter(pl.col("code") == "wrong_type")["detail"].to_list()
    assert len(schema) == 6
    assert schema[0] == ("data: expected string, got object; name the string inside it by "
                         "its path: --text-field data.text")
    assert "--text-field data.text" in flat(result.output)
