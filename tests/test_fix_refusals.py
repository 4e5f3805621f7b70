"""Fix refuses what the gate refuses, found by a hostile review: records no rule read, two
runs into one output, and the Python API's missing argument."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from preflight import ConfigError, FixOptions, run_preflight
from preflight.cli import main
from tests.outputs import write_records, write_shaped


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("lines", ["{}\n{}\n", '{"a": true}\n{"a": false}\n'])
@pytest.mark.parametrize("dry_run", [False, True])
def test_fix_refuses_records_no_rule_read(tmp_path: Path, lines: str, dry_run: bool) -> None:
    # The gate fails (exit 1) on records of which nothing was checked; fix wrote a "clean"
    # copy of them, exit 0, as if they had been cleaned.
    src = tmp_path / "in.jsonl"
    src.write_text(lines)
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    result = invoke(
        "fix",
        src,
        "--out",
        out,
        "--quarantine",
        q,
        "--no-progress",
        *(["--dry-run"] if dry_run else []),
    )
    assert result.exit_code == 1, result.output
    assert "none of the records' fields was checked" in result.output
    assert not out.exists() and not q.exists()


@pytest.mark.parametrize("name", ["in.json", "in.parquet", "in.arrow", "shards", "dataset"])
def test_fix_refuses_records_no_rule_read_on_every_format(tmp_path: Path, name: str) -> None:
    rows = [{"a": k % 2 == 0, "b": None} for k in range(8)]  # booleans and nulls only
    src = write_shaped(tmp_path / name, rows)
    out, q = tmp_path / "o" / "clean.parquet", tmp_path / "o" / "q.jsonl"
    result = invoke("fix", src, "--out", out, "--quarantine", q, "--no-progress")
    assert result.exit_code == 1, result.output
    assert "none of the records' fields was checked" in result.output
    assert not out.exists() and not q.exists()


RULES = {
    "fields": {"text": "text"},
    "rules": [{"id": "invisible", "check": "invisible_unicode"}],
}


def test_a_second_fix_into_the_same_outputs_is_refused_while_the_first_runs(
    tmp_path: Path,
) -> None:
    # Two runs renamed their outputs into place one after the other, interleaved: the clean
    # output of one beside the quarantine and manifest of the other. The second run (another
    # process, started while the first is in its gate) now stops at once, exit 2.
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text('{"text": "one\u200btwo"}\n{"text": "three"}\n')
    second.write_text('{"text": "four"}\n')
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps(RULES))
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    seen: list[subprocess.CompletedProcess[str]] = []

    def during_the_gate(done: int, total: int, stage: str) -> None:
        if not seen:
            cmd = [
                sys.executable,
                "-m",
                "preflight",
                "fix",
                str(second),
                "--out",
                str(out),
                "--quarantine",
                str(q),
                "--rules",
                str(rules),
                "--no-progress",
            ]
            seen.append(subprocess.run(cmd, capture_output=True, text=True, check=False))

    report = run_preflight(
        first, RULES, smoke=False, progress=during_the_gate, fix=FixOptions(out=out, quarantine=q)
    )
    [other] = seen
    assert other.returncode == 2, other.stderr
    assert "another preflight run" in other.stderr and str(out) in other.stderr
    assert report.fix is not None and report.fix["input"]["records"] == 2
    assert len(out.read_text().splitlines()) == 2  # the first run's, whole
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []


def test_a_dead_runs_leftovers_block_nothing(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "one\u200btwo"}\n')
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    out.parent.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    left = out.parent / f".clean.jsonl.preflight-{int(dead.stdout)}-claim.tmp"
    left.touch()
    run_preflight(src, RULES, smoke=False, fix=FixOptions(out=out, quarantine=q))
    assert out.read_text() == '{"text": "onetwo"}\n'
    assert not left.exists()


def test_a_refused_fix_leaves_no_folder_it_made(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("{}\n")
    out = tmp_path / "new" / "deep" / "clean.jsonl"
    result = invoke("fix", src, "--out", out, "--quarantine", out.with_name("q.jsonl"))
    assert result.exit_code == 1, result.output
    assert not (tmp_path / "new").exists()


def test_a_second_fix_in_another_thread_of_the_process_is_refused(tmp_path: Path) -> None:
    # A library step run twice at once (a thread pool): both runs have one process id, so
    # they wrote the same temporary names, each over the other's.
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text('{"text": "one\u200btwo"}\n{"text": "three"}\n')
    second.write_text('{"text": "four"}\n')
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    errors: list[BaseException] = []
    started: list[threading.Thread] = []

    def other() -> None:
        try:
            run_preflight(second, RULES, smoke=False, fix=FixOptions(out=out, quarantine=q))
        except BaseException as e:
            errors.append(e)

    def during_the_gate(done: int, total: int, stage: str) -> None:
        if not started:
            started.append(threading.Thread(target=other))
            started[0].start()
            started[0].join()

    report = run_preflight(
        first, RULES, smoke=False, progress=during_the_gate, fix=FixOptions(out=out, quarantine=q)
    )
    [error] = errors
    assert isinstance(error, ConfigError), error
    assert "another preflight run (another thread of this process)" in str(error)
    assert report.fix is not None and len(out.read_text().splitlines()) == 2


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"out": None, "quarantine": "q.jsonl"}, "FixOptions.out is None"),
        ({"out": "c.jsonl", "quarantine": None}, "FixOptions.quarantine is None"),
        ({"out": 5, "quarantine": "q.jsonl"}, "FixOptions.out must be a path"),
        ({"out": "c.jsonl", "quarantine": "q.jsonl", "manifest": 1.5}, "FixOptions.manifest"),
        # a true string ran a dry run; None as the marker failed only once a text was cut
        ({"out": "c.jsonl", "quarantine": "q.jsonl", "dry_run": "no"}, "FixOptions.dry_run"),
        ({"out": "c.jsonl", "quarantine": "q.jsonl", "marker": None}, "FixOptions.marker"),
        ({"out": "c.jsonl", "quarantine": "q.jsonl", "format": 5}, "FixOptions.format"),
    ],
)
def test_fix_options_that_are_no_paths_are_config_errors(given: dict, said: str) -> None:
    # They were an AttributeError ('NoneType' object has no attribute 'suffix') or a
    # TypeError from deep inside the run.
    with pytest.raises(ConfigError, match=re.escape(said)):
        FixOptions(**given)


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet", ".arrow"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_fix_refuses_shards_of_another_shape(tmp_path: Path, suffix: str, dry_run: bool) -> None:
    # Shards whose records have another text field than the first's are not scanned (the
    # gate's mixed_shards finding); fix copied them to the clean output, exit 0, their
    # hidden character and empty text included, as if they had been cleaned.
    folder = tmp_path / "shards"
    folder.mkdir()
    first = [{"id": f"a{i}", "text": f"first shard sentence {i} about rivers"} for i in range(4)]
    other = [{"id": f"b{i}", "body": f"second shard sentence {i} about lakes"} for i in range(4)]
    other[1]["body"], other[2]["body"] = "hidden\u200bspace", ""
    for name, rows in (("a", first), ("b", other)):
        write_records(folder / f"{name}{suffix}", rows)
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    result = invoke("fix", folder, "--out", out, "--quarantine", q, "--no-progress",
                    *(["--dry-run"] if dry_run else []))
    assert result.exit_code == 2, result.output
    assert "fix refuses to run" in result.output
    assert f"b{suffix}" in result.output and "nothing was written" in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet", ".arrow"])
def test_fix_refuses_labels_only_later_shards_hold(tmp_path: Path, suffix: str) -> None:
    # The first shard has no label, so none was judged (the gate's unjudged_labels); fix
    # copied the later shard's label -3 to the clean output, exit 0.
    folder = tmp_path / "shards"
    folder.mkdir()
    first = [{"id": f"a{i}", "text": f"first shard sentence {i} about rivers"} for i in range(4)]
    other = [{"id": f"b{i}", "text": f"second shard sentence {i} about lakes", "label": i % 2}
             for i in range(6)]
    other[3]["label"] = -3
    for name, rows in (("a", first), ("b", other)):
        write_records(folder / f"{name}{suffix}", rows)
    out, q = tmp_path / "o" / "clean.jsonl", tmp_path / "o" / "q.jsonl"
    result = invoke("fix", folder, "--out", out, "--quarantine", q, "--no-progress")
    assert result.exit_code == 2, result.output
    assert "fix refuses to run" in result.output and "--label-field label" in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["folder", "fifo", "link"])
def test_an_output_that_is_no_regular_file_is_named_as_such(tmp_path: Path, kind: str) -> None:
    # A suffix-less folder, pipe or /dev/stdout-like link was told to add a suffix ("name it
    # /dev/stdout.jsonl"): no name makes it work, and the message said nothing of why.
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "one line of text"}\n')
    target = tmp_path / "target"
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(tmp_path / "elsewhere")
    said = {"folder": "is a folder", "fifo": "is not a regular file", "link": "is a symbolic link"}
    for args in (("--out", target, "--quarantine", tmp_path / "q.jsonl"),
                 ("--out", tmp_path / "c.jsonl", "--quarantine", target)):
        result = invoke("fix", src, *args, "--no-progress")
        assert result.exit_code == 2, result.output
        assert said[kind] in result.output and "suffix" not in result.output
