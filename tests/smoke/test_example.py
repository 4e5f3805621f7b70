"""The README's worked example of a user model (examples/smoke_model.py) does what it says."""

from __future__ import annotations

import json
import random
from pathlib import Path

from click.testing import CliRunner

from preflight.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "smoke_model.py"


def _smoke(data: Path, out: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["smoke", str(data), "--preset", "classification",
                                       "--num-classes", "4", "--model", f"{EXAMPLE}:build",
                                       "--out", str(out), "--no-progress"])
    return result.exit_code, json.loads((out / "report.json").read_text("utf-8"))


def test_the_example_model_blames_the_out_of_range_label_in_the_sample(tmp_path: Path) -> None:
    code, report = _smoke(ROOT / "sample_data" / "classification.jsonl", tmp_path / "out")
    smoke = report["smoke"]
    assert code == 1
    assert smoke["verdict"] == "data_fault"
    assert smoke["model"] == f"{EXAMPLE}:build"
    assert smoke["reason"].endswith("target 4 outside [0, 4)")
    assert smoke["minimal_ids"] == ["cls-00012"]


def test_the_example_model_passes_clean_data(tmp_path: Path) -> None:
    rng = random.Random(0)
    topics = [["goal", "match", "team"], ["vote", "law", "party"], ["cell", "gene", "virus"],
              ["stock", "bank", "price"]]
    lines = []
    for i in range(80):
        label = i % 4
        words = [rng.choice(topics[label]) for _ in range(12)]
        lines.append(json.dumps({"id": f"c{i}", "text": " ".join(words), "label": label}))
    data = tmp_path / "clean.jsonl"
    data.write_text("\n".join(lines) + "\n", "utf-8")
    code, report = _smoke(data, tmp_path / "out")
    assert report["smoke"]["verdict"] == "pass", report["smoke"]["reason"]
    assert report["smoke"]["real"]["learned"] is True
    assert code == 0
