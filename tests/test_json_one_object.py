"""A .json file that is one object holding the records ({"data": [...]}, SQuAD's layout and
what json.dump writes on one line) reads as one record or as malformed lines: the report
says why and what to do. It passed with "no text field" or with a version string as the
text, and every record inside unchecked: on one line (one record read) the gate now fails
and ``fix`` refuses (exit 3), naming the list to extract."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight import run_preflight
from preflight.cli import main

RECORDS = [{"id": i, "text": f"record {i}" + ("\u200b" if i == 1 else "")} for i in range(5)]


@pytest.mark.parametrize(("wrapper", "indent"), [
    ({"data": RECORDS}, None), ({"version": "1.0", "data": RECORDS}, None),
    ({"version": "1.0", "data": RECORDS}, 2)], ids=["one-line", "beside-a-string", "pretty"])
def test_one_object_holding_the_records_is_a_warning(tmp_path: Path, wrapper: dict,
                                                      indent: int | None) -> None:
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps(wrapper, indent=indent))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    [note] = report.source.warnings
    assert note.startswith("wrapped.json holds one JSON object, not an array of records")
    assert "jq -c '.data[]' wrapped.json" in note


def test_the_warning_names_the_key_that_holds_the_records(tmp_path: Path) -> None:
    # It always said '.data[]', whatever the key: followed, jq found nothing.
    path = tmp_path / "res.json"
    path.write_text(json.dumps({"version": 1, "results": RECORDS}))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    [note] = report.source.warnings
    assert "jq -c '.results[]' res.json" in note and ".data" not in note


def test_the_list_of_objects_is_named_when_no_text_is_inferred(tmp_path: Path) -> None:
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"rows": RECORDS}))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    why = report.rules_file.inferred["text"]
    assert why.startswith("none: 'rows' holds a list of objects") and "'.rows[]'" in why


@pytest.mark.parametrize("text", [json.dumps(RECORDS), json.dumps(RECORDS, indent=2),
                                  "\n".join(json.dumps(r) for r in RECORDS)],
                         ids=["array", "pretty-array", "json-lines"])
def test_no_warning_for_an_array_or_json_lines(tmp_path: Path, text: str) -> None:
    path = tmp_path / "records.json"
    path.write_text(text)
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.source.warnings == []
    assert report.source.records == 5


@pytest.mark.parametrize("wrapper", [
    {"data": RECORDS}, {"version": "1.0", "data": RECORDS},
    {"meta": {"source": "x", "n": [1, 2]}, "rows": RECORDS},
    {"version": "1.0", "my data": RECORDS}],
    ids=["alone", "beside-a-string", "after-an-object", "key-with-a-space"])
def test_one_line_wrapper_fails_the_gate_and_fix_refuses(tmp_path: Path,
                                                          wrapper: dict) -> None:
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps(wrapper))
    key = next(k for k, v in wrapper.items() if v is RECORDS)
    jq = f".{key}[]" if key.isidentifier() else f'.["{key}"][]'
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.source.records == 1
    assert report.verdict == "fail"
    assert report.reasons[0].startswith("wrapped.json is one JSON object whose records")
    assert f"jq -c '{jq}' {path} > records.jsonl" in report.reasons[0]
    out, quarantine = tmp_path / "clean.jsonl", tmp_path / "q.jsonl"
    result = CliRunner().invoke(main, ["fix", str(path), "--out", str(out),
                                       "--quarantine", str(quarantine)])
    assert result.exit_code == 3, result.output
    assert "records are in a list inside it" in result.output
    assert not out.exists() and not quarantine.exists()


@pytest.mark.parametrize("record", [
    {"text": "one record", "spans": [{"start": 0, "end": 3}]},
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
    {"text": "one record", "label": 1}], ids=["one-object-list", "chat", "plain"])
def test_one_record_in_a_json_file_is_a_warning_only(tmp_path: Path, record: dict) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(record))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    [note] = report.source.warnings
    assert "holds one JSON object" in note
    assert report.verdict == "pass", report.reasons


def test_json_lines_under_a_json_name_read_with_limit_1_is_not_one_object(
        tmp_path: Path) -> None:
    # One record read (--limit 1) from a file of many lines: no "one object" warning, and
    # a list of objects in that record (spans) is not records wrapped in an object.
    path = tmp_path / "lines.json"
    spans = [{"start": 0, "end": 1}, {"start": 2, "end": 3}]
    path.write_text("".join(json.dumps({"text": f"t {i}", "spans": spans}) + "\n"
                            for i in range(3)))
    report = run_preflight(path, smoke=False, out=tmp_path / "r", limit=1)
    assert report.source.records == 1
    assert report.source.warnings == []
    assert report.verdict == "pass", report.reasons


@pytest.mark.parametrize(("wrapper", "jq"), [
    ({"meta": {"v": 1}, "splits": {"train": RECORDS}}, "'.splits.train[]'"),
    ({"données": RECORDS}, """'.["données"][]'"""),
    ({"it's": RECORDS}, """'.["it'"'"'s"][]'""")],
    ids=["nested-in-an-object", "non-ascii-key", "key-with-a-quote"])
def test_the_wrapper_hint_is_a_command_jq_1_6_and_a_shell_run(tmp_path: Path, wrapper: dict,
                                                               jq: str) -> None:
    # A list one object deeper passed with nothing checked; .données is a jq 1.6 syntax
    # error, and a ' in the key ended the shell's single quotes.
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps(wrapper, ensure_ascii=False))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.verdict == "fail"
    assert f"jq -c {jq} {path} > records.jsonl" in report.reasons[0], report.reasons
    if shutil.which("jq") and shutil.which("sh"):
        command = report.reasons[0].split("e.g. ", 1)[1]
        done = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True)
        assert done.returncode == 0, done.stderr
        assert len((tmp_path / "records.jsonl").read_text().splitlines()) == len(RECORDS)


@pytest.mark.parametrize("wrapper", [{"data": ["text a", "text b"]},
                                     {"data": [{"text": "only one record"}]}],
                         ids=["list-of-strings", "list-of-one-object"])
def test_one_object_in_which_nothing_was_checked_fails(tmp_path: Path, wrapper: dict) -> None:
    # Neither a list of two objects nor a record any rule reads: it passed, nothing checked.
    path = tmp_path / "w.json"
    path.write_text(json.dumps(wrapper))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.verdict == "fail"
    # A list of strings is one column of records ({"text": [...]}: ``columnar``).
    said = ("that lays out its records as a list per field" if isinstance(wrapper["data"][0], str)
            else "and nothing in it was checked")
    assert report.reasons[0].startswith(f"w.json is one JSON object {said}")
    result = CliRunner().invoke(main, ["fix", str(path), "--out", str(tmp_path / "c.jsonl"),
                                       "--quarantine", str(tmp_path / "q.jsonl")])
    assert result.exit_code == 3, result.output


def _packed(path: Path, text: str) -> Path:
    data = text.encode()
    if path.suffix == ".gz":
        import gzip

        data = gzip.compress(data)
    elif path.suffix == ".zst":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def _refused(tmp_path: Path, args: list[str], **kw: object) -> str:
    out, quarantine = tmp_path / "clean.jsonl", tmp_path / "q.jsonl"
    result = CliRunner().invoke(main, ["fix", *args, "--out", str(out),
                                       "--quarantine", str(quarantine)], **kw)
    assert result.exit_code == 3, result.output
    assert not out.exists() and not quarantine.exists()
    return " ".join(result.output.split())


@pytest.mark.parametrize("name", ["train.json.gz", "train.json.zst", "train.jsonl",
                                  "train.jsonl.gz", "records.jsonl"])
def test_a_compressed_json_or_a_one_line_json_lines_wrapper_fails_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # Read as one record, it passed with none of the records inside checked: a .json.gz
    # (the warning read the compressed bytes), or json.dump's output under a .jsonl name.
    monkeypatch.chdir(tmp_path)
    path = _packed(tmp_path / name, json.dumps({"version": "1.0", "data": RECORDS}))
    report = run_preflight(name, smoke=False, out=tmp_path / "r")
    assert report.source.records == 1
    assert report.verdict == "fail"
    reason = report.reasons[0]
    assert reason.startswith(f"{name} is one JSON object whose records are in a list")
    if shutil.which("jq") and shutil.which("sh") and shutil.which("zstd"):
        command = reason.split("e.g. ", 1)[1]
        done = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True)
        assert done.returncode == 0, done.stderr
        written = command.rsplit("> ", 1)[1]
        assert written != name  # "> records.jsonl" emptied the input before jq read it
        assert len((tmp_path / written).read_text().splitlines()) == len(RECORDS)
    assert "records are in a list inside it" in _refused(tmp_path, [str(path)])


def test_a_folder_of_one_wrapped_shard_fails_and_fix_refuses(tmp_path: Path) -> None:
    # Was an internal error: the wrapper's list was looked for in the folder, not the file.
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps({"data": RECORDS}))
    report = run_preflight(folder, smoke=False, out=tmp_path / "r")
    assert report.verdict == "fail"
    assert report.reasons[0].startswith("a.json is one JSON object whose records")
    assert f"jq -c '.data[]' {folder / 'a.json'} > records.jsonl" in report.reasons[0]
    assert "a.json is one JSON object" in _refused(tmp_path, [str(folder)])


def test_a_wrapper_piped_into_standard_input_fails_and_fix_refuses(tmp_path: Path) -> None:
    data = json.dumps({"version": "1.0", "data": RECORDS}).encode()
    out = tmp_path / "r"
    result = CliRunner().invoke(main, ["check", "-", "--no-smoke", "--out", str(out)],
                                input=data)
    assert result.exit_code == 1, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["reasons"][0].startswith("standard input is one JSON object whose records")
    assert "piping it through jq -c '.data[]' > records.jsonl" in report["reasons"][0]
    said = _refused(tmp_path, ["-"], input=data)
    assert "standard input is one JSON object" in said and "preflight-stdin" not in said


@pytest.mark.parametrize("record", [
    {"text": "one record", "spans": [{"start": 0, "end": 3}]},
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
    {"text": "one record", "label": 1}], ids=["one-object-list", "chat", "plain"])
def test_one_record_in_a_json_lines_file_passes(tmp_path: Path, record: dict) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(record) + "\n")
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.source.warnings == []
    assert report.verdict == "pass", report.reasons


def test_one_json_lines_record_read_with_limit_1_is_not_a_wrapper(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    spans = [{"start": 0, "end": 1}, {"start": 2, "end": 3}]
    path.write_text("".join(json.dumps({"text": f"t {i}", "spans": spans}) + "\n"
                            for i in range(3)))
    report = run_preflight(path, smoke=False, out=tmp_path / "r", limit=1)
    assert report.verdict == "pass", report.reasons


def test_one_json_lines_record_checked_for_its_shape_only_passes(tmp_path: Path) -> None:
    # JSON Lines of one record is a corpus of one: with a rules file running `schema`
    # alone it is not "one JSON object in which nothing was checked".
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": "r0", "features": [0.5, 1.5], "target": 2.0}) + "\n")
    rules = {"fields": {"features": "features", "target": "target", "id": "id"},
             "rules": [{"id": "schema", "check": "schema"}]}
    report = run_preflight(path, rules=rules, smoke=False, out=tmp_path / "r")
    assert report.verdict == "pass", report.reasons


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_one_record_with_a_text_and_a_list_of_spans_is_a_record(tmp_path: Path,
                                                                suffix: str) -> None:
    # Its text was read (inferred by name), yet it failed as "records wrapped in 'spans'".
    path = tmp_path / f"one{suffix}"
    path.write_text(json.dumps({"text": "John lives in Paris", "spans": [
        {"start": 0, "end": 4, "label": "PER"}, {"start": 14, "end": 19, "label": "LOC"}]}))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    assert report.verdict == "pass", report.reasons
