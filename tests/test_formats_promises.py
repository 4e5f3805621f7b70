"""Promises first tested on JSON Lines, held on the other input formats: a list item that
``fix`` would empty sends its record to the quarantine (Arrow, a Parquet shard folder, a
JSON array); an Arrow IPC stream is read as a shard; an unreadable shard folder or
``datasets`` folder leaves no earlier report behind; a full disk while ``fix`` writes
Parquet with strings mended inside lists leaves nothing half-written (exit 3). That last
one left the deleted temporary Parquet or Arrow output open in the process (its writer
failed to close, and nothing else closed the file): a DAG worker calling ``fix`` held the
full disk's space until it exited."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from preflight.cli import main
from tests.children import CHILD_TIMEOUT
from tests.test_cli_io import _no_read_permission

ZW = "\u200b"


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def _ner(n: int = 40) -> pa.Table:
    tokens = [["John", "lives", "in", f"Paris{i}", "."] for i in range(n)]
    tokens[3][3] = f"Par{ZW}is3"  # mended in place
    tokens[6][2] = ZW  # emptied by the fix: the record goes to the quarantine
    return pa.table(
        {"id": [f"s{i}" for i in range(n)], "tokens": tokens, "ner_tags": [[1, 0, 0, 5, 0]] * n}
    )


def _write(folder: Path, shape: str, table: pa.Table) -> Path:
    if shape == "arrow":
        feather.write_feather(table, path := folder / "d.arrow")
    elif shape == "json":
        (path := folder / "d.json").write_text(json.dumps(table.to_pylist(), indent=1))
    elif shape == "parquet":
        pq.write_table(table, path := folder / "d.parquet")
    else:  # a folder of two Parquet shards
        path = folder / "shards"
        path.mkdir()
        half = table.num_rows // 2
        pq.write_table(table.slice(0, half), path / "a.parquet")
        pq.write_table(table.slice(half), path / "b.parquet")
    return path


def _read(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    read = pq.read_table if path.suffix == ".parquet" else feather.read_table
    return read(path).to_pylist()


@pytest.mark.parametrize(
    ("shape", "out"),
    [
        ("arrow", "clean.arrow"),
        ("arrow", "clean.parquet"),
        ("shards", "clean.parquet"),
        ("shards", "clean.jsonl"),
        ("json", "clean.jsonl"),
        ("json", "clean.parquet"),
    ],
)
def test_a_list_item_a_fix_would_empty_is_quarantined_on_every_format(
    tmp_path: Path, shape: str, out: str
) -> None:
    # CSV has no lists (a JSON list in a cell is one string), so it is not among them.
    data = _write(tmp_path, shape, _ner())
    clean, quarantine = tmp_path / "o" / out, tmp_path / "o" / "q.jsonl"
    result = _invoke("fix", data, "--out", clean, "--quarantine", quarantine)
    assert result.exit_code == 0, result.output
    [set_aside] = [json.loads(line) for line in quarantine.read_text().splitlines()]
    assert (set_aside["row"], set_aside["file"]) == (6, "a.parquet" if shape == "shards" else None)
    assert set_aside["reasons"][0]["code"] == "empty_after_fix"
    assert set_aside["reasons"][0]["detail"].startswith("tokens[2]: empty")
    assert set_aside["record"]["tokens"] == ["John", "lives", ZW, "Paris6", "."]
    fixed = _read(clean)
    assert [r["id"] for r in fixed] == [f"s{i}" for i in range(40) if i != 6]
    assert fixed[3]["tokens"] == ["John", "lives", "in", "Paris3", "."]


def test_an_arrow_stream_shard_is_read_beside_an_arrow_file(tmp_path: Path) -> None:
    # datasets writes its files as streams: one among IPC files is read, not skipped.
    shards = tmp_path / "shards"
    shards.mkdir()
    table = pa.table({"text": [f"a sentence number {i}{ZW}" for i in range(10)]})
    feather.write_feather(table, shards / "a.arrow")
    with pa.ipc.new_stream(str(shards / "b.arrow"), table.schema) as sink:
        sink.write_table(table)
    result = _invoke("check", "--no-smoke", shards, "--out", tmp_path / "r")
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert result.exit_code == 1, result.output
    assert report["source"]["records"] == 20
    hidden = next(r for r in report["rules"] if r["check"] == "invisible_unicode")
    assert hidden["violations"] == 20


def _clean_parquet(folder: Path) -> Path:
    folder.mkdir()
    table = pa.table({"text": [f"a sentence number {i}" for i in range(10)]})
    pq.write_table(table, folder / "a.parquet")
    pq.write_table(table.slice(0, 5), folder / "b.parquet")
    return folder


def _saved(folder: Path) -> Path:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict(
        {"text": [f"a sentence number {i}" for i in range(10)]}
    ).save_to_disk(str(folder))
    return folder


@pytest.mark.parametrize("bad", ["broken-shards", "missing-datasets", "datasets-file-gone"])
def test_an_unreadable_folder_leaves_no_earlier_report(tmp_path: Path, bad: str) -> None:
    data = (_saved if "datasets" in bad else _clean_parquet)(tmp_path / "data")
    out = tmp_path / "out"
    first = _invoke("check", "--no-smoke", data, "--out", out, "--format", "json,html,md")
    assert first.exit_code == 0, first.output
    if bad == "broken-shards":  # every shard cut to a few bytes
        for shard in data.iterdir():
            shard.write_bytes(b"PAR1")
    elif bad == "missing-datasets":
        shutil.rmtree(data)
    else:
        next(data.glob("data-*.arrow")).unlink()
    result = _invoke("check", "--no-smoke", data, "--out", out)
    assert result.exit_code == 3, result.output
    assert list(out.iterdir()) == []


def test_a_shard_without_read_permission_leaves_no_earlier_report(tmp_path: Path) -> None:
    prefix = _no_read_permission()
    data = _clean_parquet(tmp_path / "data")
    out = tmp_path / "out"
    assert _invoke("check", "--no-smoke", data, "--out", out).exit_code == 0
    (data / "b.parquet").chmod(0)
    try:
        proc = subprocess.run(
            [
                *prefix,
                sys.executable,
                "-m",
                "preflight",
                "check",
                "--no-smoke",
                str(data),
                "--out",
                str(out),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT,
            check=False,
        )
    finally:
        (data / "b.parquet").chmod(0o644)
    assert proc.returncode == 3, proc.stderr + proc.stdout
    assert "b.parquet" in proc.stderr and "Permission denied" in proc.stderr
    assert list(out.iterdir()) == []


def _open_under(folder: Path) -> list[str]:
    """The files under ``folder`` this process holds open (deleted ones too)."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("no /proc/self/fd to list open files")
    found = []
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            if (target := os.readlink(fd)).startswith(str(folder)):
                found.append(target)
    return found


