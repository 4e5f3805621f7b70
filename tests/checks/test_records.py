"""Record-level checks: empty, schema, malformed."""

from __future__ import annotations

import json

from preflight import run_preflight

# --- empty ---------------------------------------------------------------------------------


def test_empty_codes_on_their_rows(gate):
    records = [
        {"id": "a", "text": "fine"},
        {"id": "b", "text": ""},
        {"id": "c", "text": "  \t\n "},
        {"id": "d"},
        {"id": "e", "text": None},
        {"id": "f", "text": "\u00a0\u3000"},
    ]
    g = gate(records, "empty")
    assert g.codes_by_row() == {
        1: {"empty_text"},
        2: {"whitespace_only"},
        3: {"missing_field"},
        4: {"missing_field"},
        5: {"whitespace_only"},
    }
    assert g.result.codes == {"empty_text": 1, "whitespace_only": 2, "missing_field": 2}


def test_number_in_text_is_not_empty_but_wrong_type(gate):
    records = [{"id": "a", "text": 42}, {"id": "b", "text": "fine"}]
    assert gate(records, "empty").result.codes == {}
    g = gate(records, "schema")
    assert g.result.codes == {"wrong_type": 1}
    assert g.rows() == [0]


def test_number_text_in_every_record_is_not_empty(gate):
    g = gate([{"id": "a", "text": 1}, {"id": "b", "text": 2.5}], "empty")
    assert g.result.codes == {}


def test_empty_checks_each_listed_text_field(gate):
    records = [
        {"id": "a", "title": "", "body": "x"},
        {"id": "b", "title": "t", "body": " "},
        {"id": "c", "title": "t", "body": "x"},
    ]
    g = gate(records, "empty", fields={"text": ["title", "body"], "id": "id"})
    assert g.codes_by_row() == {0: {"empty_text"}, 1: {"whitespace_only"}}


# --- schema --------------------------------------------------------------------------------


def test_text_not_a_string_is_wrong_type(gate):
    records = [
        {"id": "a", "text": "ok"},
        {"id": "b", "text": ["a", "list"]},
        {"id": "c", "text": {"an": "object"}},
        {"id": "d", "text": True},
    ]
    g = gate(records, "schema")
    assert g.rows("wrong_type") == [1, 2, 3]
    assert g.result.codes == {"wrong_type": 3}


def test_declared_id_is_optional_rows_number_themselves(gate):
    records = [{"id": "a", "text": "x"}, {"text": "y"}, {"id": None, "text": "z"}]
    g = gate(records, "schema")
    assert g.result.codes == {}
    assert g.result.status == "pass"


def test_integer_id_is_accepted_fractional_is_not(gate):
    g = gate([{"id": 1, "text": "x"}, {"id": 2, "text": "y"}], "schema")
    assert g.result.codes == {}
    g = gate([{"id": 1, "text": "x"}, {"id": 1.5, "text": "y"}], "schema")
    assert g.rows("wrong_type") == [1]


def test_types_number_accepts_ints_and_floats_flags_strings(gate):
    records = [
        {"id": "a", "text": "x", "score": 1},
        {"id": "b", "text": "x", "score": 0.5},
        {"id": "c", "text": "x", "score": "0.7"},
        {"id": "d", "text": "x", "score": None},
        {"id": "e", "text": "x", "score": True},
    ]
    g = gate(records, "schema", types={"score": "number"})
    assert g.result.codes == {"wrong_type": 2}
    assert g.rows("wrong_type") == [2, 4]


def test_types_number_on_a_uniform_column(gate):
    ints = [{"id": str(i), "text": "x", "score": i} for i in range(3)]
    floats = [{"id": str(i), "text": "x", "score": i + 0.5} for i in range(3)]
    strings = [{"id": str(i), "text": "x", "score": str(i)} for i in range(3)]
    assert gate(ints, "schema", types={"score": "number"}).result.codes == {}
    assert gate(floats, "schema", types={"score": "number"}).result.codes == {}
    assert gate(strings, "schema", types={"score": "number"}).rows("wrong_type") == [0, 1, 2]


