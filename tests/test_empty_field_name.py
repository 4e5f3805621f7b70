"""A field named "" (a JSON key "", a Parquet column named "") keeps its name: polars'
from_arrow renamed it "column_0", so the text checks flagged a record that fix then left
unchanged while reporting it changed (it edited a "column_0" the record lacks), and a real
"column_0" beside it was exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflight import FixOptions, run_preflight
from preflight.report.model import Report

RULES = {"rules": [{"id": "hidden", "check": "invisible_unicode"}]}


def _codes(report: Report) -> list[tuple[int, str]]:
    [rule] = [r for r in report.rules if r.id == "hidden"]
    return [(e.row, e.code) for e in rule.examples]


@pytest.mark.parametrize("beside", [{}, {"column_0": "short"}], ids=["alone", "beside-column_0"])
def test_a_text_under_an_empty_key_is_checked_and_fixed(tmp_path: Path, beside: dict) -> None:
    src = tmp_path / "in.jsonl"
    records = [{"": "zero\u200bwidth text that is long", **beside, "id": 1},
               {"": "another text that is long enough", **beside, "id": 2}]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = run_preflight(src, RULES, smoke=False)
    assert report.rules_file.fields["text"] == ""
    assert _codes(report) == [(0, "zero_width_space")]
    out, q = tmp_path / "clean.jsonl", tmp_path / "q.jsonl"
    run_preflight(src, RULES, fix=FixOptions(out=out, quarantine=q), smoke=False)
    clean = [json.loads(x) for x in out.read_text().splitlines()]
    assert clean[0] == {"": "zerowidth text that is long", **beside, "id": 1}
    assert clean[1] == records[1]
    assert run_preflight(out, RULES, smoke=False).passed


def test_a_parquet_column_named_empty_keeps_its_name(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"": ["zero\u200bwidth text", "plain text two"],
                             "column_0": ["a", "b"]}), src)
    out, q = tmp_path / "clean.parquet", tmp_path / "q.jsonl"
    report = run_preflight(src, RULES, fix=FixOptions(out=out, quarantine=q), smoke=False)
    assert _codes(report) == [(0, "zero_width_space")]
    clean = pq.read_table(out)
    assert clean.column_names == ["", "column_0"]
    assert clean.column("").to_pylist() == ["zerowidth text", "plain text two"]
