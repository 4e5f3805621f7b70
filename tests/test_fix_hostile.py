"""Fix cases found by a hostile review: what a changed CSV row, a full disk and odd numbers
do to the outputs."""

from __future__ import annotations

import csv
import errno
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from preflight import FixOptions, run_preflight
from preflight.cli import main
from tests.outputs import read_records

RULES = {"fields": {"text": "text", "id": "id"},
         "rules": [{"id": "invisible", "check": "invisible_unicode"}]}


def fix(src: Path, folder: Path, out: str, rules: Any = RULES) -> tuple[dict[str, Any], Path]:
    """Run fix; return the manifest and the clean output's path."""
    clean = folder / out
    report = run_preflight(src, rules, smoke=False,
                           fix=FixOptions(out=clean, quarantine=folder / "q.jsonl"))
    assert report.fix is not None and report.fix["balanced"] is True
    return report.fix, clean


@pytest.mark.parametrize("ending", [b"\n", b""])
def test_a_changed_csv_row_quotes_a_cell_holding_a_line_break(tmp_path: Path, ending: bytes
                                                              ) -> None:
    # The csv writer quotes only the characters of its line terminator: a row ending in
    # "\n" wrote a cell holding "\r" bare, and the last row (no ending) wrote "\n" bare,
    # so the clean CSV read back as more, broken rows.
    src = tmp_path / "in.csv"
    src.write_bytes(b'id,text\n0,"carriage\xe2\x80\x8b\rreturn"\n'
                    b'1,"line\xe2\x80\x8b\nfeed"' + ending)
    manifest, clean = fix(src, tmp_path / "out", "clean.csv")
    assert manifest["clean"]["changed"] == 2
    rows = list(csv.reader(io.StringIO(clean.read_bytes().decode(), newline="")))
    assert rows == [["id", "text"], ["0", "carriage\rreturn"], ["1", "line\nfeed"]]
    assert clean.read_bytes().endswith(b'feed"' + ending)


def test_a_full_disk_while_writing_parquet_is_exit_3(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The first batch's write failed (no space); leaving the writer then flushed the next
    # batch into the closed file, and that error ("Operation on closed file") was reported
    # instead: exit 2, "write JSON Lines".
    src = tmp_path / "in.arrow"
    table = pa.table({"id": [0, 1, 2, 3], "text": ["a\u200bb", "cd", "e\u200bf", "gh"]})
    with pa.ipc.new_file(str(src), table.schema) as sink:
        for batch in table.to_batches(max_chunksize=2):
            sink.write_batch(batch)
    calls: list[int] = []

    class Full(pq.ParquetWriter):  # the clean output's writer only, not the gate's
        def write_table(self, table: Any, row_group_size: Any = None) -> None:
            calls.append(1)
            if len(calls) == 1:
                raise OSError(errno.ENOSPC, "No space left on device")
            raise pa.ArrowInvalid("Operation on closed file")

    monkeypatch.setattr("preflight.fix.writers.table.pq", SimpleNamespace(ParquetWriter=Full))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["fix", str(src), "--out", str(out / "clean.parquet"),
                                       "--quarantine", str(out / "q.jsonl"), "--rules",
                                       str(_rules(tmp_path))])
    assert result.exit_code == 3, result.output
    assert "No space left on device" in result.output
    assert not out.exists()  # nothing left, not even the folder the run made


def _rules(folder: Path) -> Path:
    path = folder / "rules.json"
    path.write_text(json.dumps(RULES))
    return path


@pytest.mark.parametrize("target", ["eval", "rules", "tokenizer"])
def test_an_output_on_a_file_fix_reads_is_refused(tmp_path: Path, target: str) -> None:
    # Only the data was protected: --out on the eval file replaced the eval set with the
    # clean corpus, --quarantine on the rules file replaced the rules.
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 0, "text": "a\u200bb"}) + "\n")
    evals = tmp_path / "eval.jsonl"
    evals.write_text(json.dumps({"id": 9, "text": "held out"}) + "\n")
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    rules = _rules(tmp_path)
    inputs = {"eval": evals, "rules": rules, "tokenizer": tokenizer}
    before = {p: p.read_bytes() for p in inputs.values()}
    extra = {"eval": ["--eval", evals], "rules": [], "tokenizer": ["--tokenizer", tokenizer]}
    result = CliRunner().invoke(main, [str(a) for a in [
        "fix", src, "--rules", rules, *extra[target], "--out", tmp_path / "out.jsonl",
        "--quarantine", inputs[target]]])
    assert result.exit_code == 2, result.output
    what = {"eval": "the eval file", "rules": "the rules file", "tokenizer": "the tokenizer"}
    assert f"is {what[target]}" in result.output
    assert {p: p.read_bytes() for p in inputs.values()} == before
    assert not (tmp_path / "out.jsonl").exists()


