"""A field nested deeper than ``RAW_DEPTH`` levels is kept as Python values on every input
format (polars would convert it at a cost of rows x depth), and the gate still reads the
records around it: the same rows, the same findings as without the deep field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from preflight import run_preflight
from preflight.record_batches import RAW_DEPTH
from preflight.source import open_source

DEEP_ROWS = (5, 30)
N = 60


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _records() -> list[dict[str, Any]]:
    # row 12 is an exact copy of row 11: a finding that must survive the deep field
    return [{"id": i, "text": f"record {min(i, 11) if i == 12 else i} says hello",
             "m": _nested(RAW_DEPTH + 8) if i in DEEP_ROWS else None} for i in range(N)]


def _write(fmt: str, folder: Path) -> Path:
    records = _records()
    if fmt == "jsonl":
        path = folder / "d.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    elif fmt == "json":
        path = folder / "d.json"
        path.write_text(json.dumps(records, indent=1))
    elif fmt == "parquet":
        path = folder / "d.parquet"
        pq.write_table(pa.Table.from_pylist(records), path, row_group_size=16)
    elif fmt == "arrow":
        path = folder / "d.arrow"
        feather.write_feather(pa.Table.from_pylist(records), path)
    elif fmt == "shards":
        path = folder / "shards"
        path.mkdir()
        for k, part in enumerate((records[:20], records[20:])):
            (path / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    else:
        datasets = pytest.importorskip("datasets")
        path = folder / "saved"
        datasets.Dataset.from_list(records).save_to_disk(str(path), num_shards=2)
    return path


FORMATS = ["jsonl", "json", "parquet", "arrow", "shards", "datasets"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_deep_field_is_kept_as_python_values_on_every_format(tmp_path: Path,
                                                                fmt: str) -> None:
    path = _write(fmt, tmp_path)
    values, dtypes = [], set()
    for batch in open_source(path).batches():
        values += batch.values("m")
        dtypes.add(batch.frame.schema.get("m"))
        assert batch.values("id") == [int(v) for v in batch.values("id")]  # still typed
    assert values == [r["m"] for r in _records()]
    assert dtypes <= {pl.String, pl.Null}  # never the 40-level list type


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_gate_reads_around_a_deep_field_on_every_format(tmp_path: Path, fmt: str) -> None:
    path = _write(fmt, tmp_path)
    rules = {"fields": {"text": "text", "id": "id"},
             "rules": [{"id": "dupes", "check": "exact_duplicate"}]}
    report = run_preflight(path, rules, tmp_path / "out", smoke=False)
    assert report.source.records == N and report.rule("malformed").codes == {}
    found = pl.read_parquet(tmp_path / "out" / "findings.parquet")
    assert found.filter(pl.col("rule") == "dupes")["id"].to_list() == ["12"]
