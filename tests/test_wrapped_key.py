"""The key of a wrapper's list of objects is recorded by the inference itself
(``rules_file.records_in``): it was read back from the inference's message with a regex,
which a key holding that message's own words cut short (a crash, ``SyntaxError``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflight import run_preflight

KEY = "page' holds a list of objects (v2)"


def _pages() -> list[dict]:
    return [{KEY: [{"text": f"r {k} {i}"} for i in range(3)], "page": k} for k in range(3)]


@pytest.mark.parametrize("kind", ["jsonl", "json", "parquet"])
def test_the_wrapping_key_is_recorded_and_named(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"w.{kind}"
    if kind == "jsonl":
        path.write_text("".join(json.dumps(p) + "\n" for p in _pages()))
    elif kind == "json":
        path.write_text(json.dumps(_pages()))
    else:
        pq.write_table(pa.Table.from_pylist(_pages()), path)
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.rules_file.records_in == KEY
    assert "records_in" not in report.rules_file.inferred
    assert report.verdict == "fail"
    assert any(f"hold their own records in {KEY!r}" in r for r in report.reasons)


def test_no_key_when_a_text_is_found(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"text": "a", "spans": [{"a": 1}, {"a": 2}]}) + "\n")
    assert run_preflight(path, smoke=False, out=tmp_path / "r").rules_file.records_in is None
