"""A ``.jsonl`` file not laid out one object per line — a JSON array, objects pretty-printed
across lines, lines ending in a bare carriage return — failed the gate with a malformed
finding per line ("Expecting property name enclosed in double quotes (column 2)") and no
word of why. Now a warning says what the file holds and the command that fixes it, which
runs as written; a file of mostly good lines gets no such warning."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight.cli import main

RECORDS = [{"text": f"record {i}\u200b"} for i in range(3)]
LAYOUTS = {
    "array": (json.dumps(RECORDS, indent=2), "holds a JSON array, not JSON Lines",
              "mv d.jsonl d.json", "d.json"),
    "pretty": ("".join(json.dumps(r, indent=2) + "\n" for r in RECORDS),
               "holds JSON objects pretty-printed across lines",
               "jq -c . d.jsonl > d.compact.jsonl", "d.compact.jsonl"),
    "cr": ("".join(json.dumps(r) + "\r" for r in RECORDS),
           "ends its lines with a bare carriage return",
           "tr '\\r' '\\n' < d.jsonl > d.lf.jsonl", "d.lf.jsonl"),
}


def _check(path: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", path, "--no-smoke", "--out", "r"])
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_jsonl_file_in_another_layout_says_what_it_holds_and_how_to_fix_it(
        tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text, says, command, fixed = LAYOUTS[layout]
    Path("d.jsonl").write_text(text, newline="")
    code, said = _check("d.jsonl")
    assert code == 1, said
    assert f"d.jsonl {says}" in said and command in said
    if command.startswith("jq") and shutil.which("jq") is None:
        pytest.skip("no jq here to run the command")
    subprocess.run(command, shell=True, check=True)
    code, said = _check(fixed)
    assert code == 1 and "zero_width_space=3" in said and "malformed: " not in said, said


def test_a_jsonl_file_with_a_few_bad_lines_gets_no_layout_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("d.jsonl").write_text("{\n" + "".join(json.dumps(r) + "\n" for r in RECORDS))
    code, said = _check("d.jsonl")
    assert code == 1 and "malformed: invalid_json=1" in said
    assert "pretty-printed" not in said and "JSON array" not in said


def test_jsonl_of_arrays_is_not_told_to_be_renamed_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line a whole JSON array: JSON Lines already (``mv`` to ``.json`` would make it
    no JSON at all); a one-line array file still gets the advice."""
    monkeypatch.chdir(tmp_path)
    Path("d.jsonl").write_text("[1, 2, 3]\n[4, 5]\n" + json.dumps(RECORDS[0]) + "\n")
    code, said = _check("d.jsonl")
    assert code == 1 and "not_an_object" in said
    assert "JSON array, not JSON Lines" not in said and "mv d.jsonl" not in said, said
    Path("e.jsonl").write_text(json.dumps(RECORDS) + "\n")
    code, said = _check("e.jsonl")
    assert "e.jsonl holds a JSON array, not JSON Lines" in said, said
