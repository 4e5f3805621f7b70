"""Run Python in a child process with a time limit: a regression that hangs fails its test
instead of hanging the suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CHILD_TIMEOUT = 120  # seconds: far past any limit a test sets; a hang fails the test instead


def run_python(
    cwd: Path, *args: str, what: str = "the child process"
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``cwd``; fails the test when it does not end in time."""
    try:
        return subprocess.run(
            [sys.executable, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not end in {CHILD_TIMEOUT} s")


def run_script(cwd: Path, source: str) -> dict[str, Any]:
    """Write ``source`` to ``cwd/child.py``, run it, and return the JSON object it prints last
    (the child must exit 0)."""
    script = cwd / "child.py"
    script.write_text(source, encoding="utf-8")
    proc = run_python(cwd, str(script))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
