"""report.md from real gate runs: the verdict line, a valid GFM table with one row per rule,
the failed rules' first rows, the smoke test, and the length limit (never cutting the table
mid-row, ending with the cut note)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from preflight.choices import MD_MAX_CHARS
from preflight.report.markdown import render_markdown
from preflight.report.model import Example, Report, RuleResult
from tests.report.conftest import CUT_NOTE, ROW_BIG_TARGET, SECRET, Run, gate

HEADER = ["status", "rule", "check", "severity", "violations", "share", "codes"]
SEPARATOR_CELL = re.compile(r"^:?-+:?$")
MANY_RULES = 30


def split_row(line: str) -> list[str]:
    """A GFM table row's cells (pipes escaped as \\| stay inside their cell)."""
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def table_lines(md: str) -> list[str]:
    """The lines of the one table in ``md`` (consecutive lines starting with a pipe)."""
    lines = md.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("|")]
    if not starts:
        return []
    block = lines[starts[0]:starts[-1] + 1]
    assert all(line.startswith("|") for line in block), "the table is interrupted"
    return block


def parse_table(md: str) -> list[dict[str, str]]:
    """The table as one dict per row, after checking it is a valid GFM table."""
    header, separator, *rows = table_lines(md)
    names = split_row(header)
    assert names == HEADER
    marks = split_row(separator)
    assert len(marks) == len(names)
    assert all(SEPARATOR_CELL.match(m) for m in marks), marks
    out = []
    for row in rows:
        values = split_row(row)
        assert len(values) == len(names), row
        out.append(dict(zip(names, values, strict=True)))
    return out


def status_cell(r: RuleResult) -> str:
    return r.status.upper() if r.blocking or r.status == "pass" else f"{r.status} (warn)"


def example_line(ex: Example) -> str:
    where = "corpus" if ex.row is None else f"row {ex.row}"
    ident = f" `{ex.id}`" if ex.id else ""
    detail = html.escape(ex.detail, quote=False).replace("|", "\\|")  # no raw HTML
    return f"- {where}{ident} `{ex.code}`: {detail}"


# ------------------------------------------------------------------------------- content


def test_verdict_line_first(failing: Run, passing: Run) -> None:
    assert failing.text("md").splitlines()[0] == "## ❌ preflight: **FAIL**"
    assert passing.text("md").splitlines()[0] == "## ✅ preflight: **PASS**"


def test_source_line_and_reasons(failing: Run) -> None:
    md = failing.text("md")
    assert f"`{failing.data}` · jsonl · 60 records · 0 malformed" in md
    for reason in failing.report.reasons:
        assert f"- {reason}" in md.splitlines()


