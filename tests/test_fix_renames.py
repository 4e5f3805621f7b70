"""What ``fix`` renames, said and done alike on every format.

A struct field whose name hides a character (``meta.so\\u200burce``) in Parquet, Arrow, a
shard folder or a ``datasets`` folder sets the records holding a value under it aside
(``key_not_mendable``: the name is the schema's), but the clean output's schema kept the bad
name. Now the clean output's schema has the name mended (no value changes: the records left
hold none there), the ``datasets`` feature names too, and the manifest lists it; a name
that would become a sibling's is kept, and the manifest says why.

``fix --dry-run`` listed no renamed key (a hidden character stripped from a JSON key or a
map's key): it now lists them (``renamed_keys``), as the real run's manifest does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from tests.outputs import fix_setting_aside, read_records, write_records, write_shaped
from tests.test_cli import invoke

ZW, RLO = "\u200b", "\u202e"


def _struct_rows() -> list[dict[str, Any]]:
    rows = [{"text": f"document {i} here", "meta": {f"so{ZW}urce": None, "n": i}}
            for i in range(6)]
    rows[1]["meta"][f"so{ZW}urce"] = "web 1"
    return rows


@pytest.mark.parametrize(("shape", "out"), [
    ("d.parquet", "clean.parquet"), ("d.arrow", "clean.arrow"),
    ("shards", "clean.parquet"), ("dataset", "clean.parquet")])
def test_a_hidden_struct_field_name_is_mended_in_the_clean_schema(
        tmp_path: Path, shape: str, out: str) -> None:
    rows = _struct_rows()
    data = write_shaped(tmp_path / shape, rows)
    clean = tmp_path / out
    fixed, aside = fix_setting_aside(data, clean, tmp_path / "q.jsonl")
    assert [a["record"]["meta"] for a in aside] == [rows[1]["meta"]]  # nothing lost
    assert aside[0]["reasons"][0]["code"] == "key_not_mendable"
    schema = (pq.read_schema(clean) if out.endswith(".parquet")
              else feather.read_table(clean).schema)
    assert schema.field("meta").type == pa.struct([("source", pa.string()), ("n", pa.int64())])
    assert ZW not in json.dumps({k.decode(): v.decode()
                                 for k, v in (schema.metadata or {}).items()})
    assert fixed == [{"text": r["text"], "meta": {"source": None, "n": r["meta"]["n"]}}
                     for i, r in enumerate(rows) if i != 1]
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text())
    assert manifest["renamed_fields"] == [{"field": 'meta["so\\u200burce"]', "to": "source"}]
    again = invoke("check", clean, "--no-smoke", "--out", tmp_path / "again")
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_a_name_that_would_be_a_siblings_is_kept_and_said(tmp_path: Path,
                                                          suffix: str) -> None:
    rows = [{"text": f"document {i} here", "meta": {f"so{ZW}urce": None, "source": "w"}}
            for i in range(4)]
    data = write_records(tmp_path / f"d{suffix}", rows)
    clean = tmp_path / f"clean{suffix}"
    fixed, aside = fix_setting_aside(data, clean, tmp_path / "q.jsonl")
    assert aside == [] and fixed == rows
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text())
    [kept] = manifest["renamed_fields"]
    assert kept["field"] == 'meta["so\\u200burce"]' and "another field" in kept["kept"]


def _key_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"text": f"document {i} here", "meta": {"source": "w"}}
                                  for i in range(5)]
    rows[1]["meta"] = {f"so{ZW}urce": "w"}
    rows[3]["meta"] = {f"so{ZW}urce": "v"}
    rows[4][f"sco{RLO}re"] = "5"
    return rows


def _dry_run(data: Path, tmp_path: Path, *more: str) -> str:
    result = invoke("fix", data, "--out", tmp_path / "c.jsonl", "--quarantine",
                    tmp_path / "q.jsonl", "--dry-run", *more)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("shape", ["d.jsonl", "d.json", "shards"])
def test_the_dry_run_lists_the_keys_a_real_run_renames(tmp_path: Path, shape: str) -> None:
    if shape == "shards":  # JSON Lines shards: keys that differ per record stay JSON
        data = tmp_path / shape
        data.mkdir()
        write_records(data / "part-0.jsonl", _key_rows()[:3])
        write_records(data / "part-1.jsonl", _key_rows()[3:])
    else:
        data = write_shaped(tmp_path / shape, _key_rows())
    said = _dry_run(data, tmp_path)
    assert "key renamed: meta[\"so\\u200burce\"] → 'source' (2 records)" in said
    assert "key renamed: [\"sco\\u202ere\"] → 'score' (1 records)" in said
    fixed, aside = fix_setting_aside(data, tmp_path / "c.jsonl", tmp_path / "q.jsonl")
    assert aside == [] and fixed[1]["meta"] == {"source": "w"}
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text())
    assert manifest["renamed_keys"] == [
        {"key": 'meta["so\\u200burce"]', "to": "source", "records": 2},
        {"key": '["sco\\u202ere"]', "to": "score", "records": 1}]


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_the_dry_run_lists_map_keys_and_struct_fields(tmp_path: Path, suffix: str) -> None:
    maps = [[("source", f"web {i}")] for i in range(4)]
    maps[2] = [(f"so{ZW}urce", "web 2")]
    table = pa.table({"text": [f"document {i}" for i in range(4)],
                      "meta": pa.array(maps, type=pa.map_(pa.string(), pa.string())),
                      "info": pa.array([{f"la{ZW}ng": None}] * 4,
                                       type=pa.struct([(f"la{ZW}ng", pa.string())]))})
    data = write_records(tmp_path / f"d{suffix}", [], table)
    out = tmp_path / f"c{suffix}"
    result = invoke("fix", data, "--out", out, "--quarantine", tmp_path / "q.jsonl",
                    "--dry-run")
    assert result.exit_code == 0, result.output
    assert "key renamed: meta[\"so\\u200burce\"] → 'source' (1 records)" in result.output
    assert ("field renamed in the schema: info[\"la\\u200bng\"] → 'lang'"
            in result.output)
    fixed, _ = fix_setting_aside(data, out, tmp_path / "q.jsonl")
    assert fixed[2]["meta"] == [("source", "web 2")] and fixed[0]["info"] == {"lang": None}
    assert read_records(out) == fixed


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_a_column_s_own_hidden_name_is_said_to_be_kept(tmp_path: Path, suffix: str) -> None:
    """A null-only column named ``no\u200bte``: fix exited 0 saying nothing of it, and a
    check of its clean output failed on that name (a corpus-level finding)."""
    rows = [{"text": f"document {i} here", f"no{ZW}te": None} for i in range(4)]
    table = pa.Table.from_pylist(rows, schema=pa.schema(
        [("text", pa.string()), (f"no{ZW}te", pa.string())]))
    data = tmp_path / f"d{suffix}"
    if suffix == ".parquet":
        pq.write_table(table, data)
    else:
        feather.write_feather(table, data, compression="uncompressed")
    clean = tmp_path / f"clean{suffix}"
    result = invoke("fix", data, "--out", clean, "--quarantine", tmp_path / "q.jsonl")
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text())
    [kept] = manifest["renamed_fields"]
    assert kept["field"] == '["no\\u200bte"]' and "column's own name" in kept["kept"]
    assert "kept: a column's own name" in result.output


@pytest.mark.parametrize("shape", ["d.parquet", "d.arrow", "shards", "dataset"])
def test_a_json_lines_output_names_keys_as_a_parquet_one(tmp_path: Path, shape: str) -> None:
    """From a table, a JSON Lines output kept the null-only struct field ``so\u200burce`` as
    a key of every record (its Parquet output's schema had it renamed, and its manifest said
    so): it now has the Parquet output's names, a column's own name kept in both, and the
    same ``renamed_fields``."""
    rows = [{"text": f"document {i} here", f"no{ZW}te": None,
             "meta": {f"so{ZW}urce": None, "n": i}} for i in range(6)]
    data = write_shaped(tmp_path / shape, rows)
    said = {}
    for out in ("c.jsonl", "c.parquet"):
        result = invoke("fix", data, "--out", tmp_path / out, "--quarantine",
                        tmp_path / f"q-{out}.jsonl", "--manifest", tmp_path / f"m-{out}.json")
        assert result.exit_code == 0, result.output
        assert "field renamed in the schema: meta[\"so\\u200burce\"] → 'source'" in result.output
        said[out] = json.loads((tmp_path / f"m-{out}.json").read_text())["renamed_fields"]
        assert read_records(tmp_path / out) == [
            {"text": r["text"], f"no{ZW}te": None, "meta": {"source": None, "n": r["meta"]["n"]}}
            for r in rows]
    assert said["c.jsonl"] == said["c.parquet"]
    assert [f.get("to", "kept") for f in said["c.jsonl"]] == ["kept", "source"]


def test_a_key_in_every_turn_counts_its_record_once(tmp_path: Path) -> None:
    """``renamed_keys`` counted each place in a record: a key in both turns of one chat
    said 2 records."""
    rows = [{"messages": [{"role": "user", "content": f"question {i}"},
                          {"role": "assistant", "content": f"answer {i}"}]} for i in range(3)]
    for turn in rows[1]["messages"]:
        turn[f"na{ZW}me"] = "bob"
    data = write_records(tmp_path / "d.jsonl", rows)
    fixed, aside = fix_setting_aside(data, tmp_path / "c.jsonl", tmp_path / "q.jsonl")
    assert aside == [] and [t["name"] for t in fixed[1]["messages"]] == ["bob", "bob"]
    manifest = json.loads((tmp_path / "fix-manifest.json").read_text())
    assert manifest["renamed_keys"] == [
        {"key": 'messages[*]["na\\u200bme"]', "to": "name", "records": 1}]
