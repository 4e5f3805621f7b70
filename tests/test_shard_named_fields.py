"""A folder of shards whose text field is named (``--text-field``, a rules file's
``fields.text``) while other fields are inferred: each shard's shape was compared with the
named fields rather than with the first shard's inferred shape, so when the named text was
not the one inference would pick (a short ``title`` beside a longer ``body``), no shard
matched and none was scanned: the gate passed with nothing checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from preflight.cli import main
from tests.outputs import write_records

ZW = "\u200b"


def _rows() -> list[dict[str, Any]]:
    rows = [{"id": i, "title": f"title {i}", "body": f"a much longer body, number {i}"}
            for i in range(12)]
    rows[2]["title"] = f"ti{ZW}tle"  # first shard
    rows[9]["title"] = f"ti{ZW}tle 9"  # second shard
    return rows


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_every_shard_is_scanned_when_the_text_field_is_named(tmp_path: Path, suffix: str,
                                                             workers: str) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    rows = _rows()
    write_records(folder / f"a{suffix}", rows[:6])
    write_records(folder / f"b{suffix}", rows[6:])
    result = CliRunner().invoke(main, ["check", str(folder), "--text-field", "title",
                                       "--out", str(tmp_path / "o"), "--no-smoke",
                                       "--workers", workers])
    assert result.exit_code == 1, result.output
    assert "zero_width_space=2" in result.output
    assert f"a{suffix}:2" in result.output and f"b{suffix}:3" in result.output
    assert "mixed_shards" not in result.output
