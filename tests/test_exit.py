"""The ``preflight`` command leaves without tearing the interpreter down (``cli.run``): the
exit status, everything written to a pipe and the exit handlers' clean-up must survive it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def preflight(*args: str, tmp: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp / "tmp"), "PYTHONPATH": str(ROOT)}
    (tmp / "tmp").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "preflight", *args], input=stdin,
                          capture_output=True, env=env, timeout=300, check=False)


def test_a_failed_gate_piped_report_and_clean_up_survive_the_fast_exit(tmp_path: Path) -> None:
    lines = [json.dumps({"id": i, "text": f"record number {i} " * 5}) for i in range(3000)]
    lines[7] = "{broken"  # a planted malformed line: the gate fails
    data = ("\n".join(lines) + "\n").encode()
    done = preflight("check", "-", "--no-smoke", "--json", "-q", "--no-progress",
                     "--out", str(tmp_path / "out"), tmp=tmp_path, stdin=data)
    assert done.returncode == 1, done.stderr.decode()
    piped = json.loads(done.stdout)  # the whole report reached the pipe
    assert piped == json.loads((tmp_path / "out" / "report.json").read_text())
    assert piped["rules"][0]["codes"] == {"invalid_json": 1}
    # stdin was spooled to a temporary file: the exit handlers removed it
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("args,code", [(("check", "no-such-file.jsonl"), 3),
                                       (("check", "--workers", "0", "x.jsonl"), 2),
                                       (("rules", "list"), 0)])
def test_exit_statuses_survive_the_fast_exit(tmp_path: Path, args: tuple[str, ...],
                                             code: int) -> None:
    done = preflight(*args, tmp=tmp_path)
    assert done.returncode == code, done.stderr.decode()
    if code == 0:
        assert b"default" in done.stdout and done.stdout.endswith(b"\n")
