"""A label only some shards hold: fields are inferred from the first shard, so when it had
no label column the run checked no label, and a ``-3`` in a later shard passed the gate.
Now the gate fails with one ``unjudged_labels`` finding naming the shards and the option;
with that option (``--label-field``, refused before as "no column" in the first shard) the
labels of every shard are judged. The same with one worker and two."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from preflight import run_preflight
from preflight.cli import main
from preflight.executor import launch, pool
from tests.executor.cases import same_findings, same_report
from tests.outputs import write_records

N = 300


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pool even the small test files, cut into pieces of about 8 KB."""
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 8_000)


def _folder(tmp: Path, fmt: str) -> Path:
    """part-0 without labels; part-1 and part-2 with class ids 0..2, a -3 at part-1 row 7."""
    folder = tmp / "shards"
    folder.mkdir()
    for k in range(3):
        rows = [{"text": f"shard {k} document {i} about this and that"} for i in range(N)]
        if k:
            for i, row in enumerate(rows):
                row["label"] = -3 if (k, i) == (1, 7) else i % 3
        write_records(folder / f"part-{k}.{fmt}", rows)
    return folder


def _found(out: Path, rule: str) -> dict[tuple[str | None, int | None], str]:
    frame = pl.read_parquet(out / "findings.parquet").filter(pl.col("rule") == rule)
    return {(f, r): c for f, r, c in frame.select("file", "row", "code").iter_rows()}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_label_only_later_shards_hold_fails_the_gate_saying_how(tmp_path: Path,
                                                                   fmt: str) -> None:
    folder = _folder(tmp_path, fmt)
    one = run_preflight(folder, None, tmp_path / "one", workers=1, smoke=False)
    two = run_preflight(folder, None, tmp_path / "two", workers=2, smoke=False)
    assert "pool:scan" in two.timings
    assert "label" not in one.rules_file.fields
    assert _found(tmp_path / "one", "schema") == {(None, None): "unjudged_labels"}
    detail = one.findings().filter(pl.col("code") == "unjudged_labels")["detail"][0]
    assert f"in 2 shard(s) (part-1.{fmt}, part-2.{fmt})" in detail
    assert "--label-field label" in detail
    assert one.verdict == "fail"
    same_findings(one, two, tmp_path / "one", tmp_path / "two")
    same_report(one, two)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_label_field_option_judges_the_labels_of_every_shard(tmp_path: Path,
                                                                 fmt: str) -> None:
    folder = _folder(tmp_path, fmt)
    result = CliRunner().invoke(main, ["check", str(folder), "--no-smoke", "--label-field",
                                       "label", "--out", str(tmp_path / "r"),
                                       "--format", "json"])
    assert result.exit_code == 1, result.output
    assert _found(tmp_path / "r", "labels") == {
        **{(f"part-0.{fmt}", i): "label_null" for i in range(N)},
        (f"part-1.{fmt}", 7): "label_out_of_range"}
    assert "unjudged_labels" not in result.output


def test_a_label_field_no_shard_holds_is_the_rules_error(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "jsonl")
    result = CliRunner().invoke(main, ["check", str(folder), "--no-smoke", "--label-field",
                                       "lable", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())  # as wrapped to the terminal's width
    assert "field(s) 'lable' not found in the data (fields seen: 'label', 'text')" in said


def test_shards_that_all_hold_the_label_have_no_such_finding(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "jsonl")
    (folder / "part-0.jsonl").unlink()
    report = run_preflight(folder, None, tmp_path / "r", workers=2, smoke=False)
    assert report.rules_file.fields["label"] == "label"
    assert _found(tmp_path / "r", "labels") == {("part-1.jsonl", 7): "label_out_of_range"}
    assert _found(tmp_path / "r", "schema") == {}
