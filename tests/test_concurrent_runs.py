"""Runs into one out folder at once, as real processes: a fix and a check, two checks, two
fixes of one output, are never interleaved (the second stops, exit 2, with why); two fixes
of distinct outputs in one folder both run. A claim left by a killed run blocks nothing,
whatever became of its process id, and the next run says it removed it. The first run is
held inside its critical section by a hook (no timing)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# Runs the CLI with MODULE.ATTR wrapped: on its first call the process creates READY and
# waits for GO to exist (the test makes it), then goes on.
_HOLD = r"""
import importlib, os, sys, time
target, ready, go = sys.argv[1:4]
module, attr = target.split(":")
mod = importlib.import_module(module)
inner = getattr(mod, attr)
def held(*a, **k):
    if not os.path.exists(ready):
        open(ready, "w").close()
        while not os.path.exists(go):
            time.sleep(0.01)
    return inner(*a, **k)
setattr(mod, attr, held)
sys.argv = ["preflight", *sys.argv[4:]]
from preflight.entry import run
run()
"""
FIX_HOLD = "preflight.fix:temp_dir"  # called once the outputs are claimed
CHECK_HOLD = "preflight.pipeline:clear_stale"  # called once the folder is locked


def preflight(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "preflight", *map(str, args)],
                          capture_output=True, text=True, check=False)


@contextmanager
def held(tmp_path: Path, hook: str, *args: str | Path) -> Iterator[subprocess.Popen[str]]:
    """The run ``args``, started and held inside its critical section while the block
    runs; then let go (the block's caller waits for it)."""
    ready, go = tmp_path / "ready", tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, hook, str(ready), str(go),
                             *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        yield proc
    finally:
        go.touch()
        if proc.poll() is None and not ready.exists():
            proc.kill()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "one\u200btwo"}\n{"text": "three"}\n{"text": "three"}\n')
    return src


def fix_args(src: Path, out: Path, q: str = "q.jsonl") -> list[str | Path]:
    return ["fix", src, "--out", out, "--quarantine", out.with_name(q), "--no-progress",
            "--workers", "1"]


def check_args(src: Path, out: Path) -> list[str | Path]:
    return ["check", src, "--out", out, "--no-smoke", "--no-progress", "--workers", "1"]


def test_a_check_into_a_folder_a_fix_is_writing_stops(tmp_path: Path, data: Path) -> None:
    out = tmp_path / "o"
    with held(tmp_path, FIX_HOLD, *fix_args(data, out / "clean.jsonl")) as first:
        second = preflight(*check_args(data, out))
    assert first.wait() == 0, first.communicate()
    assert second.returncode == 2, second.stderr
    assert "another preflight run is writing into" in second.stderr
    assert sorted(p.name for p in out.iterdir()) == ["clean.jsonl", "fix-manifest.json",
                                                     "q.jsonl"]


def test_a_fix_into_a_folder_a_check_is_writing_stops(tmp_path: Path, data: Path) -> None:
    out = tmp_path / "o"
    with held(tmp_path, CHECK_HOLD, *check_args(data, out)) as first:
        second = preflight(*fix_args(data, out / "clean.jsonl"))
    assert first.wait() == 1, first.communicate()  # the gate fails: findings
    assert second.returncode == 2, second.stderr
    assert "a preflight check is writing its report into" in second.stderr
    assert not (out / "clean.jsonl").exists() and (out / "report.json").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_two_checks_into_one_folder(tmp_path: Path, data: Path) -> None:
    out = tmp_path / "o"
    with held(tmp_path, CHECK_HOLD, *check_args(data, out)) as first:
        second = preflight(*check_args(data, out))
    assert first.wait() == 1, first.communicate()
    assert second.returncode == 2, second.stderr
    assert "another preflight run is writing into" in second.stderr


def test_two_fixes_of_one_output(tmp_path: Path, data: Path) -> None:
    out = tmp_path / "o" / "clean.jsonl"
    with held(tmp_path, FIX_HOLD, *fix_args(data, out)) as first:
        second = preflight(*fix_args(data, out))
    assert first.wait() == 0, first.communicate()
    assert second.returncode == 2, second.stderr
    assert f"is writing {out} right now" in second.stderr


def test_two_fixes_of_distinct_outputs_in_one_folder_both_run(tmp_path: Path, data: Path
                                                              ) -> None:
    out = tmp_path / "o"
    with held(tmp_path, FIX_HOLD, *fix_args(data, out / "a.jsonl", "qa.jsonl")) as first:
        second = preflight(*fix_args(data, out / "b.jsonl", "qb.jsonl"),
                           "--manifest", out / "b-manifest.json")
    assert first.wait() == 0, first.communicate()
    assert second.returncode == 0, second.stderr
    assert (out / "a.jsonl").read_text() == (out / "b.jsonl").read_text()


def test_a_killed_runs_claims_block_nothing_and_are_reported(tmp_path: Path, data: Path
                                                             ) -> None:
    out = tmp_path / "o" / "clean.jsonl"
    with held(tmp_path, FIX_HOLD, *fix_args(data, out)) as first:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert any("-claim" in p.name for p in out.parent.iterdir())  # the killed run's
    again = preflight(*fix_args(data, out))
    assert again.returncode == 0, again.stderr
    assert f"the claims of fix run {first.pid}, which was killed" in again.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["clean.jsonl",
                                                           "fix-manifest.json", "q.jsonl"]


def test_a_claim_whose_process_id_was_reused_blocks_nothing(tmp_path: Path, data: Path
                                                            ) -> None:
    # A killed run's process id, given to another process since (a container restarted,
    # pids wrapped): the claim counted as a live run, and every later run stopped.
    out = tmp_path / "o" / "clean.jsonl"
    out.parent.mkdir()
    live = os.getppid()  # a live process that is no preflight run
    left = out.parent / f".clean.jsonl.preflight-{live}-claim1.tmp"
    left.touch()
    again = preflight(*fix_args(data, out))
    assert again.returncode == 0, again.stderr
    assert f"a claim left by process {live}, which was killed" in again.stderr
    assert not left.exists()
