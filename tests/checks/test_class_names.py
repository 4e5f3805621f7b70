"""label_range with class names taken from the data: a ``label`` of strings ("pos", "neg")
is inferred with no rules file, and blank names, non-strings, other spellings of a class
and typos of a big class fail, on JSON Lines, CSV and Parquet alike."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflight import FixOptions, run_preflight
from preflight.checks.class_names import osa_distance, suspect_names
from preflight.report.model import Report

# 200 records of "pos"/"neg" with planted faults: row -> (label, code)
PLANTED: dict[int, tuple[Any, str]] = {
    5: (None, "label_null"),
    6: ("", "label_null"),
    7: ("nge", "label_stray"),
    8: ("Pos", "label_variant"),
    9: ("neg ", "label_variant"),
    10: (1, "label_wrong_type"),
    11: ("   ", "label_null"),
}


def _labels(planted: dict[int, tuple[Any, str]], n: int = 200) -> list[Any]:
    values: list[Any] = ["pos" if i % 2 else "neg" for i in range(n)]
    for row, (value, _) in planted.items():
        values[row] = value
    return values


def _write(tmp: Path, fmt: str, labels: list[Any]) -> Path:
    texts = [f"review {i} says {'good' if i % 3 else 'bad'} things" for i in range(len(labels))]
    if fmt == "jsonl":
        path = tmp / "data.jsonl"
        path.write_text(
            "".join(
                json.dumps({"text": t, "label": v}) + "\n"
                for t, v in zip(texts, labels, strict=True)
            )
        )
    elif fmt == "csv":
        path = tmp / "data.csv"
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows([t, "" if v is None else v] for t, v in zip(texts, labels, strict=True))
    else:  # a dictionary-encoded (categorical) string column
        path = tmp / "data.parquet"
        column = pa.array(labels, type=pa.string()).dictionary_encode()
        pq.write_table(pa.table({"text": texts, "label": column}), path)
    return path


def _run(path: Path, out: Path, **kwargs: Any) -> Report:
    return run_preflight(path, None, out, smoke=False, **kwargs)


def _found(out: Path) -> dict[int, str]:
    frame = pl.read_parquet(out / "findings.parquet").filter(pl.col("rule") == "labels")
    return dict(frame.select("row", "code").iter_rows())


def _details(out: Path) -> dict[int, str]:
    frame = pl.read_parquet(out / "findings.parquet").filter(pl.col("rule") == "labels")
    return dict(frame.select("row", "detail").iter_rows())


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_every_planted_fault_is_found(tmp_path: Path, fmt: str) -> None:
    path = _write(tmp_path, fmt, _labels(PLANTED))
    report = _run(path, tmp_path / "out")
    assert (
        report.rules_file.inferred["label"] == "'label' (by name, class names: 'Pos', "
        "'neg', 'neg ', 'nge', 'pos')"
    )
    assert report.verdict == "fail"
    assert _found(tmp_path / "out") == {row: code for row, (_, code) in PLANTED.items()}
    details = _details(tmp_path / "out")
    assert (
        details[7] == "label: 'nge' occurs once, 1 edit from class 'neg' (97 labels): a "
        "typo of 'neg'?"
    )
    assert (
        details[8] == "label: 'Pos' (1 label) is 'pos' (96 labels) spelled another way "
        "(the same after trimming spaces and case folding)"
    )
    assert "'neg ' (1 label) is 'neg' (97 labels)" in details[9]
    assert details[10] == (
        "label: expected a class name (a string, as most labels are), got an integer 1"
    )
    if fmt == "jsonl":  # CSV has no empty string: an empty or blank cell is a missing label
        assert details[6] == "label: empty (''), not a class name"
        assert details[11] == "label: only whitespace ('   '), not a class name"
    stats = report.rule("labels").stats
    assert stats["class_names"] is True
    assert stats["classes"] == {"Pos": 1, "neg": 97, "neg ": 1, "nge": 1, "pos": 96}
    assert report.rule("labels").notes == [
        "classes inferred from the data: 5 names ('Pos', 'neg', 'neg ', 'nge', 'pos'); set "
        "model.labels to check against the model"
    ]


def test_parquet_dictionary_column(tmp_path: Path) -> None:
    planted = {k: v for k, v in PLANTED.items() if v[1] != "label_wrong_type"}
    path = _write(tmp_path, "parquet", _labels(planted))
    report = _run(path, tmp_path / "out")
    assert "class names" in report.rules_file.inferred["label"]
    assert _found(tmp_path / "out") == {row: code for row, (_, code) in planted.items()}


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_clean_names_pass_with_their_distribution(tmp_path: Path, fmt: str) -> None:
    path = _write(tmp_path, fmt, _labels({}))
    report = _run(path, tmp_path / "out")
    assert report.rule("labels").status == "pass"
    assert report.rule("labels").stats["classes"] == {"neg": 100, "pos": 100}


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_fix_quarantines_each_flagged_record_and_keeps_the_rest(tmp_path: Path, fmt: str) -> None:
    path = _write(tmp_path, fmt, _labels(PLANTED))
    clean, rejected = tmp_path / f"clean.{fmt}", tmp_path / "rejected.jsonl"
    report = run_preflight(path, None, fix=FixOptions(out=clean, quarantine=rejected), smoke=False)
    assert report.fix is not None and report.fix["balanced"] is True
    entries = [json.loads(x) for x in rejected.read_bytes().splitlines()]
    assert sorted(e["row"] for e in entries) == sorted(PLANTED)
    if fmt == "csv":
        with clean.open(newline="") as f:
            kept = [r["text"] for r in csv.DictReader(f)]
    else:
        kept = [json.loads(x)["text"] for x in clean.read_bytes().splitlines()]
    texts = sorted(kept + [e["record"]["text"] for e in entries])
    assert texts == sorted(
        f"review {i} says {'good' if i % 3 else 'bad'} things" for i in range(200)
    )  # each record in exactly one output
    again = _run(clean, tmp_path / "again")
    assert again.rule("labels").status == "pass"


def test_a_dominant_class_name(tmp_path: Path) -> None:
    path = _write(tmp_path, "jsonl", ["pos"] * 190 + ["neg"] * 10)
    rules = {
        "rules": [
            {"id": "labels", "check": "label_range", "infer_classes": True, "max_class_share": 0.9}
        ],
        "fields": {"label": "label"},
    }
    report = run_preflight(path, rules, tmp_path / "out", smoke=False)
    assert report.rule("labels").codes == {"class_dominant": 1}


def test_csv_integer_labels_are_still_class_ids(tmp_path: Path) -> None:
    path = tmp_path / "ids.csv"
    path.write_text(
        "text,label\n" + "".join(f"row {i},{i % 3}\n" for i in range(60)) + "odd one,pos\n"
    )
    report = _run(path, tmp_path / "out")
    assert report.rules_file.inferred["label"] == "'label' (by name, integer class ids)"
    assert "class_names" not in report.rule("labels").stats
    assert _found(tmp_path / "out") == {60: "label_wrong_type"}


def test_free_text_in_a_label_field_is_not_class_names(tmp_path: Path) -> None:
    path = tmp_path / "free.jsonl"
    path.write_text(
        "".join(
            json.dumps({"text": f"doc {i}", "label": f"a note about doc {i}"}) + "\n"
            for i in range(100)
        )
    )
    report = _run(path, tmp_path / "out")
    assert "label" not in report.rules_file.fields
    assert report.rules_file.inferred["label"].startswith("none: 'label' has a label's name")
    assert "labels" not in [r.id for r in report.rules]


# A long-tailed intent set: 30 big intents and 10 singletons, all distinct words.
_INTENTS = [
    "book_flight",
    "cancel_order",
    "check_balance",
    "play_music",
    "set_alarm",
    "weather",
    "translate",
    "timer",
    "reminder",
    "calendar",
    "news",
    "traffic",
    "recipe",
    "shopping_list",
    "order_status",
    "pay_bill",
    "transfer",
    "greeting",
    "goodbye",
    "thanks",
    "joke",
    "definition",
    "spelling",
    "calculator",
    "currency",
    "flight_status",
    "hotel",
    "restaurant",
    "taxi",
    "movie",
]
_TAIL = [
    "tire_pressure",
    "oil_change",
    "jump_start",
    "pto_request",
    "w2_form",
    "meal_suggestion",
    "nutrition_info",
    "carry_on",
    "lost_luggage",
    "insurance",
]


def test_a_long_tailed_intent_set_passes(tmp_path: Path) -> None:
    labels = [_INTENTS[i % len(_INTENTS)] for i in range(900)] + _TAIL
    path = _write(tmp_path, "jsonl", labels)
    report = _run(path, tmp_path / "out")
    assert "class names" in report.rules_file.inferred["label"]
    assert report.rule("labels").status == "pass", report.rule("labels")
    assert report.rule("labels").stats["num_classes"] == 40


def test_mostly_rare_classes_have_no_strays() -> None:
    counts = {"cat": 40, "cart": 1, "bat": 1, "hat": 1}  # 3 of 4 classes rare
    assert suspect_names(counts, "label") == {}


@pytest.mark.parametrize("family", ["intent_{}", "LABEL_{}", "topic{}"])
def test_a_numbered_family_has_no_strays(family: str) -> None:
    # A long tail of numbered intents: 'intent_87' (once) is 2 edits from 'intent_0' (151
    # labels), and 28 of 106 rare classes were flagged as typos.
    counts = {family.format(i): 100 for i in range(10)}
    counts |= {family.format(i): 1 for i in range(10, 15)}
    counts[family.format(0).replace("0", "O")] = 1  # a letter for the digit: a typo still
    flagged = suspect_names(counts, "label")
    assert set(flagged) == {family.format(0).replace("0", "O")}


def test_strays_and_variants_from_counts() -> None:
    counts = {
        "sports": 300,
        "politics": 280,
        "sprots": 1,
        "politcs": 2,
        "Sports": 3,
        "science": 250,
        "sport": 40,
    }
    got = {k: code for k, (code, _) in suspect_names(counts, "topic").items()}
    # 'sport' holds 40: a class of its own, not 20 times rarer than 'sports'
    assert got == {"sprots": "label_stray", "politcs": "label_stray", "Sports": "label_variant"}


def test_a_typo_needs_a_class_twenty_times_bigger() -> None:
    assert suspect_names({"neg": 19, "pos": 30, "nge": 1}, "label") == {}
    assert set(suspect_names({"neg": 20, "pos": 30, "nge": 1}, "label")) == {"nge"}


@pytest.mark.parametrize(
    ("a", "b", "d"),
    [
        ("neg", "nge", 1),
        ("sports", "sprots", 1),
        ("politics", "politcs", 1),
        ("positive", "postive", 1),
        ("abc", "abc", 0),
        ("kitten", "sitting", 3),
        ("ca", "abc", 3),
    ],
)
def test_osa_distance(a: str, b: str, d: int) -> None:
    assert osa_distance(a, b, 5) == d
    assert osa_distance(a, b, 1) == min(d, 2)
