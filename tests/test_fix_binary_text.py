"""``fix`` on a Parquet text column stored as ``binary`` (Spark and Hive writers): the text
rules read it as UTF-8, so a fix must write its mended text back as bytes, in a binary
column; a value that is not valid UTF-8 cannot be written back mended, so it goes to the
quarantine instead of being counted as fixed and written unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from preflight import FixOptions, run_preflight

RULES = {"fields": {"text": "text", "id": "id"},
         "rules": [{"id": "hid", "check": "invisible_unicode", "fix": "strip"},
                   {"id": "dup", "check": "exact_duplicate", "fix": "keep_first"}]}


def test_strip_writes_binary_text_back_as_binary(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    texts = [b"fine text here", "zero\u200bwidth here".encode(), b"fine text here",
             b"bad \xff byte\xe2\x80\x8b", None]
    pq.write_table(pa.table({"id": ["a", "b", "c", "d", "e"],
                             "text": pa.array(texts, pa.binary())}), src)
    out, quarantine = tmp_path / "clean.parquet", tmp_path / "q.jsonl"
    report = run_preflight(src, RULES, fix=FixOptions(out=out, quarantine=quarantine),
                           smoke=False)
    assert report.fix is not None and report.fix["balanced"] is True
    clean = pq.read_table(out)
    assert clean.schema.field("text").type == pa.binary()
    assert clean.to_pylist() == [{"id": "a", "text": b"fine text here"},
                                 {"id": "b", "text": b"zerowidth here"},
                                 {"id": "e", "text": None}]
    reasons = {json.loads(x)["id"]: [(r["code"], r["detail"]) for r in json.loads(x)["reasons"]]
               for x in quarantine.read_text().splitlines()}
    assert reasons["c"][0][0] == "exact_duplicate_of"
    assert reasons["d"] == [("not_utf8", "text: binary value is not valid UTF-8, so strip "
                                         "cannot be written back")]
