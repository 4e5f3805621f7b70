"""A JSON file that lays out its records by column — pandas' ``df.to_json()`` (its default
``orient="columns"``), ``orient="index"``, ``orient="split"``, ``json.dump(df.to_dict(
"list"))`` — read as one record: ``orient="split"`` passed the gate with a ``-3`` label
inside (its ``index`` judged as a number field), the others failed or passed for the wrong
reason with a hint (``jq '.data[]'``) that extracts nothing. Now the gate fails and ``fix``
refuses, naming the layout and a jq command that writes the records."""

from __future__ import annotations

import gzip
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

N = 12
TEXTS = [f"document {i} about this and that" for i in range(N)]
LABELS = [-3 if i == 5 else i % 3 for i in range(N)]  # a planted negative label at row 5


def _layouts() -> dict[str, Any]:
    rows = [{"text": t, "label": y} for t, y in zip(TEXTS, LABELS, strict=True)]
    return {
        "split": {"columns": ["text", "label"], "index": list(range(N)),
                  "data": [[t, y] for t, y in zip(TEXTS, LABELS, strict=True)]},
        "list": {"text": TEXTS, "label": LABELS},
        "columns": {"text": {str(i): t for i, t in enumerate(TEXTS)},
                    "label": {str(i): y for i, y in enumerate(LABELS)}},
        "index": {str(i): r for i, r in enumerate(rows)},
    }


LAYOUTS = _layouts()
NAMES = {"split": "pandas orient='split'", "list": "a list per field, 12 values each",
         "columns": "pandas orient='columns', df.to_json's default",
         "index": "pandas orient='index'"}


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_a_columnar_json_fails_the_gate_naming_its_layout(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "train.json"
    path.write_text(json.dumps(LAYOUTS[kind]))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.verdict == "fail"
    [why] = [r for r in report.reasons if "lays out its records" in r]
    assert why.startswith(f"train.json is one JSON object that lays out its records as "
                          f"{NAMES[kind]}")
    [warning] = report.source.warnings
    assert NAMES[kind] in warning and "jq -c '.data[]'" not in warning


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_the_command_it_gives_writes_the_records(tmp_path: Path, kind: str) -> None:
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed")
    path = tmp_path / "train.json"
    path.write_text(json.dumps(LAYOUTS[kind]))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    [why] = [r for r in report.reasons if "lays out its records" in r]
    command = why.split("e.g. ", 1)[1]
    subprocess.run(command, shell=True, cwd=tmp_path, check=True)
    records = tmp_path / "records.jsonl"
    assert [json.loads(line) for line in records.read_text().splitlines()] == [
        {"text": t, "label": y} for t, y in zip(TEXTS, LABELS, strict=True)]
    again = run_preflight(records, smoke=False, out=tmp_path / "again")
    found = again.findings().select("row", "code").rows()
    assert found == [(5, "label_out_of_range")]


@pytest.mark.parametrize("kind", ["split", "columns"])
def test_fix_refuses_it(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "train.json.gz"
    path.write_bytes(gzip.compress(json.dumps(LAYOUTS[kind]).encode()))
    clean = tmp_path / "clean.jsonl"
    result = CliRunner().invoke(main, ["fix", str(path), "--out", str(clean),
                                       "--quarantine", str(tmp_path / "q.jsonl")])
    assert result.exit_code == 3, result.output
    assert "lays out its records as" in result.output
    assert "gzip -dc" in result.output  # jq reads only text
    assert not clean.exists()


def test_standard_input_is_told_to_pipe_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["check", "-", "--no-smoke", "--out",
                                       str(tmp_path / "r")],
                                input=json.dumps(LAYOUTS["columns"]).encode())
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())  # as wrapped to the terminal's width
    assert "standard input is one JSON object that lays out its records" in said
    assert "by piping it through jq -c" in said


@pytest.mark.parametrize("value", [
    {"question": {"en": "Why?", "fr": "Pourquoi ?"}, "answer": {"en": "So.", "fr": "Ainsi."}},
    {"tokens": ["a", "b", "c"], "ner_tags": [0, 1]},  # lists of other lengths
    {"text": "one record", "spans": [1, 2]},
    {"columns": ["text"], "data": "not rows"},
    {"0": {"text": "a"}, "1": {"body": "b"}},  # rows of other fields
    {"text": ["only one"], "label": [1]},  # one value each: one record
], ids=["objects-by-language", "ragged-lists", "a-record", "not-split", "ragged-rows",
        "one-row"])
def test_other_objects_are_no_such_layout(value: dict[str, Any]) -> None:
    assert layout(value) is None


def test_one_record_of_two_objects_is_not_called_columnar(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"question": {"en": "Why is the sky blue?", "fr": "Pourquoi"},
                                "answer": {"en": "Scattering.", "fr": "La diffusion."}}))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert not any("lays out" in r for r in report.reasons)
    assert all("lays out" not in w for w in report.source.warnings)
