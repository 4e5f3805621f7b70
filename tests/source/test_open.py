"""Choosing a reader: folders of shards, ``datasets`` folders and objects, bad paths,
and the fingerprint of what was read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflight.batch import Batch
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
    # the message is the contract here: it must point at a split the user can pass
    assert "test" in str(e.value) or "train" in str(e.value)
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
