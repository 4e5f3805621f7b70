"""Compressed or columnar bytes under a plain text name (a download that lost its ``.gz``,
a Parquet file saved as ``.json``) or bzip2/xz/zip piped into ``-``: read as text, every
line was a ``malformed`` finding (``invalid_utf8``) or a CSV header "not valid UTF-8",
exit 1 with no word of why. Now exit 3 saying what the bytes are and the command that
makes them readable, which runs as written."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from click.testing import CliRunner

from preflight.cli import main

RECORDS = [{"text": f"record {i}", "label": i % 2} for i in range(4)]
TEXTS = {
    "d.jsonl": "".join(json.dumps(r) + "\n" for r in RECORDS),
    "d.json": json.dumps(RECORDS),
    "d.csv": "text,label\n" + "".join(f"{r['text']},{r['label']}\n" for r in RECORDS),
}
PACKERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "zstd": zstandard.ZstdCompressor().compress,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
}


def _said(result: object) -> str:
    return " ".join(result.output.split())  # type: ignore[attr-defined]


def _check(path: Path | str, tmp_path: Path, **kw: object) -> object:
    return CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--out",
                                     str(tmp_path / "r")], **kw)


@pytest.mark.parametrize("name", list(TEXTS))
@pytest.mark.parametrize("kind", list(PACKERS))
def test_compressed_bytes_under_a_text_name_are_exit_3(tmp_path: Path, name: str,
                                                       kind: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(PACKERS[kind](TEXTS[name].encode()))
    result = _check(name, tmp_path)
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    said = _said(result)
    assert f"{name} is {kind}-compressed, but its name does not say so" in said
    fixed = CliRunner().invoke(main, ["fix", name, "--out", "c.jsonl", "--quarantine",
                                      "q.jsonl"])
    assert fixed.exit_code == 3, fixed.output
    assert not (tmp_path / "c.jsonl").exists()
    command = said.split("e.g. ", 1)[1]
    tools = {"gzip": "mv", "zstd": "mv", "bzip2": "bunzip2", "xz": "unxz"}
    if shutil.which("sh") and shutil.which(tools[kind]):
        done = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True)
        assert done.returncode == 0, done.stderr
        readable = command.split()[2] if kind in ("gzip", "zstd") else name
        assert _check(readable, tmp_path).exit_code == 0  # type: ignore[attr-defined]


def test_parquet_bytes_under_a_json_name_are_exit_3(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(RECORDS), buffer)
    (tmp_path / "d.json").write_bytes(buffer.getvalue())
    result = _check(tmp_path / "d.json", tmp_path)
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    assert f"holds Parquet data, not text: rename it, e.g. mv {tmp_path / 'd.json'} " \
           f"{tmp_path / 'd.parquet'}" in _said(result)


def test_a_csv_header_starting_par1_is_read(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("PAR1,text\n1,hello\n2,world\n")
    assert _check(tmp_path / "d.csv", tmp_path).exit_code == 0  # type: ignore[attr-defined]


def test_one_misnamed_shard_in_a_folder_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "a.jsonl").write_text(TEXTS["d.jsonl"])
    (folder / "b.jsonl").write_bytes(gzip.compress(TEXTS["d.jsonl"].encode()))
    result = _check(folder, tmp_path)
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    assert "b.jsonl is gzip-compressed" in _said(result)


def _zipped(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("d.jsonl", data)
    return buffer.getvalue()


@pytest.mark.parametrize(("kind", "pack", "command"), [
    ("bzip2", bz2.compress, "bzcat data.jsonl.bz2 | preflight check -"),
    ("xz", lzma.compress, "xzcat data.jsonl.xz | preflight check -"),
    ("zip", _zipped, "unzip -p data.zip | preflight check -")])
def test_bzip2_xz_or_zip_piped_into_standard_input_is_exit_3(
        tmp_path: Path, kind: str, pack: Callable[[bytes], bytes], command: str) -> None:
    result = _check("-", tmp_path, input=pack(TEXTS["d.jsonl"].encode()))
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    assert f"standard input is {kind}-compressed" in _said(result)
    assert command in _said(result)


@pytest.mark.parametrize(("data", "says"), [
    (bz2.compress(TEXTS["d.jsonl"].encode()), "bzcat data.jsonl.bz2 | preflight fix -"),
    (b"", "e.g. cat data.jsonl | preflight fix -")])
def test_fix_from_standard_input_names_fix_in_its_hint(tmp_path: Path, data: bytes,
                                                       says: str) -> None:
    # The hint said `| preflight check -` to a user running fix: followed, it checked and
    # wrote no clean copy.
    result = CliRunner().invoke(main, ["fix", "-", "--out", str(tmp_path / "c.jsonl"),
                                       "--quarantine", str(tmp_path / "q.jsonl")], input=data)
    assert result.exit_code == 3, result.output
    assert says in _said(result) and "preflight check -" not in _said(result)


def test_an_arrow_stream_under_a_text_name_or_piped_is_exit_3(tmp_path: Path) -> None:
    # A `datasets` cache file is an Arrow IPC stream: under a .jsonl name, as a shard or
    # piped into '-', it was exit 1 with every line invalid_utf8 and no word of why.
    table = pa.table({"text": [f"record {i}" for i in range(4)]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data = sink.getvalue().to_pybytes()
    (tmp_path / "st.jsonl").write_bytes(data)
    result = _check(tmp_path / "st.jsonl", tmp_path)
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    assert "st.jsonl holds Arrow stream data, not text: rename it" in _said(result)
    piped = _check("-", tmp_path, input=data)
    assert piped.exit_code == 3, piped.output  # type: ignore[attr-defined]
    assert "standard input holds an Arrow stream" in _said(piped)
    (tmp_path / "st.arrow").write_bytes(data)  # named as what it is: read
    named = _check(tmp_path / "st.arrow", tmp_path)
    assert named.exit_code == 0, named.output  # type: ignore[attr-defined]


@pytest.mark.parametrize(("name", "kind", "says"), [
    ("b.parquet", "stream", "b.parquet holds Arrow stream data, not Parquet: rename it, e.g. mv"),
    ("b.parquet", "file", "b.parquet holds Arrow data, not Parquet: rename it, e.g. mv"),
    ("b.arrow", "parquet", "b.arrow holds Parquet data, not Arrow IPC: rename it, e.g. mv")])
@pytest.mark.parametrize("alone", [True, False])
def test_one_columnar_format_under_the_others_name_is_named(
        tmp_path: Path, name: str, kind: str, says: str, alone: bool) -> None:
    # An Arrow stream (a datasets cache file) named .parquet, alone or as a shard among
    # Parquet files, was exit 3 with only "Parquet magic bytes not found in footer".
    table = pa.table({"text": [f"record {i}" for i in range(4)]})
    folder = tmp_path / "shards"
    folder.mkdir()
    if not alone:  # a well-named shard beside it, of the format its name says
        other = folder / f"a{Path(name).suffix}"
        if other.suffix == ".parquet":
            pq.write_table(table, other)
        else:
            with pa.ipc.new_file(str(other), table.schema) as writer:
                writer.write_table(table)
    path = folder / name
    if kind == "parquet":
        pq.write_table(table, path)
    else:
        opener = pa.ipc.new_stream if kind == "stream" else pa.ipc.new_file
        with opener(str(path), table.schema) as writer:
            writer.write_table(table)
    result = _check(path if alone else folder, tmp_path)
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    assert says in _said(result)


@pytest.mark.parametrize(("odd", "holds", "renamed"), [
    ("part-1.jsonl", "Parquet", "part-1.parquet"),  # a Parquet shard renamed .jsonl
    ("part-1.parquet", "JSON Lines", "part-1.jsonl")])  # among JSON Lines shards
def test_a_shard_whose_bytes_do_not_match_its_suffix_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: str, holds: str,
        renamed: str) -> None:
    # The folder used to be said to "mix formats", with no word of which file or why.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shards").mkdir()
    parquet = odd.endswith(".jsonl")
    for k in range(3):
        name = odd if k == 1 else f"part-{k}.{'parquet' if parquet else 'jsonl'}"
        if parquet:
            pq.write_table(pa.Table.from_pylist(RECORDS), tmp_path / "shards" / name)
        else:
            (tmp_path / "shards" / name).write_text(TEXTS["d.jsonl"])
    result = _check("shards", tmp_path)
    assert result.exit_code == 3, result.output  # type: ignore[attr-defined]
    said = _said(result)
    assert f"shards/{odd} holds {holds} data" in said
    assert f"mv shards/{odd} shards/{renamed}" in said
    (tmp_path / "shards" / odd).rename(tmp_path / "shards" / renamed)
    assert _check("shards", tmp_path).exit_code == 0  # type: ignore[attr-defined]


HIDDEN = [{"id": i, "text": f"record {i}\u200b caf\u00c3\u00a9"} for i in range(5)] + [
    {"id": 9, "text": ""}]
JSON_UNDER_CSV = {
    "jsonl": "".join(json.dumps(r) + "\n" for r in HIDDEN),  # \u200b escaped: ASCII
    "array": json.dumps(HIDDEN, indent=2),
    "one-line array": "\n" + json.dumps(HIDDEN),
    "pretty objects": "".join(json.dumps(r, indent=2) + "\n" for r in HIDDEN),
}


@pytest.mark.parametrize("name", ["d.csv", "d.tsv", "d.csv.gz", "shards/b.csv"])
@pytest.mark.parametrize("layout", list(JSON_UNDER_CSV))
def test_json_under_a_csv_name_is_exit_3_not_a_pass(tmp_path: Path, name: str, layout: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # Read as CSV, the first record was the header and every other one a cell of JSON whose
    # escapes hid the zero-width spaces and mojibake: the gate passed (exit 0) on them.
    monkeypatch.chdir(tmp_path)
    path = Path(name)
    path.parent.mkdir(exist_ok=True)
    data = JSON_UNDER_CSV[layout].encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    target = Path(name.replace(".csv", "{}").replace(".tsv", "{}"))
    if name.startswith("shards/"):
        (path.parent / "a.csv").write_text("id,text\n1,fine\n")
    given = str(path.parent if name.startswith("shards/") else path)
    kind, suffix = {"jsonl": ("JSON Lines", ".jsonl"),
                    "pretty objects": ("JSON", ".json")}.get(layout, ("a JSON array", ".json"))
    for command in (["check", given, "--no-smoke", "--out", "r"],
                    ["fix", given, "--out", "clean.jsonl", "--quarantine", "q.jsonl"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 3, result.output
        said = _said(result)
        assert f"{name} holds {kind}, not CSV" in said
        told = (f"mv {name} {str(target).format(suffix)}" if layout != "pretty objects"
                else f"| jq -c . > {name.replace('.csv.gz', '.jsonl')}" if name.endswith(".gz")
                else f"jq -c . {name} > {str(target).format('.jsonl')}")
        assert told in said
        assert not Path("clean.jsonl").exists()
    if not name.startswith("shards/"):  # done as told, its faults are found
        if layout == "pretty objects":
            if shutil.which("jq") is None:
                return
            subprocess.run(said.split("e.g. ", 1)[1], shell=True, check=True)
            fixed = name.replace(".csv.gz", ".jsonl").replace(".csv", ".jsonl").replace(
                ".tsv", ".jsonl")
        else:
            fixed = str(target).format(suffix)
            shutil.move(name, fixed)
        result = _check(fixed, tmp_path)
        assert result.exit_code == 1 and "zero_width_space=5" in _said(result), _said(result)


@pytest.mark.parametrize("header", ["{id},text", "[CLS],text", "[],text", "{},text"])
def test_a_csv_whose_header_starts_with_a_bracket_is_read(tmp_path: Path,
                                                          header: str) -> None:
    (tmp_path / "d.csv").write_text(f"{header}\n1,a\u200b\n")
    result = _check(tmp_path / "d.csv", tmp_path)
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]
    assert "zero_width_space=1" in _said(result)
