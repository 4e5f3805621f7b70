"""``-`` reads JSON Lines from standard input (issue 16, item 8): spooled to a temporary
file so the second reads (near-duplicate confirmation, fix) work; rows are line numbers
minus one; bad input is a clear exit 3."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight.cli import main

ZW = "\u200b"
NEAR = "the quick brown fox jumps over the lazy dog near the river bank today"


def lines(records: list[object]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


@pytest.fixture(autouse=True)
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def check(data: bytes, tmp_path: Path, *args: str) -> tuple[int, str, dict | None]:
    out = tmp_path / "r"
    result = CliRunner().invoke(main, ["check", "-", "--no-smoke", "--out", str(out), *args],
                                input=data)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() \
        else None
    return result.exit_code, result.output, report


def test_stdin_rows_are_line_numbers_and_the_spool_is_removed(tmp_path: Path,
                                                              own_tmp: Path) -> None:
    data = lines([{"text": "a"}]) + b"\n" + lines([{"text": f"hid{ZW}den"}, {"text": "b"}])
    code, output, report = check(data, tmp_path)
    assert code == 1, output
    assert report is not None and report["source"]["path"] == "-"
    hidden = next(r for r in report["rules"] if r["check"] == "invisible_unicode")
    assert [e["row"] for e in hidden["examples"]] == [2]  # the blank line 2 keeps its number
    assert list(own_tmp.iterdir()) == []


def test_stdin_near_duplicates_are_confirmed_on_a_second_read(tmp_path: Path) -> None:
    data = lines([{"text": NEAR}, {"text": "something else entirely, not alike at all"},
                  {"text": NEAR + " again"}])
    _, output, report = check(data, tmp_path, "--preset", "pretrain-text")
    assert report is not None, output
    near = next(r for r in report["rules"] if r["check"] == "near_duplicate")
    assert [(e["row"], e["code"]) for e in near["examples"]] == [(2, "near_duplicate_of")]


def test_stdin_gzip_is_decompressed(tmp_path: Path) -> None:
    code, output, report = check(gzip.compress(lines([{"text": "a"}, {"text": "b"}])), tmp_path)
    assert code == 0, output
    assert report is not None and report["source"]["records"] == 2


def test_invalid_utf8_on_stdin_is_a_malformed_row(tmp_path: Path) -> None:
    data = lines([{"text": "a"}]) + b'{"text": "caf\xe9"}\n' + lines([{"text": "b"}])
    code, output, report = check(data, tmp_path)
    assert code == 1
    assert "row 1 invalid_utf8: byte 0xE9 at byte 13 is not valid UTF-8" in output
    assert report is not None and report["source"]["records"] == 2


@pytest.mark.parametrize(("data", "message"), [
    (b"", "standard input is empty: pipe JSON Lines into it, e.g. "
          "cat data.jsonl | preflight check -"),
    ('{"text": "a"}\n'.encode("utf-16"),
     "standard input is UTF-16 text (it starts with a byte-order mark); preflight reads "
     "UTF-8: convert it first, e.g. iconv -f UTF-16 -t UTF-8 (in PowerShell, Out-File "
     "-Encoding utf8)"),
    (b"PAR1\x00\x00", "standard input holds a Parquet file; give its path instead of -; "
                      "'-' reads JSON Lines (UTF-8)"),
])
def test_bad_stdin_is_exit_3_with_what_to_do(tmp_path: Path, data: bytes, message: str) -> None:
    code, output, _ = check(data, tmp_path)
    assert code == 3
    assert " ".join(output.split()) == f"error: {message}"


def test_fix_reads_stdin(tmp_path: Path) -> None:
    out, quarantine = tmp_path / "clean.jsonl", tmp_path / "q.jsonl"
    data = lines([{"text": "a"}, {"text": f"hid{ZW}den"}, {"text": "a"}])
    result = CliRunner().invoke(main, ["fix", "-", "--out", str(out), "--quarantine",
                                       str(quarantine)], input=data)
    assert result.exit_code == 0, result.output
    kept = [json.loads(x) for x in out.read_text().splitlines()]
    dropped = [json.loads(x) for x in quarantine.read_text().splitlines()]
    assert len(kept) + len(dropped) == 3  # nothing lost
    assert {"text": "hidden"} in kept


def test_real_pipe_into_the_cli(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "preflight", "check", "-", "--no-smoke",
                           "--out", str(tmp_path / "r"), "--no-progress"],
                          input=lines([{"text": "a"}, {"text": "b"}]), capture_output=True,
                          timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r" / "report.json").read_text())["source"]["records"] == 2


@pytest.mark.parametrize(("args", "message"), [
    (["fix", "-", "--out", "-", "--quarantine", "q.jsonl"],
     "- means standard input for DATA; name a file for --out"),
    (["fix", "-", "--out", "clean.jsonl", "--quarantine", "-"],
     "- means standard input for DATA; name a file for --quarantine"),
    (["fix", "-", "--out", "clean.jsonl", "--quarantine", "q.jsonl", "--manifest", "-"],
     "- means standard input for DATA; name a file for --manifest"),
    (["check", "-", "--no-smoke", "--out", "-"],
     "- means standard input for DATA; name a folder for --out"),
    (["smoke", "-", "--out", "-"], "- means standard input for DATA; name a folder for --out"),
    (["init", "data.jsonl", "--out", "-"],
     "- means standard input for DATA; name a file for --out"),
])
def test_dash_as_an_output_is_exit_2_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.jsonl").write_bytes(lines([{"text": "a"}]))
    monkeypatch.chdir(work)
    result = CliRunner().invoke(main, args, input=lines([{"text": "a"}, {"text": "b"}]))
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()) == f"error: {message}"
    assert sorted(p.name for p in work.iterdir()) == ["data.jsonl"]  # no file named -


def test_delimiter_with_stdin_is_exit_2_naming_stdin_not_the_spool(tmp_path: Path,
                                                                   own_tmp: Path) -> None:
    message = "error: standard input (-) is read as JSON Lines; --delimiter applies to CSV files"
    code, output, report = check(lines([{"text": "a"}]), tmp_path, "--delimiter", ";")
    assert (code, " ".join(output.split()), report) == (2, message, None)
    result = CliRunner().invoke(main, ["fix", "-", "--delimiter", ";", "--out",
                                       str(tmp_path / "c.jsonl"), "--quarantine",
                                       str(tmp_path / "q.jsonl")], input=lines([{"text": "a"}]))
    assert (result.exit_code, " ".join(result.output.split())) == (2, message)
    assert list(own_tmp.iterdir()) == []  # nothing was spooled


def test_init_of_stdin_says_it_needs_a_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", "-", "--out", str(tmp_path / "r.yaml")],
                                input=lines([{"text": "a"}]))
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()) == (
        "error: preflight init needs a file: - (standard input) is for check, smoke and fix; "
        "save the data to a file and pass its path")
    assert not (tmp_path / "r.yaml").exists()


CSV_NOTE = "standard input is read as JSON Lines only; save CSV to a file and pass its path"


@pytest.mark.parametrize("sep", [",", ";", "\t"])
def test_csv_on_stdin_gets_one_note(tmp_path: Path, sep: str) -> None:
    csv = "".join(f"row {i} text{sep}{i % 3}\n" for i in range(8))
    code, output, report = check(f"text{sep}label\n{csv}".encode(), tmp_path)
    assert code == 1
    assert report is not None and report["source"]["warnings"] == [CSV_NOTE]
    assert output.count("save CSV to a file") == 1
    assert f"warning: {CSV_NOTE}" in " ".join(output.split())


@pytest.mark.parametrize("data", [
    # mostly JSON, a few broken lines: no note
    lines([{"text": "a,b"}, {"text": "c;d"}]) + b"x,y\n",
    # most lines broken, but the first is JSON: not CSV
    lines([{"text": "a"}]) + b"x,y\nz,w\nu,v\n",
    # most lines broken, no delimiter in the first: not CSV
    b"just words\nmore words\n",
])
def test_no_csv_note_where_stdin_is_not_csv(tmp_path: Path, data: bytes) -> None:
    _, output, report = check(data, tmp_path)
    assert report is not None, output
    assert report["source"]["warnings"] == []
    assert "save CSV to a file" not in output


ARRAY_NOTE = ("standard input is read as JSON Lines only (one object per line); if it holds a "
              "JSON array, save it to a .json file and pass its path")


@pytest.mark.parametrize("data", [
    json.dumps([{"text": f"record {i}"} for i in range(5)]).encode(),  # one line
    json.dumps([{"text": f"record {i}"} for i in range(5)], indent=2).encode(),  # pretty
    b"\xef\xbb\xbf\n  " + json.dumps([{"text": "a"}, {"text": "b"}]).encode(),  # BOM, blanks
])
def test_a_json_array_on_stdin_gets_one_note(tmp_path: Path, data: bytes) -> None:
    code, output, report = check(data, tmp_path)
    assert code == 1
    assert report is not None and report["source"]["warnings"] == [ARRAY_NOTE]
    assert " ".join(output.split()).count(f"warning: {ARRAY_NOTE}") == 1


def test_json_lines_of_lists_mostly_fine_get_no_array_note(tmp_path: Path) -> None:
    # a first line that is a list, then records: most lines are objects, no note
    data = b'[1, 2]\n' + lines([{"text": f"t {i}"} for i in range(4)])
    _, output, report = check(data, tmp_path)
    assert report is not None, output
    assert report["source"]["warnings"] == []
    assert ".json file" not in output


def test_a_full_disk_while_copying_stdin_is_exit_3_naming_where(
        tmp_path: Path, own_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import shutil

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", full)
    code, output, report = check(lines([{"text": "a"}] * 3), tmp_path)
    assert code == 3 and report is None
    assert "cannot copy standard input to" in output and str(own_tmp) in output
    assert "No space left on device" in output and "TMPDIR" in output
    assert "Traceback" not in output
    assert list(own_tmp.iterdir()) == []  # the spool's folder is gone