@pytest.mark.parametrize("fixture", ["failing", "passing", "smoke_fail"])
def test_table_has_one_row_per_rule(fixture: str, request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(fixture)
    rows = parse_table(run.text("md"))
    assert [row["rule"] for row in rows] == [f"`{r.id}`" for r in run.report.rules]
    for row, r in zip(rows, run.report.rules, strict=True):
        assert row["status"] == status_cell(r)
        assert (row["check"], row["severity"]) == (r.check, r.severity)
        assert row["violations"] == f"{r.violations:,}"
        assert row["codes"] == ", ".join(f"{c} {n:,}" for c, n in r.codes.items())


def test_table_statuses_of_the_failing_run(failing: Run) -> None:
    status = {row["rule"].strip("`"): row["status"] for row in parse_table(failing.text("md"))}
    assert status == {"malformed": "PASS", "hidden": "FAIL", "tokens": "FAIL",
                      "dupes": "fail (warn)", "near": "fail (warn)", "scores": "FAIL",
                      "labels": "FAIL", "contamination": "ERROR"}


def test_failed_rules_list_their_first_rows(failing: Run) -> None:
    md = failing.text("md")
    lines = md.splitlines()
    shown = 0
    for r in failing.report.rules:
        summary = f"<details><summary><code>{r.id}</code>: first rows</summary>"
        if r.status == "pass" or not r.examples:
            assert summary not in md
            continue
        shown += 1
        start = lines.index(summary)
        end = lines.index("</details>", start)
        block = [line for line in lines[start + 1:end] if line]
        assert block == [example_line(ex) for ex in r.examples[:3]], r.id
    assert shown == 6


def test_planted_rows_appear(failing: Run) -> None:
    md = failing.text("md")
    for line in ("- row 3 `r3` `zero_width_space`: text: 1× U+200B at char 12",
                 "- row 13 `r13` `label_out_of_range`: label: 7 outside [0, 4)",
                 "- corpus `class_absent`: class 3 never occurs (59 valid labels)"):
        assert line in md.splitlines()
    assert SECRET not in md


def test_passing_run_lists_no_rows(passing: Run) -> None:
    md = passing.text("md")
    assert "<details>" not in md
    assert "FAIL" not in md


def test_smoke_line(smoke_fail: Run) -> None:
    smoke = smoke_fail.report.smoke
    assert smoke is not None
    line = f"**Smoke test: data fault** · {smoke.reason} · minimal rows {ROW_BIG_TARGET}"
    assert line in smoke_fail.text("md").splitlines()


def test_pipes_in_example_text_are_escaped(tmp_path: Path) -> None:
    # A string label is repeated in the finding's detail: a pipe there must not break a row.
    records = [{"id": f"k{i}", "text": f"Sentence {i}.", "label": i % 2} for i in range(6)]
    records[2]["label"] = "a|b"
    rules = {"task": "classification", "model": {"num_classes": 2},
             "fields": {"text": "text", "id": "id", "label": "label"},
             "rules": [{"id": "labels", "check": "label_range"}]}
    run = gate(tmp_path / "data.jsonl", records, rules, tmp_path / "out", formats=("md",))
    md = run.text("md")
    assert "'a\\|b'" in md
    assert "'a|b'" not in md
    parse_table(md)


def test_pipes_in_table_cells_are_escaped(failing: Run) -> None:
    report = failing.report.model_copy(deep=True)
    report.rule("hidden").codes["odd|code"] = 1
    rows = parse_table(render_markdown(report))
    hidden = next(row for row in rows if row["rule"] == "`hidden`")
    assert hidden["codes"] == "zero_width_space 1, odd\\|code 1"


# -------------------------------------------------------------------------------- length


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """A failing run with MANY_RULES rules, most failing with three or more examples."""
    tmp = tmp_path_factory.mktemp("many")
    records = [{"id": f"m{i}", "text": f"Sentence {i} with a zero\u200bwidth | pipe."
                if i % 2 else f"Clean sentence number {i}."} for i in range(40)]
    records[4]["text"] = records[6]["text"]
    rules = {"fields": {"text": "text", "id": "id"},
             "rules": [{"id": f"hidden-{k:02d}", "check": "invisible_unicode",
                        "severity": "warn" if k % 3 == 0 else "error"}
                       for k in range(MANY_RULES - 2)]
             + [{"id": "dupes", "check": "exact_duplicate"}, {"id": "empty", "check": "empty"}]}
    run = gate(tmp / "data.jsonl", records, rules, tmp / "out", formats=("json",))
    assert len(run.report.rules) == MANY_RULES + 1  # with the implicit malformed rule
    return run.report


def check_cut(md: str, full: str, limit: int, rules: int) -> None:
    """``md`` respects ``limit`` and holds the table whole or not at all."""
    assert len(md) <= limit
    if md == full:
        return
    lines = table_lines(md)
    if lines:
        assert len(lines) == 2 + rules, f"table cut at {limit}"
        assert lines == table_lines(full)


def test_the_full_summary_fits_the_default_limit(many: Report) -> None:
    full = render_markdown(many)
    assert len(full) < MD_MAX_CHARS
    assert not full.rstrip().endswith(CUT_NOTE)
    assert len(parse_table(full)) == len(many.rules)


def test_every_limit_is_respected_and_the_table_never_cut_mid_row(many: Report) -> None:
    full = render_markdown(many)
    for limit in range(200, len(full) + 10, 7):
        check_cut(render_markdown(many, max_chars=limit), full, limit, len(many.rules))


def test_a_cut_just_short_of_the_whole_ends_with_the_note(many: Report) -> None:
    full = render_markdown(many)
    md = render_markdown(many, max_chars=len(full) - 1)
    assert len(md) <= len(full) - 1
    assert md.rstrip("\n").endswith(CUT_NOTE)
    assert md.startswith("## ❌ preflight: **FAIL**")
    assert len(parse_table(md)) == len(many.rules)


def test_every_cut_summary_ends_with_the_note(many: Report) -> None:
    full = render_markdown(many)
    silent = [limit for limit in range(200, len(full), 3)
              if not render_markdown(many, max_chars=limit).rstrip("\n").endswith(CUT_NOTE)]
    assert silent == []


def test_the_verdict_line_survives_any_limit(many: Report) -> None:
    md = render_markdown(many, max_chars=200)
    assert md.startswith("## ❌ preflight: **FAIL**")


def test_markup_in_user_text_stays_text(tmp_path: Path) -> None:
    records = [{"id": f"k{i}", "text": f"Sentence {i}.", "label": i % 2} for i in range(6)]
    records[2]["label"] = '<img src="x.png"></details>'
    rules = {"task": "classification", "model": {"num_classes": 2},
             "fields": {"text": "text", "id": "id", "label": "label"},
             "rules": [{"id": "labels", "check": "label_range"}]}
    run = gate(tmp_path / "data.jsonl", records, rules, tmp_path / "out", formats=("md",))
    outside_code = re.sub(r"`[^`\n]*`", "", run.text("md"))
    assert "<img" not in outside_code
    assert outside_code.count("</details>") == outside_code.count("<details>")
