"""label_range: class labels, token labels and token ids a loss function cannot take."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preflight import run_preflight
from tests.checks.conftest import RULE_ID, Gate

LabelGate = Callable[..., Gate]


def _write(path: Path, records: Sequence[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.fixture
def labels(tmp_path: Path) -> LabelGate:
    """``labels(records, fields={...}, model={...}, **params)``: run one ``label_range``
    rule (the ``gate`` fixture cannot pass model facts). ``records`` may also be a list of
    shards (lists of records), written as a folder of files."""
    runs = iter(range(1000))

    def run(records: Sequence[Any], *, fields: dict[str, Any], model: dict[str, Any] | None = None,
            **params: Any) -> Gate:
        n = next(runs)
        if records and isinstance(records[0], list):
            path = tmp_path / f"shards{n}"
            path.mkdir()
            for k, shard in enumerate(records):
                _write(path / f"part{k}.jsonl", shard)
        else:
            path = tmp_path / f"data{n}.jsonl"
            _write(path, records)
        rules = {
            "fields": {"id": "id", **fields},
            "model": model or {},
            "rules": [{"id": RULE_ID, "check": "label_range", **params}],
        }
        out = tmp_path / f"out{n}"
        return Gate(run_preflight(path, rules=rules, out=out, smoke=False), out)

    return run


def _records(field: str, values: Sequence[Any]) -> list[dict[str, Any]]:
    """One record per value; ``...`` leaves the field out."""
    return [{"id": f"r{i}"} | ({} if v is ... else {field: v}) for i, v in enumerate(values)]


def _record_codes(g: Gate) -> dict[int, set[str]]:
    return {row: codes for row, codes in g.codes_by_row().items() if row is not None}


def _corpus(g: Gate) -> list[tuple[str, str]]:
    """Corpus-level findings (null row) as (code, detail)."""
    f = g.findings().filter(pl.col("row").is_null())
    return f.select("code", "detail").rows()


# --- class labels ---------------------------------------------------------------------------


def test_a_label_past_64_bits_is_shown_exactly(labels):
    # orjson read 2**70 as a float: the detail said 1.1805916207174113e+21.
    g = labels(_records("label", [0, 1, 2**70 + 1, 0]), fields={"label": "label"},
               model={"num_classes": 2})
    details = dict(g.findings().select("row", "detail").rows())
    assert details == {2: f"label: {2**70 + 1} outside [0, 2)"}


def test_integer_labels_out_of_range_fraction_and_null(labels):
    values = [0, 0.0, 1, 2, 3, -1, 1.5, None, ..., 2.0]
    g = labels(_records("label", values), fields={"label": "label"}, model={"num_classes": 3})
    assert _record_codes(g) == {
        4: {"label_out_of_range"},
        5: {"label_out_of_range"},
        6: {"label_wrong_type"},
        7: {"label_null"},
        8: {"label_null"},
    }
    details = dict(g.findings().select("row", "detail").rows())
    assert details[4] == "label: 3.0 outside [0, 3)"
    assert "got a number with a fraction 1.5" in details[6]
    assert g.result.stats["classes"] == {"0": 2, "1": 1, "2": 2}


def test_zero_labels_are_valid(labels):
    g = labels(_records("label", [0, 0.0, 0, 1]), fields={"label": "label"},
               model={"num_classes": 2})
    assert g.result.status == "pass"
    assert g.findings().height == 0


def test_bool_and_string_labels_are_wrong_type_when_ints_are_declared(labels):
    # Mixed JSON types: the batch keeps Python values (the raw path).
    values = [0, True, "2", 1.5, None, [1], {"c": 1}, 2, False, 3]
    g = labels(_records("label", values), fields={"label": "label"}, model={"num_classes": 3})
    assert _record_codes(g) == {
        1: {"label_wrong_type"},
        2: {"label_wrong_type"},
        3: {"label_wrong_type"},
        4: {"label_null"},
        5: {"label_wrong_type"},
        6: {"label_wrong_type"},
        8: {"label_wrong_type"},
        9: {"label_out_of_range"},
    }
    details = dict(g.findings().select("row", "detail").rows())
    assert details[1] == "label: expected an integer class id in [0, 3), got a boolean true"
    assert details[2] == "label: expected an integer class id in [0, 3), got a string '2'"


def test_bool_after_a_float_label_is_wrong_type(labels):
    g = labels(_records("label", [1.5, True, 0]), fields={"label": "label"},
               model={"num_classes": 3})
    assert _record_codes(g) == {0: {"label_wrong_type"}, 1: {"label_wrong_type"}}


def test_all_bool_labels_are_wrong_type(labels):
    g = labels(_records("label", [True, False]), fields={"label": "label"},
               model={"num_classes": 2})
    assert g.result.codes == {"label_wrong_type": 2, "class_absent": 2}


def test_string_labels_outside_the_declared_set(labels):
    values = ["pos", "neg", "neutral", "Pos", None, "pos"]
    g = labels(_records("label", values), fields={"label": "label"},
               model={"labels": ["pos", "neg"]})
    assert _record_codes(g) == {2: {"label_not_in_set"}, 3: {"label_not_in_set"},
                                4: {"label_null"}}
    detail = g.findings().filter(pl.col("row") == 2).get_column("detail").item()
    assert detail == "label: 'neutral' not in the declared labels (one of 'pos', 'neg')"
    assert g.result.stats["classes"] == {"pos": 2, "neg": 1}


def test_integer_where_string_labels_are_declared_is_wrong_type(labels):
    g = labels(_records("label", ["pos", 1, "neg"]), fields={"label": "label"},
               model={"labels": ["pos", "neg"]})
    assert _record_codes(g) == {1: {"label_wrong_type"}}


def test_declared_integer_label_set(labels):
    g = labels(_records("label", [0, 1, 2, "1", 1.0]), fields={"label": "label"},
               model={"labels": [0, 1]})
    assert _record_codes(g) == {2: {"label_not_in_set"}, 3: {"label_wrong_type"}}


def test_csv_labels_are_read_as_numbers(tmp_path):
    # CSV writes every value as text: "2" is class 2 and an empty cell a missing label, but
    # "x" in the same column is still not a class id.
    path = tmp_path / "train.csv"
    path.write_text("id,text,label\n1,a,0\n2,b,x\n3,c,2\n4,d,\n5,e,1.0\n6,f,3\n7,g,0.5\n")
    rules = {"fields": {"id": "id", "label": "label"}, "model": {"num_classes": 3},
             "rules": [{"id": RULE_ID, "check": "label_range"}]}
    g = Gate(run_preflight(path, rules=rules, out=tmp_path / "out", smoke=False), tmp_path / "out")
    assert _record_codes(g) == {1: {"label_wrong_type"}, 3: {"label_null"},
                                5: {"label_out_of_range"}, 6: {"label_wrong_type"}}
    assert g.result.stats["classes"] == {"0": 1, "1": 1, "2": 1}


@pytest.mark.parametrize(("name", "content", "shown"), [
    # a NaN in the column types it as floats: the detail still quotes the cell, "7"
    ("floats.csv", "text,label\na,0\nb,7\nc,NaN\nd,1\n", "7"),
    ("ints.tsv", "text\tlabel\na\t0\nb\t 07\nc\t1\n", "07"),
    # JSON floats stay as they are
    ("floats.jsonl", '{"text": "a", "label": 0}\n{"text": "b", "label": 7.0}\n'
                     '{"text": "c", "label": NaN}\n', "7.0"),
])
def test_label_out_of_range_shows_a_csv_value_as_written(tmp_path: Path, name: str,
                                                         content: str, shown: str) -> None:
    from click.testing import CliRunner

    from preflight.cli import main

    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", str(path), "--no-smoke", "--num-classes", "4",
                                       "--out", str(out)])
    assert result.exit_code == 1, result.output
    expected = f"row 1 label_out_of_range: label: {shown} outside [0, 4)"
    assert expected in " ".join(result.output.split())
    found = pl.read_parquet(out / "findings.parquet").filter(
        pl.col("code") == "label_out_of_range")
    assert found.get_column("detail").to_list() == [f"label: {shown} outside [0, 4)"]


def test_share_stays_within_the_records_when_every_record_and_the_corpus_fail(labels):
    """Every record out of range plus a class that never occurs: 4 violations of 3
    records, but the share is 100%, and max_fraction 1.0 (allow all) passes."""
    values = [7, 8, 9]
    g = labels(_records("label", values), fields={"label": "label"},
               model={"num_classes": 3}, max_fraction=1.0)
    assert g.result.violations > 3 and g.result.fraction == 1.0
    assert g.result.status == "pass"
    strict = labels(_records("label", values), fields={"label": "label"},
                    model={"num_classes": 3}, max_fraction=0.99)
    assert strict.result.fraction == 1.0 and strict.result.status == "fail"


def test_class_absent_and_dominant_are_corpus_findings(labels):
    g = labels(_records("label", [0, 0, 0, 1, 7]), fields={"label": "label"},
               model={"num_classes": 3}, max_class_share=0.6)
    corpus = _corpus(g)
    assert [c for c, _ in corpus] == ["class_absent", "class_dominant"]
    assert corpus[0][1] == "class 2 never occurs (4 valid labels)"
    assert corpus[1][1].startswith("class 0 has 3 of 4 valid labels (75.0%)")
    f = g.findings().filter(pl.col("row").is_null())
    assert f.get_column("file").to_list() == [None, None]
    assert f.get_column("id").to_list() == [None, None]
    # Each corpus finding is one violation, besides the one record out of range.
    assert g.result.violations == 3
    assert g.result.stats["absent"] == ["2"]
    assert g.result.stats["dominant"] == ["0"]


def test_no_class_findings_when_switched_off(labels):
    g = labels(_records("label", [0, 0, 0, 1]), fields={"label": "label"},
               model={"num_classes": 3}, absent_classes=False)
    assert g.result.codes == {}
    assert g.result.stats["absent"] == ["2"]  # still reported in the stats


def test_share_exactly_at_the_limit_is_not_dominant(labels):
    g = labels(_records("label", [0, 0, 1, 1]), fields={"label": "label"},
               model={"num_classes": 2}, max_class_share=0.5)
    assert g.result.codes == {}


def test_absent_string_class_named_in_detail(labels):
    g = labels(_records("label", ["pos", "pos"]), fields={"label": "label"},
               model={"labels": ["pos", "neg"]})
    assert _corpus(g) == [("class_absent", "class 'neg' never occurs (2 valid labels)")]


def test_class_distribution_in_stats_is_json(labels):
    g = labels(_records("label", [1, 1, 0, 5]), fields={"label": "label"},
               model={"num_classes": 4})
    stats = g.result.stats
    assert stats == {
        "classes": {"0": 1, "1": 2},
        "num_classes": 4,
        "labelled": 3,
        "absent": ["2", "3"],
        "absent_count": 2,
        "dominant": [],
        "inferred": False,
    }
    report = json.loads((g.out / "report.json").read_text())
    rule = next(r for r in report["rules"] if r["id"] == RULE_ID)
    assert rule["stats"]["classes"] == {"0": 1, "1": 2}


def test_class_counts_span_files(labels):
    shards = [_records("label", [0, 0]), _records("label", [1, 0])]
    g = labels(shards, fields={"label": "label"}, model={"num_classes": 3},
               max_class_share=0.7)
    assert g.result.stats["classes"] == {"0": 3, "1": 1}
    assert [c for c, _ in _corpus(g)] == ["class_absent", "class_dominant"]


def test_a_few_hundred_records(labels):
    values = [i % 3 for i in range(300)]
    values[250] = 3
    g = labels(_records("label", values), fields={"label": "label"}, model={"num_classes": 3})
    assert _record_codes(g) == {250: {"label_out_of_range"}}
    assert g.result.stats["classes"] == {"0": 100, "1": 99, "2": 100}


# --- token labels and token ids --------------------------------------------------------------


def test_token_labels_out_of_vocab_and_all_ignored(labels):
    values = [[1, -100, 5], [50000, 3, -5], [-100, -100], [], [31999, 0], [-100, 7]]
    g = labels(_records("labels", values), fields={"token_labels": "labels"},
               model={"vocab_size": 32000})
    assert _record_codes(g) == {
        1: {"token_label_out_of_range"},
        2: {"all_labels_ignored"},
        3: {"all_labels_ignored"},
    }
    details = dict(g.findings().select("row", "detail").rows())
    assert details[1] == ("labels[0]: 50000 outside [0, 32000) and not the ignore index -100 "
                          "(out-of-range values: 2)")
    assert details[2] == "labels: all 2 labels are the ignore index -100 (its mean loss is NaN)"
    assert details[3].startswith("labels: empty")


def test_whole_float_token_labels_are_integers(labels):
    values = [[1.0, -100.0], [2.5, 1.0], [40000.0, 1.0]]
    g = labels(_records("labels", values), fields={"token_labels": "labels"},
               model={"vocab_size": 32000})
    assert _record_codes(g) == {1: {"token_labels_wrong_type"},
                                2: {"token_label_out_of_range"}}


def test_token_labels_of_the_wrong_type(labels):
    values = [[1, 2], [1, "a"], [True], "1 2", None, [1.5], [[1]], ...]
    g = labels(_records("labels", values), fields={"token_labels": "labels"},
               model={"vocab_size": 100})
    assert _record_codes(g) == {k: {"token_labels_wrong_type"} for k in range(1, 8)}
    details = dict(g.findings().select("row", "detail").rows())
    assert details[1] == "labels[1]: 'a' is not an integer"
    assert details[3] == "labels: expected a list of integers, got a string"
    assert details[4] == "labels: missing or null, expected a list of integers"


def test_bool_inside_a_float_token_list_is_wrong_type(labels):
    g = labels(_records("input_ids", [[2.0, True], [1]]), fields={"input_ids": "input_ids"},
               model={"vocab_size": 10})
    assert _record_codes(g) == {0: {"token_ids_wrong_type"}}


def test_ignore_index_is_configurable(labels):
    g = labels(_records("labels", [[-1, 2], [-100, 2]]), fields={"token_labels": "labels"},
               model={"vocab_size": 10}, ignore_index=-1)
    assert _record_codes(g) == {1: {"token_label_out_of_range"}}


def test_token_labels_bounded_by_num_classes_without_vocab(labels):
    # Token classification (NER): tags in [0, num_classes).
    g = labels(_records("tags", [[0, 8, -100], [9, 0]]), fields={"token_labels": "tags"},
               model={"num_classes": 9})
    assert _record_codes(g) == {1: {"token_label_out_of_range"}}


def test_input_ids_out_of_vocab(labels):
    values = [[1, 2, 31999], [0, 32000], [5, -100], [-1], [1.0, 2.0]]
    g = labels(_records("input_ids", values), fields={"input_ids": "input_ids"},
               model={"vocab_size": 32000})
    assert _record_codes(g) == {k: {"token_id_out_of_range"} for k in (1, 2, 3)}


def test_an_id_past_int64_is_not_shown_as_the_clip(labels):
    # 2^64 + 5 was shown as 4611686018427387904 (the value it is clipped to on reading).
    values = [[1, 2**64 + 5, 3], [1, 2], [-(2**64)], [2**62 - 1]]
    g = labels(_records("input_ids", values), fields={"input_ids": "input_ids"})
    details = dict(g.findings().select("row", "detail").rows())
    assert details[0].startswith("input_ids[1]: 2^62 or more outside [0, 2^31)")
    assert details[2].startswith("input_ids[0]: -2^62 or less outside [0, 2^31)")
    assert details[3].startswith(f"input_ids[0]: {2**62 - 1} outside")
    assert 1 not in details


def test_input_ids_of_the_wrong_type(labels):
    values = [[1, 2], [1, None], ["1"], [0.5], 7]
    g = labels(_records("input_ids", values), fields={"input_ids": "input_ids"},
               model={"vocab_size": 10})
    assert _record_codes(g) == {k: {"token_ids_wrong_type"} for k in (1, 2, 3, 4)}
    details = dict(g.findings().select("row", "detail").rows())
    assert details[1] == "input_ids[1]: null is not an integer"


def test_token_lists_of_different_length(labels):
    records = [
        {"id": "a", "input_ids": [1, 2, 3], "labels": [-100, 2, 3]},
        {"id": "b", "input_ids": [1, 2, 3], "labels": [2, 3]},
    ]
    fields = {"input_ids": "input_ids", "token_labels": "labels"}
    g = labels(records, fields=fields, model={"vocab_size": 10})
    assert _record_codes(g) == {1: {"token_labels_length_mismatch"}}
    assert g.findings().get_column("detail").item() == "labels has 2 values, input_ids has 3"
    g = labels(records, fields=fields, model={"vocab_size": 10}, same_length=False)
    assert g.result.codes == {}


def test_all_fields_together(labels):
    records = [
        {"id": "a", "label": 1, "input_ids": [1, 2], "labels": [-100, 2]},
        {"id": "b", "label": 2, "input_ids": [1, 99], "labels": [-100, -100]},
    ]
    fields = {"label": "label", "input_ids": "input_ids", "token_labels": "labels"}
    g = labels(records, fields=fields, model={"vocab_size": 10, "num_classes": 2})
    assert _record_codes(g) == {
        1: {"label_out_of_range", "token_id_out_of_range", "all_labels_ignored"},
    }


# --- what the rule needs ---------------------------------------------------------------------


def test_no_label_field_is_an_error(labels):
    g = labels(_records("text", ["a"]), fields={"text": "text"})
    assert g.result.status == "error"
    assert "fields.label" in (g.result.message or "")
    assert g.report.verdict == "fail"


def test_label_without_classes_is_an_error(labels):
    g = labels(_records("label", [0, 1]), fields={"label": "label"})
    assert g.result.status == "error"
    assert "model.num_classes or model.labels" in (g.result.message or "")


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        ({"labels": ["a", "b"], "num_classes": 3}, "lists 2 classes"),
        ({"labels": ["a", "a"]}, "twice"),
        ({"labels": [0, 5], "num_classes": 2}, "outside [0, 2)"),
        ({"labels": []}, "empty"),
    ],
)
def test_inconsistent_model_facts_are_an_error(labels, model, needle):
    g = labels(_records("label", ["a"]), fields={"label": "label"}, model=model)
    assert g.result.status == "error"
    assert needle in (g.result.message or "")


def test_declared_field_absent_from_the_data_is_an_error(labels):
    g = labels(_records("label", [0]), fields={"label": "lbl"}, model={"num_classes": 2})
    assert g.result.status == "error"
    assert "lbl" in (g.result.message or "")


# ---- inferred classes: a stray label past the classes the data is labelled with


def _inferred(labels: LabelGate, values: Sequence[Any]) -> Gate:
    return labels(_records("label", values), fields={"label": "label"}, infer_classes=True)


def test_a_singleton_two_past_the_block_is_a_stray(labels: LabelGate) -> None:
    g = _inferred(labels, [i % 4 for i in range(40)] + [5])
    assert _record_codes(g) == {40: {"label_stray"}}


def test_a_stray_label_past_empty_classes_fails(labels: LabelGate) -> None:
    # 0..3 label 40 records; one 7, with 4, 5, 6 empty
    g = _inferred(labels, [i % 4 for i in range(40)] + [7])
    assert _record_codes(g) == {40: {"label_stray"}}
    assert g.result.status == "fail"
    assert g.result.notes == ["classes inferred as 0..7 from the data; 4, 5, 6 never occur — "
                              "a stray label? set --num-classes to check against the model"]


@pytest.mark.parametrize("values", [
    [i % 4 for i in range(40)],  # dense 0..3
    [*range(300), 0, 1],  # a long tail: every class once, none empty
    [0] * 500 + [1] * 500 + list(range(2, 200)),  # two big classes and a singleton tail
    [i % 4 for i in range(40)] + [4, 5, 6, 8],  # a thin tail with one gap: most occur
    [i % 4 for i in range(40)] + [4],  # next to the block
    [i % 4 for i in range(40)] + [7, 7],  # twice: a class, not one stray
])
def test_no_stray_in_a_set_without_a_stray(labels: LabelGate, values: list[int]) -> None:
    g = _inferred(labels, values)
    assert "label_stray" not in {c for cs in g.codes_by_row().values() for c in cs}
    assert g.result.status == "pass", g.result
