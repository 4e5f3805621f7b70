"""A column by a text name whose values are of mixed JSON types (a number, a list, an object
where the text should be, strings among them) is the text zero-config inference reads: it was
passed over (not mostly strings), so the gate said "no text field" and passed a corpus whose
text was broken in most records — or read another string field as the text instead."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from preflight.cli import main

ROWS = [
    {"id": 1, "title": "a longer title than any text value here", "text": "ok text here"},
    {"id": 2, "title": "second title, also long enough to win", "text": 5},
    {"id": 3, "title": "third title", "text": ["a", "b"]},
    {"id": 4, "title": "fourth title", "text": "another fine text"},
    {"id": 5, "title": "fifth title", "text": {"x": 1}},
    {"id": 6, "title": "sixth title", "text": True},
]


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
@pytest.mark.parametrize("with_title", [False, True], ids=["text-only", "beside-a-title"])
def test_a_text_field_of_mixed_types_is_the_text_and_its_other_values_are_findings(
        tmp_path: Path, suffix: str, with_title: bool) -> None:
    rows = [r if with_title else {k: v for k, v in r.items() if k != "title"} for r in ROWS]
    path = tmp_path / f"d{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        path.write_text(json.dumps(rows, indent=1))
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out",
                                       str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert "inferred text: 'text' (by name; 33% of the values it holds are strings" \
        in result.output
    found = pl.read_parquet(tmp_path / "out" / "findings.parquet")
    wrong = found.filter(pl.col("code") == "wrong_type")
    assert sorted(wrong.get_column("row").to_list()) == [1, 2, 4, 5]  # 0-based rows
    assert "no text field" not in result.output
