"""End-to-end: where `check` reads and writes. Paths that cannot work are exit 2 before any
work, I/O failures while reading or writing are exit 3 (never "internal error"), nothing
half-written is left behind, and a closed stdout never changes the verdict's exit code."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from preflight import run_preflight
from preflight.cli import main
from preflight.errors import ConfigError
from tests.test_cli import CLEAN, faulty, flat, write_jsonl
from tests.test_tempfiles import dead_pid


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def cli(*args: str | Path, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "preflight", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.startswith("."))


# -- item 6: --out must be a folder preflight may fill --------------------------------------


@pytest.mark.parametrize("args", [
    ("check", "--no-smoke", "{data}", "--out", ""),
    ("smoke", "{data}", "--out", "  "),
    ("check", "--no-smoke", ""),
    ("check", "--no-smoke", "{data}", "--rules", ""),
    ("fix", "{data}", "--out", "", "--quarantine", "q.jsonl"),
    ("report", "render", "", "--html", "x.html"),
    ("init", "{data}", "--out", "")], ids=lambda a: " ".join(a[:2]))
def test_an_empty_path_is_exit_2_not_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]) -> None:
    # --out "$UNSET" read as "." wrote report.json, findings.parquet and report.html among
    # the user's files (and DATA "" checked the working directory as a shard folder).
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    monkeypatch.chdir(tmp_path)
    result = invoke(*(a.format(data=data) for a in args))
    assert result.exit_code == 2, result.output
    assert "is empty (an unset variable?); give a path" in flat(result.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]


def test_an_empty_out_from_python_is_a_config_error(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="out is empty"):
        run_preflight(data, smoke=False, out="")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]


def test_out_that_is_a_file_is_exit_2(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    (tmp_path / "taken").write_text("keep me")
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "taken")
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output
    assert "is a file" in flat(result.output)
    assert (tmp_path / "taken").read_text() == "keep me"
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "taken" / "sub")
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output


def test_out_that_is_the_input_is_exit_2(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    before = data.read_bytes()
    result = invoke("check", "--no-smoke", data, "--out", data)
    assert result.exit_code == 2, result.output
    assert "is the input" in flat(result.output)
    assert data.read_bytes() == before


@pytest.mark.parametrize("out", [".", "reports", "reports/deeper"])
def test_out_inside_the_shard_folder_being_read_is_exit_2(tmp_path: Path, out: str) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    write_jsonl(shards / "a.jsonl", CLEAN)
    result = invoke("check", "--no-smoke", shards, "--out", shards / out)
    assert result.exit_code == 2, result.output
    assert "input folder" in flat(result.output)
    assert sorted(p.name for p in shards.iterdir()) == ["a.jsonl"]  # nothing written there


# -- item 8: leftovers of killed runs -------------------------------------------------------


def test_check_sweeps_stale_temporaries_of_dead_runs(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    out, tmpdir = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    tmpdir.mkdir()
    dead, live = dead_pid(), os.getpid()  # the test process outlives the run
    stale = [out / f".findings.parquet.{dead}.tmp", out / f".report.json.{dead}.tmp",
             out / f".report.html.preflight-{dead}.tmp"]
    kept = [out / f".findings.parquet.{live}.tmp", out / f".report.json.preflight-{live}.tmp",
            out / "notes.txt"]
    for p in stale + kept:
        p.write_bytes(b"x" * 100)
    (tmpdir / f"preflight-fix-{dead}-abc").mkdir()
    (tmpdir / f"preflight-fix-{dead}-abc" / "clean.jsonl").write_text("x")
    (tmpdir / f"preflight-fix-{live}-abc").mkdir()
    proc = cli("check", "--no-smoke", data, "--out", out, "--no-progress", cwd=tmp_path,
               env={"TMPDIR": str(tmpdir)})
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in kept)
    assert sorted(p.name for p in tmpdir.iterdir()) == [f"preflight-fix-{live}-abc"]


def test_ctrl_c_in_the_smoke_stage_leaves_no_findings_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import preflight.findings
    import preflight.pipeline

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(preflight.findings, "ROW_GROUP", 1)  # the spill exists by then
    monkeypatch.setattr(preflight.pipeline, "_smoke", interrupted)
    out = tmp_path / "out"
    result = invoke("check", faulty(tmp_path), "--out", out, "--no-progress")
    assert result.exit_code == 130, result.output
    assert leftovers(out) == []


@pytest.mark.parametrize("formats", ["json,html", "json,md,junit"])
def test_a_run_stopped_before_its_report_leaves_no_earlier_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, formats: str
) -> None:
    # A passing run's report.json stayed in --out when the next run (on faulty data) was
    # killed or stopped: read afterwards, it said "pass" for data never checked.
    import preflight.pipeline

    out = tmp_path / "out"
    clean = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    first = invoke("check", "--no-smoke", clean, "--out", out, "--format", formats)
    assert first.exit_code == 0, first.output
    written = sorted(p.name for p in out.iterdir())
    assert "report.json" in written and "findings.parquet" in written
    (out / "notes.txt").write_text("mine")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(preflight.pipeline, "scan", interrupted)
    result = invoke("check", "--no-smoke", faulty(tmp_path), "--out", out, "--format",
                    formats)
    assert result.exit_code == 130, result.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


# -- item 9: nesting that crashes Arrow's reader --------------------------------------------


def test_a_line_nested_20000_deep_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    good = [json.dumps({"text": f"record number {i}"}) for i in range(100)]
    lines = [*good[:50], '{"a":' * 20_000 + "1" + "}" * 20_000, "[" * 20_000, *good[50:]]
    data = tmp_path / "deep.jsonl"
    data.write_text("\n".join(lines) + "\n")
    proc = cli("check", "--no-smoke", data, "--out", tmp_path / "out", "--no-progress",
               cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr + proc.stdout  # was -11 (SIGSEGV)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["source"]["records"] == 100
    assert report["source"]["malformed"] == 2
    found = pq.read_table(tmp_path / "out" / "findings.parquet").to_pylist()
    assert [(f["row"], f["code"]) for f in found if f["check"] == "malformed"] == [
        (50, "too_deep"), (51, "too_deep")]


# -- item 10: what a shard folder holds -----------------------------------------------------


def shard_folder(tmp_path: Path) -> Path:
    shards = tmp_path / "shards"
    shards.mkdir()
    write_jsonl(shards / "a.jsonl", CLEAN)
    return shards


@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_a_broken_symlink_in_a_shard_folder_is_exit_3_naming_it(tmp_path: Path,
                                                                 link: str) -> None:
    shards = shard_folder(tmp_path)
    target = "missing.jsonl" if link == "dangling" else "b.jsonl"
    (shards / "b.jsonl").symlink_to(target)
    result = invoke("check", "--no-smoke", shards, "--out", tmp_path / "out")
    assert result.exit_code == 3, result.output  # was 0: the shard silently not read
    assert "b.jsonl" in result.output
    assert ("broken" if link == "dangling" else "loops") in result.output


def test_skipped_entries_of_a_shard_folder_are_listed(tmp_path: Path) -> None:
    shards = shard_folder(tmp_path)
    (shards / "nested").mkdir()
    (shards / "nested" / "notes.txt").write_text("no data here\n")
    write_jsonl(shards / "nested" / "_old.jsonl", CLEAN)
    write_jsonl(shards / "_old.jsonl", CLEAN)
    (shards / ".hidden.jsonl").write_text("{}\n")
    (shards / "README.md").write_text("about\n")
    result = invoke("check", "--no-smoke", shards, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    skipped = {s["path"]: s["reason"] for s in report["source"]["skipped"]}
    assert sorted(skipped) == [".hidden.jsonl", "README.md", "_old.jsonl", "nested"]
    assert "sub-folder" in skipped["nested"]
    assert "'_'" in skipped["_old.jsonl"]
    for name in skipped:
        assert f"skipped {name}" in result.output


def test_a_sub_folder_holding_data_is_not_skipped(tmp_path: Path) -> None:
    # Skipped with a note, its records went unchecked and the gate could pass on the rest.
    shards = shard_folder(tmp_path)
    (shards / "2024" / "12").mkdir(parents=True)
    write_jsonl(shards / "2024" / "12" / "part-9.jsonl", CLEAN)
    result = invoke("check", "--no-smoke", shards, "--out", tmp_path / "out")
    assert result.exit_code == 3, result.output
    said = flat(result.output)
    assert "2024 is a sub-folder holding data (12/part-9.jsonl)" in said
    assert "check" in said and "on its own" in said
    fixed = invoke("fix", shards, "--out", tmp_path / "c.jsonl", "--quarantine",
                   tmp_path / "q.jsonl")
    assert fixed.exit_code == 3, fixed.output
    assert not (tmp_path / "c.jsonl").exists()


# -- item 11: inputs that cannot be opened, or must not be ----------------------------------


def _no_read_permission() -> list[str]:
    """A prefix that runs a command without the right to read others' unreadable files
    (root reads anything unless it drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot make a file unreadable")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_an_input_without_read_permission_is_exit_3(tmp_path: Path, kind: str) -> None:
    prefix = _no_read_permission()
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    if kind == "folder":
        data = shard_folder(tmp_path)
    data.chmod(0)
    try:
        proc = subprocess.run([*prefix, sys.executable, "-m", "preflight", "check",
                               "--no-smoke", str(data), "--out", str(tmp_path / "out")],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              check=False)
    finally:
        data.chmod(0o755)
    assert proc.returncode == 3, proc.stderr + proc.stdout  # click said 2: "not readable"
    assert "Permission denied" in proc.stderr
    assert data.name in proc.stderr


def test_an_input_that_cannot_be_opened_is_exit_3(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import preflight.source.tracked

    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    real_access = os.access

    def access(path: object, mode: int, **kwargs: object) -> bool:
        return False if Path(str(path)) == data else real_access(path, mode, **kwargs)

    def refuse(path: object, *args: object, **kwargs: object) -> object:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(preflight.source.tracked, "open", refuse, raising=False)
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "out")
    assert result.exit_code == 3, result.output
    assert "Permission denied" in result.output and "d.jsonl" in result.output


def test_a_fifo_is_refused_never_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "stream.jsonl"
    os.mkfifo(fifo)
    proc = cli("check", "--no-smoke", fifo, "--out", tmp_path / "out", cwd=tmp_path,
               timeout=60)  # today it blocks for ever on the open
    assert proc.returncode == 3, proc.stderr + proc.stdout
    assert "stream.jsonl" in proc.stderr and "named pipe" in proc.stderr


def test_a_device_or_a_fifo_shard_is_refused(tmp_path: Path) -> None:
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    proc = cli("check", "--no-smoke", zero, "--out", tmp_path / "out", cwd=tmp_path,
               timeout=60)
    assert proc.returncode == 3, proc.stderr + proc.stdout
    assert "character device" in proc.stderr
    shards = shard_folder(tmp_path)
    os.mkfifo(shards / "b.jsonl")
    proc = cli("check", "--no-smoke", shards, "--out", tmp_path / "out", cwd=tmp_path,
               timeout=60)
    assert proc.returncode == 3, proc.stderr + proc.stdout
    assert "b.jsonl" in proc.stderr


# -- item 12: disk full, read-only folders --------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path, options: str) -> Iterator[Path]:
    """A small tmpfs mounted at ``path`` (root only; skips where mounting is refused)."""
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def many_faults(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "faults.jsonl",
                       [{"text": f"zero\u200bwidth number {i}"} for i in range(5000)])


def test_a_full_disk_under_out_is_exit_3_with_nothing_half_written(tmp_path: Path) -> None:
    data = many_faults(tmp_path)
    with tmpfs(tmp_path / "small", "size=16k") as small:
        proc = cli("check", "--no-smoke", data, "--out", small / "report", cwd=tmp_path)
        assert proc.returncode == 3, proc.stderr + proc.stdout
        assert "internal error" not in proc.stderr
        assert "No space left on device" in flat(proc.stderr)
        assert str(small / "report") in proc.stderr
        assert leftovers(small) == []


def test_a_read_only_out_is_exit_3(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    with tmpfs(tmp_path / "ro", "size=1m,ro") as ro:
        proc = cli("check", "--no-smoke", data, "--out", ro / "report", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr + proc.stdout
    assert "Read-only file system" in proc.stderr


def test_a_full_tmpdir_is_exit_3_naming_it(tmp_path: Path) -> None:
    # near-duplicate confirmation spills the candidates' shingles to TMPDIR
    base = " ".join(f"word{i % 97}x{i}" for i in range(300)).split()
    records = []
    for i in range(3000):
        words = list(base)
        words[i % 300] = f"changed{i}"
        records.append({"text": " ".join(words)})
    data = write_jsonl(tmp_path / "near.jsonl", records)
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {id: near, check: near_duplicate, severity: warn}\n")
    with tmpfs(tmp_path / "tmp", "size=16k") as tmp:
        proc = cli("check", "--no-smoke", data, "--rules", rules, "--out", tmp_path / "out",
                   cwd=tmp_path, env={"TMPDIR": str(tmp)})
    assert proc.returncode == 3, proc.stderr + proc.stdout
    assert "No space left on device" in proc.stderr and str(tmp) in proc.stderr


@pytest.mark.parametrize("where", ["report", "findings"])
def test_a_failed_write_is_exit_3_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    data = faulty(tmp_path)
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if where == "report":
        real = Path.write_text

        def write_text(self: Path, text: str, *args: object, **kwargs: object) -> int:
            real(self, text[: len(text) // 2], *args, **kwargs)  # half, then the disk is full
            raise full

        monkeypatch.setattr(Path, "write_text", write_text)
    else:
        def write_table(self: object, *args: object, **kwargs: object) -> None:
            raise full

        monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    out = tmp_path / "out"
    result = invoke("check", "--no-smoke", data, "--out", out)
    assert result.exit_code == 3, result.output  # was 2, "internal error"
    assert "No space left on device" in flat(result.output)
    assert "internal error" not in result.output
    assert leftovers(out) == []


# -- item 13: a reader that stops early -----------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("fails", [False, True])
def test_a_closed_stdout_keeps_the_verdicts_exit_code(tmp_path: Path, as_json: bool,
                                                      fails: bool) -> None:
    data = faulty(tmp_path) if fails else write_jsonl(tmp_path / "d.jsonl", CLEAN)
    args = ["check", "--no-smoke", str(data), "--out", str(tmp_path / "out"), "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "preflight", *args, *(["--json"] * as_json)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything is written: EPIPE
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == (1 if fails else 0), stderr
    assert "internal error" not in stderr and "Traceback" not in stderr


def test_check_piped_to_head_passes(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": f"r{i}", "text": f"Sentence {i} on rivers."}
                                             for i in range(500)])
    command = (f"{sys.executable} -m preflight check --no-smoke {data} --out "
               f"{tmp_path / 'out'} --no-progress | head -1")
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, text=True,
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr  # the gate passed, whoever stopped reading
    assert proc.stdout.startswith(str(data))


@pytest.mark.parametrize("quiet", [False, True])
@pytest.mark.parametrize("fails", [False, True])
def test_check_with_stdout_closed_at_start_exits_with_the_verdict(tmp_path: Path, quiet: bool,
                                                                  fails: bool) -> None:
    # `>&-`: Python starts with sys.stdout None (was "internal error: AttributeError", exit 2).
    data = faulty(tmp_path) if fails else write_jsonl(tmp_path / "d.jsonl", CLEAN)
    command = (f"{sys.executable} -m preflight check --no-smoke {data} --out out "
               f"{'-q' if quiet else ''} >&-")
    proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, text=True,
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == (1 if fails else 0), proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    # nothing meant for stdout landed in a file that took its descriptor
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == ("fail" if fails else "pass")


def _printing_commands(tmp_path: Path) -> dict[str, tuple[list[str], int]]:
    """Each command that prints to stdout, with the exit code it must keep."""
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    bad = faulty(tmp_path)
    (tmp_path / "r.yaml").write_text("rules:\n  - {id: a, check: empty}\n")
    assert invoke("check", "--no-smoke", data, "--out", tmp_path / "ok").exit_code == 0
    assert invoke("check", "--no-smoke", bad, "--out", tmp_path / "bad").exit_code == 1
    return {
        "rules-list": (["rules", "list"], 0),
        "rules-list-json": (["rules", "list", "--json"], 0),
        "rules-validate": (["rules", "validate", "r.yaml"], 0),
        "report-render": (["report", "render", "ok/report.json", "--md", "r.md"], 0),
        "diff-worse": (["diff", "ok/report.json", "bad/report.json"], 1),
        "fix": (["fix", str(data), "--out", "c.jsonl", "--quarantine", "q.jsonl"], 0),
        "fix-dry-run": (["fix", str(bad), "--out", "c2.jsonl", "--quarantine", "q2.jsonl",
                         "--dry-run"], 0),
        "check": (["check", "--no-smoke", str(bad), "--out", "again"], 1),
    }


COMMANDS = ["rules-list", "rules-list-json", "rules-validate", "report-render", "diff-worse",
            "fix", "fix-dry-run", "check"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_printing_command_survives_a_reader_gone(tmp_path: Path, command: str) -> None:
    # `preflight rules list | head -1` was a BrokenPipeError traceback and exit 1.
    args, code = _printing_commands(tmp_path)[command]
    proc = subprocess.Popen([sys.executable, "-m", "preflight", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything is written: EPIPE
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == code, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert "Broken pipe" not in stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_every_printing_command_runs_with_stdout_closed(tmp_path: Path, command: str) -> None:
    args, code = _printing_commands(tmp_path)[command]
    line = " ".join([sys.executable, "-m", "preflight", *args, ">&-"])
    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, text=True, capture_output=True,
                          timeout=120, check=False)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


def test_rules_list_piped_to_head_exits_quietly(tmp_path: Path) -> None:
    command = f"{sys.executable} -m preflight rules list | head -1"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, text=True,
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode in (0, 141), proc.stderr
    assert proc.stdout.startswith("Every rule takes")
    assert proc.stderr == ""


def test_an_io_failure_nothing_else_named_is_still_exit_3(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import preflight.pipeline

    def failing() -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO), "/dev/sdz1")

    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    monkeypatch.setattr(preflight.pipeline, "environment", failing)
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "out")
    assert result.exit_code == 3, result.output
    assert "internal error" not in result.output
    assert "/dev/sdz1" in result.output and "Input/output error" in result.output


def test_a_run_without_smoke_removes_an_earlier_replay_file(tmp_path: Path) -> None:
    # An earlier smoke test's replay (a data fault, other data) stayed beside a later
    # --no-smoke run's passing report, as if this run had found it.
    out = tmp_path / "out"
    out.mkdir()
    (out / "smoke-replay.pt").write_bytes(b"earlier")
    result = invoke("check", "--no-smoke", write_jsonl(tmp_path / "c.jsonl", CLEAN), "--out", out)
    assert result.exit_code == 0, result.output
    assert not (out / "smoke-replay.pt").exists()


def test_a_report_in_a_format_this_run_does_not_write_is_removed(tmp_path: Path) -> None:
    # A failing run's report.junit.xml stayed beside a later --format json run's report:
    # a CI step reading the JUnit file read the earlier run's verdict as today's.
    out = tmp_path / "out"
    first = invoke("check", "--no-smoke", faulty(tmp_path), "--out", out, "--format", "junit,md")
    assert first.exit_code == 1, first.output
    assert (out / "report.junit.xml").exists() and (out / "report.md").exists()
    (out / "notes.txt").write_text("mine")
    clean = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    result = invoke("check", "--no-smoke", clean, "--out", out, "--format", "json")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["findings.parquet", "notes.txt",
                                                    "report.json"]


@pytest.mark.parametrize("bad", ["missing.jsonl", "utf16.jsonl"])
def test_an_unreadable_input_leaves_no_earlier_verdict(tmp_path: Path, bad: str) -> None:
    # `check nope.jsonl --out r` was exit 3 with the earlier run's passing report.json
    # (and .html, .junit.xml, .md) still in r, to be read as this run's.
    out = tmp_path / "out"
    clean = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    first = invoke("check", "--no-smoke", clean, "--out", out, "--format", "json,html,junit,md")
    assert first.exit_code == 0, first.output
    (out / "notes.txt").write_text("mine")
    (tmp_path / "utf16.jsonl").write_bytes('{"text": "a"}\n'.encode("utf-16"))
    result = invoke("check", "--no-smoke", tmp_path / bad, "--out", out)
    assert result.exit_code == 3, result.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_an_unreadable_shard_folder_keeps_its_own_files(tmp_path: Path) -> None:
    # --out inside the input folder: its files are data there, not an earlier report.
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes('{"text": "a"}\n'.encode("utf-16"))
    (folder / "rep").mkdir()
    (folder / "rep" / "report.json").write_text("{}")
    result = invoke("check", "--no-smoke", folder, "--out", folder / "rep")
    assert result.exit_code in (2, 3), result.output
    assert (folder / "rep" / "report.json").exists()
