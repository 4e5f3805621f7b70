"""Strings inside top-level lists (an NER corpus's ``tokens``, ``choices``) were not read by
the character checks: a zero-width space inside one token passed, and a corpus of ``tokens``
and ``ner_tags`` had no text field, so the character checks did not run at all. Now they
read every string of a top-level list (the finding names the field and index), run on data
with no text field when it holds strings, and ``fix`` mends the string in place on every
output format, the list's length and every other record kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from preflight import FixOptions, run_preflight
from preflight.batch import Batch
from preflight.checks.string_fields import list_items
from preflight.executor import launch, pool
from tests.executor.cases import same_findings, same_report
from tests.outputs import fix_cleanly, fix_setting_aside, write_records

ZW = "\u200b"
MOJIBAKE = "caf\u00c3\u00a9"  # "café" as UTF-8 read as cp1252


def _records(n: int = 40) -> list[dict[str, Any]]:
    rows = [{"id": f"s{i}", "tokens": ["John", "lives", "in", f"Paris{i}", "."],
             "ner_tags": [1, 0, 0, 5, 0], "choices": ["yes", "no", None]}
            for i in range(n)]
    rows[3]["tokens"][3] = f"Par{ZW}is3"
    rows[8]["choices"][1] = MOJIBAKE
    rows[11]["tokens"][0] = "\u202eJohn"  # a bidi override: "Trojan Source"
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    table = None
    if path.stem.endswith("-dict"):  # list<dictionary<string>>: items dictionary-encoded
        table = pa.table({k: [r[k] for r in rows] for k in rows[0]})
        kind = pa.list_(pa.dictionary(pa.int32(), pa.string()))
        for name in ("tokens", "choices"):
            at = table.schema.get_field_index(name)
            table = table.set_column(at, name, pa.array([r[name] for r in rows], kind))
    return write_records(path, rows, table)


def _found(report: Any) -> list[tuple[int, str, str]]:
    frame = report.findings()
    picked = frame.filter(frame["check"].is_in(["invisible_unicode", "encoding"])).sort("row")
    return [(row, code, detail.split(":")[0])
            for row, code, detail in zip(picked["row"], picked["code"], picked["detail"],
                                         strict=True)]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet", ".arrow", "-dict.parquet",
                                    "-dict.arrow"])
def test_strings_in_lists_are_read(tmp_path: Path, suffix: str) -> None:
    data = _write(tmp_path / f"ner{suffix}", _records())
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert "text" not in report.rules_file.fields  # no text field: the checks run all the same
    assert report.rules_file.fields["token_labels"] == "ner_tags"
    assert _found(report) == [(3, "zero_width_space", "tokens[3]"),
                              (8, "mojibake", "choices[1]"),
                              (11, "bidi_control", "tokens[0]")]
    assert report.verdict == "fail"


def test_empty_and_null_lists_keep_the_indexes_right() -> None:
    # What polars' explode gives for [] and null differs between versions (a null row, or
    # none): a list_view column read from Arrow crashed the check with a height mismatch.
    frame = pl.DataFrame({"tokens": [["a"], None, [], [None, f"b{ZW}", "c"], []]})
    batch = Batch(frame=frame, rows=np.arange(5))
    items = list_items(batch, ("tokens",))
    assert items.rows() == [(0, "tokens", 0, "a"), (3, "tokens", 1, f"b{ZW}"),
                            (3, "tokens", 2, "c")]


def test_a_list_of_mixed_values_is_read_too(tmp_path: Path) -> None:
    # A list holding a number beside its strings is kept as Python values (``raw``).
    rows = [{"text": f"question {i}", "answers": ["a", i, "b"] if i % 2 else "c"}
            for i in range(10)]
    rows[5]["answers"] = ["a", 5, f"b{ZW}"]
    data = _write(tmp_path / "mixed.jsonl", rows)
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert _found(report) == [(5, "zero_width_space", "answers[2]")]


def test_all_string_fields_false_leaves_the_lists_out(tmp_path: Path) -> None:
    rows = [dict(r, text=f"sentence {i}") for i, r in enumerate(_records())]
    data = _write(tmp_path / "d.jsonl", rows)
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nfields: {text: text}\nrules:\n"
                     "  - {id: hidden, check: invisible_unicode, all_string_fields: false}\n")
    report = run_preflight(data, rules=rules, smoke=False, out=tmp_path / "r")
    assert report.verdict == "pass", report.reasons


def test_data_without_strings_still_has_no_character_checks(tmp_path: Path) -> None:
    rows = [{"input_ids": [1, 2, i], "labels": [1, 2, i]} for i in range(20)]
    report = run_preflight(_write(tmp_path / "ids.jsonl", rows), smoke=False,
                           out=tmp_path / "r")
    assert not {"hidden-chars", "encoding"} & {r.id for r in report.rules}


@pytest.mark.parametrize(("rows", "status"), [
    (_records(), "fail"),  # no text field, but tokens to read
    ([{"x": i, "y": [1.0, 2.0]} for i in range(20)], "error"),  # nothing to read: fail closed
])
def test_a_rules_file_with_no_text_field(tmp_path: Path, rows: list[dict[str, Any]],
                                         status: str) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nfields: {id: id}\nrules:\n"
                     "  - {id: hidden, check: invisible_unicode}\n")
    data = _write(tmp_path / "d.jsonl", rows)
    report = run_preflight(data, rules=rules, smoke=False, out=tmp_path / "r")
    assert report.rule("hidden").status == status


@pytest.mark.parametrize(("suffix", "out"), [
    (".jsonl", "clean.jsonl"), (".json", "clean.jsonl"), (".parquet", "clean.parquet"),
    (".arrow", "clean.arrow"), (".parquet", "clean.jsonl"), ("-dict.parquet", "clean.parquet"),
    ("-dict.arrow", "clean.arrow")])
def test_fix_mends_strings_in_lists(tmp_path: Path, suffix: str, out: str) -> None:
    rows = _records()
    data = _write(tmp_path / f"d{suffix}", rows)
    clean = tmp_path / out
    fixed = fix_cleanly(data, clean, tmp_path / "q.jsonl")
    assert len(fixed) == len(rows)
    assert fixed[3]["tokens"] == ["John", "lives", "in", "Paris3", "."]
    assert fixed[8]["choices"] == ["yes", "café", None]
    assert fixed[11]["tokens"] == ["John", "lives", "in", "Paris11", "."]
    untouched = [i for i in range(len(rows)) if i not in (3, 8, 11)]
    assert [fixed[i] for i in untouched] == [rows[i] for i in untouched]
    if suffix == ".jsonl":  # untouched lines byte for byte, a changed one only in its token
        before, after = data.read_bytes().splitlines(), clean.read_bytes().splitlines()
        assert [after[i] for i in untouched] == [before[i] for i in untouched]
        assert after[3] == before[3].replace(ZW.encode(), b"")
    if suffix.endswith((".parquet", ".arrow")) and out.endswith((".parquet", ".arrow")):
        read = pq.read_schema if out.endswith(".parquet") else (
            lambda p: feather.read_table(p).schema)
        assert read(clean) == read(data)  # the schema kept
    again = run_preflight(clean, smoke=False, out=tmp_path / "again")
    assert again.verdict == "pass", again.reasons


def test_fix_keeps_the_other_values_of_a_mixed_list(tmp_path: Path) -> None:
    rows = [{"text": f"question {i}", "answers": ["a", i, "b"]} for i in range(10)]
    rows[5]["answers"] = ["a", 5, f"b{ZW}", 1e400]  # 1e400 stays as written
    data = tmp_path / "mixed.jsonl"
    lines = [json.dumps(r) for r in rows]
    lines[5] = lines[5].replace("Infinity", "1e400")
    data.write_text("".join(line + "\n" for line in lines))
    clean, quarantine = tmp_path / "clean.jsonl", tmp_path / "q.jsonl"
    run_preflight(data, fix=FixOptions(out=clean, quarantine=quarantine), smoke=False)
    assert clean.read_text().splitlines()[5] == lines[5].replace("\\u200b", "")


def test_dry_run_names_the_list_item(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.jsonl", _records())
    report = run_preflight(data, smoke=False, fix=FixOptions(
        out=tmp_path / "c.jsonl", quarantine=tmp_path / "q.jsonl", dry_run=True))
    assert report.fix is not None
    fields = [(e["row"], e["field"]) for e in report.fix["examples"]]
    assert fields == [(3, "tokens[3]"), (8, "choices[1]"), (11, "tokens[0]")]


def test_two_workers_equal_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 2_000)
    rows = _records(300)
    rows[250]["tokens"][1] = f"li{ZW}ves"
    data = _write(tmp_path / "d.jsonl", rows)
    one = run_preflight(data, smoke=False, out=tmp_path / "one", workers=1)
    two = run_preflight(data, smoke=False, out=tmp_path / "two", workers=2)
    assert "pool:scan" in two.timings
    assert [row for row, _, _ in _found(one)] == [3, 8, 11, 250]
    same_findings(one, two, tmp_path / "one", tmp_path / "two")
    same_report(one, two)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_list_item_a_fix_would_empty_goes_to_the_quarantine(tmp_path: Path,
                                                              suffix: str) -> None:
    # ["a", "\u200b", "b"] became ["a", "", "b"] with no word: a tokenizer drops the empty
    # token and every tag after it shifts.
    rows = _records()
    rows[6]["tokens"][2] = ZW
    data = _write(tmp_path / f"d{suffix}", rows)
    fixed, [set_aside] = fix_setting_aside(data, tmp_path / "clean.jsonl",
                                           tmp_path / "q.jsonl")
    assert set_aside["row"] == 6
    assert set_aside["reasons"][0]["code"] == "empty_after_fix"
    assert set_aside["reasons"][0]["detail"].startswith("tokens[2]: empty")
    assert len(fixed) == len(rows) - 1
    assert fixed[3]["tokens"] == ["John", "lives", "in", "Paris3", "."]  # still mended
