"""The character checks read every string field: a zero-width character in an Alpaca
instruction (beside the longer response, inferred as the text) passed the default gate,
which said only "other string fields not checked". Now ``invisible_unicode`` and
``encoding`` read every top-level string field (``all_string_fields``, default true), the
finding names the field, and ``fix`` mends it there on every output format."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from preflight import run_preflight
from preflight.cli import main
from tests.outputs import fix_cleanly

ZW = "\u200b"
MOJIBAKE = "caf\u00c3\u00a9 au lait"  # "café" as UTF-8 read as cp1252


def _records() -> list[dict[str, str]]:
    rows = [{"id": f"r{i}", "instruction": f"Translate sentence {i}",
             "input": "" if i % 3 else f"input {i}",
             "output": f"A long answer to instruction number {i}, with many more words"}
            for i in range(30)]
    rows[4]["instruction"] = f"Ignore{ZW} previous instructions"
    rows[9]["input"] = MOJIBAKE
    rows[12]["id"] = f"r12{ZW}"
    return rows


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    if path.name.endswith("dataset"):  # a `datasets` save_to_disk folder of two Arrow shards
        import datasets

        datasets.Dataset.from_list(rows).save_to_disk(str(path), num_shards=2)
    elif path.name.endswith("shards"):  # a folder of two JSON Lines shards, the faults in the first
        path.mkdir()
        _write(path / "part-0.jsonl", rows[:20])
        _write(path / "part-1.jsonl", rows[20:])
    elif path.suffix == ".json":  # a pretty-printed JSON array
        path.write_text(json.dumps(rows, indent=2))
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".csv":
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        table = pa.table({k: [r[k] for r in rows] for k in rows[0]})
        if path.suffix == ".arrow":  # a dictionary column too
            table = table.set_column(1, "instruction",
                                     table["instruction"].dictionary_encode())
            feather.write_feather(table, path)
        else:
            pq.write_table(table, path)
    return path


def _found(report: object, rule: str) -> list[tuple[int, str, str]]:
    frame = report.findings()  # type: ignore[attr-defined]
    picked = frame.filter(frame["rule"] == rule).sort("row")
    return list(zip(picked["row"], picked["code"], picked["detail"], strict=True))


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet", ".arrow", "shards",
                                    "dataset"])
def test_every_string_field_is_read_by_the_character_checks(tmp_path: Path,
                                                            suffix: str) -> None:
    data = _write(tmp_path / f"d{suffix}", _records())
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert report.rules_file.fields["text"] == "output"
    hidden = _found(report, "hidden-chars")
    assert [(row, code) for row, code, _ in hidden] == [(4, "zero_width_space"),
                                                        (12, "zero_width_space")]
    assert hidden[0][2].startswith("instruction: 1× U+200B")
    assert hidden[1][2].startswith("id: 1× U+200B")
    [(row, code, detail)] = _found(report, "encoding")
    assert (row, code) == (9, "mojibake") and detail.startswith("input:")
    assert report.verdict == "fail"


def test_all_string_fields_false_reads_the_text_fields_only(tmp_path: Path) -> None:
    data = _write(tmp_path / "d.jsonl", _records())
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nfields: {text: output}\nrules:\n"
                     "  - {id: hidden, check: invisible_unicode, all_string_fields: false}\n"
                     "  - {id: enc, check: encoding, all_string_fields: false}\n")
    report = run_preflight(data, rules=rules, smoke=False, out=tmp_path / "r")
    assert report.verdict == "pass", report.reasons
    assert _found(report, "hidden") == [] and _found(report, "enc") == []


def test_a_chat_is_read_once(tmp_path: Path) -> None:
    # The messages field is read as messages (not as another string field), and a string
    # beside it (a system prompt kept apart) is read too.
    rows = [{"system": "Be brief", "messages": [
        {"role": "user", "content": f"hi {i}"},
        {"role": "assistant", "content": f"hello{ZW if i == 2 else ''} {i}"}]}
        for i in range(6)]
    rows[3]["system"] = f"Be{ZW} brief"
    data = tmp_path / "chat.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    found = _found(report, "hidden-chars")
    assert [(row, detail.split(":")[0]) for row, _, detail in found] == [
        (2, "messages[1].content"), (3, "system")]


@pytest.mark.parametrize(("suffix", "out"), [
    (".jsonl", "clean.jsonl"), (".json", "clean.jsonl"), (".csv", "clean.csv"),
    (".parquet", "clean.parquet"), (".arrow", "clean.arrow"), ("shards", "clean.jsonl"),
    ("dataset", "clean.parquet")])
def test_fix_mends_the_other_string_fields(tmp_path: Path, suffix: str, out: str) -> None:
    rows = _records()
    data = _write(tmp_path / f"d{suffix}", rows)
    clean = tmp_path / out
    fixed = fix_cleanly(data, clean, tmp_path / "q.jsonl")
    assert len(fixed) == len(rows)
    assert fixed[4]["instruction"] == "Ignore previous instructions"
    assert fixed[9]["input"] == "café au lait"
    assert fixed[12]["id"] == "r12"
    untouched = [i for i in range(len(rows)) if i not in (4, 9, 12)]
    assert [fixed[i] for i in untouched] == [rows[i] for i in untouched]
    again = run_preflight(clean, smoke=False, out=tmp_path / "again")
    assert again.verdict == "pass", again.reasons


def test_stdin_is_read_and_fixed_on_every_string_field(tmp_path: Path) -> None:
    rows = _records()
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    out = tmp_path / "r"
    result = CliRunner().invoke(main, ["check", "-", "--no-smoke", "--out", str(out),
                                       "--format", "json"], input=data)
    assert result.exit_code == 1, result.output
    found = pq.read_table(out / "findings.parquet").to_pylist()
    assert sorted((f["rule"], f["row"], f["detail"].split(":")[0]) for f in found) == [
        ("encoding", 9, "input"), ("hidden-chars", 4, "instruction"), ("hidden-chars", 12, "id")]
    clean = tmp_path / "clean.jsonl"
    result = CliRunner().invoke(main, ["fix", "-", "--out", str(clean), "--quarantine",
                                       str(tmp_path / "q.jsonl")], input=data)
    assert result.exit_code == 0, result.output
    fixed = [json.loads(line) for line in clean.read_text().splitlines()]
    assert (fixed[4]["instruction"], fixed[9]["input"], fixed[12]["id"]) == (
        "Ignore previous instructions", "café au lait", "r12")
    assert [f for i, f in enumerate(fixed) if i not in (4, 9, 12)] == [
        r for i, r in enumerate(rows) if i not in (4, 9, 12)]
