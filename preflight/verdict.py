"""The verdict: each rule's status from its findings' counts, and the gate's from those.

Pure functions of the counts, the rules and the smoke result, so the verdict can be tested
without any data. A rule fails when its violations pass ``max_count`` or ``max_fraction``;
a rule that could not run is ``error``, never ``pass``. The gate fails on a rule that could
not run, on a failed ``error`` rule (``warn`` too with ``--strict``), on an input with no
readable record, and on a failed smoke test.
"""

from __future__ import annotations

from typing import Any

from preflight.checks.base import Check
from preflight.config import Rule
from preflight.findings import Tally
from preflight.report.model import RuleResult, SmokeResult


def could_not_run(check: Check, seen: set[str], records: int) -> str | None:
    """Why ``check`` could not run: the fields it needs that no record had (``seen``)."""
    if records == 0:
        return None
    missing = [f for f in check.required_fields() if f not in seen]
    if missing:
        # quoted: a field named '' read as "field(s)  not found"; a 5,000-column file's
        # fields seen filled the console and every report
        from preflight.infer import quoted_names

        have = quoted_names(sorted(seen), shown=20) or "none"
        return (f"field(s) {', '.join(map(repr, missing))} not found in the data "
                f"(fields seen: {have})")
    return None


def rule_result(rule: Rule, tally: Tally, *, total: int, error: str | None,
                stats: dict[str, Any], strict: bool, notes: list[str]) -> RuleResult:
    """A rule's line in the report: its counts, status and whether it blocks the gate."""
    max_count, max_fraction = rule.allowed()
    status = "error" if error else judge(tally.violations, total, rule)
    blocking = status == "error" or rule.severity == "error" or (
        strict and rule.severity == "warn"
    )
    return RuleResult(
        id=rule.id,
        check=rule.check,
        severity=rule.severity,
        status=status,
        blocking=blocking,
        violations=tally.violations,
        findings=tally.findings,
        fraction=round(violation_share(tally.violations, total), 6),
        threshold={"max_count": max_count, "max_fraction": max_fraction},
        codes=dict(sorted(tally.codes.items())),
        examples=tally.examples,
        message=error,
        stats=stats,
        fix=rule.fix,
        notes=notes,
    )


def violation_share(violations: int, total: int) -> float:
    """Violations per record checked, at most 1: a corpus-level finding ("class 3 never
    occurs") is a violation of its own, so with every record flagged the count can pass
    the records."""
    return min(violations / total, 1.0) if total else 0.0


def judge(violations: int, total: int, rule: Rule) -> str:
    """A rule's status from its violation count: ``pass`` or ``fail``."""
    max_count, max_fraction = rule.allowed()
    fraction = violation_share(violations, total)
    over_count = max_count is not None and violations > max_count
    over_fraction = max_fraction is not None and fraction > max_fraction
    return "fail" if over_count or over_fraction else "pass"


def decide(results: list[RuleResult], *, records: int,
           smoke: SmokeResult | None = None) -> tuple[str, list[str]]:
    """The gate's verdict and its reasons, from the rule results and the smoke test."""
    reasons = []
    if records == 0:
        reasons.append("no readable records in the input")
    for r in results:
        if r.blocking and r.status == "error":
            reasons.append(f"rule {r.id!r} could not run: {r.message}")
        elif r.blocking and r.status == "fail":
            reasons.append(f"rule {r.id!r} ({r.severity}) failed: {r.violations:,} violation(s)")
    if smoke is not None and smoke.failed:
        files = smoke.minimal_files or [None] * len(smoke.minimal_rows)
        rows = ", ".join(f"{f}:{r}" if f else str(r)
                         for f, r in zip(files[:10], smoke.minimal_rows[:10], strict=False))
        more = " …" if len(smoke.minimal_rows) > 10 else ""
        reasons.append(f"smoke test: {smoke.verdict}: {smoke.reason}"
                       + (f" (rows {rows}{more})" if rows else ""))
    return ("fail" if reasons else "pass"), reasons
