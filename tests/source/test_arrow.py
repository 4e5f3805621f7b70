"""Parquet and Arrow IPC (file and stream formats, Feather)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from preflight.errors import InputError
from tests.source.helpers import read, values


def _table() -> pa.Table:
    return pa.table({
        "text": ["a", "b", None, "d"],
        "label": pa.array(["pos", "neg", "pos", "neg"]).dictionary_encode(),
        "score": [0.5, 1.0, float("nan"), -2.0],
        "n": pa.array([1, 2, 3, 4], type=pa.int32()),
    })


def _write_ipc_file(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table, max_chunksize=2)


def _write_ipc_stream(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=2)


WRITERS = {
    "d.parquet": lambda p, t: pq.write_table(t, p, row_group_size=2),
    "d.arrow": _write_ipc_file,
    "s.arrow": _write_ipc_stream,
    "d.feather": lambda p, t: feather.write_feather(t, p),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_columnar_files_read_with_rows_and_string_dictionary(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    WRITERS[name](path, _table())
    batches = read(path)
    assert np.concatenate([b.rows for b in batches]).tolist() == [0, 1, 2, 3]
    assert all(b.file is None for b in batches)
    assert all(b.frame.schema["label"] == pl.String for b in batches)
    assert values(batches, "label") == ["pos", "neg", "pos", "neg"]
    assert values(batches, "text") == ["a", "b", None, "d"]
    assert values(batches, "n") == [1, 2, 3, 4]
    assert [t for b in batches for t in b.json_types("label").to_list()] == ["string"] * 4


def test_parquet_rows_continue_across_batches(tmp_path: Path) -> None:
    n = 150_000
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"i": np.arange(n)}), path, row_group_size=10_000)
    batches = read(path)
    assert len(batches) >= 2
    assert np.concatenate([b.rows for b in batches]).tolist() == list(range(n))
    assert values(batches, "i") == list(range(n))


def test_corrupt_parquet_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1 this is not really parquet")
    with pytest.raises(InputError):
        read(path)


def test_corrupt_arrow_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.arrow"
    path.write_bytes(b"not arrow at all")
    with pytest.raises(InputError):
        read(path)
