"""A wide CSV (a feature matrix of thousands of columns): reading a batch must cost work
per column, not per column squared. polars builds ``DataFrame.schema`` anew on every access
(a pass over every column), so looking it up once per column was quadratic: a 20,000-column
file of three rows ran past five minutes. Counted, not timed."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from preflight.source import open_source

COLUMNS = 400


def test_a_wide_csv_builds_its_schema_a_few_times_not_once_per_column(
        tmp_path: Path, schema_builds: list[int]) -> None:
    path = tmp_path / "wide.csv"
    header = ",".join(f"c{i}" for i in range(COLUMNS))
    row = ",".join("7" if i % 2 else f"word{i}" for i in range(COLUMNS))
    path.write_text(f"{header}\n{row}\n{row}\n")
    (batch,) = list(open_source(str(path)).batches())
    assert batch.frame.width == COLUMNS
    assert batch.frame.get_column("c1").dtype == pl.Int64  # typed as before
    assert schema_builds[0] < COLUMNS // 10, schema_builds[0]


def test_a_header_with_many_repeated_names_still_says_which(tmp_path: Path) -> None:
    path = tmp_path / "rep.csv"
    names = [f"c{i % 50}" for i in range(COLUMNS)]
    path.write_text(",".join(names) + "\n" + ",".join("x" for _ in names) + "\n")
    source = open_source(str(path))
    list(source.batches())
    (said,) = [w for w in source.warnings if "more than once" in w]
    assert "'c0', 'c1', 'c10'" in said


def test_a_header_longer_than_the_sniffed_sample_names_no_repeat(tmp_path: Path) -> None:
    # The sample the dialect is sniffed from ends inside such a header: its last cell, cut
    # short ("c10" of "c10017"), was taken for a second "c10", a warning about nothing.
    path = tmp_path / "wide.csv"
    names = [f"c{i}" for i in range(20_000)]
    path.write_text(",".join(names) + "\n" + ",".join("x" for _ in names) + "\n")
    source = open_source(str(path))
    list(source.batches())
    assert not [w for w in source.warnings if "more than once" in w], source.warnings


def test_a_wide_csv_infers_its_fields_in_a_few_polars_passes_not_one_per_column(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inference types every column of the first batch (which hold numbers, which text):
    one polars select per column cost about a millisecond each, a quarter of a 4,000-column
    file's run. Counted, not timed; the fields found stay the same."""
    from preflight.infer import infer_fields

    path = tmp_path / "wide.csv"
    header = ",".join(f"c{i}" for i in range(COLUMNS))
    rows = [",".join(str(r + i) if i % 2 else f"word{i} of row {r}" for i in range(COLUMNS))
            for r in range(3)]
    path.write_text("\n".join([header, *rows]) + "\n")
    (batch,) = list(open_source(str(path)).batches())
    selects = 0
    frame_select, module_select = pl.DataFrame.select, pl.select

    def counted_frame(self: pl.DataFrame, *args: object, **kwargs: object) -> pl.DataFrame:
        nonlocal selects
        selects += 1
        return frame_select(self, *args, **kwargs)

    def counted_module(*args: object, **kwargs: object) -> pl.DataFrame:
        nonlocal selects
        selects += 1
        return module_select(*args, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "select", counted_frame)
    monkeypatch.setattr(pl, "select", counted_module)
    fields, _why = infer_fields(batch)
    assert selects < COLUMNS // 10, selects
    assert len(fields.numeric) == COLUMNS // 2  # the integer columns
    assert fields.text in {f"c{i}" for i in range(0, COLUMNS, 2)}