def test_a_full_disk_while_mending_lists_into_parquet_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Arrow's own I/O error (an OSError, not an ArrowException) from the clean output's
    # writer: exit 3 naming the cause, not "cannot be written as parquet" (exit 2). The
    # output's temporary file was deleted but left open: in a long-lived process (a DAG
    # worker calling fix) the full disk's space was never given back.
    data = _write(tmp_path, "arrow", _ner())  # one table: written as the writer closes

    class Full(pq.ParquetWriter):  # the clean output's writer only, not the gate's
        def write_table(self, table: Any, row_group_size: Any = None) -> None:
            raise OSError(
                errno.ENOSPC,
                "Error writing bytes to file. Detail: [errno 28] No space left on device",
            )

    monkeypatch.setattr("preflight.fix.writers.table.pq", SimpleNamespace(ParquetWriter=Full))
    out = tmp_path / "out"
    result = _invoke("fix", data, "--out", out / "clean.parquet", "--quarantine", out / "q.jsonl")
    assert result.exit_code == 3, result.output
    assert "No space left on device" in result.output
    assert not out.exists()  # the folder the failed run made is removed with its files
    assert _open_under(out) == []


@pytest.mark.parametrize(
    ("source", "out"),
    [("parquet", "clean.parquet"), ("parquet", "clean.arrow"), ("dictionary", "clean.arrow")],
)
def test_a_real_full_disk_lets_go_of_the_parquet_or_arrow_output(
    tmp_path: Path, source: str, out: str
) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
            capture_output=True,
            check=False,
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        n = 20_000
        rows = _ner(n).to_pylist()
        for k in range(0, n, 7):
            rows[k]["tokens"][1] = f"li{ZW}ves"
        table = pa.Table.from_pylist(rows)
        if source == "dictionary":  # Arrow out through a spill, written at the end
            texts = pa.array([f"hel{ZW}lo {k}" for k in range(n)]).dictionary_encode()
            table = pa.table({"id": list(range(n)), "text": texts})
        data = tmp_path / f"d.{'arrow' if source == 'dictionary' else 'parquet'}"
        (feather.write_feather if source == "dictionary" else pq.write_table)(table, data)
        result = _invoke("fix", data, "--out", mount / out, "--quarantine", mount / "q.jsonl")
        assert result.exit_code == 3, result.output
        assert "No space left on device" in result.output
        assert list(mount.iterdir()) == []
        assert _open_under(mount) == []  # its space given back, not held by a deleted file
    finally:
        subprocess.run(["umount", str(mount)], check=True)