def test_types_integer_accepts_whole_numbers_in_a_column_with_fractions(gate):
    # JSON 1 is an integer even when another record of the column holds 2.5.
    records = [{"id": "a", "text": "x", "n": 1}, {"id": "b", "text": "x", "n": 2.5}]
    g = gate(records, "schema", types={"n": "integer"})
    assert g.rows("wrong_type") == [1]


def test_types_accepts_a_list_of_types(gate):
    records = [{"id": "a", "text": "x", "v": 1}, {"id": "b", "text": "x", "v": "s"},
               {"id": "c", "text": "x", "v": [1]}]
    g = gate(records, "schema", types={"v": ["integer", "string"]})
    assert g.rows("wrong_type") == [2]


def test_required_fields(gate):
    records = [
        {"id": "a", "text": "x", "label": 0},
        {"id": "b", "text": "x"},
        {"id": "c", "text": "x", "label": None},
        {"id": "d", "text": "x", "label": 1},
    ]
    g = gate(records, "schema", required=["label"])
    assert g.result.codes == {"missing_field": 2}
    assert g.rows("missing_field") == [1, 2]


def test_required_replaces_the_default_id_requirement(gate):
    records = [{"text": "x", "label": 0}, {"text": "y", "label": 1}]
    g = gate(records, "schema", required=["label"], fields={"text": "text"})
    assert g.result.codes == {}


# --- malformed -----------------------------------------------------------------------------


def test_malformed_lines_are_findings_with_their_line_rows(gate):
    lines = [
        json.dumps({"text": "ok"}),
        "not json",
        "[1, 2]",
        "",
        json.dumps({"text": "ok too"}),
        '{"text": "unterminated',
        '"a string"',
    ]
    g = gate(check="malformed", lines=lines, fields={"text": "text"})
    assert g.codes_by_row() == {
        1: {"invalid_json"},
        2: {"not_an_object"},
        5: {"invalid_json"},
        6: {"not_an_object"},
    }
    assert g.report.source.records == 2
    assert g.report.source.malformed == 4
    assert g.report.source.total == 6
    assert g.result.status == "fail"


def test_invalid_utf8_line_is_malformed(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n{"text": "ok"}\n')
    report = run_preflight(path, rules={"fields": {"text": "text"},
                                        "rules": [{"id": "m", "check": "malformed"}]}, smoke=False)
    assert report.rule("m").codes == {"invalid_utf8": 1}
    assert [e.row for e in report.rule("m").examples] == [1]
    assert report.source.records == 2


def test_rows_of_other_checks_count_blank_and_malformed_lines(gate):
    lines = ["garbage", "", json.dumps({"id": "x", "text": "a\u200bb"})]
    g = gate(lines=lines)
    assert g.rows("zero_width_space") == [2]


def test_malformed_rule_is_added_when_not_listed(gate):
    g = gate(lines=[json.dumps({"id": "a", "text": "ok"}), "{bad"], check="empty")
    malformed = g.report.rule("malformed")
    assert malformed.check == "malformed"
    assert malformed.severity == "error"
    assert malformed.codes == {"invalid_json": 1}
    assert malformed.status == "fail"
    assert any("malformed" in note for note in g.report.rules_file.notes)
    assert g.report.verdict == "fail"
    assert g.findings("malformed").get_column("row").to_list() == [1]


def test_malformed_rule_is_not_added_twice(gate):
    g = gate([{"id": "a", "text": "ok"}], "malformed")
    assert [r.check for r in g.report.rules] == ["malformed"]
    assert not any("malformed" in note for note in g.report.rules_file.notes)


def test_types_naming_a_field_no_record_has_is_an_error(gate):
    # `types: {lable: integer}` (a typo) checked nothing and passed.
    records = [{"id": "a", "text": "x", "label": 0}, {"id": "b", "text": "y", "label": "1"}]
    g = gate(records, "schema", types={"lable": "integer"})
    assert g.result.status == "error"
    assert "lable" in (g.result.message or "")
    assert gate(records, "schema", types={"label": "integer"}).rows("wrong_type") == [1]
