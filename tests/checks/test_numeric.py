"""numeric: NaN/Inf/null/strings in numeric fields and vectors, bounds, dtype overflow and
corpus-wide robust outliers."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

import preflight.source.jsonl as jsonl
from preflight import ConfigError, load_rules, run_preflight
from preflight.batch import Batch
from preflight.checks.base import Context
from preflight.checks.numeric import Numeric, NumericParams, overflow_limit
from preflight.config import Fields, ModelFacts
from preflight.source import open_source

SCORE = {"numeric": "score", "id": "id"}


def numeric(gate, records, *, fields=SCORE, **params):
    """Run one `numeric` rule over dict records."""
    return gate(records, "numeric", fields=fields, **params)


def scores(*values):
    return [{"id": f"r{i}", "score": v} for i, v in enumerate(values)]


def details(g, code=None) -> dict[int, str]:
    f = g.findings()
    if code is not None:
        f = f.filter(pl.col("code") == code)
    return dict(f.select("row", "detail").iter_rows())


# -- values that are not finite numbers ---------------------------------------------------


def test_python_nan_and_infinity_literals_are_read_and_flagged(gate):
    lines = [
        '{"id": "a", "score": 1.5}',
        '{"id": "b", "score": NaN}',
        '{"id": "c", "score": Infinity}',
        '{"id": "d", "score": -Infinity}',
        '{"id": "e", "score": 2}',
    ]
    g = gate(lines=lines, check="numeric", fields=SCORE)
    assert g.codes_by_row() == {1: {"nan"}, 2: {"pos_inf"}, 3: {"neg_inf"}}
    assert details(g) == {1: "score: NaN", 2: "score: +Inf", 3: "score: -Inf"}
    assert g.result.status == "fail"


def test_every_string_kind_has_its_code(gate):
    g = numeric(gate, scores(1, "NaN", "nan", "inf", "-Infinity", "1e400", "3.5", " 2 ",
                             "abc", "", 4))
    assert g.codes_by_row() == {
        1: {"nan_string"}, 2: {"nan_string"}, 3: {"inf_string"}, 4: {"inf_string"},
        5: {"inf_string"}, 6: {"numeric_string"}, 7: {"numeric_string"},
        8: {"not_a_number"}, 9: {"not_a_number"},
    }
    d = details(g)
    assert d[1] == 'score: "NaN" (a string)'
    assert d[5] == 'score: "1e400" (a string; infinite as a number)'
    assert d[6] == 'score: "3.5" (a number written as a string)'


def test_non_numeric_string_is_kept_out_of_the_detail_and_redacted(gate):
    g = numeric(gate, scores(1.0, "secret words"))
    f = g.findings()
    assert f.get_column("detail").to_list() == ["score: a string, not a number"]
    example = g.result.examples[0]
    assert example.code == "not_a_number" and "secret" not in (example.snippet or "")


def test_booleans_objects_and_lists_are_not_numbers(gate):
    g = numeric(gate, scores(1, True, {"a": 1}, 2), fields={"target": "score", "id": "id"})
    assert g.codes_by_row() == {1: {"not_a_number"}, 2: {"not_a_number"}}
    g = numeric(gate, scores([1.0], [2.0, 3.0], None), fields={"target": "score", "id": "id"})
    assert g.codes_by_row() == {0: {"not_a_number"}, 1: {"not_a_number"}, 2: {"null"}}
    assert details(g)[0] == "score: an array where a number is expected"


def test_typed_boolean_column_is_not_a_number(gate):
    g = numeric(gate, scores(True, False))
    assert g.rows("not_a_number") == [0, 1]
    assert details(g)[0] == "score: true (a boolean, not a number)"


def test_null_and_missing_are_flagged_where_the_field_exists(gate):
    records = [{"id": "a", "score": 1}, {"id": "b", "score": None}, {"id": "c"}]
    g = numeric(gate, records)
    assert g.codes_by_row() == {1: {"null"}, 2: {"null"}}
    assert details(g)[2] == "score: null or missing"
    assert numeric(gate, records, allow_null=True).findings().height == 0


def test_zero_negative_huge_and_integer_values_are_fine(gate):
    values = (0, 0.0, -0.0, -3, -2.5e10, 1e300, 9007199254740993, 1e-320, 7)
    g = numeric(gate, scores(*values), outlier_z=None)
    assert g.findings().height == 0
    assert g.result.status == "pass"


def test_mixed_type_field_numbers_and_nan_strings(gate):
    # Numbers and "NaN" strings in one field: the reader keeps the Python values.
    g = numeric(gate, scores(1.0, "NaN", 2, "nan", 3.5, "Infinity"))
    assert g.codes_by_row() == {1: {"nan_string"}, 3: {"nan_string"}, 5: {"inf_string"}}
    stats = g.result.stats["fields"]["score"]
    assert (stats["count"], stats["nan"], stats["inf"], stats["strings"]) == (3, 2, 1, 3)
    assert (stats["min"], stats["max"], stats["median"]) == (1.0, 3.5, 2.0)


def test_numeric_strings_can_be_allowed(gate):
    g = numeric(gate, scores(1, "3.5", "NaN"), allow_numeric_strings=True)
    assert g.codes_by_row() == {2: {"nan_string"}}


# -- vectors ------------------------------------------------------------------------------


def test_one_nan_element_in_a_feature_vector_names_its_index(gate):
    lines = [
        '{"id": "a", "features": [0.1, 0.2, 0.3, 0.4]}',
        '{"id": "b", "features": [0.1, 0.2, 0.3, NaN]}',
        '{"id": "c", "features": [NaN, Infinity, NaN, null]}',
        '{"id": "d", "features": null}',
        '{"id": "e", "features": []}',
    ]
    g = gate(lines=lines, check="numeric", fields={"features": "features", "id": "id"})
    # [] where the others hold 4 values: a vector of another length (numeric_shapes)
    assert g.codes_by_row() == {1: {"nan"}, 2: {"nan", "pos_inf", "null"}, 3: {"null"},
                                4: {"wrong_length"}}
    f = g.findings()
    got = {(r, c): d for r, c, d in f.select("row", "code", "detail").iter_rows()}
    assert got[(1, "nan")] == "features[3]: NaN"
    assert got[(2, "nan")] == "features: 2× NaN at [0], [2]"
    assert got[(2, "pos_inf")] == "features[1]: +Inf"
    assert got[(2, "null")] == "features[3]: null"
    assert got[(3, "null")] == "features: null or missing"
    stats = g.result.stats["fields"]["features"]
    assert (stats["count"], stats["nan"], stats["inf"], stats["nulls"]) == (7, 3, 1, 2)


def test_vector_elements_that_are_strings_or_mixed(gate):
    records = [{"id": "a", "features": [1, "NaN", 2, "x", True]}, {"id": "b", "features": [1, 2]}]
    g = numeric(gate, records, fields={"features": "features", "id": "id"})
    got = {c: d for c, d in g.findings().select("code", "detail").iter_rows()}
    assert got == {"nan_string": 'features[1]: "NaN" (a string)',
                   "not_a_number": "features: 2× not numbers at [3], [4]"}


def test_nested_lists_name_every_level(gate):
    lines = ['{"m": [[1, 2], [3, 4]]}', '{"m": [[1, NaN], null, [5, 1e6]]}']
    g = gate(lines=lines, check="numeric", fields={"numeric": "m"}, max=100)
    got = {c: d for c, d in g.findings().select("code", "detail").iter_rows()}
    assert got.pop("outlier").startswith("m[2][1]: 1000000 is an outlier")
    assert got == {"nan": "m[0][1]: NaN", "null": "m[1]: null",
                   "above_max": "m[2][1]: 1000000 > max 100"}


def test_several_elements_out_of_bounds_list_positions_and_values(gate):
    records = [{"v": [5, -1, 3, -2]}, {"v": [1, 2]}]
    g = numeric(gate, records, fields={"numeric": "v"}, min=0)
    assert details(g) == {0: "v: 2× below min 0 at [1]=-1, [3]=-2"}


def test_typed_and_python_paths_agree(gate):
    records = [{"v": [1.0, None, 3.0]}, {"v": [math.inf, 2.0]}, {"v": None}, {"v": [5.0, -1.0]},
               {"v": [[1.0], 2.0]}]
    typed = numeric(gate, records[:4], fields={"numeric": "v"}, min=0)
    # A last record with a nested list makes the field's types disagree: Python values.
    walked = numeric(gate, records, fields={"numeric": "v"}, min=0)
    cols = ["row", "code", "detail"]
    assert typed.findings().select(cols).rows() == walked.findings().select(cols).rows()
    assert typed.findings().height == 4


def test_parquet_float32_and_list_columns(tmp_path):
    frame = pl.DataFrame({
        "x": pl.Series([1.0, math.nan, 70000.0, None], dtype=pl.Float32),
        "f": [[1.0, 2.0], [math.inf], None, [0.5]],
    })
    path = tmp_path / "data.parquet"
    frame.write_parquet(path)
    rules = {"fields": {"numeric": ["x", "f"]},
             "rules": [{"id": "r", "check": "numeric", "dtype": "fp16", "outlier_z": None}]}
    run_preflight(path, rules=rules, out=tmp_path / "out", smoke=False)
    f = pl.read_parquet(tmp_path / "out" / "findings.parquet")
    assert set(f.select("row", "code", "detail").iter_rows()) == {
        (1, "nan", "x: NaN"), (1, "pos_inf", "f[0]: +Inf"), (2, "null", "f: null or missing"),
        (2, "dtype_overflow", "x: 70000 overflows fp16 (|x| >= 65520 rounds to inf)"),
        (3, "null", "x: null or missing"),
    }


def test_fixed_size_array_column_is_flattened():
    col = pl.Series("v", [[1.0, math.nan], [2.0, 3.0]], dtype=pl.Array(pl.Float64, 2))
    check = _check(numeric="v")
    found = check.scan(Batch(frame=pl.DataFrame([col]), rows=np.arange(2)))
    assert found is not None
    assert found.select("i", "code", "detail").rows() == [(0, "nan", "v[1]: NaN")]


# -- bounds -------------------------------------------------------------------------------


def test_min_max_are_inclusive(gate):
    g = numeric(gate, scores(0, 10, -0.001, 10.5, 5), min=0, max=10)
    assert g.codes_by_row() == {2: {"below_min"}, 3: {"above_max"}}
    assert details(g) == {2: "score: -0.001 < min 0", 3: "score: 10.5 > max 10"}


def test_per_field_bounds_override_min_max(gate):
    records = [{"a": 5, "b": 5}, {"a": -1, "b": -1}, {"a": 200, "b": 200}]
    g = numeric(gate, records, fields={"numeric": ["a", "b"]}, min=0, max=10,
                bounds={"b": [None, 100]}, outlier_z=None)
    got = set(g.findings().select("row", "code", "detail").iter_rows())
    assert got == {(1, "below_min", "a: -1 < min 0"), (2, "above_max", "a: 200 > max 10"),
                   (2, "above_max", "b: 200 > max 100")}


def test_inf_and_nan_are_not_also_out_of_bounds(gate):
    lines = ['{"score": Infinity}', '{"score": -Infinity}', '{"score": NaN}']
    g = gate(lines=lines, check="numeric", fields={"numeric": "score"}, min=0, max=1,
             dtype="fp16")
    assert g.codes_by_row() == {0: {"pos_inf"}, 1: {"neg_inf"}, 2: {"nan"}}


def test_bounds_apply_to_numeric_strings_too(gate):
    g = numeric(gate, scores(1, "50"), max=10)
    assert g.codes_by_row() == {1: {"numeric_string", "above_max"}}


# -- training dtype overflow --------------------------------------------------------------


def test_overflow_limits_are_where_numpy_and_torch_round_to_inf():
    for dtype, np_type in (("fp16", np.float16), ("fp32", np.float32)):
        limit = overflow_limit(dtype)
        with np.errstate(over="ignore"):
            assert np.isinf(np_type(limit)) and np.isinf(np_type(-limit))
            below = np.nextafter(limit, 0)
            assert np.isfinite(np_type(below)) and np_type(below) == np.finfo(np_type).max
    assert overflow_limit("fp16") == 65520.0
    torch = pytest.importorskip("torch")
    limit = overflow_limit("bf16")
    # Exactly representable in float32, so casting through float32 is one rounding here.
    assert float(np.float32(limit)) == limit
    below = float(np.nextafter(np.float32(limit), np.float32(0)))
    cast = torch.tensor([limit, below, 3.39e38], dtype=torch.float32).to(torch.bfloat16)
    assert cast[0].isinf() and not cast[1].isinf() and not cast[2].isinf()
    assert float(cast[1]) == torch.finfo(torch.bfloat16).max


def test_fp16_boundaries(gate):
    values = [65504, 65519, 65519.99, 65520, -65520, 70000, -65504, 1e-8]
    g = numeric(gate, scores(*values), dtype="fp16", outlier_z=None)
    with np.errstate(over="ignore"):
        expected = [i for i, v in enumerate(values) if np.isinf(np.float16(v))]
    assert expected == [3, 4, 5]
    assert g.rows("dtype_overflow") == expected
    assert details(g)[3] == "score: 65520 overflows fp16 (|x| >= 65520 rounds to inf)"


def test_fp16_overflow_after_scale(gate):
    g = numeric(gate, scores(100.0, 65.0, -0.5), dtype="fp16", scale=1000, outlier_z=None)
    assert g.rows("dtype_overflow") == [0]
    assert details(g)[0] == (
        "score: 100 × scale 1000 = 100000 overflows fp16 (|x| >= 65520 rounds to inf)"
    )


def test_bf16_and_fp32_boundaries(gate):
    bf16 = overflow_limit("bf16")
    fp32 = overflow_limit("fp32")
    values = [3.39e38, float(np.nextafter(bf16, 0)), bf16, 3.4e38, float(np.finfo(np.float32).max),
              float(np.nextafter(fp32, 0)), fp32, -fp32, 1e39]
    g = numeric(gate, scores(*values), dtype="bf16", outlier_z=None)
    assert g.rows("dtype_overflow") == [2, 3, 4, 5, 6, 7, 8]
    g = numeric(gate, scores(*values), dtype="fp32", outlier_z=None)
    with np.errstate(over="ignore"):
        expected = [i for i, v in enumerate(values) if np.isinf(np.float32(v))]
    assert expected == [6, 7, 8]
    assert g.rows("dtype_overflow") == expected


def test_no_dtype_means_no_overflow_check(gate):
    assert numeric(gate, scores(1e300, 70000), outlier_z=None).findings().height == 0


# -- outliers over the whole column -------------------------------------------------------


def test_outlier_is_flagged_with_its_z_score(gate):
    values = [10.0 + (i % 7) for i in range(50)]
    values[17] = 1000.0
    g = numeric(gate, scores(*values))
    assert g.rows("outlier") == [17]
    stats = g.result.stats["fields"]["score"]
    assert stats["median"] == float(np.median(values))
    mad = float(np.median(np.abs(np.array(values) - stats["median"])))
    assert stats["mad"] == mad and stats["outliers"] == 1
    z = (1000.0 - stats["median"]) / (1.4826 * mad)
    assert details(g)[17] == (
        f"score: 1000 is an outlier (z = {z:.3g} > 8; median {stats['median']:g}, MAD {mad:g})"
    )


def test_outliers_use_the_median_of_the_whole_column_across_batches(gate, monkeypatch):
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 64)  # two or three records per batch
    monkeypatch.setattr(jsonl, "PIECE_BYTES", 32)
    values = [float(i % 10) for i in range(60)]
    values[31], values[32] = 500.0, 520.0  # both land in one small batch
    records = [{"id": f"r{i}", "score": v} for i, v in enumerate(values)]
    g = numeric(gate, records)
    path = next(p for p in g.out.parent.glob("data*.jsonl"))
    batches = list(open_source(path).batches())
    assert len(batches) > 10 and max(len(b) for b in batches) <= 3
    # In a batch of two or three records no value is 8 MADs out; against the corpus it is.
    assert g.rows("outlier") == [31, 32]
    stats = g.result.stats["fields"]["score"]
    assert stats["median"] == float(np.median(values))
    assert stats["count"] == 60 and stats["min"] == 0.0 and stats["max"] == 520.0


def test_ragged_vector_outliers_are_per_field_over_all_elements(gate):
    # Lists of two lengths: pooled (a fixed length is judged per position, see
    # test_numeric_positions.py).
    records = [{"id": f"r{i}", "v": [float(i % 5), float(i % 3), 1.0] + [2.0] * (i % 2)}
               for i in range(30)]
    records[4]["v"][2] = 900.0
    records[9]["v"] = [math.nan, 800.0, 950.0]
    g = numeric(gate, records, fields={"numeric": "v", "id": "id"})
    out = details(g, "outlier")
    assert set(out) == {4, 9}
    assert out[4].startswith("v[2]: 900 is an outlier (z = ")
    assert out[9].startswith("v: 2× outliers (z > 8; median 1, MAD 1) at [1]=800 (z = ")
    assert "[2]=950" in out[9]


def test_zero_mad_skips_outliers_and_says_so(gate):
    g = numeric(gate, scores(*([0.0] * 20 + [1.0, 1e9])))
    assert g.rows("outlier") == []
    stats = g.result.stats["fields"]["score"]
    assert stats["mad"] == 0.0 and "MAD is 0" in stats["note"]


def test_outliers_can_be_disabled(gate):
    values = [float(i % 7) for i in range(40)] + [1e6]
    assert numeric(gate, scores(*values), outlier_z=None).findings().height == 0
    assert numeric(gate, scores(*values), outlier_z=1e9).findings().height == 0
    assert numeric(gate, scores(*values)).rows("outlier") == [40]


def test_missing_in_a_whole_batch_is_null_when_the_field_appears_later(gate, monkeypatch):
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 64)
    records = [{"id": f"r{i}"} for i in range(6)] + [{"id": f"r{i}", "score": 1.0}
                                                      for i in range(6, 12)]
    g = numeric(gate, records)
    assert g.rows("null") == [0, 1, 2, 3, 4, 5]
    # The same finding whether or not the record's batch has the column somewhere: it
    # must not depend on where batches are cut (nor on which executor cut them).
    assert set(details(g).values()) == {"score: null or missing"}
    assert g.result.stats["fields"]["score"]["nulls"] == 6
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 1 << 20)
    whole = numeric(gate, records)
    assert details(whole) == details(g)
    assert [e.row for e in whole.result.examples] == [e.row for e in g.result.examples]


# -- inputs and configuration -------------------------------------------------------------


def test_csv_numbers_arrive_typed(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("id,score,other\n0,1.5,a\n1,NaN,b\n2,inf,c\n3,,d\n4,-7,e\n5,3,f\n")
    rules = {"fields": {"numeric": "score", "id": "id"},
             "rules": [{"id": "r", "check": "numeric", "min": -5}]}
    out = tmp_path / "out"
    report = run_preflight(path, rules=rules, out=out, smoke=False)
    f = pl.read_parquet(out / "findings.parquet")
    assert dict(f.select("row", "code").iter_rows()) == {
        1: "nan", 2: "pos_inf", 3: "null", 4: "below_min"
    }
    stats = report.rule("r").stats["fields"]["score"]
    assert (stats["count"], stats["min"], stats["max"], stats["median"]) == (3, -7.0, 3.0, 1.5)


def test_summary_stats(gate):
    lines = ['{"x": 1}', '{"x": 2}', '{"x": 4}', '{"x": null}', '{"x": NaN}',
             '{"x": Infinity}', '{"x": 10}', '{"x": "NaN"}']
    g = gate(lines=lines, check="numeric", fields={"numeric": "x"})
    stats = g.result.stats["fields"]["x"]
    hist = stats.pop("histogram")
    assert stats == {
        "count": 4, "nulls": 1, "nan": 2, "inf": 1, "strings": 1, "not_numbers": 0,
        "outliers": 0, "min": 1.0, "max": 10.0, "median": 3.0, "mad": 1.5, "note": None,
    }
    # The four finite values, over min..max (the outlier bounds are wider than the data).
    assert len(hist["counts"]) == 40 and len(hist["edges"]) == 41
    assert sum(hist["counts"]) == 4 and hist["below"] == hist["above"] == 0
    assert hist["edges"][0] == 1.0 and hist["edges"][-1] == 10.0
    assert hist["counts"][0] == 1 and hist["counts"][-1] == 1
    sigma = 1.4826 * 1.5
    assert hist["bounds"] == pytest.approx([3 - 8 * sigma, 3 + 8 * sigma])
    json.dumps(stats | {"histogram": hist})


def test_histogram_counts_far_values_outside_its_range(gate):
    lines = [json.dumps({"x": v}) for v in [10.0, 11.0, 9.0, 10.5, 9.5, 10.2, 9.8, 1e9]]
    g = gate(lines=lines, check="numeric", fields={"numeric": "x"})
    hist = g.result.stats["fields"]["x"]["histogram"]
    assert hist["above"] == 1 and hist["below"] == 0  # the outlier, beyond 1.5x its bound
    assert sum(hist["counts"]) == 7
    assert hist["bounds"][1] < hist["edges"][-1] < 1e9


@pytest.mark.parametrize("values", [[2**64 - 1] * 3, [1e16, 1e16 + 2, 1e16], [-1e308, 1e308, 0.0],
                                    [1.7976931348623157e308] * 2])
def test_histogram_of_values_at_the_edges_of_floats(gate, tmp_path, values):
    # numpy could not cut these into 40 bins ("Too many bins for data range": an internal
    # error in check and fix): one huge value (x and x + 1.0 are one float), two values
    # closer than 40 of their float steps, a range wider than a float holds.
    lines = [json.dumps({"x": v}) for v in values]
    g = gate(lines=lines, check="numeric", fields={"numeric": "x"})
    hist = g.result.stats["fields"]["x"]["histogram"]
    assert sum(hist["counts"]) + hist["below"] + hist["above"] == len(values)
    edges = hist["edges"]
    assert all(math.isfinite(e) for e in edges) and edges == sorted(set(edges))
    src = tmp_path / "edge.jsonl"
    src.write_text("".join(line + "\n" for line in lines))
    report = run_preflight(src, {"fields": {"numeric": "x"},
                                 "rules": [{"id": "r", "check": "numeric"}]},
                           out=tmp_path / "report", formats=["html"], smoke=False)
    assert report.rule("r").status != "error"
    assert (tmp_path / "report" / "report.html").stat().st_size > 0


def test_target_features_and_numeric_fields_are_all_checked(gate):
    records = [{"y": 1.0, "f": [1.0, 2.0], "n": 3}, {"y": None, "f": [None], "n": None}]
    g = numeric(gate, records, fields={"target": "y", "features": ["f"], "numeric": ["n"]})
    assert set(g.findings().get_column("detail")) == {"y: null or missing", "f[0]: null",
                                                      "n: null or missing"}
    assert set(g.result.stats["fields"]) == {"n", "y", "f"}


def test_no_numeric_field_declared_is_an_error(gate):
    g = numeric(gate, scores(1, 2), fields={"text": "text"})
    assert g.result.status == "error"
    assert "no numeric field declared" in (g.result.message or "")
    assert g.report.verdict == "fail"


def test_declared_field_absent_from_the_data_is_an_error(gate):
    g = numeric(gate, scores(1, 2), fields={"numeric": ["score", "nope"]})
    assert g.result.status == "error" and "nope" in (g.result.message or "")


def test_bounds_for_an_undeclared_field_is_an_error(gate):
    g = numeric(gate, scores(1, 2), bounds={"other": [0, 1]})
    assert g.result.status == "error" and "other" in (g.result.message or "")


@pytest.mark.parametrize(
    "params",
    [{"min": 5, "max": 1}, {"bounds": {"x": [3, 2]}}, {"dtype": "fp8"}, {"scale": "inf"},
     {"outlier_z": 0}, {"max_z": 3}],
)
def test_bad_params_are_config_errors(params):
    with pytest.raises(ConfigError):
        load_rules({"fields": {"numeric": "x"},
                    "rules": [{"id": "r", "check": "numeric", **params}]})


def test_params_have_descriptions():
    for name, f in NumericParams.model_fields.items():
        assert f.description, name


def _check(**fields: str) -> Numeric:
    return Numeric(NumericParams(), Context(fields=Fields(**fields), model=ModelFacts()))


def test_an_integer_beyond_float_range_is_inf_not_a_crash(gate):
    # Mixed types in the column send it down the per-value path, where float() overflows.
    lines = ['{"x": 1}', '{"x": "two"}', '{"x": ' + "9" * 400 + "}"]
    g = gate(lines=lines, check="numeric", fields={"numeric": "x"})
    assert g.result.status == "fail"
    assert set(g.rows()) == {1, 2}
