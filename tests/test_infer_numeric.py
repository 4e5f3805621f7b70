"""Inference of numeric fields with no rules file: a feature vector with a few numbers among
its lists is still inferred (and checked, per position); columns of numbers that too few
records hold to be inferred are named as not checked, with how to check them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner, Result

from preflight.cli import main
from tests.executor.cases import person_features
from tests.tokenizers import write_jsonl


def check(*args: Any) -> Result:
    return CliRunner().invoke(
        main, ["check", "--no-smoke", "--no-progress", *[str(a) for a in args]]
    )


def report_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def found(out: Path) -> set[tuple[int, str, str]]:
    frame = pl.read_parquet(out / "findings.parquet").filter(pl.col("row").is_not_null())
    return {tuple(r) for r in frame.select("row", "check", "code").iter_rows()}


def test_a_feature_vector_with_one_number_among_its_lists_is_still_inferred(tmp_path: Path) -> None:
    # One number among the lists gives the column mixed JSON types: the lists of numbers
    # still count as numbers, so the field is checked, per position, with one finding.
    records = person_features(120)
    records[6]["features"] = 7
    records[9]["features"] = [44, 1]
    out = tmp_path / "out"
    result = check(write_jsonl(tmp_path / "f.jsonl", records), "--out", out)
    assert result.exit_code == 1, result.output
    assert report_of(out)["rules_file"]["fields"]["features"] == "features"
    assert found(out) == {(6, "numeric", "wrong_length"), (9, "numeric", "wrong_length")}


def test_numeric_columns_some_records_lack_are_named_beside_those_inferred(tmp_path: Path) -> None:
    records = [
        {
            "text": f"plain record {i}",
            "score": i / 10,
            **({"weight": float(i)} if i % 5 else {}),  # 80% of the records
            **({"dims": [i, i + 1]} if i < 8 else {}),  # lists of numbers, 40%
            **({"note": "a word"} if i < 6 else {}),
        }  # not numbers: not named
        for i in range(20)
    ]
    records[1]["weight"] = float("nan")
    out = tmp_path / "out"
    check(write_jsonl(tmp_path / "w.jsonl", records), "--out", out)
    inferred = report_of(out)["rules_file"]["inferred"]
    assert inferred["numeric"] == (
        "'score' (numbers in nearly every record); not checked: numbers in only some "
        "records: 'dims' (40% of records), 'weight' (80% of records); name them in "
        "fields.numeric to check them"
    )
    # named in a rules file, the field is checked and there is nothing to say
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "fields: {text: text, numeric: [score, weight]}\n"
        "rules: [{id: values, check: numeric, allow_null: true}]\n"
    )
    named = check(
        write_jsonl(tmp_path / "w.jsonl", records), "--out", tmp_path / "named", "--rules", rules
    )
    assert named.exit_code == 1
    assert report_of(tmp_path / "named")["rules_file"]["inferred"] == {}
    assert (1, "numeric", "nan") in found(tmp_path / "named")


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_column_named_like_a_pattern_is_inferred_as_itself(tmp_path: Path, fmt: str) -> None:
    # polars reads pl.col("^.*$") as "every column": typing the columns in one pass broke on
    # such a name ("internal error: DuplicateError"), and the run never started.
    frame = pl.DataFrame({"text": ["hello world one", "hello there two", "third one here"],
                          "^.*$": [1.5, float("nan"), 2.5]})
    data = tmp_path / f"d.{fmt}"
    if fmt == "jsonl":
        frame.write_ndjson(data)
        data.write_text(data.read_text().replace("null", "NaN"))
    elif fmt == "csv":
        frame.write_csv(data)
    else:
        frame.write_parquet(data)
    result = check(data, "--out", tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert (1, "numeric", "nan") in found(tmp_path / "out")


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_string_column_named_like_a_pattern_is_inferred_as_itself(tmp_path: Path,
                                                                    fmt: str) -> None:
    # A polars Series method runs as an expression on a column of the series' name: on a
    # series named "^t.*$" it found no column ("internal error: IndexError"), with no
    # rules file given.
    frame = pl.DataFrame({"^t.*$": ["a title here", "another title", "third title"],
                          "text": ["plain text one", "zero\u200bwidth two", "plain three"]})
    data = tmp_path / f"d.{fmt}"
    getattr(frame, {"jsonl": "write_ndjson", "csv": "write_csv",
                    "parquet": "write_parquet"}[fmt])(data)
    result = check(data, "--out", tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert (1, "invisible_unicode", "zero_width_space") in found(tmp_path / "out")
