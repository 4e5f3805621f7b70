"""fix off the JSON Lines path: every record in exactly one output, values and schema kept.

Regression tests for issue 13 (items 1-7, 12): JSON arrays with bad elements, CSV rows
with wrong field counts, invalid UTF-8 or unterminated quotes, shard folders, Parquet and
Arrow schemas, numbers JSON cannot hold in a float, output path collisions, rules that
could not run, and a full disk.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from preflight import FixOptions, run_preflight
from preflight.cli import main
from preflight.fix.writers.text import JsonlWriter
from tests.outputs import kill_mid_write

RULES = {"fields": {"text": "text", "id": "id"},
         "rules": [{"id": "malformed", "check": "malformed"},
                   {"id": "invisible", "check": "invisible_unicode"},
                   {"id": "dupes", "check": "exact_duplicate"}]}
PLAIN = ["The quick brown fox jumps over the lazy dog.",
         "A second, entirely different sentence about rivers.",
         "Third record: the weather was cold and bright all week."]


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def fix(src: Path, folder: Path, rules: Any = RULES, out: str = "clean.jsonl"
        ) -> tuple[dict[str, Any], Path, list[dict[str, Any]]]:
    """Run fix; return the manifest, the clean output's path and the quarantine entries."""
    clean, quarantine = folder / out, folder / "rejected.jsonl"
    report = run_preflight(src, rules, fix=FixOptions(out=clean, quarantine=quarantine),
                           smoke=False)
    assert report.fix is not None and report.fix["balanced"] is True
    entries = [json.loads(x) for x in quarantine.read_bytes().splitlines()]
    return report.fix, clean, entries


def check_codes(src: Path, rules: Any = RULES) -> tuple[bool, list[tuple[int, str]]]:
    report = run_preflight(src, rules, smoke=False)
    [rule] = [r for r in report.rules if r.check == "malformed"]
    return report.passed, sorted((e.row, e.code) for e in rule.examples)


# -- 1. JSON arrays -------------------------------------------------------------------------


def test_a_bad_element_mid_array_loses_no_later_element(tmp_path: Path) -> None:
    src = tmp_path / "in.json"
    src.write_text('[{"id": 0, "text": "%s"},\n {oops},\n [1, 2],\n {"id": 3, "text": "%s"},'
                   '\n {"id": 4, "text": "%s"}]' % tuple(PLAIN), encoding="utf-8")
    passed, codes = check_codes(src)
    assert not passed
    assert codes == [(1, "invalid_json"), (2, "not_an_object")]

    manifest, clean, entries = fix(src, tmp_path / "out")
    assert [json.loads(x)["id"] for x in clean.read_bytes().splitlines()] == [0, 3, 4]
    assert [(e["row"], e["raw"]) for e in entries] == [(1, "{oops}"), (2, "[1, 2]")]
    assert manifest["input"]["records"] == 5


@pytest.mark.parametrize(("tail", "code", "raw"), [
    ('][{"id": 9, "text": "x"}]', "trailing_data", '[{"id": 9, "text": "x"}]'),
    ("", "truncated", ""),
    (', {"id": 9, "te', "truncated", '{"id": 9, "te'),
])
def test_data_after_the_array_or_a_missing_bracket_is_malformed(
        tmp_path: Path, tail: str, code: str, raw: str) -> None:
    src = tmp_path / "in.json"
    src.write_text('[{"id": 0, "text": "%s"}, {"id": 1, "text": "%s"}%s' % (*PLAIN[:2], tail),
                   encoding="utf-8")
    passed, codes = check_codes(src)
    assert (passed, codes) == (False, [(2, code)])
    _, clean, entries = fix(src, tmp_path / "out")
    assert len(clean.read_bytes().splitlines()) == 2
    assert [(e["row"], e["raw"], e["reasons"][0]["code"]) for e in entries] == [(2, raw, code)]


