"""findings.parquet and the per-rule counts the sink keeps: the same content as the
join-based spill the sink used before (kept here as the reference), on every sample corpus
with its preset and on a folder of shards (findings of several files in one frame)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preflight import run_preflight
from preflight.findings import PARQUET_SCHEMA, FindingsSink

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
CASES = [("pretrain.jsonl", "pretrain-text"), ("pretrain.jsonl", None),
         ("sft_chat.jsonl", "sft-chat"), ("classification.jsonl", "classification"),
         ("regression.jsonl", "regression")]


def reference_rows(frame: pl.DataFrame, rule: Any, labels: dict[int, str | None]) -> pl.DataFrame:
    """The spilled rows as the sink built them before (a label frame joined per call)."""
    label_frame = pl.DataFrame({"file_index": list(labels), "file": list(labels.values())},
                               schema={"file_index": pl.Int32, "file": pl.String})
    return frame.join(label_frame, on="file_index", how="left", maintain_order="left").select(
        pl.col("row").cast(pl.Int64), pl.col("file"), pl.lit(rule.id).alias("rule"),
        pl.lit(rule.check).alias("check"), "code", "detail", pl.col("id").cast(pl.String),
        pl.col("cluster").cast(pl.Int64), pl.col("partner").cast(pl.Int64))


def _run(data: Path, out: Path, preset: str | None,
         monkeypatch: pytest.MonkeyPatch) -> tuple[pl.DataFrame, pl.DataFrame, Any]:
    spilled: list[pl.DataFrame] = []
    real = FindingsSink._spill

    def spy(self: FindingsSink, frame: pl.DataFrame, rule: Any) -> None:
        spilled.append(reference_rows(frame, rule, dict(self._labels)))
        real(self, frame, rule)

    monkeypatch.setattr(FindingsSink, "_spill", spy)
    report = run_preflight(data, out=out, smoke=False, preset=preset)
    written = pl.read_parquet(out / "findings.parquet")
    expected = pl.from_arrow(pl.concat(spilled).to_arrow().cast(PARQUET_SCHEMA))
    return written, expected, report


def _check(written: pl.DataFrame, expected: pl.DataFrame, report: Any) -> None:
    assert written.height > 0
    assert written.schema == expected.schema
    assert written.sort(written.columns, nulls_last=True).equals(
        expected.sort(expected.columns, nulls_last=True))
    # The report's counts agree with the file: findings per code, records per rule.
    for r in report.rules:
        mine = written.filter(pl.col("rule") == r.id)
        assert r.codes == dict(mine.group_by("code").len().iter_rows())
        assert r.findings == mine.height
        located = mine.filter(pl.col("row").is_not_null())
        assert r.violations == (located.select("file", "row").n_unique()
                                + mine.height - located.height)


@pytest.mark.parametrize(("name", "preset"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_sample_findings_match_the_reference_spill(name: str, preset: str | None,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _check(*_run(SAMPLE / name, tmp_path / "out", preset, monkeypatch))


def test_shard_folder_findings_name_their_files(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    lines = (SAMPLE / "pretrain.jsonl").read_bytes().splitlines(keepends=True)
    (shards / "a.jsonl").write_bytes(b"".join(lines[:150]))
    (shards / "b.jsonl").write_bytes(b"".join(lines[150:]))
    shutil.copy(shards / "a.jsonl", shards / "c.jsonl")  # every record of a again: duplicates
    written, expected, report = _run(shards, tmp_path / "out", "pretrain-text", monkeypatch)
    _check(written, expected, report)
    dupes = written.filter(pl.col("check") == "exact_duplicate")
    assert set(dupes.get_column("file")) >= {"c.jsonl"}
