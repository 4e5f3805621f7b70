"""Findings → verdict: thresholds, severities, strict mode, rules that could not run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from preflight import run_preflight
from preflight.config import Rule
from preflight.report.model import RuleResult
from preflight.verdict import decide, judge


def _rule(**kw: Any) -> Rule:
    return Rule(id="r", check="empty", **kw)


def _result(status: str, *, severity: str = "error", blocking: bool | None = None,
            violations: int = 1) -> RuleResult:
    if blocking is None:
        blocking = status == "error" or severity == "error"
    return RuleResult(id=f"{severity}-{status}", check="empty", severity=severity,
                      status=status, blocking=blocking, violations=violations,
                      findings=violations, fraction=0.0, threshold={})


# --- judge ---------------------------------------------------------------------------------


def test_max_count_defaults_to_zero():
    rule = _rule()
    assert rule.allowed() == (0, None)
    assert judge(0, 1000, rule) == "pass"
    assert judge(1, 1000, rule) == "fail"


def test_max_count():
    rule = _rule(max_count=3)
    assert judge(3, 10, rule) == "pass"
    assert judge(4, 10, rule) == "fail"


def test_max_fraction_alone_replaces_the_default_count():
    rule = _rule(max_fraction=0.01)
    assert rule.allowed() == (None, 0.01)
    assert judge(1, 1000, rule) == "pass"
    assert judge(10, 1000, rule) == "pass"
    assert judge(11, 1000, rule) == "fail"


def test_both_thresholds_fail_when_either_is_exceeded():
    rule = _rule(max_count=5, max_fraction=0.01)
    assert judge(5, 1000, rule) == "pass"
    assert judge(6, 1000, rule) == "fail"  # over the count, under the fraction
    assert judge(2, 100, rule) == "fail"  # under the count, over the fraction


def test_zero_total_does_not_divide_by_zero():
    assert judge(0, 0, _rule(max_fraction=0.5)) == "pass"


# --- decide --------------------------------------------------------------------------------


def test_decide_passes_when_nothing_blocking_failed():
    verdict, reasons = decide([_result("pass"), _result("fail", severity="warn"),
                               _result("fail", severity="info")], records=10)
    assert verdict == "pass"
    assert reasons == []


def test_decide_fails_on_a_blocking_failure_with_a_reason():
    verdict, reasons = decide([_result("pass"), _result("fail")], records=10)
    assert verdict == "fail"
    assert len(reasons) == 1


def test_a_reason_counts_violations_with_thousands_separators():
    _, reasons = decide([_result("fail", violations=80_000)], records=100_000)
    assert reasons == ["rule 'error-fail' (error) failed: 80,000 violation(s)"]


def test_decide_fails_on_an_error_status():
    verdict, reasons = decide([_result("error", severity="warn")], records=10)
    assert verdict == "fail"
    assert len(reasons) == 1


def test_decide_fails_with_no_records():
    verdict, reasons = decide([_result("pass")], records=0)
    assert verdict == "fail"
    assert reasons


# --- through the pipeline ------------------------------------------------------------------


def _write(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def _rules(**rule: Any) -> dict[str, Any]:
    return {"fields": {"text": "text"}, "rules": [{"id": "r", "check": "empty", **rule}]}


@pytest.fixture
def one_empty_in_1000(tmp_path: Path) -> Path:
    return _write(tmp_path / "d.jsonl", ["x"] * 999 + [""])


def test_one_violation_fails_by_default(one_empty_in_1000):
    report = run_preflight(one_empty_in_1000, rules=_rules(), smoke=False)
    assert report.rule("r").status == "fail"
    assert report.rule("r").violations == 1
    assert report.verdict == "fail"
    assert report.reasons


def test_fraction_threshold_through_the_pipeline(tmp_path):
    one = run_preflight(_write(tmp_path / "a.jsonl", ["x"] * 999 + [""]),
                        rules=_rules(max_fraction=0.01), smoke=False)
    assert one.rule("r").status == "pass"
    assert one.verdict == "pass"
    eleven = run_preflight(_write(tmp_path / "b.jsonl", ["x"] * 989 + [""] * 11),
                           rules=_rules(max_fraction=0.01), smoke=False)
    assert eleven.rule("r").status == "fail"
    assert eleven.verdict == "fail"


def test_failing_warn_rule_passes_the_gate_unless_strict(one_empty_in_1000):
    report = run_preflight(one_empty_in_1000, rules=_rules(severity="warn"), smoke=False)
    assert report.rule("r").status == "fail"
    assert not report.rule("r").blocking
    assert report.verdict == "pass"
    strict = run_preflight(one_empty_in_1000, rules=_rules(severity="warn"), strict=True,
                           smoke=False)
    assert strict.rule("r").blocking
    assert strict.verdict == "fail"
    assert strict.strict


def test_failing_info_rule_never_fails_the_gate(one_empty_in_1000):
    for strict in (False, True):
        report = run_preflight(one_empty_in_1000, rules=_rules(severity="info"), strict=strict,
                               smoke=False)
        assert report.rule("r").status == "fail"
        assert report.verdict == "pass"


def test_declared_field_absent_from_the_data_is_an_error(tmp_path):
    path = _write(tmp_path / "d.jsonl", ["x", "y"])
    rules = {"fields": {"text": "body"}, "rules": [{"id": "r", "check": "invisible_unicode"}]}
    report = run_preflight(path, rules=rules, smoke=False)
    result = report.rule("r")
    assert result.status == "error"
    assert result.message
    assert result.blocking
    assert report.verdict == "fail"
    assert report.reasons


def test_absent_field_is_an_error_even_for_a_warn_rule(tmp_path):
    path = _write(tmp_path / "d.jsonl", ["x"])
    rules = {"fields": {"text": "body"},
             "rules": [{"id": "r", "check": "empty", "severity": "warn"}]}
    report = run_preflight(path, rules=rules, smoke=False)
    assert report.rule("r").status == "error"
    assert report.verdict == "fail"


def test_only_malformed_lines_fail_with_a_reason(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("not json\n[1]\n{oops\n", encoding="utf-8")
    report = run_preflight(path, rules=_rules(max_count=100), smoke=False)
    assert report.source.records == 0
    assert report.source.malformed == 3
    assert report.verdict == "fail"
    assert any("no readable records" in r for r in report.reasons)


def test_empty_file_fails_with_a_reason(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    report = run_preflight(path, rules=_rules(), smoke=False)
    assert report.source.records == 0
    assert report.verdict == "fail"
    assert report.reasons


def test_malformed_lines_count_in_the_fraction_denominator(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": "x"}) + "\n" for _ in range(9)) + "{bad\n",
                    encoding="utf-8")
    report = run_preflight(path, rules={"fields": {"text": "text"},
                                        "rules": [{"id": "m", "check": "malformed",
                                                   "max_fraction": 0.1}]}, smoke=False)
    assert report.source.total == 10
    assert report.rule("m").fraction == pytest.approx(0.1)
    assert report.rule("m").status == "pass"


def test_a_record_found_in_scan_and_at_the_end_is_one_violation(tmp_path) -> None:
    import json as _json

    from preflight import run_preflight

    path = tmp_path / "num.jsonl"
    rows = [{"target": 1.0 + k / 100} for k in range(50)] + [{"target": 1e6}]
    path.write_text("".join(_json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report = run_preflight(path, rules={"fields": {"target": "target"},
                                        "rules": [{"id": "num", "check": "numeric", "max": 1000,
                                                   "max_count": 1}]}, smoke=False)
    result = report.rule("num")
    assert result.findings == 2  # above_max during the scan, outlier at the end
    assert result.violations == 1
    assert result.status == "pass"
