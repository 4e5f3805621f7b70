"""A text input in UTF-16 or UTF-32 (PowerShell's ``>``, Excel's "Unicode text") read as
UTF-8: every JSON line was malformed and a CSV header "not valid UTF-8", with no word of
why. Its byte-order mark says what it is: exit 3 with the command that converts it, for a
file of every text format, a shard in a folder, ``fix`` and standard input alike."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight.cli import main

RECORDS = [{"text": f"record {i}", "label": i % 2} for i in range(4)]
TEXTS = {
    "d.jsonl": "".join(json.dumps(r) + "\n" for r in RECORDS),
    "d.json": json.dumps(RECORDS),
    "d.csv": "text,label\n" + "".join(f"{r['text']},{r['label']}\n" for r in RECORDS),
    "d.tsv": "text\tlabel\n" + "".join(f"{r['text']}\t{r['label']}\n" for r in RECORDS),
}


def _said(result: object) -> str:
    return " ".join(result.output.split())  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", list(TEXTS))
@pytest.mark.parametrize(("codec", "said"), [
    ("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_wide_text_file_is_exit_3_saying_how_to_convert(tmp_path: Path, name: str,
                                                          codec: str, said: str) -> None:
    path = tmp_path / name
    bom = "\ufeff" if codec.endswith("-be") else ""  # the -be codec writes no mark itself
    path.write_bytes((bom + TEXTS[name]).encode(codec))
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out",
                                       str(tmp_path / "r")])
    assert result.exit_code == 3, result.output
    assert f"is {said} text (it starts with a byte-order mark)" in _said(result)
    assert f"iconv -f {said} -t UTF-8" in _said(result)
    fixed = CliRunner().invoke(main, ["fix", str(path), "--out", str(tmp_path / "c.jsonl"),
                                      "--quarantine", str(tmp_path / "q.jsonl")])
    assert fixed.exit_code == 3, fixed.output
    assert not (tmp_path / "c.jsonl").exists()


def test_one_wide_shard_in_a_folder_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "a.jsonl").write_text(TEXTS["d.jsonl"], encoding="utf-8")
    (folder / "b.jsonl").write_bytes(TEXTS["d.jsonl"].encode("utf-16"))
    result = CliRunner().invoke(main, ["check", str(folder), "--no-smoke", "--out",
                                       str(tmp_path / "r")])
    assert result.exit_code == 3, result.output
    assert "b.jsonl is UTF-16 text" in _said(result)


@pytest.mark.parametrize("head", [b"\xef\xbb\xbf", b""], ids=["utf-8-bom", "plain"])
def test_utf8_with_or_without_its_mark_is_read(tmp_path: Path, head: bytes) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(head + TEXTS["d.jsonl"].encode())
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out",
                                       str(tmp_path / "r"), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["source"]["records"] == 4 and report["source"]["malformed"] == 0


@pytest.mark.parametrize("name", list(TEXTS))
@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_wide_text_with_no_mark_is_exit_3_too(tmp_path: Path, name: str, codec: str) -> None:
    # Python's encode("utf-16-le") and .NET write no mark: every line was malformed (exit 1).
    path = tmp_path / name
    path.write_bytes(TEXTS[name].encode(codec))
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out",
                                       str(tmp_path / "r")])
    assert result.exit_code == 3, result.output
    assert f"iconv -f {codec.upper().replace('-LE', 'LE').replace('-BE', 'BE')} -t UTF-8" \
        in _said(result)


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_compressed_wide_text_is_exit_3_on_a_file_and_standard_input(tmp_path: Path,
                                                                       suffix: str) -> None:
    # The mark is inside the compression: the first bytes read were gzip's or zstd's.
    import gzip

    import zstandard

    raw = TEXTS["d.jsonl"].encode("utf-16")
    packed = gzip.compress(raw) if suffix == ".gz" else zstandard.compress(raw)
    path = tmp_path / f"d.jsonl{suffix}"
    path.write_bytes(packed)
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out",
                                       str(tmp_path / "r")])
    assert result.exit_code == 3, result.output
    assert "is UTF-16 text (it starts with a byte-order mark)" in _said(result)
    piped = CliRunner().invoke(main, ["check", "-", "--no-smoke", "--out",
                                      str(tmp_path / "s")], input=packed)
    assert piped.exit_code == 3, piped.output
    assert "standard input is UTF-16 text" in _said(piped)


@pytest.mark.skipif(not shutil.which("iconv"), reason="no iconv on this machine")
@pytest.mark.parametrize("name", ["my data.jsonl", "d.csv.gz", "d.jsonl.zst"])
def test_the_suggested_conversion_runs_as_written(tmp_path: Path, name: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The hint said only "iconv -f UTF-16 -t UTF-8": no file, and on a .gz not a command
    # that works. Now it is one to paste: run in the folder, it writes a file that passes.
    import gzip

    import zstandard

    text = (TEXTS["d.csv"] if ".csv" in name else TEXTS["d.jsonl"]).encode("utf-16")
    packed = {".gz": gzip.compress, ".zst": zstandard.compress}.get(Path(name).suffix)
    (tmp_path / name).write_bytes(packed(text) if packed else text)
    monkeypatch.chdir(tmp_path)  # the hint names the file as given
    result = CliRunner().invoke(main, ["check", name, "--no-smoke", "--out", "r"])
    assert result.exit_code == 3, result.output
    command = result.output.split("e.g. ", 1)[1].split(" (in PowerShell")[0]
    command = " ".join(command.split())  # the console's line breaks
    subprocess.run(["sh", "-c", command], cwd=tmp_path, check=True)
    converted = next(p for p in tmp_path.iterdir() if ".utf8." in p.name)
    again = CliRunner().invoke(main, ["check", str(converted), "--no-smoke", "--out",
                                      str(tmp_path / "r2"), "--format", "json"])
    assert again.exit_code == 0, again.output