def test_a_kept_bad_element_that_spans_lines_is_set_aside_not_split(tmp_path: Path) -> None:
    """Under ``malformed: none`` a bad element is kept as written; one with line breaks in
    it would be several JSON Lines lines (several units, read back as several malformed
    lines): it goes to the quarantine as written. One on a single line stays."""
    src = tmp_path / "in.json"
    broken = '{"id": 1, "text": "never closed\n  "more": 1}'
    src.write_text('[\n  {"id": 0, "text": "%s"},\n  %s,\n  {oops},\n  {"id": 3, "text": "%s"}'
                   "\n]\n" % (PLAIN[0], broken, PLAIN[1]), encoding="utf-8")
    keep = {"fields": {"text": "text", "id": "id"},
            "rules": [{"id": "malformed", "check": "malformed", "fix": "none"}]}
    manifest, clean, entries = fix(src, tmp_path / "out", keep)
    lines = clean.read_bytes().splitlines()
    assert [json.loads(lines[0])["id"], lines[1], json.loads(lines[2])["id"]] == [0, b"{oops}", 3]
    assert len(lines) == 3
    [entry] = entries
    assert entry["row"] == 1 and entry["raw"].startswith('{"id": 1, "text": "never closed\n')
    assert "spans several lines" in entry["reasons"][0]["detail"]
    assert manifest["clean"]["records"] + manifest["quarantine"]["records"] == 4
    # the clean output reads back with the kept bad element as its one malformed line
    passed, codes = check_codes(clean, keep)
    assert not passed  # malformed is an error by default
    assert codes == [(1, "invalid_json")]


@pytest.mark.parametrize("out", ["clean.jsonl", "clean.parquet", "clean.arrow"])
def test_the_dry_run_counts_the_kept_bad_elements_the_output_cannot_hold(
        tmp_path: Path, out: str) -> None:
    """Found by the late review: under ``malformed: none`` the dry run said "0 would be
    quarantined" where the run sets aside the bad element that spans lines (JSON Lines) or
    every bad element (Parquet, Arrow, where it cannot be a row)."""
    src = tmp_path / "in.json"
    src.write_text('[\r\n  {"id": 0, "text": "%s"},\r\n  {"id": 1, "text": "x",\r\n  '
                   '"more": },\r\n  {oops},\r\n  {"id": 3, "text": "%s"}\r\n]\r\n'
                   % (PLAIN[0], PLAIN[1]), encoding="utf-8")
    keep = {"fields": {"text": "text", "id": "id"},
            "rules": [{"id": "malformed", "check": "malformed", "fix": "none"}]}
    manifest, _, entries = fix(src, tmp_path / "real", keep, out=out)
    assert manifest["quarantine"]["records"] == len(entries) == (1 if out.endswith("l") else 2)
    dry = tmp_path / "dry"
    report = run_preflight(src, keep, smoke=False, fix=FixOptions(
        out=dry / out, quarantine=dry / "q.jsonl", dry_run=True))
    assert report.fix is not None and report.fix["would_quarantine"] == len(entries)
    assert not dry.exists()


@pytest.mark.parametrize("out", ["clean.jsonl", "clean.parquet"])
def test_the_dry_run_counts_kept_malformed_lines_of_json_lines(tmp_path: Path,
                                                               out: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 0, "text": "%s"}\n{oops\n{"id": 2, "text": "%s"}\n'
                   % (PLAIN[0], PLAIN[1]), encoding="utf-8")
    keep = {"fields": {"text": "text", "id": "id"},
            "rules": [{"id": "malformed", "check": "malformed", "fix": "none"}]}
    _, _, entries = fix(src, tmp_path / "real", keep, out=out)
    assert len(entries) == (0 if out.endswith("l") else 1)
    dry = tmp_path / "dry"
    report = run_preflight(src, keep, smoke=False, fix=FixOptions(
        out=dry / out, quarantine=dry / "q.jsonl", dry_run=True))
    assert report.fix is not None and report.fix["would_quarantine"] == len(entries)


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_kept_missing_bracket_is_set_aside_not_written_as_a_blank_line(
        tmp_path: Path, dry_run: bool) -> None:
    """A file cut off before the array's ``]`` is a unit with no text; kept under
    ``malformed: none`` it was a blank JSON Lines line, which is no unit when read back (the
    manifest counted it clean). It goes to the quarantine; the dry run counts it so."""
    src = tmp_path / "in.json"
    src.write_text('[{"id": 0, "text": "%s"}, {"id": 1, "text": "%s"}' % tuple(PLAIN[:2]),
                   encoding="utf-8")
    keep = {"fields": {"text": "text", "id": "id"},
            "rules": [{"id": "malformed", "check": "malformed", "fix": "none"}]}
    clean, quarantine = tmp_path / "out" / "clean.jsonl", tmp_path / "out" / "q.jsonl"
    report = run_preflight(src, keep, smoke=False, fix=FixOptions(
        out=clean, quarantine=quarantine, dry_run=dry_run))
    manifest = report.fix
    assert manifest is not None
    if dry_run:
        assert (manifest["input"]["records"], manifest["would_quarantine"]) == (3, 1)
        return
    assert (manifest["clean"]["records"], manifest["quarantine"]["records"]) == (2, 1)
    assert [json.loads(x)["id"] for x in clean.read_bytes().splitlines()] == [0, 1]
    [entry] = [json.loads(x) for x in quarantine.read_bytes().splitlines()]
    assert (entry["row"], entry["raw"], entry["malformed"]["code"]) == (2, "", "truncated")
    assert "blank JSON Lines line" in entry["reasons"][0]["detail"]


