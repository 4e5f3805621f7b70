"""Relative paths given on the command line are the working directory's: never looked up
among the shipped presets (found by a hostile review)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight.cli import main
from preflight.paths import presets_dir


@pytest.mark.parametrize(
    ("option", "name", "what"),
    [
        ("--eval", "missing-eval.jsonl", "eval file"),
        # a name the preset folder holds: it was read from there as the eval data (exit 3,
        # "cannot tell the format of default.yaml")
        ("--eval", "default.yaml", "eval file"),
        ("--tokenizer", "tokenizer.json", "tokenizer"),
    ],
)
def test_a_relative_path_with_a_preset_is_the_working_directorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, name: str, what: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("in.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    result = CliRunner().invoke(
        main, ["check", "in.jsonl", "--no-smoke", "--out", "rep", option, name]
    )
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert f"{what} not found: tried {name} (from the working directory {tmp_path})" in flat
    assert str(presets_dir()) not in flat


def test_a_relative_path_is_also_tried_beside_a_rules_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cfg").mkdir()
    rules = tmp_path / "cfg" / "rules.yaml"
    rules.write_text("fields: {text: text}\neval: gone.jsonl\nrules:\n  - {check: overlap}\n")
    monkeypatch.chdir(tmp_path)
    Path("in.jsonl").write_text('{"text": "one"}\n')
    result = CliRunner().invoke(
        main, ["check", "in.jsonl", "--no-smoke", "--out", "rep", "--rules", rules]
    )
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert (
        f"tried gone.jsonl (from the working directory {tmp_path}), "
        f"{tmp_path / 'cfg' / 'gone.jsonl'} (beside the rules file)"
    ) in flat
