"""`preflight check DATA` with no rules file, on data that makes inference guess: the console
says what it picked, what it left unchecked and why each rule was added; a rules file in the
working directory with several mistakes names them all at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_defaults import check
from tests.tokenizers import write_jsonl


def test_a_numeric_rule_says_the_numbers_called_for_it_not_the_label(tmp_path: Path) -> None:
    records = [{"text": f"record {i}", "label": i % 3, "score": i * 0.5} for i in range(20)]
    result = check(write_jsonl(tmp_path / "data.jsonl", records), "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "added rule 'labels' (label_range, severity error): the data has a label " \
           "field ('label')" in result.output
    assert "added rule 'values' (numeric, severity error): the data has numbers in " \
           "'score'" in result.output


def test_string_fields_left_out_of_the_text_checks_are_named(tmp_path: Path) -> None:
    # No field by a text name: the longest one is the text; a zero-width space in the
    # shorter prompt passes unseen, which the console must say.
    records = [{"prompt": f"question {i}?", "response": f"a longer answer number {i}"}
               for i in range(20)]
    records[4]["prompt"] = "quest\u200bion?"
    result = check(write_jsonl(tmp_path / "data.jsonl", records), "--out", tmp_path / "out")
    assert "inferred text: 'response' (the string field with the longest values; other " \
           "string fields not checked: 'prompt'" in result.output


@pytest.mark.parametrize(("config", "name"), [
    ("version: 1\nfeilds: {text: body}\nrules: []\n", "preflight.yaml"),
    ('[tool.preflight]\nversion = 1\n[tool.preflight.fields]\ntxt = "body"\n',
     "pyproject.toml"),
])
def test_a_rules_file_without_rules_names_its_other_mistakes_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, name: str) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", [{"body": "hello"}])
    (tmp_path / name).write_text(config, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = check(data)
    assert result.exit_code == 2, result.output
    assert "did you mean" in result.output and "rules" in result.output
    assert ("`rules` is empty" if name == "preflight.yaml" else "missing key `rules`") \
        in result.output


def test_a_file_of_thousands_of_numeric_columns(tmp_path: Path,
                                                schema_builds: list[int]) -> None:
    """Inference reads each column's type from a schema built once per batch (polars builds
    a new one on every ``frame.schema``: once per column made 5,000 columns take minutes),
    and the console names the first columns and how many more, not all of them."""
    import numpy as np
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {f"c{i}": np.arange(20, dtype=np.float64) + i for i in range(3000)}
    pq.write_table(pa.table({**columns, "text": [f"record {i}" for i in range(20)]}),
                   tmp_path / "wide.parquet")
    result = check(tmp_path / "wide.parquet", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert schema_builds[0] < 100  # was one per column (and a column list per column)
    assert "inferred numeric: 'c0', 'c1'" in result.output
    assert "'c11' and 2,988 more (numbers in" in " ".join(result.output.split())
    assert "'c12'" not in result.output
    found = pl.read_parquet(tmp_path / "out" / "findings.parquet")
    assert found.height == 0
