"""``report.junit.xml``: one test case per rule and one for the smoke test, so CI systems
show the gate beside their tests. A failed blocking rule is a ``failure`` (its message and
first examples), a rule that could not run an ``error``, a failed warning ``skipped`` with its
details in ``system-out``. The suite carries the notes the other reports show (the inferred
fields as ``inferred.ROLE`` properties too) in its own ``system-out``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from preflight.report.model import Report, RuleResult, SmokeResult

_EXAMPLES = 5
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def render_junit(report: Report) -> str:
    """The JUnit XML document for ``report``."""
    suite = ET.Element("testsuite", name=f"preflight {report.source.path}",
                       time=_seconds(report.timings.get("total", 0.0)))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    inferred = report.rules_file.inferred
    if inferred:  # which column was taken for which role, and why: a CI reader's first doubt
        props = ET.SubElement(suite, "properties")
        for role, why in inferred.items():
            ET.SubElement(props, "property", name=f"inferred.{role}", value=why)
    for r in report.rules:
        counts["tests"] += 1
        case = ET.SubElement(suite, "testcase", classname=f"preflight.{r.check}", name=r.id,
                             time=_seconds(report.timings.get(f"rule:{r.id}", 0.0)))
        outcome = _rule_outcome(case, r)
        if outcome:
            counts[outcome] += 1
    if report.smoke is not None:
        counts["tests"] += 1
        case = ET.SubElement(suite, "testcase", classname="preflight.smoke", name="smoke",
                             time=_seconds(report.smoke.timings.get("total", 0.0)))
        outcome = _smoke_outcome(case, report.smoke)
        if outcome:
            counts[outcome] += 1
    if notes := _notes(report):
        ET.SubElement(suite, "system-out").text = "\n".join(notes)
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites", name="preflight", **{k: str(v) for k, v in counts.items()},
                      time=suite.get("time", "0"))
    root.append(suite)
    for element in root.iter():  # record text can hold what XML 1.0 cannot carry
        if element.text:
            element.text = _xml_safe(element.text)
        for key, value in element.attrib.items():
            element.set(key, _xml_safe(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _notes(report: Report) -> list[str]:
    """The notes the other reports show beside the rules: each rule's notes, what was not
    checked, how the input was read, and which fields were inferred."""
    notes = [f"{r.id}: {note}" for r in report.rules for note in r.notes]
    notes += [f"not checked: {what}" for what in report.rules_file.not_checked]
    notes += [f"warning: {w}" for w in report.source.warnings]
    notes += [f"inferred {role}: {why}" for role, why in report.rules_file.inferred.items()]
    return notes


def _rule_outcome(case: ET.Element, r: RuleResult) -> str | None:
    summary = f"{r.violations:,} violation(s) of {r.check}"
    if r.status == "error":
        ET.SubElement(case, "error", message=f"could not run: {r.message}",
                      type="rule_error").text = r.message or ""
        return "errors"
    if r.status == "pass":
        if r.violations:
            ET.SubElement(case, "system-out").text = f"{summary} (allowed)\n" + _details(r)
        return None
    if r.blocking:
        ET.SubElement(case, "failure", message=f"{summary} ({r.severity})",
                      type=_top_code(r)).text = _details(r)
        return "failures"
    ET.SubElement(case, "skipped", message=f"warning: {summary} (not blocking)")
    ET.SubElement(case, "system-out").text = _details(r)
    return "skipped"


def _smoke_outcome(case: ET.Element, smoke: SmokeResult) -> str | None:
    lines = [smoke.reason]
    if smoke.minimal_rows:
        lines.append(f"minimal rows: {', '.join(map(str, smoke.minimal_rows))}")
    lines += [f"{f.severity} {f.code}: {f.detail}" for f in smoke.findings]
    text = "\n".join(lines)
    if smoke.verdict in ("data_fault", "code_fault"):
        ET.SubElement(case, "failure", message=f"{smoke.verdict}: {smoke.reason}",
                      type=smoke.verdict).text = text
        return "failures"
    if smoke.verdict == "skipped":
        ET.SubElement(case, "skipped", message=smoke.reason)
        return "skipped"
    ET.SubElement(case, "system-out").text = text
    return None


def _details(r: RuleResult) -> str:
    lines = [", ".join(f"{c}={n:,}" for c, n in r.codes.items())] if r.codes else []
    for ex in r.examples[:_EXAMPLES]:
        where = "corpus" if ex.row is None else f"row {ex.file + ':' if ex.file else ''}{ex.row}"
        ident = f" id={ex.id}" if ex.id else ""
        snippet = f"  «{ex.snippet}»" if ex.snippet else ""
        lines.append(f"{where}{ident} {ex.code}: {ex.detail}{snippet}")
    return "\n".join(lines)


def _top_code(r: RuleResult) -> str:
    return max(r.codes, key=lambda c: r.codes[c]) if r.codes else r.check


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _xml_safe(text: str) -> str:
    """``text`` with each character XML 1.0 forbids (C0 controls but tab, newline and
    carriage return; surrogates; U+FFFE, U+FFFF) shown as ``<U+XXXX>``."""
    return _FORBIDDEN.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)
