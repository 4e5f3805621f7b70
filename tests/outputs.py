"""Write test records in any input format; run ``preflight fix`` as a user does and read back
what it wrote, in any output format."""

from __future__ import annotations

import csv
import gzip
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from preflight.cli import main


def write_records(path: Path, rows: list[dict[str, Any]], table: pa.Table | None = None
                  ) -> Path:
    """``rows`` as JSON Lines (gzip-compressed for ``.jsonl.gz``), a JSON array
    (pretty-printed), CSV (a column per key, in first-seen order; a missing key an empty
    cell), Parquet or Arrow, by ``path``'s suffix; ``table`` (the rows' own Arrow table,
    e.g. with dictionary-encoded columns) is written instead of the rows' inferred one."""
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text(lines)
    elif path.name.endswith(".jsonl.gz"):
        path.write_bytes(gzip.compress(lines.encode()))
    elif path.suffix == ".csv":
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows, indent=2))
    else:
        table = pa.Table.from_pylist(rows) if table is None else table
        (feather.write_feather if path.suffix == ".arrow" else pq.write_table)(table, path)
    return path


def write_shaped(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` by ``path``'s shape: a file by its suffix (``write_records``), a ``datasets``
    save_to_disk folder (a name ending ``dataset``), else a folder of two Parquet shards (the
    first four rows, then the rest)."""
    if path.suffix:
        return write_records(path, rows)
    if path.name.endswith("dataset"):
        datasets = pytest.importorskip("datasets")
        datasets.Dataset.from_list(rows).save_to_disk(str(path))
        return path
    path.mkdir(parents=True)
    write_records(path / "part-0.parquet", rows[:4])
    write_records(path / "part-1.parquet", rows[4:])
    return path


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON Lines, CSV (every value a string), Parquet or Arrow file."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    if path.suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    table = pq.read_table(path) if path.suffix == ".parquet" else feather.read_table(path)
    return table.to_pylist()


def fix_cleanly(data: Path, clean: Path, quarantine: Path) -> list[dict[str, Any]]:
    """``preflight fix DATA --out CLEAN --quarantine QUARANTINE``, which must succeed and set
    nothing aside; the records it wrote."""
    result = CliRunner().invoke(main, ["fix", str(data), "--out", str(clean),
                                       "--quarantine", str(quarantine)])
    assert result.exit_code == 0, result.output
    assert quarantine.read_text() == ""
    return read_records(clean)


def fix_setting_aside(data: Path, clean: Path, quarantine: Path
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``preflight fix``, which must succeed: the records it kept and those it set aside
    (the quarantine's entries)."""
    result = CliRunner().invoke(main, ["fix", str(data), "--out", str(clean),
                                       "--quarantine", str(quarantine)])
    assert result.exit_code == 0, result.output
    return read_records(clean), [json.loads(line)
                                 for line in quarantine.read_text().splitlines()]


def kill_mid_write(args: list[str], out: Path) -> None:
    """Start the command ``args`` and SIGKILL it once its temporaries appear in ``out``
    (it must still be running then); they are left there."""
    proc = subprocess.Popen(args)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if out.is_dir() and any(".preflight-" in p.name for p in out.iterdir()):
                break
            time.sleep(0.01)
        assert proc.poll() is None, "it finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert any(".preflight-" in p.name for p in out.iterdir())  # the killed run's leftovers
