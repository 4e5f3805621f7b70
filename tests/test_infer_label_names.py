"""Labels under the other names corpora give them (``intent``, ``sentiment``, ``category``,
``class``, ``stars``, ``rating``, ``target``, ``*_label``) were not inferred: with no rules
file a null, a negative id, a wrong type or a typo of a class there passed the gate. Now
they are inferred when their values are a class set, and judged as ``label`` is; a free-text
``category`` and a continuous ``rating`` are not labels."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflight import run_preflight
from preflight.executor import launch, pool
from preflight.report.model import Report
from tests.executor.cases import same_findings, same_report

N = 200
# Class names, with planted faults: row -> (value, code). Parquet's string column holds no
# integer, so the wrong type is planted in JSON Lines and CSV only.
NAMES = ("sports", "politics", "science")
NAME_FAULTS: dict[int, tuple[Any, str]] = {
    5: (None, "label_null"),
    7: ("sprots", "label_stray"),
    9: ("Politics", "label_variant"),
    10: (3, "label_wrong_type"),
}
# Class ids 0..3, with planted faults. Parquet's column is float64 (whole floats are ids),
# so it holds 2.5 but not a string.
ID_FAULTS: dict[int, tuple[Any, str]] = {
    5: (None, "label_null"),
    6: (-1, "label_out_of_range"),
    7: ("two", "label_wrong_type"),
    9: (2.5, "label_wrong_type"),
    11: (57, "label_stray"),
}
NAME_FIELDS = ["intent", "sentiment", "category", "class", "coarse_label", "topic_label"]
ID_FIELDS = ["stars", "rating", "target", "fine_label", "class", "sentiment"]


def _values(kind: str, faults: dict[int, tuple[Any, str]]) -> list[Any]:
    values: list[Any] = [NAMES[i % 3] if kind == "names" else i % 4 for i in range(N)]
    for row, (value, _) in faults.items():
        values[row] = value
    return values


def _write(tmp: Path, fmt: str, columns: dict[str, list[Any]]) -> Path:
    texts = [f"document number {i} about {'this' if i % 2 else 'that'}" for i in range(N)]
    columns = {"text": texts, **columns}
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(),
                                                                        strict=True)]
    path = tmp / f"data.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "csv":
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(columns)
            writer.writerows(["" if v is None else v for v in r.values()] for r in rows)
    else:
        table = {}
        for name, values in columns.items():
            numbers = any(isinstance(v, int | float) for v in values)
            table[name] = pa.array(values, type=pa.float64() if numbers else pa.string())
        pq.write_table(pa.table(table), path)
    return path


def _faults(fmt: str, faults: dict[int, tuple[Any, str]]) -> dict[int, tuple[Any, str]]:
    """The faults a format's column can hold: Parquet's typed column holds no string among
    numbers (the ids' column), nor an integer among strings (the names')."""
    if fmt != "parquet":
        return faults
    odd = int if faults is NAME_FAULTS else str
    return {row: (v, code) for row, (v, code) in faults.items() if not isinstance(v, odd)}


def _found(out: Path) -> dict[int, str]:
    frame = pl.read_parquet(out / "findings.parquet").filter(pl.col("rule") == "labels")
    return dict(frame.select("row", "code").iter_rows())


def _run(path: Path, out: Path, **kwargs: Any) -> Report:
    return run_preflight(path, None, out, smoke=False, **kwargs)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("name", NAME_FIELDS)
def test_class_names_under_another_name(tmp_path: Path, fmt: str, name: str) -> None:
    faults = _faults(fmt, NAME_FAULTS)
    path = _write(tmp_path, fmt, {name: _values("names", faults)})
    report = _run(path, tmp_path / "out")
    assert report.rules_file.fields["label"] == name
    assert report.rules_file.inferred["label"].startswith(f"{name!r} (by name, class names: ")
    assert report.rules_file.fields["text"] == "text"
    assert _found(tmp_path / "out") == {row: code for row, (_, code) in faults.items()}
    assert report.verdict == "fail"


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("name", ID_FIELDS)
def test_class_ids_under_another_name(tmp_path: Path, fmt: str, name: str) -> None:
    faults = _faults(fmt, ID_FAULTS)
    path = _write(tmp_path, fmt, {name: _values("ids", faults)})
    report = _run(path, tmp_path / "out")
    assert report.rules_file.inferred["label"].startswith(f"{name!r} (by name, integer class ids")
    assert name not in str(report.rules_file.fields.get("numeric"))
    assert _found(tmp_path / "out") == {row: code for row, (_, code) in faults.items()}
    assert report.verdict == "fail"


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("name", ["intent", "stars"])
def test_clean_labels_under_another_name_pass(tmp_path: Path, fmt: str, name: str) -> None:
    kind = "names" if name == "intent" else "ids"
    path = _write(tmp_path, fmt, {name: _values(kind, {})})
    report = _run(path, tmp_path / "out")
    assert report.rules_file.fields["label"] == name
    assert report.rule("labels").status == "pass"
    assert report.verdict == "pass", report.reasons


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_free_text_category_is_not_a_label(tmp_path: Path, fmt: str) -> None:
    free = [f"a long free description of item {i}, in words of its own" for i in range(N)]
    path = _write(tmp_path, fmt, {"category": free})
    report = _run(path, tmp_path / "out")
    assert "label" not in report.rules_file.fields
    # not judged, and said so: a long tail of intents or booleans would pass with no word
    assert report.rules_file.inferred["label"].startswith(
        "none: 'category' has a label's name, but no class set in the first records")
    assert "--label-field category judges it as one" in report.rules_file.inferred["label"]
    assert "labels" not in [r.id for r in report.rules]
    assert report.verdict == "pass", report.reasons


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("step", ["continuous", "halves", "signed"])
def test_a_rating_of_numbers_is_not_a_label(tmp_path: Path, fmt: str, step: str) -> None:
    # A continuous score, a rating in half stars, a signed score: numbers, not class ids.
    values = {"continuous": [round(1 + (i * 37 % 400) / 100, 2) for i in range(N)],
              "halves": [1 + (i % 9) / 2 for i in range(N)],
              "signed": [i % 3 - 1 for i in range(N)]}[step]
    path = _write(tmp_path, fmt, {"rating": values})
    report = _run(path, tmp_path / "out")
    assert "label" not in report.rules_file.inferred
    assert "labels" not in [r.id for r in report.rules]
    assert report.rules_file.fields["numeric"] == "rating"


@pytest.mark.parametrize(("name", "values"), [
    ("target", [18 + (i * 7) % 73 for i in range(N)]),  # ages: no id 0 or 1
    ("stars", [10 + i % 5 for i in range(N)]),
    ("target", [(i * 13) % 60 for i in range(N)]),  # a count 0..59: too many classes
    ("rating", [(i * 7) % 40 for i in range(N)]),
])
def test_integer_quantities_are_not_class_ids(tmp_path: Path, name: str,
                                              values: list[int]) -> None:
    # An integer target of ages 18..90 or counts 0..216 was "classes inferred as 0..216":
    # the numeric check did not run and the classification preset was suggested.
    report = _run(_write(tmp_path, "jsonl", {name: values}), tmp_path / "out")
    assert "label" not in report.rules_file.fields
    assert "labels" not in [r.id for r in report.rules]


def test_an_integer_target_taken_as_classes_says_how_to_judge_it_as_a_number(
        tmp_path: Path) -> None:
    report = _run(_write(tmp_path, "jsonl", {"target": [i % 3 for i in range(N)]}),
                  tmp_path / "out")
    assert report.rules_file.fields["label"] == "target"
    assert "--set fields.target=target" in report.rules_file.inferred["label"]


def test_a_regression_target_stays_a_target(tmp_path: Path) -> None:
    path = _write(tmp_path, "jsonl", {"target": [i * 1.5 for i in range(N)]})
    report = _run(path, tmp_path / "out")
    assert report.rules_file.fields["target"] == "target"
    assert "label" not in report.rules_file.fields


@pytest.mark.parametrize("order", [("fine_label", "coarse_label"), ("coarse_label", "fine_label")])
def test_of_two_labels_the_first_by_name_is_picked_and_the_other_named(
        tmp_path: Path, order: tuple[str, str]) -> None:
    values = {"coarse_label": [i % 6 for i in range(N)], "fine_label": [i % 47 for i in range(N)]}
    path = _write(tmp_path, "jsonl", {name: values[name] for name in order})
    report = _run(path, tmp_path / "out")
    assert report.rules_file.fields["label"] == "coarse_label"
    why = report.rules_file.inferred["label"]
    assert why.startswith("'coarse_label' (by name, integer class ids; 'fine_label' holds "
                          "labels too, not judged as such")
    assert "--label-field fine_label judges that one instead" in why


def test_label_comes_before_the_other_names(tmp_path: Path) -> None:
    path = _write(tmp_path, "jsonl", {"intent": _values("names", {}),
                                      "label": _values("ids", {})})
    report = _run(path, tmp_path / "out")
    assert report.rules_file.fields["label"] == "label"
    assert "'intent' holds labels too" in report.rules_file.inferred["label"]


def test_a_free_text_label_gives_way_to_another_name(tmp_path: Path) -> None:
    free = [f"a note about document {i}" for i in range(N)]
    path = _write(tmp_path, "jsonl", {"label": free, "sentiment": _values("names", {})})
    report = _run(path, tmp_path / "out")
    assert report.rules_file.fields["label"] == "sentiment"


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize(("name", "kind"), [("intent", "names"), ("stars", "ids")])
def test_two_workers_equal_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str,
                               name: str, kind: str) -> None:
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 4_000)
    faults = NAME_FAULTS if kind == "names" else ID_FAULTS
    path = _write(tmp_path, fmt, {name: _values(kind, faults)})
    one = _run(path, tmp_path / "one", workers=1)
    two = _run(path, tmp_path / "two", workers=2)
    assert "pool:scan" in two.timings
    assert _found(tmp_path / "one") == {row: code for row, (_, code) in faults.items()}
    same_findings(one, two, tmp_path / "one", tmp_path / "two")
    same_report(one, two)


def test_one_based_stars_are_said_to_count_from_one_not_a_stray(tmp_path: Path) -> None:
    # Every 1..5 corpus printed "0 never occur — a stray label?".
    report = _run(_write(tmp_path, "jsonl", {"stars": [1 + i % 5 for i in range(N)]}),
                  tmp_path / "out")
    [warning] = next(r.notes for r in report.rules if r.id == "labels")
    assert "0 never occurs: the labels count from 1 (1..5)" in warning
    assert "stray" not in warning


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("kind", ["names", "ids"])
@pytest.mark.parametrize("name", ["label", "intent"])
def test_labels_null_in_most_records_are_still_the_label(tmp_path: Path, fmt: str, kind: str,
                                                         name: str) -> None:
    # 60% null labels passed the gate: the shares that make a class set counted the nulls,
    # so the field was not a label and its missing labels no finding.
    values = _values(kind, {})
    nulls = [i for i in range(N) if i % 10 < 6]
    for i in nulls:
        values[i] = None
    report = _run(_write(tmp_path, fmt, {name: values}), tmp_path / "out")
    assert report.rules_file.fields["label"] == name
    assert set(_found(tmp_path / "out").items()) == {(i, "label_null") for i in nulls}
    assert report.verdict == "fail"


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_first_shard_of_null_labels_does_not_hide_the_label(tmp_path: Path, fmt: str) -> None:
    # Fields are inferred from the first batch: one of null labels only left the label
    # uninferred, and the stray and negative labels of the next shard passed.
    folder = tmp_path / "shards"
    folder.mkdir()
    _write(tmp_path, fmt, {"label": [None] * N}).rename(folder / f"part-0.{fmt}")
    _write(tmp_path, fmt, {"label": [(i % 3) if i not in (4, 8) else -1 for i in range(N)]}
           ).rename(folder / f"part-1.{fmt}")
    report = _run(folder, tmp_path / "out")
    assert report.rules_file.inferred["label"] == (
        "'label' (by name, every value null in the first records)")
    frame = pl.read_parquet(tmp_path / "out" / "findings.parquet").filter(
        pl.col("rule") == "labels")
    codes = dict(zip(zip(frame["file"], frame["row"], strict=True), frame["code"], strict=True))
    assert codes == {**{(f"part-0.{fmt}", i): "label_null" for i in range(N)},
                     (f"part-1.{fmt}", 4): "label_out_of_range",
                     (f"part-1.{fmt}", 8): "label_out_of_range"}
    assert report.verdict == "fail"


@pytest.mark.parametrize("workers", [1, 2])
def test_an_unlabeled_split_of_minus_ones_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   workers: int) -> None:
    # The hub's test splits (GLUE) mark every label -1: the gate failed with "no valid class
    # label" and 200 findings, and no word of what the data is.
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 4_000)
    report = _run(_write(tmp_path, "jsonl", {"label": [-1] * N}), tmp_path / "out",
                  workers=workers)
    [note] = next(r.notes for r in report.rules if r.id == "labels")
    assert note.endswith(f"; {N} label(s) are -1, as the hub marks the labels of an unlabeled "
                         "split (a test split?): train on a labelled split")
    assert report.verdict == "fail"


def test_a_labelled_split_says_nothing_of_minus_ones(tmp_path: Path) -> None:
    values = [i % 3 for i in range(N)]
    values[4] = -1
    report = _run(_write(tmp_path, "jsonl", {"label": values}), tmp_path / "out")
    notes = next(r.notes for r in report.rules if r.id == "labels")
    assert not any("unlabeled" in n for n in notes)
    assert _found(tmp_path / "out") == {4: "label_out_of_range"}