def test_a_pretty_printed_array_keeps_values_as_written(tmp_path: Path) -> None:
    src = tmp_path / "in.json"
    src.write_text('[\n  {\n    "id": 0,\n    "text": "Zero\u200b width",\n'
                   '    "big": 123456789012345678901234567890,\n    "x": 1e400,\n'
                   '    "y": 1.10\n  },\n  {"id": 1, "text": "%s", "n": 00.5e1}\n]' % PLAIN[0],
                   encoding="utf-8")
    _, clean, entries = fix(src, tmp_path / "out")
    # element 1 holds a number JSON does not allow (00.5e1): malformed, kept raw
    assert [e["row"] for e in entries] == [1]
    assert clean.read_bytes() == (b'{"id":0,"text":"Zero width",'
                                  b'"big":123456789012345678901234567890,"x":1e400,"y":1.10}\n')


def test_an_array_nested_past_the_limit_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    src = tmp_path / "in.json"
    deep = '{"a": ' * 20_000 + "1" + "}" * 20_000
    src.write_text(f'[{{"id": 0, "text": "{PLAIN[0]}"}}, {deep}, {{"id": 2, "text": "ok"}}]')
    done = subprocess.run([sys.executable, "-m", "preflight", "check", str(src), "--no-smoke",
                           "--out", str(tmp_path / "report"), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    findings = pq.read_table(tmp_path / "report" / "findings.parquet").to_pylist()
    assert [(f["row"], f["code"]) for f in findings if f["check"] == "malformed"] == [
        (1, "too_deep")]


# -- 2. CSV ---------------------------------------------------------------------------------


def test_csv_rows_that_are_not_records_are_quarantined_with_their_bytes(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    rows = [b"id,text,label\r\n", b"0,%s,1\r\n" % PLAIN[0].encode(), b"1,too,many,fields\r\n",
            b"2,caf\xe9 latin-1,0\r\n", b"3,%s,0\r\n" % PLAIN[2].encode()]
    src.write_bytes(b"".join(rows))
    passed, codes = check_codes(src)
    assert (passed, codes) == (False, [(1, "wrong_field_count"), (2, "invalid_utf8")])
    _, clean, entries = fix(src, tmp_path / "out")
    assert entries[0]["raw"].encode() == rows[2]
    assert base64.b64decode(entries[1]["raw_base64"]) == rows[3]
    assert [json.loads(x)["id"] for x in clean.read_bytes().splitlines()] == ["0", "3"]


@pytest.mark.parametrize(("out", "kept"), [("clean.csv", True), ("clean.jsonl", False),
                                           ("clean.parquet", False)])
def test_a_kept_bad_csv_row_stays_only_in_csv_and_the_dry_run_agrees(
        tmp_path: Path, out: str, kept: bool) -> None:
    """Under ``malformed: none`` a CSV row that is not a record stays in CSV output as
    written; JSON Lines and Parquet cannot hold it, so it goes to the quarantine there; the
    dry run counts what the run does."""
    src = tmp_path / "in.csv"
    rows = [b"id,text\r\n", b"0,%s\r\n" % PLAIN[0].encode(), b"1,too,many,fields\r\n",
            b"2,%s\r\n" % PLAIN[2].encode()]
    src.write_bytes(b"".join(rows))
    keep = {"fields": {"text": "text", "id": "id"},
            "rules": [{"id": "malformed", "check": "malformed", "fix": "none"}]}
    folder = tmp_path / "out"
    dry = run_preflight(src, keep, smoke=False, fix=FixOptions(
        out=folder / out, quarantine=folder / "q.jsonl", dry_run=True)).fix
    manifest, clean, entries = fix(src, folder, keep, out=out)
    assert dry is not None and dry["would_quarantine"] == len(entries) == (0 if kept else 1)
    assert manifest["clean"]["records"] == (3 if kept else 2)
    if kept:
        assert clean.read_bytes() == b"".join(rows)
    else:
        assert entries[0]["raw"].encode() == rows[2]
        assert f"cannot be written as a {out.split('.')[1]}" in entries[0]["reasons"][0]["detail"]


def test_csv_to_jsonl_keeps_every_cell_as_written(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text('id,text,code,big,score,pad\n00123,"Zero\u200b width",1E5,'
                   '123456789012345678901234567890,nan, 7 \n', encoding="utf-8")
    _, clean, _ = fix(src, tmp_path / "out")
    assert json.loads(clean.read_bytes()) == {
        "id": "00123", "text": "Zero width", "code": "1E5",
        "big": "123456789012345678901234567890", "score": "nan", "pad": " 7 "}


def test_an_unterminated_quote_that_swallows_rows_is_malformed(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    body = ('id,text\n0,"%s\n1,%s\n2,"a ""quoted"" word",\n3,%s\n'
            % (PLAIN[0], PLAIN[1], PLAIN[2]))
    src.write_text(body, encoding="utf-8")
    passed, codes = check_codes(src)
    assert not passed
    assert codes == [(0, "unbalanced_quote")]
    _, clean, entries = fix(src, tmp_path / "out")
    assert entries[0]["raw"] == '0,"%s\n1,%s\n2,"a ""quoted"" word",\n' % (PLAIN[0], PLAIN[1])
    assert [json.loads(x)["id"] for x in clean.read_bytes().splitlines()] == ["3"]


def test_csv_to_csv_copies_untouched_rows_byte_for_byte(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    rows = [b"id,text,n\r\n", b'00123,"%s",1E5\r\n' % PLAIN[0].encode(),
            'x,"Zero\u200b, width",07\r\n'.encode(), b"y,%s, 7 \r\n" % PLAIN[2].encode()]
    src.write_bytes(b"".join(rows))
    _, clean, _ = fix(src, tmp_path / "out", out="clean.csv")
    assert clean.read_bytes() == rows[0] + rows[1] + b'x,"Zero, width",07\r\n' + rows[3]
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())
    _, with_bom, _ = fix(bom, tmp_path / "bom", out="clean.csv")
    assert with_bom.read_bytes() == b"\xef\xbb\xbf" + clean.read_bytes()
    again, clean2, entries = fix(clean, tmp_path / "again", out="clean.csv")
    assert clean2.read_bytes() == clean.read_bytes() and entries == []
    assert again["clean"]["changed"] == 0


def test_a_second_round_on_csv_input_does_not_judge_labels_read_back_as_text(
        tmp_path: Path) -> None:
    # A repair is a risky change, so the gate runs again on the clean JSON Lines, where the
    # CSV's cells are strings: the label rule must not see "1" there and quarantine it.
    src = tmp_path / "in.csv"
    src.write_text("id,text,label\n0,caf\u00c3\u00a9 au lait,1\n1,%s,2\n" % PLAIN[0],
                   encoding="utf-8")
    rules = {"fields": {"text": "text", "id": "id", "label": "label"},
             "model": {"num_classes": 3},
             "rules": [{"id": "enc", "check": "encoding"},
                       {"id": "labels", "check": "label_range"}]}
    manifest, clean, entries = fix(src, tmp_path / "out", rules)
    assert entries == []
    assert [json.loads(x)["text"] for x in clean.read_bytes().splitlines()] == [
        "café au lait", PLAIN[0]]
    assert manifest["clean"]["changed"] == 1


# -- 3. shard folders -----------------------------------------------------------------------


def test_a_shard_folder_keeps_records_as_written(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(
        b'{"id": 0, "text": "%s", "score": 3}\n{"id": 1, "text": "Zero\\u200b", "score": 2.5}\n'
        % PLAIN[0].encode())
    (folder / "b.jsonl").write_bytes(b'{"id": 2, "text": "%s"}\nnot json\n' % PLAIN[1].encode())
    _, clean, entries = fix(folder, tmp_path / "out")
    assert clean.read_bytes().splitlines(keepends=True) == [
        b'{"id": 0, "text": "%s", "score": 3}\n' % PLAIN[0].encode(),
        b'{"id": 1, "text": "Zero", "score": 2.5}\n',
        b'{"id": 2, "text": "%s"}\n' % PLAIN[1].encode()]
    assert [(e["file"], e["row"], e["raw"]) for e in entries] == [("b.jsonl", 1, "not json")]


def test_a_shard_folder_of_json_arrays(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "a.json").write_text('[{"id": 0, "text": "%s"}, 7]' % PLAIN[0])
    (folder / "b.json").write_text('[{"id": 1, "text": "%s"}]' % PLAIN[1])
    _, clean, entries = fix(folder, tmp_path / "out")
    assert [json.loads(x)["id"] for x in clean.read_bytes().splitlines()] == [0, 1]
    assert [(e["file"], e["row"], e["raw"]) for e in entries] == [("a.json", 1, "7")]


# -- 4. Parquet and Arrow -------------------------------------------------------------------

N = 70_000  # past one Arrow batch of 65,536 rows


def _wide_table() -> pa.Table:
    texts = [f"Record number {k} says something plain." for k in range(N)]
    texts[5] = "Zero\u200bwidth in record five."
    texts[N - 1] = texts[0]  # an exact duplicate: quarantined
    return pa.table({
        "id": pa.array(range(N), pa.int32()),
        "text": pa.array(texts, pa.string()),
        "small": pa.array([k % 100 for k in range(N)], pa.int8()),
        "f32": pa.array([0.1] * N, pa.float32()),
        "u64": pa.array([2**63 + k for k in range(N)], pa.uint64()),
        "late": pa.array([None] * 66_000 + [1.5] * (N - 66_000), pa.float64()),
        "cat": pa.array(["a", "b"] * (N // 2)).dictionary_encode(),
        "dec": pa.array([Decimal("1.250")] * N, pa.decimal128(10, 3)),
        "ts": pa.array([10**18] * N, pa.timestamp("ns")),
        "tags": pa.array([{"k": 1}] * N, pa.map_(pa.string(), pa.int64())),
    })


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_parquet_and_arrow_keep_their_schema_and_values(tmp_path: Path, suffix: str) -> None:
    table = _wide_table()
    src = tmp_path / f"in{suffix}"
    if suffix == ".parquet":
        pq.write_table(table, src)
    else:
        feather.write_feather(table, src)
    rules = {"fields": {"text": "text", "id": "id"},
             "rules": [{"id": "invisible", "check": "invisible_unicode"},
                       {"id": "dupes", "check": "exact_duplicate"}]}
    _, clean, entries = fix(src, tmp_path / "out", rules, out=f"clean{suffix}")
    read = pq.read_table(clean) if suffix == ".parquet" else feather.read_table(clean)
    expected = pq.read_table(src) if suffix == ".parquet" else feather.read_table(src)
    assert read.schema.equals(expected.schema, check_metadata=True)
    assert read.num_rows == N - 1
    assert [e["row"] for e in entries] == [N - 1]
    assert read.column("text")[5].as_py() == "Zerowidth in record five."
    untouched = [k for k in range(N - 1) if k != 5]
    assert (read.take(untouched).drop_columns(["text"])
            .equals(expected.take(untouched).drop_columns(["text"])))


# -- 5. numbers in JSON Lines -----------------------------------------------------------------


def test_quarantined_and_changed_records_keep_numbers_as_written(tmp_path: Path) -> None:
    lines = [b'{"id": 0, "text": "%s", "big": 123456789012345678901234567890}\n'
             % PLAIN[0].encode(),
             b'{"id":1,"text":"Zero\\u200bwidth","x":1e400,"y":1.10,"big":-18446744073709551617}'
             b"\n",
             b'{"id": 2, "text": "%s",   "big": 123456789012345678901234567890, "z": 1E+2}\n'
             % PLAIN[0].upper().encode()]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(lines))
    _, clean, entries = fix(src, tmp_path / "out")
    assert clean.read_bytes() == lines[0] + (
        b'{"id":1,"text":"Zerowidth","x":1e400,"y":1.10,"big":-18446744073709551617}\n')
    [entry] = entries
    assert entry["row"] == 2
    q_line = (tmp_path / "out" / "rejected.jsonl").read_bytes()
    assert q_line.endswith(b'"record": ' + lines[2].rstrip(b"\n") + b"}\n")


# -- 6. output paths ------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "names"), [
    (["--out", "o.jsonl", "--quarantine", "q.jsonl", "--manifest", "o.jsonl"],
     ("--out", "--manifest")),
    (["--out", "o.jsonl", "--quarantine", "q.jsonl", "--manifest", "q.jsonl"],
     ("--quarantine", "--manifest")),
    (["--out", "o.jsonl", "--quarantine", "fix-manifest.json"],
     ("--quarantine", "the manifest")),
    (["--out", "same.jsonl", "--quarantine", "./same.jsonl"], ("--out", "--quarantine")),
])
def test_outputs_that_collide_are_refused_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
        names: tuple[str, str]) -> None:
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "data" / "in.jsonl"
    src.parent.mkdir()
    src.write_text(json.dumps({"id": 0, "text": "Zero\u200bwidth"}) + "\n")
    result = invoke("fix", src, *args)
    assert result.exit_code == 2, result.output
    assert all(name in result.output for name in names), result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_an_output_that_is_a_link_to_the_input_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 0, "text": PLAIN[0]}) + "\n")
    (tmp_path / "link.jsonl").symlink_to(src)
    result = invoke("fix", src, "--out", tmp_path / "link.jsonl", "--quarantine",
                    tmp_path / "q.jsonl")
    assert result.exit_code == 2 and "is the input" in result.output
    assert src.read_text() == json.dumps({"id": 0, "text": PLAIN[0]}) + "\n"


# -- 7. a rule that could not run -----------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_fix_refuses_when_a_rule_could_not_run(tmp_path: Path, suffix: str) -> None:
    records = [{"id": k, "text": f"{PLAIN[k % 3]} {k}"} for k in range(200)]
    src = tmp_path / f"in{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(records), src)
    else:
        src.write_text("".join(json.dumps(r) + "\n" for r in records))
    rules = tmp_path / "rules.yaml"
    rules.write_text("fields: {text: text, label: label}\nmodel: {num_classes: 3}\n"
                     "rules:\n  - {id: labels, check: label_range}\n")
    out = tmp_path / "out"
    result = invoke("fix", src, "--rules", rules, "--out", out / f"clean{suffix}",
                    "--quarantine", out / "q.jsonl")
    assert result.exit_code == 2, result.output
    assert "labels" in result.output and "could not run" in result.output
    assert not out.exists() or list(out.iterdir()) == []


# -- 12. a full disk ------------------------------------------------------------------------


def test_a_full_disk_is_exit_3_and_leaves_nothing(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": k, "text": f"Zero\u200b {k}"}) + "\n"
                           for k in range(5)))

    def full(self: Any, unit: Any, after: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.path))

    monkeypatch.setattr(JsonlWriter, "change", full)
    out = tmp_path / "out"
    result = invoke("fix", src, "--out", out / "clean.jsonl", "--quarantine", out / "q.jsonl")
    assert result.exit_code == 3, result.output
    assert "No space left on device" in result.output
    assert not out.exists()  # nothing left, not even the folder the run made


