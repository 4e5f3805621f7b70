"""What the console says about how the input was read — the fields inferred (with what
they leave unchecked: numbers in only some records, tokenizer outputs) and the source's
warnings — is in report.html and report.md too. A NaN in a column that only some records
hold passed with the only word of it on the console, lost in CI's Markdown comment."""

from __future__ import annotations

import json
from pathlib import Path

from preflight import run_preflight
from preflight.report.html import render_html
from preflight.report.markdown import render_markdown
from tests.report.conftest import parse_html


def test_inferred_fields_and_what_they_leave_unchecked_are_in_html_and_markdown(
        tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": f"hello {i}", **(
        {"score": float("nan") if i == 3 else i / 2} if i % 5 < 2 else {})}) + "\n"
        for i in range(50)))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    said = report.rules_file.inferred["numeric"]
    assert "not checked: numbers in only some records: 'score'" in said
    items = [li.text() for li in parse_html(render_html(report)).find(
        "ul", id="inferred").elements()]
    assert items == [f"inferred {role}: {why}"
                     for role, why in report.rules_file.inferred.items()]
    assert f"- inferred numeric: {said}" in render_markdown(report)


def test_source_warnings_are_in_html_and_markdown(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"text": "one record", "label": 1}))
    report = run_preflight(path, smoke=False, out=tmp_path / "r")
    [warning] = report.source.warnings
    items = [li.text() for li in parse_html(render_html(report)).find(
        "ul", id="warnings").elements()]
    assert items == [f"warning: {warning}"]
    assert "- warning: one.json holds one JSON object, not an array" in render_markdown(report)
