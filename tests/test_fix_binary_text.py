"""``fix`` on a text column stored as ``binary`` (Parquet or Arrow written by Spark or Hive,
a folder of such shards, a ``datasets`` folder of bytes): the text rules read it as UTF-8,
so a fix must write its mended text back as bytes, in a binary column; a value that is not
valid UTF-8 cannot be written back mended, so it goes to the quarantine instead of being
counted as fixed and written unchanged. (JSON Lines, JSON arrays and CSV hold no bytes; the
output goes through the same writers as any other fix, whose full-disk and killed-run tests
are in ``tests/test_fix_formats.py``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from preflight import FixOptions, run_preflight

RULES = {"fields": {"text": "text", "id": "id"},
         "rules": [{"id": "hid", "check": "invisible_unicode", "fix": "strip"},
                   {"id": "dup", "check": "exact_duplicate", "fix": "keep_first"}]}
TEXTS = [b"fine text here", "zero\u200bwidth here".encode(), b"fine text here",
         b"bad \xff byte\xe2\x80\x8b", None]
IDS = ["a", "b", "c", "d", "e"]


def _write(tmp_path: Path, kind: str) -> Path:
    table = pa.table({"id": IDS, "text": pa.array(TEXTS, pa.binary())})
    if kind == "parquet":
        pq.write_table(table, tmp_path / "in.parquet")
        return tmp_path / "in.parquet"
    if kind == "arrow":
        feather.write_feather(table, tmp_path / "in.arrow")
        return tmp_path / "in.arrow"
    if kind == "shards":
        (tmp_path / "shards").mkdir()
        pq.write_table(table.slice(0, 2), tmp_path / "shards" / "part-0.parquet")
        pq.write_table(table.slice(2), tmp_path / "shards" / "part-1.parquet")
        return tmp_path / "shards"
    datasets = pytest.importorskip("datasets")
    datasets.Dataset(table).save_to_disk(str(tmp_path / "saved"), num_shards=2)
    return tmp_path / "saved"


@pytest.mark.parametrize("kind", ["parquet", "arrow", "shards", "datasets"])
def test_strip_writes_binary_text_back_as_binary(tmp_path: Path, kind: str) -> None:
    src = _write(tmp_path, kind)
    suffix = ".parquet" if kind in ("parquet", "shards") else ".arrow"
    out, quarantine = tmp_path / f"clean{suffix}", tmp_path / "q.jsonl"
    report = run_preflight(src, RULES, fix=FixOptions(out=out, quarantine=quarantine),
                           smoke=False)
    assert report.fix is not None and report.fix["balanced"] is True
    clean = pq.read_table(out) if suffix == ".parquet" else feather.read_table(out)
    assert clean.schema.field("text").type == pa.binary()
    assert clean.select(["id", "text"]).to_pylist() == [
        {"id": "a", "text": b"fine text here"}, {"id": "b", "text": b"zerowidth here"},
        {"id": "e", "text": None}]
    reasons = {json.loads(x)["id"]: [(r["code"], r["detail"]) for r in json.loads(x)["reasons"]]
               for x in quarantine.read_text().splitlines()}
    assert reasons["c"][0][0] == "exact_duplicate_of"
    assert reasons["d"] == [("not_utf8", "text: binary value is not valid UTF-8, so strip "
                                         "cannot be written back")]


@pytest.mark.parametrize("kind", ["parquet", "arrow", "shards", "datasets"])
def test_default_rules_find_a_binary_text_column_by_its_name(tmp_path: Path, kind: str) -> None:
    # No rules file: a column named like text but stored as bytes is the text (it used to
    # be passed over, and the planted faults passed the gate with exit 0).
    report = run_preflight(_write(tmp_path, kind), None, tmp_path / "report", smoke=False)
    counts = {r.id: r.violations for r in report.rules}
    assert counts["hidden-chars"] == 2 and counts["exact-dupes"] == 1
    assert counts["encoding"] == 1  # the byte that is not UTF-8
    assert report.verdict != "pass"