def test_an_unwritable_tmpdir_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 0, "text": PLAIN[0]}) + "\n")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "not-there"))
    result = invoke("fix", src, "--out", tmp_path / "o.jsonl", "--quarantine", tmp_path / "q.jsonl")
    assert result.exit_code == 3, result.output
    assert "TMPDIR" in result.output


def test_a_real_full_disk_when_a_tmpfs_can_be_mounted(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        src = tmp_path / "in.jsonl"
        src.write_text("".join(json.dumps({"id": k, "text": f"{PLAIN[k % 3]} {k} " * 20})
                               + "\n" for k in range(2_000)))
        result = invoke("fix", src, "--out", mount / "clean.jsonl",
                        "--quarantine", mount / "q.jsonl")
        assert result.exit_code == 3, result.output
        assert "No space left on device" in result.output
        assert list(mount.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_datasets_folder_keeps_its_schema_and_global_rows(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    texts = ["Hello the\u200bre world.", PLAIN[0], PLAIN[1], PLAIN[0], PLAIN[2], ""]
    ds = datasets.Dataset.from_dict({"id": list(range(6)), "text": texts})
    ds.save_to_disk(str(tmp_path / "saved"), num_shards=2)
    rules = {"fields": {"text": "text", "id": "id"},
             "rules": [{"id": "invisible", "check": "invisible_unicode"},
                       {"id": "dupes", "check": "exact_duplicate"},
                       {"id": "empty", "check": "empty"}]}
    _, clean, entries = fix(tmp_path / "saved", tmp_path / "out", rules, out="clean.arrow")
    table = feather.read_table(clean)
    with pa.memory_map(str(tmp_path / "saved" / "data-00000-of-00002.arrow")) as f:
        shard = pa.ipc.open_stream(f).schema  # datasets writes Arrow IPC streams
    assert table.schema.equals(shard, check_metadata=True)
    assert table.column("id").to_pylist() == [0, 1, 2, 4]
    assert table.column("text")[0].as_py() == "Hello there world."
    assert [(e["row"], e["file"]) for e in entries] == [(3, None), (5, None)]


# -- 8. leftovers of killed runs ------------------------------------------------------------


def test_fix_sweeps_what_killed_runs_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    from tests.test_tempfiles import dead_pid

    dead = dead_pid()
    out = tmp_path / "out"
    out.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    stale = [out / f".clean.jsonl.preflight-{dead}-0.tmp.jsonl",
             out / f".rejected.jsonl.preflight-{dead}-0.tmp.jsonl",
             out / f".clean.{dead}.1.part.jsonl",  # an earlier release's name
             out / f".fix-manifest.json.{dead}.part"]
    for p in stale:
        p.write_bytes(b"x" * 1000)
    (scratch / f"preflight-fix-{dead}-abc123").mkdir()
    live = out / f".clean.jsonl.preflight-{os.getpid()}-9.tmp.jsonl"
    live.write_bytes(b"a live run's file")
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 0, "text": PLAIN[0]}) + "\n")
    fix(src, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["clean.jsonl", "rejected.jsonl", "fix-manifest.json", live.name])
    assert list(scratch.iterdir()) == []


