"""Records wrapped per row of a columnar input: a Parquet or Arrow table (a file, a folder
of shards, a ``datasets`` folder) whose rows are a page number beside ``data``, a
``list<struct<text>>`` of the records. That is the JSON wrapper's shape, and the gate failed
and ``fix`` refused it as for JSON, but the hint said ``jq -c '.data[]' w.parquet``, which
cannot read Parquet or Arrow. The hint is now a command that reads the format, and running
it writes the records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from preflight.cli import main
from tests.children import CHILD_TIMEOUT


def _pages(first: int, count: int) -> dict[str, list]:
    return {
        "page": list(range(first, first + count)),
        "data": [
            [{"text": f"record {k} {i}\u200b"} for i in range(5)]
            for k in range(first, first + count)
        ],
    }


def _write(folder: Path, shape: str) -> Path:
    table = pa.table(_pages(0, 3))
    if shape == "parquet":
        pq.write_table(table, path := folder / "w.parquet")
    elif shape == "arrow":
        feather.write_feather(table, path := folder / "w.arrow")
    elif shape == "stream":  # an Arrow IPC stream, as datasets writes its files
        path = folder / "w.arrow"
        with pa.ipc.new_stream(str(path), table.schema) as sink:
            sink.write_table(table)
    elif shape == "shards":
        path = folder / "shards"
        path.mkdir()
        for k in range(3):
            pq.write_table(pa.table(_pages(k, 1)), path / f"p{k}.parquet")
    else:
        datasets = pytest.importorskip("datasets")
        path = folder / "saved"
        datasets.Dataset.from_dict(_pages(0, 3)).save_to_disk(str(path), num_shards=2)
    return path


def _run_hint(folder: Path, hint: str) -> list[dict]:
    """Run the hint's command in ``folder``, ``python`` being this interpreter."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "-c", hint],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("shape", ["parquet", "arrow", "stream", "shards", "datasets"])
def test_a_wrapper_per_row_fails_with_a_hint_that_reads_the_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    path = _write(tmp_path, shape)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", path.name, "--no-smoke", "--out", "r"])
    assert result.exit_code == 1, result.output
    [reason] = json.loads((tmp_path / "r" / "report.json").read_text())["reasons"][:1]
    assert "hold their own records in 'data', a list of objects (a wrapper per row" in reason
    assert "jq" not in reason
    hint = reason.split("extract them first, e.g. ", 1)[1].split("; if they are not", 1)[0]
    records = _run_hint(tmp_path, hint)
    assert [r["text"] for r in records] == [
        f"record {k} {i}\u200b" for k in range(3) for i in range(5)
    ]
    fixed = CliRunner().invoke(
        main, ["fix", path.name, "--out", "c.jsonl", "--quarantine", "q.jsonl"]
    )
    assert fixed.exit_code == 3, fixed.output
    assert "python -c" in fixed.output
    assert not (tmp_path / "c.jsonl").exists()


@pytest.mark.parametrize(
    "kind",
    [
        "pyarrow.Table",
        "pyarrow.RecordBatch",
        "polars.DataFrame",
        "pandas.DataFrame",
        "datasets.Dataset",
        "list",
    ],
)
def test_a_wrapper_per_row_of_an_object_fails_with_a_python_hint(kind: str) -> None:
    # run_preflight(table) said: jq -c '.data[]' '<pyarrow.Table>' > records.jsonl
    import polars as pl

    from preflight import run_preflight

    table = pa.table(_pages(0, 3))
    name, obj = {
        "pyarrow.Table": ("table", table),
        "pyarrow.RecordBatch": ("batch", table.combine_chunks().to_batches()[0]),
        "polars.DataFrame": ("df", pl.from_arrow(table)),
        "pandas.DataFrame": ("df", table.to_pandas()),
        "datasets.Dataset": ("ds", None),
        "list": ("records", table.to_pylist()),
    }[kind]
    if kind == "datasets.Dataset":
        obj = pytest.importorskip("datasets").Dataset(table)
    report = run_preflight(obj, smoke=False)
    assert report.verdict == "fail"
    reason = report.reasons[0]
    assert "a wrapper per row" in reason and "jq" not in reason
    hint = reason.split("pass the records inside instead, e.g. ", 1)[1].split("; if they", 1)[0]
    records = eval(hint, {"pl": pl, name: obj})  # the hint, run as told
    rows = records if isinstance(records, list) else records.to_dicts()
    assert [r["text"] for r in rows] == [
        f"record {k} {i}\u200b" for k in range(3) for i in range(5)
    ]
