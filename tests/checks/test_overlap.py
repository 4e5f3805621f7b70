"""The overlap check: training records found, exactly or nearly, in the eval file."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from preflight import run_preflight
from preflight.cli import main

WORDS = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
    "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi",
    "psi", "omega", "river", "stone", "cloud", "paper", "window", "garden",
]


def _text(rng: random.Random, n: int = 60) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(50)) for _ in range(n))


def _write(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": f"r{k}", "text": t}) + "\n"
                            for k, t in enumerate(texts)), encoding="utf-8")
    return path


@pytest.fixture
def corpora(tmp_path: Path) -> tuple[Path, Path]:
    rng = random.Random(3)
    train = [_text(rng) for _ in range(300)]
    evals = [_text(rng) for _ in range(40)]
    evals[5] = train[17]                                   # the same text
    evals[6] = train[250].upper().replace(" ", "  ")       # same after folding
    words = train[120].split(" ")
    words[10] = "changed"
    evals[7] = " ".join(words)                             # one word changed: near
    words = train[200].split(" ")
    evals[8] = " ".join(words[:20] + ["x"] * 40)           # shares a third: not near
    return _write(tmp_path / "train.jsonl", train), _write(tmp_path / "eval.jsonl", evals)


def _run(train: Path, rules: dict, out: Path) -> pl.DataFrame:
    report = run_preflight(train, rules=rules, out=out, smoke=False)
    assert report.rule("overlap").status == "fail"
    return pl.read_parquet(out / "findings.parquet").filter(pl.col("check") == "overlap")


def test_exact_and_near_copies_of_eval_records_are_found(corpora, tmp_path: Path) -> None:
    train, evals = corpora
    rules = {"fields": {"text": "text", "id": "id"}, "eval": str(evals),
             "rules": [{"id": "overlap", "check": "overlap"}]}
    found = _run(train, rules, tmp_path / "out")
    got = {(r, code, c) for r, code, c in found.select("row", "code", "cluster").iter_rows()}
    assert got == {(17, "in_eval_exact", 5), (250, "in_eval_exact", 6), (120, "in_eval_near", 7)}
    assert found.filter(pl.col("row") == 120)["detail"][0].startswith("in eval row 7 (Jaccard")


def test_threshold_controls_near_matches(corpora, tmp_path: Path) -> None:
    train, evals = corpora
    rules = {"fields": {"text": "text"}, "eval": str(evals),
             "rules": [{"id": "overlap", "check": "overlap", "threshold": 0.99}]}
    found = _run(train, rules, tmp_path / "out")
    assert set(found["row"]) == {17, 250}


def test_eval_path_is_resolved_beside_the_rules_file(corpora, tmp_path: Path) -> None:
    train, _ = corpora
    rules = tmp_path / "rules.yaml"
    rules.write_text("fields: {text: text}\neval: eval.jsonl\n"
                     "rules:\n  - {id: overlap, check: overlap}\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", str(train), "--rules", str(rules), "--out",
                                       str(out), "--quiet"])
    assert result.exit_code == 1, result.output
    assert set(pl.read_parquet(out / "findings.parquet")["row"]) == {17, 120, 250}


def test_cli_eval_option_adds_the_rule(corpora, tmp_path: Path) -> None:
    train, evals = corpora
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", str(train), "--eval", str(evals), "--out",
                                       str(out), "--quiet"])
    assert result.exit_code == 1
    report = json.loads((out / "report.json").read_text())
    rule = next(r for r in report["rules"] if r["check"] == "overlap")
    assert rule["id"] == "eval-overlap"
    assert rule["violations"] == 3
    assert rule["stats"]["exact"] == 2 and rule["stats"]["near"] == 1


def test_missing_eval_file_is_a_config_error(corpora, tmp_path: Path) -> None:
    train, _ = corpora
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", str(train), "--eval",
                                       str(tmp_path / "nope.jsonl"), "--out", str(out)])
    assert result.exit_code == 2
    assert "eval file not found" in result.output
    assert not out.exists()


def test_overlap_rule_without_eval_cannot_run(corpora, tmp_path: Path) -> None:
    train, _ = corpora
    report = run_preflight(train, rules={"fields": {"text": "text"},
                                         "rules": [{"id": "overlap",
                                                    "check": "overlap"}]}, smoke=False)
    assert report.rule("overlap").status == "error"
    assert "eval" in report.rule("overlap").message
    assert not report.passed


def test_no_overlap_passes(tmp_path: Path) -> None:
    rng = random.Random(9)
    train = _write(tmp_path / "t.jsonl", [_text(rng) for _ in range(50)])
    evals = _write(tmp_path / "e.jsonl", [_text(rng) for _ in range(10)])
    report = run_preflight(train, rules={"fields": {"text": "text"}, "eval": str(evals),
                                         "rules": [{"id": "overlap",
                                                    "check": "overlap"}]}, smoke=False)
    assert report.rule("overlap").status == "pass"
    assert report.rule("overlap").stats["eval_records"] == 10


def test_an_eval_file_without_text_cannot_run(corpora, tmp_path: Path) -> None:
    train, _ = corpora
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"question": "no text field here"}) + "\n", encoding="utf-8")
    for evals in (empty, other):
        report = run_preflight(train, rules={"fields": {"text": "text"}, "eval": str(evals),
                                             "rules": [{"id": "overlap",
                                                        "check": "overlap"}]}, smoke=False)
        assert report.rule("overlap").status == "error"
        assert "no text" in report.rule("overlap").message
        assert not report.passed