# -- the hostile review's findings ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["device", "fifo", "symlink"])
def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 0, "text": PLAIN[0]}) + "\n")
    target = tmp_path / "special"
    if kind == "device":
        try:
            os.mknod(target, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod needs root")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        (tmp_path / "elsewhere.jsonl").write_text("keep me\n")
        target.symlink_to(tmp_path / "elsewhere.jsonl")
    before = os.lstat(target)
    result = invoke("fix", src, "--out", tmp_path / "o.jsonl", "--quarantine", target)
    assert result.exit_code == 2, result.output
    assert "--quarantine" in result.output
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_json_to_arrow_keeps_fields_the_first_record_lacks(tmp_path: Path, suffix: str) -> None:
    src = tmp_path / "in.jsonl"
    rows = [{"id": k, "text": f"{PLAIN[k % 3]} {k}"} for k in range(70_000)]
    for k in range(1, 40_000, 7):
        rows[k]["score"] = k  # only in the first chunk of 65,536, and not in record 0
    rows[69_999]["meta"] = {"s": 1}  # only in the last chunk
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rules = {"fields": {"text": "text", "id": "id"},
             "rules": [{"id": "invisible", "check": "invisible_unicode"}]}
    _, clean, entries = fix(src, tmp_path / "out", rules, out=f"clean{suffix}")
    table = pq.read_table(clean) if suffix == ".parquet" else feather.read_table(clean)
    assert entries == []
    assert table.num_rows == 70_000
    assert table.column("score").to_pylist()[:8] == [None, 1, None, None, None, None, None, None]
    assert table.column("score")[8].as_py() == 8
    assert table.column("meta")[69_999].as_py() == {"s": 1}
    assert table.column("meta")[0].as_py() is None


@pytest.mark.parametrize("value", ["12345678901234567890123", "1e400", "-18446744073709551617"])
def test_json_to_parquet_refuses_a_number_it_would_change(tmp_path: Path, value: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "text": "%s", "n": %s}\n{"id": 2, "text": "%s", "n": 1}\n'
                   % (PLAIN[0], value, PLAIN[1]))
    # text rules only: the default rules would quarantine 1e400 (infinite) as a bad number
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nrules:\n  - {id: hidden, check: invisible_unicode}\n")
    result = invoke("fix", src, "--out", tmp_path / "o.parquet", "--quarantine",
                    tmp_path / "q.jsonl", "--rules", rules)
    assert result.exit_code == 2, result.output
    assert "row 0" in result.output and "JSON Lines" in result.output
    assert not (tmp_path / "o.parquet").exists()


