"""Each shipped preset, end to end through the CLI, on its sample corpus: every planted fault
of the preset's checks is found at its row with its code, and nothing else is."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from click.testing import CliRunner

from preflight.cli import main
from preflight.config import load_rules, preset_names

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
CASES = [
    ("pretrain-text", "pretrain", []),
    ("sft-chat", "sft_chat", []),
    ("classification", "classification", ["--num-classes", "4"]),
    ("regression", "regression", []),
]


def test_every_preset_has_a_case_and_a_documented_header() -> None:
    assert sorted(p for p, _, _ in CASES) == sorted(n for n in preset_names() if n != "default")
    for name in preset_names():
        text = (Path(load_rules(preset=name).path)).read_text()
        assert text.startswith(f"# {name} — "), name


@pytest.mark.parametrize(("preset", "sample", "args"), CASES, ids=[c[0] for c in CASES])
def test_preset_finds_exactly_the_planted_faults(tmp_path: Path, preset: str, sample: str,
                                                 args: list[str]) -> None:
    checks = {r.check for r in load_rules(preset=preset).rules}
    faults = json.loads((SAMPLES / f"{sample}.faults.json").read_text())
    # Without --tokenizer token counts are estimates, which findings say by their code.
    estimated = "--tokenizer" not in args
    expected = {(f["row"], f["check"], f"{f['code']}_estimated"
                 if estimated and f["code"] == "too_long" else f["code"])
                for f in faults if f["check"] in checks}
    assert expected, "the sample must plant faults this preset catches"

    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["check", str(SAMPLES / f"{sample}.jsonl"), "--preset", preset, "--out", str(out),
               "--quiet", *args],
    )
    assert result.exit_code == 1, result.output
    found = pl.read_parquet(out / "findings.parquet")
    actual = {(r, c, code) for r, c, code in found.select("row", "check", "code").iter_rows()}
    assert actual == expected
    report = json.loads((out / "report.json").read_text())
    assert all(r["status"] != "error" for r in report["rules"]), report["rules"]


def test_classification_without_num_classes_cannot_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["check", str(SAMPLES / "classification.jsonl"), "--preset", "classification",
               "--out", str(out), "--quiet"],
    )
    assert result.exit_code == 1
    labels = next(r for r in json.loads((out / "report.json").read_text())["rules"]
                  if r["id"] == "labels")
    assert labels["status"] == "error"
    assert "num_classes" in labels["message"]


@pytest.mark.parametrize("name", preset_names())
def test_presets_are_valid_yaml_rules(name: str) -> None:
    path = Path(load_rules(preset=name).path)
    assert yaml.safe_load(path.read_text())["version"] == 1
    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert result.exit_code == 0, result.output
