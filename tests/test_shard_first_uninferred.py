"""A folder of shards whose first shard gives inference nothing (its ``text`` a list of
strings in every record) and whose later shard holds the text as strings: the shards'
shapes were compared only when the first shard inferred some field, so no ``mixed_shards``
finding was made, the later shard's text was never judged (empty, duplicates) and the gate
passed with "no text field"."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from preflight.cli import main
from tests.outputs import write_records


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_later_shard_with_text_is_a_finding_when_the_first_inferred_nothing(
        tmp_path: Path, suffix: str, workers: str) -> None:
    folder = tmp_path / "shards"
    write_records(folder / f"a{suffix}", [{"text": ["para one", f"para {i}"]} for i in range(4)])
    write_records(folder / f"b{suffix}", [{"text": "same text"}, {"text": "same text"},
                                          {"text": ""}])
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", str(folder), "--out", str(out), "--no-smoke",
                                       "--no-progress", "--workers", workers])
    assert result.exit_code == 1, result.output
    found = pl.read_parquet(out / "findings.parquet")
    assert found.get_column("code").to_list() == ["mixed_shards"]
    detail = found.get_column("detail")[0]
    assert f"no text or chat field in 1 shard(s): a{suffix}" in detail
    assert f"text ('text') in 1 shard(s): b{suffix}" in detail