def test_json_to_parquet_with_nesting_arrow_cannot_hold_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "text": PLAIN[0], "x": "["}).replace(
        '"["', "[" * 64 + "]" * 64) + "\n")
    result = invoke("fix", src, "--out", tmp_path / "o.parquet", "--quarantine",
                    tmp_path / "q.jsonl")
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "JSON Lines" in result.output


def test_a_zstd_json_lines_input_is_fixed(tmp_path: Path) -> None:
    import zstandard

    body = (json.dumps({"id": 1, "text": "Zero\u200bwidth"}) + "\n"
            + json.dumps({"id": 2, "text": PLAIN[0]}) + "\n").encode()
    src = tmp_path / "in.jsonl.zst"
    src.write_bytes(zstandard.ZstdCompressor().compress(body))
    _, clean, _ = fix(src, tmp_path / "out")
    assert [json.loads(x)["text"] for x in clean.read_bytes().splitlines()] == [
        "Zerowidth", PLAIN[0]]


def test_an_unwritable_manifest_leaves_the_previous_outputs(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": k, "text": f"Zero\u200b {k}"}) + "\n"
                           for k in range(5)))
    out = tmp_path / "out"
    fix(src, out)
    previous = {p.name: p.read_bytes() for p in out.iterdir()}
    src.write_text(json.dumps({"id": 9, "text": PLAIN[0]}) + "\n")
    real_write_text = Path.write_text

    def full(self: Path, *args: Any, **kwargs: Any) -> int:
        if "fix-manifest" in self.name:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    result = invoke("fix", src, "--out", out / "clean.jsonl", "--quarantine",
                    out / "rejected.jsonl")
    assert result.exit_code == 3, result.output
    assert "fix-manifest.json" in result.output and "No space left" in result.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == previous


