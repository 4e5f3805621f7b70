"""numeric: robust outliers of a fixed-length feature vector, per position (each element
against its own position's median and MAD); ragged and nested lists pooled."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl

from preflight.batch import Batch
from preflight.checks.base import Context
from preflight.checks.numeric import Numeric, NumericParams
from preflight.config import Fields, ModelFacts
from tests.executor.cases import person_features

FEATURES = {"features": "features", "id": "id", "text": "text"}


def numeric(gate, records, **params):
    return gate(records, "numeric", fields=FEATURES, **params)


def outliers(g) -> dict[int, str]:
    f = g.findings().filter(pl.col("code") == "outlier")
    return dict(f.select("row", "detail").iter_rows())


def test_heterogeneous_feature_vectors_have_no_outliers(gate):
    # Pooled, the median is ~1 and every age is 30 MADs out: each record was flagged.
    g = numeric(gate, person_features(200))
    assert outliers(g) == {}
    assert g.result.status == "pass"
    stats = g.result.stats["fields"]["features"]
    assert stats["per_position"] is True and stats["length"] == 5
    assert stats["median"] is None and stats["mad"] is None  # one pooled value fits none
    ages = np.array([r["features"][0] for r in person_features(200)], float)
    assert stats["positions"]["median"][0] == float(np.median(ages))
    assert stats["positions"]["mad"][0] == float(np.median(np.abs(ages - np.median(ages))))
    assert stats["histogram"]["bounds"] is None  # each position has its own
    assert sum(stats["histogram"]["counts"]) == 1000


def test_a_planted_age_is_flagged_against_its_own_position(gate):
    records = person_features(200)
    records[37]["features"][0] = 250
    g = numeric(gate, records)
    assert g.rows("outlier") == [37]
    pos = g.result.stats["fields"]["features"]["positions"]
    med, mad = pos["median"][0], pos["mad"][0]
    z = (250 - med) / (1.4826 * mad)
    assert outliers(g)[37] == (f"features[0]: 250 is an outlier (z = {z:.3g} > 8; "
                               f"position 0's median {med:g}, MAD {mad:g})")


def test_binary_flag_positions_are_never_flagged(gate):
    # Eight features near 0.5 and a flag that is rarely 1: pooled (median ~0.5, MAD ~0.007)
    # every flag, 0 or 1, was 50 MADs out. The flag's own MAD is 0: it is not judged.
    rng = np.random.default_rng(3)
    records = [{"id": i, "features": [*np.round(rng.normal(0.5, 0.01, 8), 4).tolist(),
                                      int(i % 10 == 0)]} for i in range(100)]
    g = numeric(gate, records)
    assert outliers(g) == {}
    stats = g.result.stats["fields"]["features"]
    assert stats["positions"]["mad"][8] == 0.0
    assert stats["note"].startswith("MAD is 0 or not finite at 1 of 9 positions (8;")


def test_nan_elements_leave_the_other_elements_at_their_positions(gate):
    records = person_features(120)
    records[3]["features"][0] = math.nan  # the later elements are not shifted to [0]
    records[3]["features"][4] = 40  # far out for a count 0..2, an age at position 0
    records[8]["features"][2] = None
    records[9]["features"][1] = "x"  # a string: this batch is read as Python values
    records[50]["features"] = None
    records[60]["features"] = []  # no element, but not 5 values: not silent
    records[77]["features"][0] = 250
    lines = [json.dumps(r) for r in records]  # NaN as the literal preflight reads
    g = gate(lines=lines, check="numeric", fields=FEATURES)
    assert g.codes_by_row() == {3: {"nan", "outlier"}, 8: {"null"}, 9: {"not_a_number"},
                                50: {"null"}, 60: {"wrong_length"}, 77: {"outlier"}}
    got = outliers(g)
    assert got[3].startswith("features[4]: 40 is an outlier (z = ")
    assert "position 4's median 1, MAD 1)" in got[3]
    assert got[77].startswith("features[0]: 250 is an outlier")
    assert g.result.stats["fields"]["features"]["per_position"] is True


def test_several_outliers_of_one_record_name_their_own_centers(gate):
    records = person_features(100)
    records[12]["features"][0] = 400
    records[12]["features"][4] = 30
    g = numeric(gate, records)
    detail = outliers(g)[12]
    assert detail.startswith("features: 2× outliers (z > 8; per position) at [0]=400 (z = ")
    assert "; median 1, MAD 1)" in detail.split("[4]=30")[1]


def test_ragged_lists_keep_pooled_statistics(gate):
    # Sequences of varying length: position 3 is not a feature, one median for the field.
    records = [{"id": i, "features": [float((i + k) % 7) for k in range(3 + i % 4)]}
               for i in range(60)]
    records[20]["features"][1] = 500.0
    g = numeric(gate, records)
    stats = g.result.stats["fields"]["features"]
    assert "per_position" not in stats and stats["median"] == 3.0
    assert outliers(g) == {20: "features[1]: 500 is an outlier (z = 168 > 8; median 3, MAD 2)"}


def test_numbers_among_lists_beyond_a_tenth_keep_the_field_pooled(gate):
    # One number among the lists is a wrong_length finding (tests/checks/
    # test_numeric_shapes.py); a field where many records hold a number is no vector.
    records = [{"id": i, "features": [float(i % 5), 100.0 + i % 3]} for i in range(40)]
    for i in range(0, 40, 8):
        records[i]["features"] = 2.0
    g = numeric(gate, records)
    stats = g.result.stats["fields"]["features"]
    assert "per_position" not in stats and stats["median"] is not None
    assert "wrong_length" not in g.findings().get_column("code").to_list()


def test_long_vectors_leave_the_positions_out_of_the_report(gate):
    records = [{"id": i, "features": [float((i * k) % 11) for k in range(65)]}
               for i in range(30)]
    stats = numeric(gate, records).result.stats["fields"]["features"]
    assert stats["per_position"] is True and stats["length"] == 65
    assert stats["positions"] is None


def _scanned(batches: list[list]) -> dict:
    """The field's stats after scanning ``batches`` of vectors in one check instance per
    batch, merged as the executors merge them, then ``finish``."""
    checks, row = [], 0
    for values in batches:
        check = Numeric(NumericParams(), Context(fields=Fields(features="f"), model=ModelFacts()))
        col = pl.Series("f", values, dtype=pl.List(pl.Float64))
        check.scan(Batch(frame=pl.DataFrame([col]), rows=np.arange(row, row + len(values))))
        checks.append(check)
        row += len(values)
    first = checks[0]
    for other in checks[1:]:
        first.merge_state(other.export_state())
    first.finish()
    return first.summary()["fields"]["f"]


def test_fixedness_does_not_depend_on_where_batches_are_cut():
    # A record of another length holds no finite value: whether it shares a batch with
    # finite values or not, the field is a vector of 3 the same way, the odd record named.
    vectors = [[float(i % 50), float(i % 2), float(i % 3)] for i in range(40)]
    odd = [math.nan, math.nan]
    alone = _scanned([vectors[:20], [odd], vectors[20:]])
    shared = _scanned([[*vectors[:20], odd], vectors[20:]])
    for stats in (alone, shared):
        assert stats["per_position"] is True and stats["length"] == 3
        assert stats["wrong_length"] == 1
    assert alone["positions"] == shared["positions"]
    fixed = _scanned([vectors[:20], [None], vectors[20:]])  # a null vector: no shape
    assert fixed["per_position"] is True and fixed["length"] == 3
    assert fixed["wrong_length"] == 0
