"""The shipped sample corpus: every planted fault is found at its row with its code, the
planted negatives and every other row stay clean, and the generator reproduces the files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from preflight import run_preflight
from preflight.config import load_rules

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
DATA = SAMPLE / "pretrain.jsonl"
FAULTS: list[dict[str, Any]] = json.loads((SAMPLE / "pretrain.faults.json").read_text("utf-8"))
# The faults the default rules look for (near_duplicate is in the pretrain-text preset only).
DEFAULT_CHECKS = {r.check for r in load_rules().rules} | {"malformed"}
PLANTED = [f for f in FAULTS if f["check"] in DEFAULT_CHECKS]
NEGATIVE_ROWS = {f["row"] for f in FAULTS if f["check"] == "none"}
PLANTED_ROWS = {f["row"] for f in PLANTED}


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The findings of the default rules over the sample corpus (one run per module)."""
    out = tmp_path_factory.mktemp("sample-report")
    report = run_preflight(DATA, out=out, smoke=False)
    assert not report.passed
    assert report.source.malformed == 3
    return pq.read_table(out / "findings.parquet").to_pylist()


def by_row(findings: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for f in findings:
        rows[f["row"]].append(f)
    return rows


@pytest.mark.parametrize(
    "fault", PLANTED, ids=[f"{f['row']}-{f['check']}-{f['code']}" for f in PLANTED]
)
def test_planted_fault_is_found(findings: list[dict[str, Any]], fault: dict[str, Any]) -> None:
    at_row = by_row(findings)[fault["row"]]
    matches = [f for f in at_row if f["check"] == fault["check"] and f["code"] == fault["code"]]
    assert matches, (fault, at_row)
    if "cluster" in fault:
        assert [f["cluster"] for f in matches] == [fault["cluster"]]


def test_duplicate_original_is_not_a_finding(findings: list[dict[str, Any]]) -> None:
    originals = {f["cluster"] for f in PLANTED if "cluster" in f}
    assert originals == {5}
    rows = by_row(findings)
    for row in originals:
        assert rows.get(row, []) == []


def test_negatives_have_no_findings(findings: list[dict[str, Any]]) -> None:
    rows = by_row(findings)
    for row in NEGATIVE_ROWS - PLANTED_ROWS:
        assert rows.get(row, []) == [], row


def test_clean_rows_stay_clean(findings: list[dict[str, Any]]) -> None:
    listed = {f["row"] for f in FAULTS}
    stray = [f for f in findings if f["row"] not in listed]
    assert stray == []


def test_no_unexpected_findings_on_planted_rows(findings: list[dict[str, Any]]) -> None:
    expected = {(f["row"], f["check"], f["code"]) for f in PLANTED}
    got = {(f["row"], f["check"], f["code"]) for f in findings}
    assert got == expected


def test_findings_carry_the_record_ids(findings: list[dict[str, Any]]) -> None:
    for f in findings:
        if f["check"] == "malformed":
            continue  # an unreadable line has no id to give
        assert f["id"] == f"doc-{f['row']:05d}", f
        assert f["file"] is None  # a single file: no shard label


def test_regenerating_the_sample_is_byte_identical(tmp_path: Path) -> None:
    # generate.py writes next to itself, so run a copy of it in a temporary folder.
    script = tmp_path / "generate.py"
    shutil.copy(SAMPLE / "generate.py", script)
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True,
                   capture_output=True, timeout=120)
    for name in ("pretrain.jsonl", "pretrain.faults.json", "README.md"):
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name


@pytest.mark.parametrize(
    ("corpus", "preset", "extra"),
    [
        ("pretrain", "pretrain-text", {}),
        ("sft_chat", "sft-chat", {}),
        ("classification", "classification", {"num_classes": 4}),
        ("regression", "regression", {}),
    ],
)
def test_smoke_on_each_sample_corpus_blames_planted_rows(
    corpus: str, preset: str, extra: dict[str, Any], tmp_path: Path
) -> None:
    """The smoke test on each sample corpus with training faults (NaN, labels out of range,
    chats without an answer) is a data fault, and the rows it blames are rows with a
    planted fault (never a clean row); its sample holds the flagged rows. The pretraining
    corpus's faults (invisible characters, mojibake, empty and duplicate documents) do not
    break training: its smoke test passes, with those rows in the sample."""
    from preflight.config import with_overrides

    planted = json.loads((SAMPLE / f"{corpus}.faults.json").read_text("utf-8"))
    planted_rows = {f["row"] for f in planted if f["check"] != "none"}
    rules = with_overrides(load_rules(preset=preset), **extra)
    report = run_preflight(SAMPLE / f"{corpus}.jsonl", rules=rules, out=tmp_path, smoke=True)
    smoke = report.smoke
    assert smoke is not None
    assert set(smoke.flagged_in_sample) <= planted_rows
    if corpus == "pretrain":
        assert smoke.verdict == "pass", smoke.reason
        assert len(smoke.flagged_in_sample) >= 10
        return
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.control is not None and smoke.control.failure is None
    assert smoke.minimal_rows
    assert set(smoke.minimal_rows) <= planted_rows
    assert set(smoke.flagged_in_sample) <= set(smoke.sample_rows)
    assert len(smoke.flagged_in_sample) >= 1
    assert any("smoke test: data_fault" in r for r in report.reasons)
