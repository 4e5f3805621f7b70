"""Records whose only content is a list of objects — a wrapper per line (a paged API dump),
per array element or per shard — passed the gate with none of the records inside checked,
and ``fix`` copied them "clean". The one-wrapper file already failed; now these fail too
(exit 1, saying how to extract them), ``fix`` refuses them (exit 3), and records that hold
a text beside such a list (spans, tool calls) are checked as ever."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight.cli import main


def _inner(k: int) -> list[dict]:
    return [{"text": f"record {k} {i}\u200b", "n": i} for i in range(5)]


def _write(path: Path, shape: str) -> Path:
    pages = [{"data": _inner(k), "page": k} for k in range(3)]
    lines = "".join(json.dumps(p) + "\n" for p in pages)
    if shape == "jsonl":
        path = path / "w.jsonl"
        path.write_text(lines)
    elif shape == "gz":
        path = path / "w.jsonl.gz"
        path.write_bytes(gzip.compress(lines.encode()))
    elif shape == "array":
        path = path / "w.json"
        path.write_text(json.dumps(pages, indent=1))
    else:  # a folder of one-object .json files
        path = path / "pages"
        path.mkdir()
        for k, page in enumerate(pages):
            (path / f"p{k}.json").write_text(json.dumps(page))
    return path


def _said(result: object) -> str:
    return " ".join(result.output.split())  # type: ignore[attr-defined]


@pytest.mark.parametrize(("shape", "hint"), [
    ("jsonl", "jq -c '.data[]' w.jsonl > records.jsonl"),
    ("gz", "gzip -dc w.jsonl.gz | jq -c '.data[]' > records.jsonl"),
    ("array", "jq -c '.[].data[]' w.json > records.jsonl"),
    ("folder", "for each file, jq -c '.data[]' FILE >> records.jsonl")])
def test_a_wrapper_per_unit_fails_the_gate_and_fix_refuses_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str, hint: str) -> None:
    path = _write(tmp_path, shape)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", path.name, "--no-smoke", "--out", "r"])
    assert result.exit_code == 1, result.output
    assert "hold their own records in 'data', a list of objects" in _said(result)
    assert hint in _said(result)
    fixed = CliRunner().invoke(main, ["fix", path.name, "--out", "c.jsonl",
                                      "--quarantine", "q.jsonl"])
    assert fixed.exit_code == 3, fixed.output
    assert not (tmp_path / "c.jsonl").exists()


def test_a_wrapper_per_line_on_standard_input_fails(tmp_path: Path) -> None:
    data = _write(tmp_path, "jsonl").read_bytes()
    result = CliRunner().invoke(main, ["check", "-", "--no-smoke", "--out",
                                       str(tmp_path / "r")], input=data)
    assert result.exit_code == 1, result.output
    assert "by piping them through jq -c '.data[]' > records.jsonl" in _said(result)


def test_records_with_a_text_beside_a_list_of_objects_are_checked(tmp_path: Path) -> None:
    rows = [{"text": f"a sentence number {i}", "spans": [{"label": "X", "start": 0}]}
            for i in range(10)]
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out",
                                       str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "hold their own records" not in _said(result)
