"""Sources a pipeline hands over that the API used to crash on: file and folder names
that are not UTF-8 (POSIX allows any bytes; Python holds them as surrogates) and a
streamed ``datasets.IterableDataset``."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from preflight import ConfigError, InputError, run_preflight
from preflight.cli import main

ZW = "\u200b"
posix_bytes = pytest.mark.skipif(sys.platform != "linux", reason="file names of any bytes")


def _name(folder: Path, raw: bytes) -> Path:
    return Path(os.fsdecode(os.path.join(os.fsencode(folder), raw)))


def _jsonl(path: Path, texts: list[str]) -> Path:
    with open(os.fsencode(path), "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts)
    return path


@posix_bytes
def test_an_input_named_in_latin_1_is_checked_and_its_report_written(tmp_path: Path) -> None:
    """It was an internal error (UnicodeEncodeError) hashing the name, then writing the
    report: a gate with no report at all."""
    data = _jsonl(_name(tmp_path, b"caf\xe9.jsonl"), ["fine", f"hid{ZW}den"])
    out = tmp_path / "out"
    report = run_preflight(data, smoke=False, out=out, formats="json,md,html,junit")
    assert report.verdict == "fail" and report.source.records == 2
    saved = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert saved["source"]["path"].endswith("caf\\xe9.jsonl")  # its bytes, escaped
    assert "caf\\xe9.jsonl" in (out / "report.md").read_text(encoding="utf-8")
    assert report.source.path == str(data)  # the Python value stays the real name


@posix_bytes
def test_a_shard_named_in_latin_1_is_named_in_findings_parquet(tmp_path: Path) -> None:
    """Arrow strings are UTF-8: the findings file failed to build."""
    folder = tmp_path / "shards"
    folder.mkdir()
    _jsonl(folder / "a.jsonl", ["fine"])
    _jsonl(_name(folder, b"p\xe9rt.jsonl"), [f"hid{ZW}den"])
    report = run_preflight(folder, smoke=False, out=tmp_path / "out")
    assert report.findings().get_column("file").to_list() == ["p\\xe9rt.jsonl"]
    result = CliRunner().invoke(main, ["check", str(folder), "--no-smoke", "--json",
                                       "--out", str(tmp_path / "out2")])
    assert result.exit_code == 1, result.output
    assert "p\\\\xe9rt.jsonl" in result.output


@posix_bytes
def test_an_out_folder_not_in_utf_8_is_refused_before_the_scan(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "data.jsonl", ["fine"])
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        run_preflight(data, smoke=False, out=_name(tmp_path, b"o\xff"))


def test_a_streamed_iterable_dataset_is_read() -> None:
    """It has no ``num_rows``: an AttributeError from inside."""
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": ["fine", f"hid{ZW}den", "more"]})
    report = run_preflight(ds.to_iterable_dataset(num_shards=2), smoke=False)
    assert report.source.records == 3
    rows = report.findings().filter(pl.col("code") == "zero_width_space")["row"].to_list()
    assert rows == [1]




def test_a_relative_path_not_found_says_where_it_was_looked_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipeline worker's working directory is rarely the one the path was written for."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=rf"data/train.jsonl \(relative to the working "
                                         rf"directory {re.escape(str(tmp_path))}\)"):
        run_preflight("data/train.jsonl", smoke=False)
    with pytest.raises(InputError) as absolute:
        run_preflight(tmp_path / "train.jsonl", smoke=False)
    assert "(relative to" not in str(absolute.value)