def _invalid_utf8_strings(values: list[bytes], dictionary: bool = False) -> pa.Array:
    """A string array holding the bytes as they are, unchecked (a writer that skipped the
    UTF-8 check), optionally dictionary-encoded."""
    raw = pa.array(values, pa.binary())
    strings = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    if not dictionary:
        return strings
    return pa.DictionaryArray.from_arrays(pa.array(range(len(values))), strings)


@pytest.mark.parametrize(("name", "dictionary"), [("d.parquet", False), ("d.arrow", False),
                                                  ("d.arrow", True), ("shards", False)])
@pytest.mark.parametrize("out", ["o.jsonl", "o.parquet", "o.arrow"])
def test_a_string_column_with_bytes_not_utf8_is_fixed_and_set_aside_as_written(
        tmp_path: Path, name: str, dictionary: bool, out: str) -> None:
    # check read such a value with U+FFFD (an encoding finding, to the quarantine); fix
    # stopped with an internal error (UnicodeDecodeError) when it wrote that record out.
    texts = [b"plain text %d" % k for k in range(6)]
    texts[2], texts[4] = b"bad \xff bytes", b"zero\xe2\x80\x8bwidth"
    table = pa.table({"id": list(range(6)), "text": _invalid_utf8_strings(texts, dictionary)})
    src = tmp_path / name
    if name == "shards":  # a folder of Parquet shards: the bad value in the first
        src.mkdir()
        pq.write_table(table.slice(0, 3), src / "part-0.parquet")
        pq.write_table(table.slice(3), src / "part-1.parquet")
    elif name.endswith(".parquet"):
        pq.write_table(table, src)
    else:
        feather.write_feather(table, src)
    rules = {"fields": {"text": "text", "id": "id"},
             "rules": [{"id": "invisible", "check": "invisible_unicode"},
                       {"id": "enc", "check": "encoding"}]}
    _, clean = fix(src, tmp_path, out, rules)
    set_aside = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert [q["row"] for q in set_aside] == [2]
    # the value as written: bytes (base64, as a binary column's), nothing lost
    assert set_aside[0]["record"]["text"] == "YmFkIP8gYnl0ZXM="
    kept = read_records(clean)
    assert [r["id"] for r in kept] == [0, 1, 3, 4, 5]
    assert [r["text"] for r in kept][3] == "zerowidth"


@pytest.mark.parametrize("shape", ["jsonl", "json-array"])
@pytest.mark.parametrize("out", ["clean.parquet", "clean.arrow"])
def test_a_kept_lone_surrogate_to_parquet_or_arrow_is_refused_naming_it(
        tmp_path: Path, shape: str, out: str) -> None:
    """A lone surrogate (``"\\ud800"`` in JSON) cannot be held by a UTF-8 string column:
    without the encoding check the record is kept, and the output refuses it by its row
    and cause (it blamed clashing types); a pair (an emoji's escape) is written."""
    lines = ['{"id": 0, "text": "pair \\ud83d\\ude00 fine"}', '{"id": 1, "text": "plain"}',
             '{"id": 2, "text": "a \\ud800 b"}']
    src = tmp_path / ("in.jsonl" if shape == "jsonl" else "in.json")
    src.write_text("\n".join(lines) + "\n" if shape == "jsonl"
                   else "[\n" + ",\n".join(lines) + "\n]\n", encoding="utf-8")
    rules = _rules(tmp_path)
    args = ["fix", src, "--rules", rules, "--out", tmp_path / out,
            "--quarantine", tmp_path / "q.jsonl"]
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    assert "row 2 holds a lone surrogate" in result.output
    assert "encoding" in result.output and "--format jsonl" in result.output
    assert not (tmp_path / out).exists()

    # The pair alone is written, as text (the emoji), nothing else changed.
    src.write_text(lines[0] + "\n" if shape == "jsonl" else f"[{lines[0]}]\n",
                   encoding="utf-8")
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    table = pq.read_table(tmp_path / out) if out.endswith(".parquet") else \
        feather.read_table(tmp_path / out)
    assert table.column("text").to_pylist() == ["pair \U0001f600 fine"]


def test_with_the_encoding_check_a_lone_surrogate_goes_to_the_quarantine(
        tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 0, "text": "a \\ud800 b"}\n{"id": 1, "text": "plain"}\n',
                   encoding="utf-8")
    rules = {**RULES, "rules": [*RULES["rules"], {"id": "enc", "check": "encoding"}]}
    manifest, clean = fix(src, tmp_path, "clean.parquet", rules)
    assert manifest["quarantine"]["records"] == 1
    assert pq.read_table(clean).column("id").to_pylist() == [1]
    entry = json.loads((tmp_path / "q.jsonl").read_text().splitlines()[0])
    assert entry["row"] == 0 and entry["record"]["text"] == "a \ud800 b"
    assert [r["code"] for r in entry["reasons"]] == ["lone_surrogate"]

