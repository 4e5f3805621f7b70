"""Errors list every problem at once: ``rules validate`` reports all its errors in one pass,
a YAML syntax error shows its line with a caret and a hint, and ``diff`` warns when the two
reports used different rules files."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.test_cli import CLEAN, flat, invoke, write_jsonl


def test_validate_reports_every_error_in_one_pass(tmp_path: Path) -> None:
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\nfeilds: {text: body}\nrules:\n"
                     "  - {id: a, check: empty}\n  - {id: a, check: encoding}\n"
                     "  - {id: b, check: nope}\n", encoding="utf-8")
    result = invoke("rules", "validate", rules)
    assert result.exit_code == 2
    assert result.output == (
        f"error: {rules}: invalid rules file:\n"
        "  feilds: unknown key for this section — did you mean 'fields'?; allowed: version, "
        "task, fields, model, eval, smoke, rules\n"
        "  rules[2].check: unknown check 'nope'\n"
        "  rules[1].id: duplicate rule id 'a'; ids must be unique\n")


def test_validate_reports_a_duplicate_id_beside_its_rules_own_error(tmp_path: Path) -> None:
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\nrules:\n  - {id: a, check: empty}\n"
                     "  - {id: a, check: exact_duplicate, max_fracton: 2}\n"
                     "  - {check: encoding}\n  - {id: encoding, check: empty}\n",
                     encoding="utf-8")
    result = invoke("rules", "validate", rules)
    assert result.exit_code == 2
    assert result.output == (
        f"error: {rules}: invalid rules file:\n"
        "  rules[1].max_fracton: unknown key for check 'exact_duplicate' — did you mean "
        "'max_fraction'?; allowed: id, check, severity, max_count, max_fraction, fix, enabled, "
        "min_chars\n"
        "  rules[1].id: duplicate rule id 'a'; ids must be unique\n"
        "  rules[3].id: duplicate rule id 'encoding'; ids must be unique\n")


def test_yaml_syntax_error_shows_the_line_a_caret_and_a_hint(tmp_path: Path) -> None:
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\nrules:\n  - id: a\n    check: empty\n   - id: b\n",
                     encoding="utf-8")
    result = invoke("rules", "validate", rules)
    assert result.exit_code == 2
    assert result.output == (
        f"error: {rules}: not valid YAML at line 5, column 4: expected <block end>, but found "
        "'<block sequence start>'\n"
        "  5 |    - id: b\n"
        "    |    ^\n"
        "  hint: check the indentation: the items of one list (`- `) or mapping start in the "
        "same column, and a nested one starts further right (spaces, not tabs)\n")


def test_yaml_tab_gets_its_own_hint(tmp_path: Path) -> None:
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\nrules:\n\t- {id: a, check: empty}\n", encoding="utf-8")
    result = invoke("check", tmp_path / "absent.jsonl", "--rules", rules)
    assert result.exit_code == 2
    assert "  3 | →- {id: a, check: empty}\n    | ^\n  hint: YAML indents with spaces, not " \
           "tabs" in result.output


def test_diff_warns_when_the_rules_files_differ(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text("version: 1\nrules:\n  - {id: e, check: empty}\n", encoding="utf-8")
    two.write_text("version: 1\nrules:\n  - {id: e, check: empty, severity: warn}\n",
                   encoding="utf-8")
    for name, rules in (("a", one), ("b", two), ("c", one)):
        assert invoke("check", data, "--no-smoke", "--rules", rules, "--format", "json",
                      "--out", tmp_path / name).exit_code == 0
    result = invoke("diff", tmp_path / "a" / "report.json", tmp_path / "b" / "report.json")
    assert result.exit_code == 0, result.output
    assert (f"warning: the two reports used different rules files: old {one} (sha256 "
            in flat(result.output))
    assert f"new {two} (sha256 " in flat(result.output)
    assert "a rule's change may come from the rules, not the data" in flat(result.output)
    same = invoke("diff", tmp_path / "a" / "report.json", tmp_path / "c" / "report.json")
    assert "warning" not in same.output
    # The same file edited between the runs is named as such.
    two.write_text(one.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    one.write_text(two.read_text(encoding="utf-8"), encoding="utf-8")
    invoke("check", data, "--no-smoke", "--rules", one, "--format", "json",
           "--out", tmp_path / "d")
    edited = invoke("diff", tmp_path / "a" / "report.json", tmp_path / "d" / "report.json",
                    "--json")
    assert "the rules file changed between the runs" in edited.output


def test_keys_the_loader_sets_are_unknown_keys_in_a_file(tmp_path: Path) -> None:
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\npath: elsewhere\ngiven_fields: {text: x}\n"
                     "rules:\n  - {id: a, check: empty}\n", encoding="utf-8")
    result = invoke("rules", "validate", rules)
    assert result.exit_code == 2
    allowed = "allowed: version, task, fields, model, eval, smoke, rules"
    assert result.output == (f"error: {rules}: invalid rules file:\n"
                             f"  path: unknown key for this section; {allowed}\n"
                             f"  given_fields: unknown key for this section; {allowed}\n")


def test_a_switch_is_true_or_false_like_enabled(tmp_path: Path) -> None:
    # A quoted "no" (or 1) was read as false for a check's switch but refused for
    # ``enabled``: one rule for every switch, saying what to write.
    rules = tmp_path / "r.yaml"
    for value, ok in [("no", True), ("false", True), ('"no"', False), ("1", False),
                      ('"false"', False)]:
        rules.write_text("version: 1\nrules:\n"
                         f"  - {{id: h, check: invisible_unicode, allow_emoji_zwj: {value}}}\n"
                         f"  - {{id: n, check: near_duplicate, confirm: {value}}}\n"
                         f"  - {{id: e, check: encoding, nfc: {value}}}\n"
                         f"  - {{id: v, check: numeric, allow_null: {value}}}\n",
                         encoding="utf-8")
        result = invoke("rules", "validate", rules)
        if ok:
            assert result.exit_code == 0, (value, result.output)
            continue
        assert result.exit_code == 2, value
        for at in ("rules[0].allow_emoji_zwj", "rules[1].confirm", "rules[2].nfc",
                   "rules[3].allow_null"):
            assert f"{at}: Input should be a valid boolean" in flat(result.output)
        assert flat(result.output).count("write true or false, unquoted") == 4


def test_yes_and_no_are_names_where_a_name_is_meant(tmp_path: Path) -> None:
    # YAML 1.1 reads yes/no/on/off as booleans: a yes/no classifier's `labels: [yes, no]`
    # was refused ("not a valid string (got True)"), in a file and with --set alike, and a
    # column named "on" could not be named. Switches still take them as booleans.
    data = write_jsonl(tmp_path / "d.jsonl", [
        {"on": f"question {i}", "answer": ["yes", "no", "maybe"][i % 3]} for i in range(9)])
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\nfields: {text: on, label: answer}\n"
                     "model: {labels: [yes, no]}\nsmoke: {enabled: no}\nrules:\n"
                     "  - {id: labels, check: label_range, absent_classes: yes}\n",
                     encoding="utf-8")
    for extra in ([], ["--set", "model.labels=[yes, no]"]):
        result = invoke("check", data, "--rules", rules, "--out", tmp_path / "r", *extra)
        assert result.exit_code == 1, result.output
        report = json.loads((tmp_path / "r" / "report.json").read_text())
        assert report["rules_file"]["fields"] == {"text": "on", "label": "answer"}
        assert report["smoke"] is None
        frame = pl.read_parquet(tmp_path / "r" / "findings.parquet")
        assert frame["code"].to_list() == ["label_not_in_set"] * 3  # the three "maybe"
        assert frame["row"].to_list() == [2, 5, 8]


@pytest.mark.parametrize("labels", ["[true, false]", "[True, no]"])
def test_true_and_false_as_labels_say_to_quote_them(tmp_path: Path, labels: str) -> None:
    # YAML reads unquoted true/false as booleans: four "not a valid string/integer (got
    # True)" lines said nothing about quoting.
    rules = tmp_path / "r.yaml"
    rules.write_text(f"model: {{labels: {labels}}}\nrules:\n  - {{id: l, check: label_range}}\n",
                     encoding="utf-8")
    result = invoke("rules", "validate", rules)
    assert result.exit_code == 2, result.output
    said = flat(result.output)
    assert "model.labels: true" in said and "read as booleans" in said
    assert 'quote them, e.g. labels: ["true"' in said
    assert "valid string" not in said and "valid integer" not in said


@pytest.mark.parametrize("rule", [
    "{id: a, check: empty, max_fraction: .nan}",
    "{id: a, check: near_duplicate, threshold: .nan}",
    "{id: a, check: label_range, max_class_share: .nan}",
])
def test_a_nan_share_is_named_as_not_finite(tmp_path: Path, rule: str) -> None:
    # It was "Input should be less than or equal to 1 (got nan)": true of NaN, but no help.
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"rules: [{rule}]\n")
    result = invoke("rules", "validate", str(rules))
    assert result.exit_code == 2, result.output
    assert "Input should be a finite number (got nan)" in flat(result.output)


def test_a_misspelt_check_key_is_named(tmp_path: Path) -> None:
    # `chek: empty` said only "check: missing", leaving the reader to find the typo.
    rules = tmp_path / "r.yaml"
    rules.write_text("rules:\n  - {id: e, chek: empty, severity: error}\n"
                     "  - {id: f, severity: error}\n", encoding="utf-8")
    result = invoke("rules", "validate", rules)
    assert result.exit_code == 2
    assert "rules[0].check: missing (the rule has 'chek' — did you mean 'check'?); " \
           "choose one of" in result.output
    assert "rules[1].check: missing; choose one of" in result.output
