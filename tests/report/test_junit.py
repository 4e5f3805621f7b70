"""report.junit.xml from real gate runs: valid against the JUnit schema, one test case per
rule plus the smoke test, counts that match the report, a failed error rule as <failure>, a
failed warning as <skipped> with <system-out>, a rule that could not run as <error>."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest
import xmlschema

from preflight import run_preflight
from preflight.report.junit import render_junit
from preflight.report.model import Report
from tests.report.conftest import JUNIT_XSD, ROW_BIG_TARGET, SECRET, XSS, Run, write_jsonl


@cache
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(JUNIT_XSD))


def tree(run: Run) -> ET.Element:
    return ET.fromstring(run.path("junit").read_bytes())


def cases(root: ET.Element) -> dict[str, ET.Element]:
    found = root.findall("./testsuite/testcase")
    by_name = {c.get("name", ""): c for c in found}
    assert len(by_name) == len(found), "test case names repeat"
    return by_name


def outcome(case: ET.Element) -> list[str]:
    return [child.tag for child in case]


def expected_counts(report: Report) -> dict[str, int]:
    smoke = report.smoke
    return {
        "tests": len(report.rules) + (smoke is not None),
        "failures": sum(r.status == "fail" and r.blocking for r in report.rules)
        + (smoke is not None and smoke.failed),
        "errors": sum(r.status == "error" for r in report.rules),
        "skipped": sum(r.status == "fail" and not r.blocking for r in report.rules)
        + (smoke is not None and smoke.verdict == "skipped"),
    }


FIXTURES = ["passing", "failing", "smoke_pass", "smoke_fail", "shown"]


@pytest.mark.parametrize("fixture", FIXTURES)
def test_validates_against_the_schema(fixture: str, request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(fixture)
    schema().validate(str(run.path("junit")))
    assert run.text("junit").startswith('<?xml version="1.0" encoding="UTF-8"?>\n')


@pytest.mark.parametrize("fixture", FIXTURES)
def test_one_case_per_rule_plus_smoke(fixture: str, request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(fixture)
    found = tree(run).findall("./testsuite/testcase")
    names = [r.id for r in run.report.rules] + (["smoke"] if run.report.smoke else [])
    assert [c.get("name") for c in found] == names
    classes = [f"preflight.{r.check}" for r in run.report.rules]
    classes += ["preflight.smoke"] if run.report.smoke else []
    assert [c.get("classname") for c in found] == classes


@pytest.mark.parametrize("fixture", FIXTURES)
def test_counts_match_the_report_and_the_cases(fixture: str,
                                               request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(fixture)
    root = tree(run)
    want = expected_counts(run.report)
    suite = root.find("testsuite")
    assert suite is not None
    tally = {
        "tests": len(suite.findall("testcase")),
        "failures": len(suite.findall("testcase/failure")),
        "errors": len(suite.findall("testcase/error")),
        "skipped": len(suite.findall("testcase/skipped")),
    }
    assert tally == want
    for element in (root, suite):
        assert {k: int(element.get(k, "-1")) for k in want} == want


def test_failed_error_rule_is_a_failure_with_message_and_first_examples(failing: Run) -> None:
    by_name = cases(tree(failing))
    for r in failing.report.rules:
        if not (r.status == "fail" and r.blocking):
            continue
        case = by_name[r.id]
        assert outcome(case) == ["failure"], r.id
        failure = case[0]
        assert failure.get("message") == f"{r.violations:,} violation(s) of {r.check} (error)"
        assert failure.get("type") in r.codes
        text = failure.text or ""
        for code, n in r.codes.items():
            assert f"{code}={n:,}" in text
        for ex in r.examples[:5]:
            assert f"{ex.code}: {ex.detail}" in text, (r.id, ex)


def test_failure_text_names_row_id_and_redacted_snippet(failing: Run) -> None:
    text = cases(tree(failing))["hidden"][0].text or ""
    ex = failing.report.rule("hidden").examples[0]
    assert ex.snippet is not None
    assert f"row 3 id=r3 zero_width_space: {ex.detail}  «{ex.snippet}»" in text
    assert "<U+200B>" in text
    assert SECRET not in failing.text("junit")


def test_failed_warning_is_skipped_with_details_in_system_out(failing: Run) -> None:
    by_name = cases(tree(failing))
    for rule_id in ("dupes", "near"):
        r = failing.report.rule(rule_id)
        assert r.status == "fail" and not r.blocking
        case = by_name[rule_id]
        assert outcome(case) == ["skipped", "system-out"]
        assert case[0].get("message") == (
            f"warning: {r.violations} violation(s) of {r.check} (not blocking)")
        out = case[1].text or ""
        for ex in r.examples[:5]:
            assert f"row {ex.row} id={ex.id} {ex.code}: {ex.detail}" in out


def test_rule_that_could_not_run_is_an_error(failing: Run) -> None:
    r = failing.report.rule("contamination")
    case = cases(tree(failing))["contamination"]
    assert outcome(case) == ["error"]
    assert case[0].get("message") == f"could not run: {r.message}"
    assert case[0].get("type") == "rule_error"
    assert "no eval file" in (case[0].text or "")


def test_passing_rules_are_plain_cases(failing: Run) -> None:
    assert outcome(cases(tree(failing))["malformed"]) == []


def test_passing_run_has_no_failures(passing: Run) -> None:
    root = tree(passing)
    assert root.get("failures") == root.get("errors") == root.get("skipped") == "0"
    assert root.findall(".//failure") == root.findall(".//error") == []
    by_name = cases(root)
    # a passing rule with violations within its allowance still says so
    dupes = by_name["dupes"]
    assert outcome(dupes) == ["system-out"]
    assert (dupes[0].text or "").startswith("1 violation(s) of exact_duplicate (allowed)")


def test_smoke_data_fault_is_a_failure_naming_the_row(smoke_fail: Run) -> None:
    smoke = smoke_fail.report.smoke
    assert smoke is not None
    case = cases(tree(smoke_fail))["smoke"]
    assert outcome(case) == ["failure"]
    assert case[0].get("type") == "data_fault"
    assert case[0].get("message") == f"data_fault: {smoke.reason}"
    assert f"minimal rows: {ROW_BIG_TARGET}" in (case[0].text or "")


def test_smoke_pass_is_a_passing_case_with_its_reason(smoke_pass: Run) -> None:
    smoke = smoke_pass.report.smoke
    assert smoke is not None
    case = cases(tree(smoke_pass))["smoke"]
    assert outcome(case) == ["system-out"]
    assert (case[0].text or "").startswith(smoke.reason)
    assert tree(smoke_pass).get("failures") == "0"


def test_markup_in_user_text_is_escaped(shown: Run) -> None:
    raw = shown.text("junit")
    assert "&lt;script&gt;" in raw and "<script>" not in raw
    text = cases(tree(shown))["hidden"][0].text or ""
    assert f"id={XSS} zero_width_space" in text
    assert f"«{SECRET}<U+200B> <b>bold</b>»" in text


def test_times_come_from_the_report(failing: Run) -> None:
    root = tree(failing)
    total = failing.report.timings["total"]
    assert float(root.get("time", "nan")) == pytest.approx(total, abs=0.001)
    hidden = cases(root)["hidden"]
    assert float(hidden.get("time", "nan")) == pytest.approx(
        failing.report.timings["rule:hidden"], abs=0.001)


def test_render_junit_is_a_function_of_the_report(failing: Run) -> None:
    assert render_junit(failing.report) == failing.text("junit")


def test_control_character_in_an_id_keeps_the_xml_well_formed(tmp_path: Path) -> None:
    records = [{"id": "a\u0001b", "text": "zero\u200bwidth"}, {"id": "c", "text": "fine"}]
    data = write_jsonl(tmp_path / "data.jsonl", records)
    rules = {"fields": {"text": "text", "id": "id"},
             "rules": [{"id": "hidden", "check": "invisible_unicode"}]}
    run_preflight(data, rules=rules, out=tmp_path / "out", smoke=False, formats=["junit"])
    schema().validate(str(tmp_path / "out" / "report.junit.xml"))


def test_the_inferred_fields_and_notes_are_in_the_suite(tmp_path: Path) -> None:
    # JSON, HTML and Markdown said which column was taken as the text and the label; JUnit
    # did not.
    records = [{"text": f"plain words {i}", "label": i % 2} for i in range(6)]
    data = write_jsonl(tmp_path / "data.jsonl", records)
    report = run_preflight(data, out=tmp_path / "out", smoke=False, formats=["junit"])
    path = tmp_path / "out" / "report.junit.xml"
    schema().validate(str(path))
    suite = ET.fromstring(path.read_bytes()).find("./testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.findall("./properties/property")}
    assert props == {f"inferred.{role}": why
                     for role, why in report.rules_file.inferred.items()}
    assert props["inferred.text"].startswith("'text'")
    assert props["inferred.label"].startswith("'label'")
    out = suite.find("./system-out")
    assert out is not None and out.text is not None
    assert f"inferred text: {props['inferred.text']}" in out.text.splitlines()
    assert any(line.startswith("not checked: ") for line in out.text.splitlines())
