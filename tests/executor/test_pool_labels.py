"""The local process pool on class names taken from the data: the names-or-ids decision
made on the first batch is the workers' too, and the rows of variants and typos (found from
the merged class counts, located by a second read) are those of one worker."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from preflight import run_preflight
from preflight.executor import launch, pool
from tests.executor.cases import same_findings, same_report, string_labels_case


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pool even the small test files, cut into pieces of about 8 KB."""
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 8_000)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_class_names_in_two_workers_equal_one(tmp_path: Path, fmt: str) -> None:
    path = string_labels_case(tmp_path, fmt)
    one = run_preflight(path, None, tmp_path / "one", workers=1, smoke=False)
    two = run_preflight(path, None, tmp_path / "two", workers=2, smoke=False)
    assert "pool:scan" in two.timings and "pool:revisit" in two.timings
    found = pl.read_parquet(tmp_path / "one" / "findings.parquet").filter(
        pl.col("rule") == "labels"
    )
    assert dict(found.select("row", "code").iter_rows()) == {
        3: "label_null",
        250: "label_wrong_type",
        400: "label_variant",
        777: "label_stray",
        1_201: "label_variant",
        1_499: "label_variant",
    }
    same_findings(one, two, tmp_path / "one", tmp_path / "two")
    same_report(one, two)


def test_a_piece_of_integers_is_judged_as_the_first_batch_says(tmp_path: Path) -> None:
    """The last third holds class ids: names rule (the first batch is mostly names), so each
    is a wrong type, in the pool too, whose last piece alone would read as ids."""
    path = tmp_path / "mixed.jsonl"
    labels = [("sports", "politics")[i % 2] if i < 1_000 else i % 2 for i in range(1_500)]
    path.write_text(
        "".join(
            f'{{"text": "article number {i}", "label": {v!r}}}\n'.replace("'", '"')
            for i, v in enumerate(labels)
        )
    )
    one = run_preflight(path, None, tmp_path / "one", workers=1, smoke=False)
    two = run_preflight(path, None, tmp_path / "two", workers=2, smoke=False)
    assert one.rule("labels").codes == {"label_wrong_type": 500}
    same_findings(one, two, tmp_path / "one", tmp_path / "two")
    same_report(one, two)
