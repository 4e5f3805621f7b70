"""numeric: a feature vector is judged per position over its modal length, and a few
records of another shape (a truncated vector, a lone [NaN, NaN], [], a number, nested
lists) are ``wrong_length`` findings instead of turning the field back into one pooled
median/MAD that flags nearly every record; ragged fields keep the pooled statistics."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from preflight import FixOptions, run_preflight
from preflight.batch import Batch
from preflight.checks.base import Context
from preflight.checks.numeric import Numeric, NumericParams
from preflight.checks.numeric_shapes import MAX_SHAPES, ShapeCount
from preflight.config import Fields, ModelFacts
from tests.executor.cases import person_features

FEATURES = {"features": "features", "id": "id", "text": "text"}
RULES = {"fields": FEATURES, "rules": [{"id": "r", "check": "numeric", "fix": "quarantine"}]}


def numeric(gate, records, **params):
    return gate(records, "numeric", fields=FEATURES, **params)


def details(g, code: str) -> dict[int, str]:
    f = g.findings().filter(pl.col("code") == code)
    return dict(f.select("row", "detail").iter_rows())


def test_one_truncated_vector_is_named_and_the_rest_judged_per_position(gate):
    records = person_features(200)
    records[17]["features"] = [44, 1]
    g = numeric(gate, records)
    # Pooled again, every record's age was an outlier.
    assert g.codes_by_row() == {17: {"wrong_length"}}
    assert details(g, "wrong_length") == {
        17: "features: 2 values, not 5 (199 of 200 records hold 5)"
    }
    stats = g.result.stats["fields"]["features"]
    assert stats["per_position"] is True and stats["length"] == 5
    assert stats["wrong_length"] == 1 and stats["outliers"] == 0
    ages = [r["features"][0] for i, r in enumerate(records) if i != 17]
    assert stats["positions"]["median"][0] == float(np.median(ages))  # 44 left out
    assert sum(stats["histogram"]["counts"]) == 199 * 5


def test_a_planted_outlier_is_still_found_beside_a_truncated_vector(gate):
    records = person_features(200)
    records[17]["features"] = [44, 1]
    records[90]["features"][0] = 250
    g = numeric(gate, records)
    assert g.codes_by_row() == {17: {"wrong_length"}, 90: {"outlier"}}


def test_a_lone_nan_pair_has_its_nan_and_its_length(gate):
    records = person_features(120)
    lines = [json.dumps(r) for r in records]
    lines[40] = json.dumps({"id": 40, "text": "x", "features": [math.nan, math.nan]})
    g = gate(lines=lines, check="numeric", fields=FEATURES)
    assert g.codes_by_row() == {40: {"nan", "wrong_length"}}
    assert g.result.stats["fields"]["features"]["per_position"] is True


@pytest.mark.parametrize(
    ("value", "held"),
    [
        (3.5, "a single number, not 5 values"),
        ("NaN", "a single number, not 5 values"),
        ([[1, 2], [3]], "nested lists, not 5 values"),
        ([], "an empty list, not 5 values"),
        ([7], "1 value, not 5"),
        ([30, 0, 1, 0, 1, 2], "6 values, not 5"),
    ],
)
def test_another_shape_among_the_vectors(gate, value, held):
    records = person_features(100)
    records[5]["features"] = value
    g = numeric(gate, records)
    assert details(g, "wrong_length") == {5: f"features: {held} (99 of 100 records hold 5)"}
    assert "outlier" not in g.findings().get_column("code").to_list()
    assert g.result.stats["fields"]["features"]["per_position"] is True


def test_empty_lists_do_not_count_toward_the_length_and_pass_with_allow_null(gate):
    # A vector left empty in many records (as null would be) does not make the field a
    # sequence: still judged per position, each [] named unless allow_null.
    records = person_features(100)
    for i in range(0, 100, 2):
        records[i]["features"] = []
    records[1]["features"] = [44, 1]
    g = numeric(gate, records)
    assert g.result.stats["fields"]["features"]["per_position"] is True
    assert g.rows("outlier") == []
    assert g.rows("wrong_length") == sorted([1, *range(0, 100, 2)])
    assert details(g, "wrong_length")[0] == (
        "features: an empty list, not 5 values (49 of 100 records hold 5)"
    )
    lenient = numeric(gate, records, allow_null=True)
    assert lenient.codes_by_row() == {1: {"wrong_length"}}


def test_nulls_and_wrong_types_are_their_own_findings_not_lengths(gate):
    records = person_features(100)
    records[3]["features"] = None
    records[4]["features"] = "five"
    records[6]["features"][2] = None  # an element: the list still holds 5
    g = numeric(gate, records)
    assert g.codes_by_row() == {3: {"null"}, 4: {"not_a_number"}, 6: {"null"}}


def test_the_modal_length_must_hold_nine_in_ten(gate):
    def run(odd: int):
        records = [{"id": i, "features": [float(20 + i % 50), float(i % 2)]} for i in range(100)]
        for i in range(odd):
            records[i]["features"] = [float(i), 1.0, 0.0]
        return numeric(gate, records)

    at = run(10)  # 90 of 100
    assert at.result.stats["fields"]["features"]["per_position"] is True
    assert at.rows("wrong_length") == list(range(10))
    below = run(11)  # 89 of 100: lengths vary, a sequence field
    assert "per_position" not in below.result.stats["fields"]["features"]
    assert below.rows("wrong_length") == []


def test_ragged_token_ids_keep_pooled_statistics_and_no_length_findings(gate):
    rnd = random.Random(5)
    records = [
        {"id": i, "features": [rnd.randrange(50_000) for _ in range(rnd.randint(3, 90))]}
        for i in range(300)
    ]
    g = numeric(gate, records)
    stats = g.result.stats["fields"]["features"]
    assert "per_position" not in stats and stats["median"] is not None
    assert g.rows("wrong_length") == []


def test_a_common_length_with_many_other_lengths_is_ragged(gate):
    # Token ids cut at a context length: most records reach it, the others end anywhere.
    # More distinct lengths than MAX_SHAPES: a sequence field, no length findings.
    rnd = random.Random(6)
    records = [{"id": i, "features": [rnd.randrange(1000) for _ in range(64)]} for i in range(400)]
    for k, i in enumerate(range(0, 400, 20)):  # 20 records, 20 lengths: 95% hold 64
        records[i]["features"] = records[i]["features"][: k + 2]
    assert len({len(r["features"]) for r in records}) > MAX_SHAPES
    g = numeric(gate, records)
    assert "per_position" not in g.result.stats["fields"]["features"]
    assert g.rows("wrong_length") == []


def test_parquet_list_column_gives_the_jsonl_findings(tmp_path: Path):
    records = person_features(150)
    records[8]["features"] = [44, 1]
    records[60]["features"] = [math.nan, math.nan]
    records[99]["features"][0] = 250
    jsonl = tmp_path / "v.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    parquet = tmp_path / "v.parquet"
    pl.DataFrame(
        {
            "id": [r["id"] for r in records],
            "text": [r["text"] for r in records],
            "features": pl.Series(
                [[float(x) for x in r["features"]] for r in records], dtype=pl.List(pl.Float64)
            ),
        }
    ).write_parquet(parquet)
    found = {}
    for path in (jsonl, parquet):
        report = run_preflight(
            path, RULES, tmp_path / f"out-{path.suffix[1:]}", smoke=False, formats=["json"]
        )
        frame = pl.read_parquet(tmp_path / f"out-{path.suffix[1:]}" / "findings.parquet")
        found[path.suffix] = sorted(frame.select("row", "code", "detail").iter_rows())
        assert report.rule("r").stats["fields"]["features"]["wrong_length"] == 2
    assert found[".jsonl"] == found[".parquet"]
    assert [(r, c) for r, c, _ in found[".jsonl"]] == [
        (8, "wrong_length"),
        (60, "nan"),
        (60, "wrong_length"),
        (99, "outlier"),
    ]


def test_fix_quarantines_the_odd_record_once_and_keeps_every_other(tmp_path: Path):
    records = person_features(120)
    records[30]["features"] = [44, 1]
    records[31]["features"] = 7
    src = tmp_path / "v.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    clean, quarantine = tmp_path / "clean.jsonl", tmp_path / "rejected.jsonl"
    report = run_preflight(
        src, RULES, fix=FixOptions(out=clean, quarantine=quarantine), smoke=False
    )
    assert report.fix is not None and report.fix["balanced"] is True
    kept = [json.loads(x)["id"] for x in clean.read_text().splitlines()]
    rejected = [json.loads(x) for x in quarantine.read_text().splitlines()]
    assert sorted(e["row"] for e in rejected) == [30, 31]
    assert sorted(kept + [e["row"] for e in rejected]) == list(range(120))
    again = run_preflight(clean, RULES, smoke=False)
    assert again.passed  # the clean output is a vector of 5 throughout


def _scanned(batches: list[list]) -> tuple[dict, list[tuple]]:
    """Scan ``batches`` (Python values: one check instance each), merge as the executors
    do, finish; the field's stats and the findings."""
    checks, row = [], 0
    for values in batches:
        check = Numeric(NumericParams(), Context(fields=Fields(features="f"), model=ModelFacts()))
        # Mixed JSON types: the reader keeps the Python values in ``raw``.
        frame = pl.DataFrame({"f": pl.Series([None] * len(values), dtype=pl.String)})
        batch = Batch(frame=frame, rows=np.arange(row, row + len(values)), raw={"f": values})
        check.scan(batch)
        checks.append(check)
        row += len(values)
    first = checks[0]
    for other in checks[1:]:
        first.merge_state(other.export_state())
    found = first.finish()
    rows = [] if found is None else sorted(found.select("row", "code", "detail").iter_rows())
    return first.summary()["fields"]["f"], rows


