"""Run ``preflight fix`` as a user does and read back what it wrote, in any output format."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow.feather as feather
import pyarrow.parquet as pq
from click.testing import CliRunner

from preflight.cli import main


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
