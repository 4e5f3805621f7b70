"""A Parquet or Arrow input whose path is not valid UTF-8 (a byte no character stands for,
as Latin-1 file names copied from an old system hold) exited 3 with Arrow's encoding error
("'utf-8' codec can't encode character '\\udcff' ... surrogates not allowed") and no word of
what to do. Arrow opens a file by a UTF-8 path only: the message now says so and how to
rename it, on a file, a shard in a folder and a ``datasets`` folder; JSON Lines, read by
Python, reads as ever."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.outputs import write_records, write_shaped
from tests.test_cli import flat, invoke

ROWS = [{"text": "hello there world"}, {"text": "goodbye now friend"}]


def _odd(tmp_path: Path, name: str) -> Path:
    return tmp_path / os.fsdecode(name.encode().replace(b"@", b"\xff"))


@pytest.mark.parametrize("name", ["b@d.parquet", "b@d.arrow"])
def test_a_file_whose_name_is_not_utf8(tmp_path: Path, name: str) -> None:
    data = write_records(tmp_path / name.replace("@", "a"), ROWS)
    os.rename(data, odd := _odd(tmp_path, name))
    result = invoke("check", odd, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 3, result.output
    said = flat(result.output)
    assert "opened by a UTF-8 path only" in said and "surrogates not allowed" not in said
    assert f"rename the file (e.g. to b_d{Path(name).suffix})" in said
    fixed = invoke("fix", odd, "--out", tmp_path / "c.jsonl", "--quarantine",
                   tmp_path / "q.jsonl")
    assert fixed.exit_code == 3 and "opened by a UTF-8 path only" in flat(fixed.output)


@pytest.mark.parametrize("shape", ["shards", "dataset"])
def test_a_folder_whose_name_is_not_utf8(tmp_path: Path, shape: str) -> None:
    data = write_shaped(tmp_path / shape, ROWS * 3)
    os.rename(data, odd := _odd(tmp_path, f"{shape}@"))
    result = invoke("check", odd, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 3, result.output
    said = flat(result.output)
    assert "opened by a UTF-8 path only" in said and "rename the folder" in said


def test_json_lines_by_such_a_name_reads_as_ever(tmp_path: Path) -> None:
    data = write_records(tmp_path / "d.jsonl", ROWS)
    os.rename(data, odd := _odd(tmp_path, "b@d.jsonl"))
    # as a user runs it (the test runner's output is strict UTF-8, a terminal's is not)
    result = subprocess.run([sys.executable, "-m", "preflight", "check", odd, "--no-smoke",
                             "--out", tmp_path / "r"], capture_output=True, check=False,
                            timeout=120)
    assert result.returncode == 0, result.stderr