def test_a_parquet_shard_folder_whose_shards_differ_in_columns(tmp_path: Path) -> None:
    folder = tmp_path / "pqs"
    folder.mkdir()
    pq.write_table(pa.table({"id": [1], "text": ["Zero\u200bwidth"]}), folder / "a.parquet")
    pq.write_table(pa.table({"id": [2], "text": [PLAIN[0]], "extra": [1.5]}),
                   folder / "b.parquet")
    _, clean, _ = fix(folder, tmp_path / "out", out="clean.parquet")
    assert pq.read_table(clean).to_pylist() == [
        {"id": 1, "text": "Zerowidth", "extra": None},
        {"id": 2, "text": PLAIN[0], "extra": 1.5}]


@pytest.mark.parametrize(("body", "rows"), [
    ('[{"id":1,"text":"a"},,{"id":2,"text":"b"}]', [1]),
    ('[{"id":1,"text":"a"} {"id":2,"text":"b"}]', [1]),
    ('[{"id":1,"text":"a"},]', [1]),
    ('[{"id":1,"text":"a"}]]', [1]),
])
def test_broken_array_separators_are_malformed(tmp_path: Path, body: str,
                                               rows: list[int]) -> None:
    src = tmp_path / "in.json"
    src.write_text(body)
    passed, codes = check_codes(src)
    assert not passed
    assert [r for r, _ in codes] == rows


