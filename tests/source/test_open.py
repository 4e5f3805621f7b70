"""Choosing a reader: folders of shards, ``datasets`` folders and objects, bad paths,
and the fingerprint of what was read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from preflight.batch import Batch
from preflight.cli import main
from preflight.errors import InputError
from preflight.source import open_source
from tests.source.helpers import values


def read(obj: Any) -> list[Batch]:
    return list(open_source(obj).batches())


def located(batches: list[Batch]) -> list[tuple[str | None, int]]:
    return [(b.file, int(r)) for b in batches for r in b.rows]




def test_folder_of_jsonl_shards_restarts_rows_and_names_files(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"i": 0}\n{"i": 1}\n')
    (tmp_path / "b.jsonl").write_text('{"i": 2}\n\nbroken\n{"i": 3}\n')
    (tmp_path / "c.jsonl").write_text('{"i": 4}\n')
    batches = read(tmp_path)
    assert located(batches) == [("a.jsonl", 0), ("a.jsonl", 1), ("b.jsonl", 0), ("b.jsonl", 3),
                                ("c.jsonl", 0)]
    assert values(batches, "i") == [0, 1, 2, 3, 4]
    assert [(b.file, m.row, m.code) for b in batches for m in b.malformed] == [
        ("b.jsonl", 2, "invalid_json")]


def test_folder_mixing_formats_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"i": 0}\n')
    pq.write_table(pa.table({"i": [1]}), tmp_path / "b.parquet")
    with pytest.raises(InputError):
        open_source(tmp_path)


def test_empty_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        open_source(tmp_path)


def _dataset() -> datasets.Dataset:
    return datasets.Dataset.from_dict({"text": [f"t{i}" for i in range(10)],
                                       "label": list(range(10))})


@pytest.mark.parametrize("shards", [1, 3])
def test_saved_dataset_folder_has_global_rows(tmp_path: Path, shards: int) -> None:
    _dataset().save_to_disk(str(tmp_path / "ds"), num_shards=shards)
    batches = read(tmp_path / "ds")
    assert located(batches) == [(None, i) for i in range(10)]
    assert values(batches, "text") == [f"t{i}" for i in range(10)]
    assert values(batches, "label") == list(range(10))


def test_dataset_object_is_read_directly() -> None:
    batches = read(_dataset())
    assert located(batches) == [(None, i) for i in range(10)]
    assert values(batches, "text") == [f"t{i}" for i in range(10)]


def test_dataset_dict_folder_is_an_input_error_naming_a_split(tmp_path: Path) -> None:
    datasets.DatasetDict({"train": _dataset(), "test": _dataset()}).save_to_disk(
        str(tmp_path / "dd"))
    with pytest.raises(InputError) as e:
        open_source(tmp_path / "dd")
    # the message is the contract here: it must point at a split the user can pass, the one
    # a model trains on (it named "test", the first by name), and list the others
    said = str(e.value)
    assert said.endswith(f"e.g. {tmp_path / 'dd' / 'train'}")
    assert "(splits: test, train)" in said
    assert e.value.exit_code == 3


def test_dataset_dict_object_is_an_input_error() -> None:
    with pytest.raises(InputError):
        read(datasets.DatasetDict({"train": _dataset()}))


def test_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as e:
        open_source(tmp_path / "nope.jsonl")
    assert e.value.exit_code == 3


@pytest.mark.parametrize("name", ["data.txt", "data", "data.parquet.gz"])
def test_unknown_extension_is_an_input_error(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text('{"a": 1}\n')
    with pytest.raises(InputError):
        open_source(tmp_path / name)


@pytest.mark.parametrize(("name", "says"), [
    ("data.jsonl.bz2", "bunzip2 -k {d}/data.jsonl.bz2, then check {d}/data.jsonl"),
    ("data.csv.xz", "unxz -k {d}/data.csv.xz, then check {d}/data.csv"),
    ("data.parquet.gz", "gunzip -k {d}/data.parquet.gz, then check {d}/data.parquet"),
    ("data.arrow.zip", "unzip -d {d} {d}/data.arrow.zip, then check {d}/data.arrow")])
def test_a_compression_not_read_says_what_to_run(tmp_path: Path, name: str, says: str) -> None:
    # The path as given: the command runs from where preflight did (a bare name did not,
    # and unzip wrote into the working directory).
    (tmp_path / name).write_bytes(b"\x00compressed")
    with pytest.raises(InputError) as e:
        open_source(tmp_path / name)
    assert says.format(d=tmp_path) in str(e.value)


def test_a_shard_in_a_compression_not_read_is_not_skipped(tmp_path: Path) -> None:
    # A folder of .jsonl shards and one .jsonl.bz2: skipping it would check part of the data
    # and pass; a README or a .bz2 of no data format is still skipped.
    (tmp_path / "part-0.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "README.md.bz2").write_bytes(b"x")
    open_source(tmp_path)
    (tmp_path / "part-1.jsonl.bz2").write_bytes(b"BZh9")
    with pytest.raises(InputError) as e:
        open_source(tmp_path)
    assert "part-1.jsonl.bz2 is a data file preflight cannot read" in str(e.value)
    # In place: bunzip2 -k kept the .bz2 in the folder, and the check was exit 3 again.
    assert f"bunzip2 {tmp_path}/part-1.jsonl.bz2, then check {tmp_path} again" in str(e.value)


@pytest.mark.parametrize(("name", "says"), [
    ("b.jsonl.zip", "unzip -d {d} {d}/b.jsonl.zip && rm {d}/b.jsonl.zip, then check {d} again"),
    ("b.parquet.gz", "gunzip {d}/b.parquet.gz, then check {d} again")])
def test_a_shard_hint_leaves_no_compressed_file_in_the_folder(tmp_path: Path, name: str,
                                                              says: str) -> None:
    (tmp_path / "a.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / name).write_bytes(b"x")
    with pytest.raises(InputError) as e:
        open_source(tmp_path)
    assert says.format(d=tmp_path) in str(e.value)


def _fingerprint(path: Path) -> dict[str, Any]:
    src = open_source(path)
    for _ in src.batches():
        pass
    return src.fingerprint()


@pytest.mark.parametrize(
    ("name", "data"),
    [("d.jsonl", b'{"a": 1, "t": "hello"}\n'), ("d.csv", b"a,t\n1,hello\n")],
    ids=["jsonl", "csv"],
)
def test_fingerprint_is_stable_and_sees_one_changed_byte(tmp_path: Path, name: str, data: bytes
                                                         ) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    first = _fingerprint(path)
    assert _fingerprint(path) == first
    assert first["bytes"] == len(data)
    changed = bytearray(data)
    changed[-9] ^= 0x01
    path.write_bytes(bytes(changed))
    assert _fingerprint(path)["xxh3_128"] != first["xxh3_128"]


def test_parquet_fingerprint_changes_with_content(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"t": ["hello"]}), path)
    first = _fingerprint(path)
    assert _fingerprint(path) == first
    pq.write_table(pa.table({"t": ["hellp"]}), path)
    assert _fingerprint(path)["xxh3_128"] != first["xxh3_128"]


def test_folder_fingerprint_changes_when_one_shard_changes(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"i": 0}\n')
    (tmp_path / "b.jsonl").write_text('{"i": 1}\n')
    first = _fingerprint(tmp_path)
    assert _fingerprint(tmp_path) == first
    (tmp_path / "b.jsonl").write_text('{"i": 2}\n')
    assert _fingerprint(tmp_path)["xxh3_128"] != first["xxh3_128"]


def test_saved_dataset_missing_a_listed_shard_is_exit_3_naming_it(tmp_path: Path) -> None:
    _dataset().save_to_disk(str(tmp_path / "ds"), num_shards=2)
    shard = sorted((tmp_path / "ds").glob("*.arrow"))[1]
    shard.unlink()
    with pytest.raises(InputError) as e:
        open_source(tmp_path / "ds")  # was FileNotFoundError: "internal error", exit 2
    assert e.value.exit_code == 3
    assert f"lists {shard.name}, which is missing" in str(e.value)
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(tmp_path / "ds"),
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert "internal error" not in result.output and shard.name in result.output


@pytest.mark.parametrize(("state", "says"), [
    ("{not json", "is not valid JSON"),
    ('{"_data_files": [{"name": "x.arrow"}]}', "does not list its data files"),
    ('{"_data_files": [{"filename": "../elsewhere.arrow"}]}', "not a file name in"),
])
def test_saved_dataset_with_a_broken_state_json_is_exit_3(tmp_path: Path, state: str,
                                                          says: str) -> None:
    _dataset().save_to_disk(str(tmp_path / "ds"))
    (tmp_path / "ds" / "state.json").write_text(state)
    with pytest.raises(InputError, match=says) as e:
        open_source(tmp_path / "ds")
    assert e.value.exit_code == 3


def test_saved_dataset_names_an_arrow_file_state_json_does_not_list(tmp_path: Path) -> None:
    _dataset().save_to_disk(str(tmp_path / "ds"))
    extra = tmp_path / "ds" / "data-00001-of-00002.arrow"
    extra.write_bytes(next((tmp_path / "ds").glob("data-00000*.arrow")).read_bytes())
    source = open_source(tmp_path / "ds")
    assert source.skipped == [(extra.name, "not listed in state.json")]
    assert values(list(source.batches()), "text") == [f"t{i}" for i in range(10)]  # not read
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(tmp_path / "ds"),
                                       "--out", str(out)])
    assert extra.name in result.output and "not listed in state.json" in result.output
    report = json.loads((out / "report.json").read_text())
    assert report["source"]["skipped"] == [{"path": extra.name,
                                            "reason": "not listed in state.json"}]


@pytest.mark.parametrize("lost", ["state.json", "dataset_info.json"])
def test_saved_dataset_missing_a_metadata_file_is_named_not_mixed_formats(
        tmp_path: Path, lost: str) -> None:
    # was "ds mixes formats (1 arrow, 1 json); point preflight at one format"
    _dataset().save_to_disk(str(tmp_path / "ds"))
    (tmp_path / "ds" / lost).unlink()
    kept = ({"state.json", "dataset_info.json"} - {lost}).pop()
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(tmp_path / "ds"),
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())
    assert f"looks like a datasets save_to_disk folder, but it has no {lost}" in said
    assert f"or move {kept} out of it" in said and "mixes formats" not in said
    (tmp_path / "ds" / kept).rename(tmp_path / kept)  # as told: its shards are read
    assert values(read(tmp_path / "ds"), "text") == [f"t{i}" for i in range(10)]
