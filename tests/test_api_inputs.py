"""The Python API takes data already in memory, and ``Report.findings()`` returns every
finding (issue 16, item 8)."""

from __future__ import annotations

import gc
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from preflight import ConfigError, InputError, Report, run_preflight
from preflight.findings import MAX_EXAMPLES

ZW = "\u200b"
TEXTS = ["alpha text", f"hid{ZW}den", "beta text", "alpha text"]


def codes(report: Report) -> list[tuple[int, str]]:
    return sorted((r["row"], r["code"]) for r in report.findings().iter_rows(named=True))


EXPECTED = [(1, "zero_width_space"), (3, "exact_duplicate_of")]


@pytest.mark.parametrize("make", [
    lambda: pl.DataFrame({"text": TEXTS}),
    lambda: pa.table({"text": TEXTS}),
    lambda: pa.RecordBatch.from_pydict({"text": TEXTS}),
    lambda: [{"text": t} for t in TEXTS],
    # rows are positions, not pandas' index labels
    lambda: pd.DataFrame({"text": TEXTS}, index=[100, 7, 55, 3]),
], ids=["polars", "arrow-table", "arrow-batch", "list", "pandas"])
def test_in_memory_inputs_number_rows_by_position(make: Callable[[], object]) -> None:
    report = run_preflight(make(), smoke=False)
    assert report.verdict == "fail" and report.source.records == 4
    assert codes(report) == EXPECTED


def test_list_with_mixed_types_and_non_dicts_is_read_like_json_lines() -> None:
    records = [{"text": "a text"}, {"text": 12345}, "not a record", {"text": "b text"}]
    report = run_preflight(records, smoke=False)
    assert codes(report) == [(1, "wrong_type"), (2, "not_an_object")]
    assert report.source.records == 3 and report.source.malformed == 1


def test_findings_returns_every_finding_not_only_the_examples(tmp_path: Path) -> None:
    n = MAX_EXAMPLES + 15
    report = run_preflight([{"text": f"row {i}{ZW}"} for i in range(n)], smoke=False)
    assert len(report.rule("hidden-chars").examples) == MAX_EXAMPLES
    found = report.findings()
    assert found.columns == ["row", "file", "rule", "check", "code", "detail", "id", "cluster",
                             "partner"]
    assert found.filter(pl.col("code") == "zero_width_space")["row"].sort().to_list() == list(
        range(n))
    # with out=, the same from the findings.parquet written there
    out = tmp_path / "r"
    again = run_preflight([{"text": f"row {i}{ZW}"} for i in range(n)], out=out, smoke=False)
    assert again.outputs["findings"] == str(out / "findings.parquet")
    assert again.findings().equals(pl.read_parquet(out / "findings.parquet"))


def test_the_temporary_findings_file_goes_with_the_report(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    report = run_preflight([{"text": "a text"}], smoke=False)
    assert report.outputs == {}
    assert len(list(tmp_path.glob("preflight-findings-*"))) == 1
    del report
    gc.collect()
    assert list(tmp_path.glob("preflight-findings-*")) == []


def test_non_string_column_names_are_refused() -> None:
    with pytest.raises(InputError) as info:
        run_preflight(pd.DataFrame([["a text", 1]]), smoke=False)
    assert str(info.value) == (
        "the pandas.DataFrame's column names must be strings; got 0 (int), 1 (int): name the "
        "columns, e.g. df.columns = [str(c) for c in df.columns], or build it with names "
        "(pd.DataFrame(rows, columns=['text', 'label']))")
    with pytest.raises(InputError, match="record 1 of the list has a key that is not a string"):
        run_preflight([{"text": "a"}, {1: "b"}], smoke=False)


def test_other_objects_and_fix_on_a_dataframe_say_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=re.escape("pass lf.collect()")):
        run_preflight(pl.DataFrame({"text": ["a"]}).lazy(), smoke=False)
    # the wrong argument, not unreadable data: exit 2 naming it
    with pytest.raises(ConfigError, match=re.escape("source must be a path, a hub dataset")):
        run_preflight({"text": ["a"]}, smoke=False)
    for wrong in (None, 3, b"train.jsonl"):
        with pytest.raises(ConfigError, match=re.escape(f"got {wrong!r} (builtins.")) as info:
            run_preflight(wrong, smoke=False)
        assert info.value.exit_code == 2
    from preflight import FixOptions

    options = FixOptions(out=tmp_path / "c.jsonl", quarantine=tmp_path / "q.jsonl")
    with pytest.raises(ConfigError, match="fix writes a cleaned copy of a file; a DataFrame"):
        run_preflight(pl.DataFrame({"text": ["a"]}), fix=options)


def test_empty_dataframe_fails_the_gate() -> None:
    report = run_preflight(pl.DataFrame({"text": []}, schema={"text": pl.String}), smoke=False)
    assert report.verdict == "fail" and report.source.records == 0


def test_report_json_of_an_in_memory_run(tmp_path: Path) -> None:
    run_preflight(pl.DataFrame({"text": TEXTS}), out=tmp_path / "r", smoke=False)
    source = json.loads((tmp_path / "r" / "report.json").read_text())["source"]
    assert (source["path"], source["format"], source["records"]) == (
        "<polars.DataFrame>", "polars.DataFrame", 4)


def test_a_polars_object_column_is_read_as_its_values_not_their_addresses() -> None:
    # to_arrow() gives an Object column as 8-byte object addresses: its strings read as
    # control characters and U+FFFD, the zero-width space and the NaN in them passed.
    frame = pl.DataFrame({
        "text": pl.Series(["a\u200b word", "b word"], dtype=pl.Object),
        "note": pl.Series(["x\u202e", "y"], dtype=pl.Object),
        "score": pl.Series([float("nan"), 1.0], dtype=pl.Object)})
    report = run_preflight(frame, smoke=False)
    found = report.findings().select("row", "code", "detail").rows()
    assert sorted(found) == [(0, "bidi_control", "note: 1× U+202E at char 1"),
                             (0, "nan", "score: NaN"),
                             (0, "zero_width_space", "text: 1× U+200B at char 1")]


def test_a_polars_object_column_of_mixed_values_says_how_to_type_it() -> None:
    frame = pl.DataFrame({"text": ["a", "b"], "o": pl.Series(["x", 1], dtype=pl.Object)})
    with pytest.raises(InputError, match=r"Object column 'o'.*map_elements\(str"):
        run_preflight(frame, smoke=False)