def test_fix_on_no_records_says_so_and_exits_1(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n\n")
    result = invoke("fix", src, "--out", tmp_path / "o.jsonl", "--quarantine",
                    tmp_path / "q.jsonl")
    assert result.exit_code == 1, result.output
    assert "no readable records" in result.output


def test_output_names_and_formats_that_disagree(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [1], "text": [PLAIN[0]]}), src)
    q = tmp_path / "q.jsonl"
    assert invoke("fix", src, "--out", tmp_path / "o.parquet", "--quarantine", q,
                  "--format", "arrow").exit_code == 2
    assert invoke("fix", src, "--out", "", "--quarantine", q).exit_code == 2
    # Parquet in, Parquet out, but under a name preflight reads back as Parquet
    result = invoke("fix", src, "--out", tmp_path / "o.dat", "--quarantine", q)
    assert result.exit_code == 2, result.output
    assert "name it" in result.output and "o.dat.parquet" in result.output
    result = invoke("fix", src, "--out", tmp_path / "o.dat.parquet", "--quarantine", q)
    assert result.exit_code == 0, result.output
    assert pq.read_table(tmp_path / "o.dat.parquet").to_pylist() == [{"id": 1,
                                                                      "text": PLAIN[0]}]


def test_the_manifest_lists_what_a_shard_folder_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.jsonl").write_text(json.dumps({"id": 0, "text": PLAIN[0]}) + "\n")
    (folder / "_SUCCESS").write_text("")
    (folder / "sub" / "notes.txt").write_text("no data here\n")  # data there is exit 3
    manifest, _, _ = fix(folder, tmp_path / "out")
    assert sorted(s["path"] for s in manifest["skipped"]) == ["_SUCCESS", "sub"]
    assert manifest["fields"]["text"] == "text"


def test_a_malformed_line_is_quarantined_exactly_as_written(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'  {oops}  \r\n' + json.dumps({"id": 1, "text": PLAIN[0]}).encode() + b"\n")
    _, _, entries = fix(src, tmp_path / "out")
    assert entries[0]["raw"] == "  {oops}  "


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_killed_fix_leaves_temporaries_the_next_run_sweeps(tmp_path: Path,
                                                             suffix: str) -> None:
    n = 150_000
    rows = [{"id": k, "text": f"{PLAIN[k % 3].replace(',', '')} Zero\u200bwidth {k}"}
            for k in range(n)]
    src = tmp_path / f"in{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), src)
    elif suffix == ".csv":
        src.write_text("id,text\n" + "".join(f"{r['id']},{r['text']}\n" for r in rows))
    else:
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    args = [sys.executable, "-m", "preflight", "fix", str(src), "--out",
            str(out / f"c{suffix}"), "--quarantine", str(out / "q.jsonl"), "--quiet"]
    kill_mid_write(args, out)
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"c{suffix}", "fix-manifest.json", "q.jsonl"])
    manifest = json.loads((out / "fix-manifest.json").read_text())
    assert manifest["balanced"] and manifest["clean"]["records"] == n
