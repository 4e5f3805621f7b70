"""fix into an Arrow IPC file keeps dictionary columns when batches' dictionaries differ:
a changed text gets a new dictionary for its batch, and an IPC stream input may replace
its dictionaries, but an IPC file holds one per column (it failed with exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from preflight import FixOptions, run_preflight
from preflight.errors import ConfigError

RULES = {"fields": {"text": "text", "id": "id"},
         "rules": [{"id": "invisible", "check": "invisible_unicode"}]}


def _batches(texts: list[list[str]], index: pa.DataType | None = None) -> list[pa.RecordBatch]:
    kind = pa.dictionary(index or pa.int32(), pa.string())
    out, first = [], 0
    for chunk in texts:
        out.append(pa.record_batch({
            "id": pa.array(range(first, first + len(chunk)), pa.int64()),
            "text": pa.array(chunk, pa.string()).dictionary_encode().cast(kind)}))
        first += len(chunk)
    return out


def _write(path: Path, batches: list[pa.RecordBatch], *, stream: bool) -> Path:
    opener = pa.ipc.new_stream if stream else pa.ipc.new_file
    with pa.OSFile(str(path), "wb") as sink, opener(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return path


def _fix(src: Path, tmp: Path) -> tuple[pa.Table, list[dict]]:
    out, q = tmp / "clean.arrow", tmp / "q.jsonl"
    report = run_preflight(src, RULES, fix=FixOptions(out=out, quarantine=q), smoke=False)
    assert report.fix is not None and report.fix["balanced"]
    clean = pa.ipc.open_file(pa.memory_map(str(out))).read_all()
    return clean, [json.loads(x) for x in q.read_text().splitlines()]


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_a_changed_text_in_a_dictionary_column_is_written_into_one_dictionary(
        tmp_path: Path, stream: bool) -> None:
    texts = [[f"batch {b} text {i}" for i in range(4)] for b in range(3)]
    texts[1][2] = "batch 1 zero\u200bwidth"
    flat = [t for chunk in texts for t in chunk]
    if not stream:  # an IPC file's batches share one dictionary, as its writer makes them
        whole = pa.array(flat).dictionary_encode()
        batches = [pa.record_batch({
            "id": pa.array(range(4 * b, 4 * b + 4), pa.int64()),
            "text": whole.slice(4 * b, 4)}) for b in range(3)]
    else:
        batches = _batches(texts)
    src = _write(tmp_path / "in.arrow", batches, stream=stream)
    clean, quarantine = _fix(src, tmp_path)
    assert quarantine == []
    assert clean.schema == batches[0].schema
    expected = [t.replace("\u200b", "") for t in flat]
    assert clean.column("text").to_pylist() == expected
    assert clean.column("id").to_pylist() == list(range(12))


def test_a_dictionary_its_index_type_cannot_address_is_refused_naming_the_column(
        tmp_path: Path) -> None:
    texts = [[f"text number {i} of batch {b}" for i in range(100)] for b in range(2)]
    texts[1][0] = "zero\u200bwidth"  # int8 indices: 200 values in one dictionary is too many
    src = _write(tmp_path / "in.arrow", _batches(texts, pa.int8()), stream=True)
    with pytest.raises(ConfigError, match=r"column 'text'.*int8.*--format parquet"):
        _fix(src, tmp_path)
    assert not (tmp_path / "clean.arrow").exists()
