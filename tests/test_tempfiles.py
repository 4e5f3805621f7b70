"""Temporary names that carry their writer's pid, and sweeping the ones of dead processes."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from preflight.errors import OutputError
from preflight.tempfiles import (
    atomic_write,
    pid_of,
    sweep,
    sweep_temp_dirs,
    temp_dir,
    temp_path,
)


def dead_pid() -> int:
    """The id of a process that has exited (and been waited for)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temp_path_is_beside_the_final_name_and_carries_the_pid(tmp_path: Path) -> None:
    final = tmp_path / "findings.parquet"
    tmp = temp_path(final)
    assert tmp.parent == tmp_path
    assert tmp.name == f".findings.parquet.preflight-{os.getpid()}.tmp"
    assert pid_of(tmp.name) == os.getpid()
    tagged = temp_path(final, "clean_2")
    assert tagged.name == f".findings.parquet.preflight-{os.getpid()}-clean_2.tmp"
    assert pid_of(tagged.name) == os.getpid()
    with pytest.raises(ValueError):
        temp_path(final, "a.b")


def test_sweep_deletes_only_temporaries_of_dead_processes(tmp_path: Path) -> None:
    dead, live = dead_pid(), os.getppid()
    stale = [
        tmp_path / f".report.json.preflight-{dead}.tmp",
        tmp_path / f".clean.jsonl.preflight-{dead}-part_1.tmp",
        tmp_path / f".findings.parquet.{dead}.tmp",  # an earlier release's name
        tmp_path / f".clean.{dead}.0.part.jsonl",
        tmp_path / f".manifest.json.{dead}.part",
    ]
    kept = [
        tmp_path / f".report.json.preflight-{live}.tmp",  # a live run is writing it
        tmp_path / f".report.json.preflight-{os.getpid()}.tmp",  # this process's own
        tmp_path / f"notes.{dead}.tmp",  # not a preflight name
        tmp_path / f".draft.{dead}.tmp",  # not one either
        tmp_path / "report.json",
    ]
    for p in stale + kept:
        p.write_text("x")
    assert sorted(sweep(tmp_path)) == sorted(stale)
    assert sorted(tmp_path.iterdir()) == sorted(kept)
    assert sweep(tmp_path / "missing") == []


def test_temp_dirs_carry_the_pid_and_dead_ones_are_swept(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    mine = temp_dir("fix")
    assert mine.parent == tmp_path and mine.name.startswith(f"preflight-fix-{os.getpid()}-")
    dead = tmp_path / f"preflight-fix-{dead_pid()}-abc123"
    (dead / "report").mkdir(parents=True)
    (dead / "report" / "findings.parquet").write_text("x")
    live = tmp_path / f"preflight-spill-{os.getppid()}-abc123"
    live.mkdir()
    other = tmp_path / "preflight-fix-notapid"
    other.mkdir()
    assert sweep_temp_dirs() == [dead]
    assert sorted(tmp_path.iterdir()) == sorted([mine, live, other])


def test_atomic_write_renames_on_success(tmp_path: Path) -> None:
    final = tmp_path / "sub" / "out.txt"
    with atomic_write(final) as tmp:
        tmp.write_text("done")
    assert final.read_text() == "done"
    assert sorted(p.name for p in final.parent.iterdir()) == ["out.txt"]


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_atomic_write_leaves_nothing_when_interrupted(tmp_path: Path,
                                                      error: type[BaseException]) -> None:
    final = tmp_path / "out.txt"
    final.write_text("old")
    with pytest.raises(error), atomic_write(final) as tmp:
        tmp.write_text("half")
        raise error
    assert final.read_text() == "old"
    assert list(tmp_path.iterdir()) == [final]


def test_atomic_write_turns_a_full_disk_into_an_output_error(tmp_path: Path) -> None:
    final = tmp_path / "out.txt"
    with pytest.raises(OutputError) as e, atomic_write(final) as tmp:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert e.value.exit_code == 3
    assert str(final) in str(e.value) and "No space left on device" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_a_readable_temporary_keeps_the_format_suffix_and_is_swept(tmp_path: Path) -> None:
    final = tmp_path / "clean.parquet"
    mine = temp_path(final, "0", suffix=".parquet")
    assert mine.name.endswith(".tmp.parquet") and mine.parent == tmp_path
    stale = tmp_path / mine.name.replace(str(os.getpid()), str(dead_pid()))
    stale.write_bytes(b"x")
    mine.write_bytes(b"x")
    assert sweep(tmp_path) == [stale]
    assert mine.exists()