def test_where_batches_are_cut_changes_nothing():
    rnd = random.Random(9)
    values: list = [[rnd.randint(20, 70), rnd.randint(0, 1), rnd.randint(0, 2)] for _ in range(90)]
    values[7] = [44, 1]
    values[40] = 3
    values[41] = []
    values[43] = [[1, 2, 3]]
    values[88][0] = 400
    whole = _scanned([values])
    for cuts in ([30, 60], [7, 8, 43], [40, 42], [1, 2, 3, 89]):  # [3, []]: no list
        parts = [values[a:b] for a, b in zip([0, *cuts], [*cuts, 90], strict=True)]
        assert _scanned(parts) == whole
    stats, rows = whole
    assert stats["wrong_length"] == 4
    assert [(r, c) for r, c, _ in rows] == [
        (7, "wrong_length"),
        (40, "wrong_length"),
        (41, "wrong_length"),
        (43, "wrong_length"),
        (88, "outlier"),
    ]


def test_shape_counts_merge_alike_in_any_grouping():
    rnd = random.Random(1)
    parts = []
    for _ in range(12):
        shapes = np.asarray(
            [rnd.choice([5, 5, 5, 5, 2, -1, rnd.randint(1, 40)]) for _ in range(8)], np.int32
        )
        count = ShapeCount()
        count.add(shapes, len(shapes))
        parts.append(count)

    def fold(items: list[ShapeCount]) -> ShapeCount:
        out = ShapeCount()
        for c in items:
            out = out.merged_with(c)
        return out

    serial = fold(parts)
    halves = fold(parts[:5]).merged_with(fold(parts[5:]))
    pairs = fold([fold(parts[k : k + 2]) for k in range(0, 12, 2)])
    assert serial == halves == pairs
