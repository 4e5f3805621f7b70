"""Write test records in any input format; run ``preflight fix`` as a user does and read back
what it wrote, in any output format."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
from click.testing import CliRunner

from preflight.cli import main


def write_records(path: Path, rows: list[dict[str, Any]], table: pa.Table | None = None
                  ) -> Path:
    """``rows`` as JSON Lines, a JSON array (pretty-printed), Parquet or Arrow, by ``path``'s
    suffix; ``table`` (the rows' own Arrow table, e.g. with dictionary-encoded columns) is
    written instead of the rows' inferred one."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    elif path.suffix == ".json":
        path.write_text(json.dumps(rows, indent=2))
    else:
        table = pa.Table.from_pylist(rows) if table is None else table
        (feather.write_feather if path.suffix == ".arrow" else pq.write_table)(table, path)
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
