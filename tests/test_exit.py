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


# Runs the command as `preflight` does, with an object in __main__ whose finalizer writes a
# mark: the interpreter's teardown runs it, the fast exit does not. The pool is allowed on a
# small input (POOL_MIN_BYTES) so that --workers 2 starts one.
_WATCHED = """
import os, sys
import preflight.executor.launch as launch
launch.POOL_MIN_BYTES = 0

class TornDown:
    def __del__(self, write=os.write):
        write(2, b"[torn down]")

watched = TornDown()
sys.argv = ["preflight", *sys.argv[1:]]
from preflight.cli import run
run()
"""


def _inputs(tmp: Path) -> dict[str, Path]:
    import polars as pl

    rows = [{"id": i, "text": f"record number {i} " * 5} for i in range(400)]
    rows[3]["text"] = "zero\u200bwidth"  # a planted hidden character: the gate fails
    frame = pl.DataFrame(rows)
    (tmp / "shards").mkdir()
    paths = {"jsonl": tmp / "d.jsonl", "json": tmp / "d.json", "csv": tmp / "d.csv",
             "parquet": tmp / "d.parquet", "arrow": tmp / "d.arrow", "shards": tmp / "shards",
             "datasets": tmp / "saved"}
    frame.write_ndjson(paths["jsonl"])
    paths["json"].write_text(json.dumps(rows, indent=2))
    frame.write_csv(paths["csv"])
    frame.write_parquet(paths["parquet"])
    frame.write_ipc(paths["arrow"])
    frame.head(200).write_parquet(paths["shards"] / "part-0.parquet")
    frame.tail(200).write_parquet(paths["shards"] / "part-1.parquet")
    datasets = pytest.importorskip("datasets")
    datasets.Dataset(frame.to_arrow()).save_to_disk(str(paths["datasets"]), num_shards=2)
    return paths


@pytest.mark.parametrize("kind,extra", [
    ("jsonl", ()), ("json", ()), ("csv", ()), ("parquet", ()), ("arrow", ()), ("shards", ()),
    ("datasets", ()),
    ("jsonl", ("--workers", "2")), ("parquet", ("--workers", "2")), ("stdin", ()),
    ("fix", ()),
])
def test_the_command_leaves_without_teardown_on_every_input(tmp_path: Path, kind: str,
                                                            extra: tuple[str, ...]) -> None:
    """Idle reader and scan threads once kept every real run on the slow exit (0.3 s of
    module teardown, a quarter of a small gate's wall time)."""
    paths = _inputs(tmp_path)
    stdin = None
    if kind == "stdin":
        args = ["check", "-"]
        stdin = paths["jsonl"].read_bytes()
    elif kind == "fix":
        args = ["fix", str(paths["jsonl"]), "--out", str(tmp_path / "clean.jsonl"),
                "--quarantine", str(tmp_path / "quarantine.jsonl")]
    else:
        args = ["check", str(paths[kind]), "--out", str(tmp_path / "report")]
    args += ["--no-progress", "-q", *extra]
    if kind != "fix":
        args.append("--no-smoke")
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PYTHONPATH": str(ROOT)}
    (tmp_path / "tmp").mkdir()
    done = subprocess.run([sys.executable, "-c", _WATCHED, *args], input=stdin,
                          capture_output=True, env=env, timeout=300, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == (0 if kind == "fix" else 1), stderr
    assert "[torn down]" not in stderr
    if kind == "fix":  # the hidden character stripped, every record written
        clean = (tmp_path / "clean.jsonl").read_text().splitlines()
        assert len(clean) == 400 and "\u200b" not in clean[3]
    assert list((tmp_path / "tmp").iterdir()) == []


def test_the_mark_shows_a_teardown(tmp_path: Path) -> None:
    """The test above can fail: a run that leaves normally shows the mark."""
    script = _WATCHED.replace("from preflight.cli import run\nrun()", "sys.exit(0)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0 and b"[torn down]" in done.stderr


# Ctrl-C as the command starts: the first import of ``module`` (which the command makes
# before its own handling of Ctrl-C, or inside it) is interrupted, once.
_CTRL_C_AT = """
import importlib.abc, sys

class CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None, module=sys.argv[1]):
        if name == module:
            sys.meta_path.remove(self)
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["preflight", *sys.argv[2:]]
from preflight.entry import run
run()
"""


# click loads with the command line itself (preflight.cli), before any handler of its own;
# rich.markup and launch as the command starts. (The package's own light modules load
# before the entry point: an interrupt there, a millisecond, is Python's traceback.)
@pytest.mark.parametrize("module", ["click", "rich.markup", "preflight.executor.launch"])
def test_ctrl_c_as_the_command_starts_is_exit_130(tmp_path: Path, module: str) -> None:
    """Click's own answer to Ctrl-C is "Aborted!" and exit 1, a failed gate to a CI job."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a"}\n')
    done = subprocess.run([sys.executable, "-c", _CTRL_C_AT, module, "check", str(data),
                           "--no-smoke", "--out", str(tmp_path / "out")],
                          capture_output=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    stderr = done.stderr.decode()
    assert done.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr


# The same, with every write of the outputs failing as a full disk does.
_FULL_DISK = _WATCHED.replace("watched = TornDown()", """watched = TornDown()
import errno
import preflight.fix.writers.text as text_writers
import pyarrow.parquet as pq

def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")

text_writers.JsonlWriter.keep = text_writers.JsonlWriter.change = full
pq.ParquetWriter.write_table = full""")


@pytest.mark.parametrize("command", ["check", "fix"])
def test_a_full_disk_is_exit_3_through_the_fast_exit_and_leaves_nothing(
        tmp_path: Path, command: str) -> None:
    paths = _inputs(tmp_path)
    out = tmp_path / "out"
    args = (["fix", str(paths["jsonl"]), "--out", str(out / "clean.jsonl"),
             "--quarantine", str(out / "q.jsonl")] if command == "fix"
            else ["check", str(paths["jsonl"]), "--out", str(out), "--no-smoke"])
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PYTHONPATH": str(ROOT)}
    (tmp_path / "tmp").mkdir()
    done = subprocess.run([sys.executable, "-c", _FULL_DISK, *args, "-q", "--no-progress"],
                          capture_output=True, env=env, timeout=300, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 3, stderr
    assert "No space left on device" in stderr and "Traceback" not in stderr
    assert "[torn down]" not in stderr
    assert not out.exists() or [p.name for p in out.iterdir()] == []
    assert list((tmp_path / "tmp").iterdir()) == []
