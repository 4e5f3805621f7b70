"""Column layouts at the edges: one column (``{"text": [...]}``, a one-column frame's
``df.to_json()``) was not recognised (the gate said "nothing in it was checked" with a
``jq '.data[]'`` hint that extracts nothing); lists of one length may be one record (an NER
sentence), so the gate says both readings and how to check it as one record."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from preflight import run_preflight
from preflight.cli import main
from preflight.columnar import layout

TEXTS = ["first doc here", "second doc\u200b here", "third doc here"]
ONE_COLUMN = {"list": {"text": TEXTS},
              "columns": {"text": {str(i): t for i, t in enumerate(TEXTS)}}}
jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def _command(reason: str) -> str:
    return reason.split("e.g. ", 1)[1]


@jq
@pytest.mark.parametrize("kind", sorted(ONE_COLUMN))
def test_one_column_is_a_layout_and_its_command_writes_the_records(
        tmp_path: Path, kind: str) -> None:
    path = tmp_path / "train.json"
    path.write_text(json.dumps(ONE_COLUMN[kind]))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.verdict == "fail"
    [why] = [r for r in report.reasons if "lays out its records" in r]
    assert ".data[]" not in why and "nothing in it was checked" not in why
    assert ".data[]" not in " ".join(report.source.warnings)
    subprocess.run(_command(why), shell=True, cwd=tmp_path, check=True)
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"text": t} for t in TEXTS]
    again = run_preflight(tmp_path / "records.jsonl", smoke=False, out=tmp_path / "again")
    assert again.findings().select("row", "code").rows() == [(1, "zero_width_space")]


@pytest.mark.parametrize("kind", sorted(ONE_COLUMN))
def test_fix_refuses_one_column(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "train.json"
    path.write_text(json.dumps(ONE_COLUMN[kind]))
    clean = tmp_path / "clean.jsonl"
    result = CliRunner().invoke(main, ["fix", str(path), "--out", str(clean),
                                       "--quarantine", str(tmp_path / "q.jsonl")])
    assert result.exit_code == 3, result.output
    assert "lays out its records as" in " ".join(result.output.split())
    assert not clean.exists()


@pytest.mark.parametrize("value", [
    {"text": ["only one"]}, {"text": {"0": "only one"}}, {"meta": {"a": "x", "b": "y"}},
    {"text": "a record"}], ids=["one-value", "one-row", "an-object", "a-string"])
def test_one_member_that_is_one_record_is_no_layout(value: dict[str, Any]) -> None:
    assert layout(value) is None


NER = {"tokens": ["Paris", "is", "big\u200b"], "tags": [1, 0, 0]}


@jq
def test_lists_of_one_length_say_both_readings(tmp_path: Path) -> None:
    path = tmp_path / "ner.json"
    path.write_text(json.dumps(NER))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.verdict == "fail"
    [why] = [r for r in report.reasons if "lays out its records" in r]
    assert "or it is one record whose fields are lists of one length" in why
    assert "or it is one record" in report.source.warnings[0]
    # The one-record reading's command gives a file that is checked as that record.
    wrap = why.split("wrap it in an array with ", 1)[1].split(" and check that", 1)[0]
    subprocess.run(wrap, shell=True, cwd=tmp_path, check=True)
    again = run_preflight(tmp_path / "record.json", smoke=False, out=tmp_path / "again")
    assert again.source.records == 1 and not any("lays out" in r for r in again.reasons)
    assert again.findings().select("row", "code").rows() == [(0, "zero_width_space")]


@pytest.mark.parametrize("value", [
    {"tokens": ["a", "b", "c"], "tags": [0, 1]},
    {"id": 7, "tokens": ["a", "b"], "tags": [0, 1]}], ids=["ragged", "beside-a-scalar"])
def test_a_clear_record_of_lists_is_not_failed_as_a_layout(tmp_path: Path,
                                                           value: dict[str, Any]) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(value))
    assert layout(value) is None
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.verdict == "pass", report.reasons
