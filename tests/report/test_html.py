"""report.html from real gate runs: the verdict banner, every rule with its status, violations
and examples, one inline SVG per plot, the environment and fingerprint; one self-contained
page (nothing fetched) whose user text is escaped."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from preflight.report.html import render_html, report_plots
from tests.report.conftest import (
    CONTEXT_WINDOW,
    ROW_BIG_TARGET,
    SECRET,
    XSS,
    Node,
    Run,
    parse_html,
)

FAILING_PLOTS = {"token_lengths": 1, "cluster_sizes": 2, "values": 1, "labels": 1}  # 1 a note
PASSING_PLOTS = FAILING_PLOTS  # the passing run has one allowed duplicate pair
SMOKE_PLOTS = {"smoke_curves": 1}


def page(run: Run) -> Node:
    return parse_html(run.text("html"))


def rule_row(doc: Node, rule_id: str) -> Node:
    return doc.find("tr", class_="rule", data_rule=rule_id)


def detail(doc: Node, rule_id: str) -> Node:
    """The rule's codes and examples: a <details> in the full-width row below its row."""
    return doc.find("tr", class_="rule-detail", data_rule=rule_id).find("details")


def cells(row: Node) -> list[Node]:
    """The row's own cells (not those of the examples table nested in it)."""
    return [c for c in row.elements() if c.tag == "td"]


def plots(doc: Node) -> list[Node]:
    return doc.find_all("figure")


def plot(doc: Node, kind: str, title: str | None = None) -> Node:
    found = [f for f in plots(doc) if f.attrs.get("data-plot") == kind
             and (title is None or f.attrs.get("title") == title)]
    assert len(found) == 1, [f.attrs for f in plots(doc)]
    return found[0]


# ------------------------------------------------------------------------------- verdict


def test_failing_banner_says_fail_with_every_reason(failing: Run) -> None:
    banner = page(failing).find("div", id="verdict")
    assert banner.attrs["class"] == "banner fail"
    assert banner.find("strong").text() == "FAIL"
    assert "the gate failed" in banner.text()
    assert [li.text() for li in banner.find_all("li")] == failing.report.reasons
    assert any("contamination" in r and "could not run" in r for r in failing.report.reasons)


def test_passing_banner_says_pass(passing: Run) -> None:
    banner = page(passing).find("div", id="verdict")
    assert banner.attrs["class"] == "banner pass"
    assert banner.find("strong").text() == "PASS"
    assert "the gate passed" in banner.text()
    assert banner.find_all("li") == []


def test_title_names_verdict_and_source(failing: Run) -> None:
    title = page(failing).find("title").text()
    assert title == f"preflight FAIL · {failing.data}"


# --------------------------------------------------------------------------------- rules


def test_one_row_per_rule_in_report_order(failing: Run, passing: Run) -> None:
    for run in (failing, passing):
        table = page(run).find("table", id="rules")
        rows = table.find_all("tr", class_="rule")
        assert [r.attrs["data-rule"] for r in rows] == [r.id for r in run.report.rules]
        assert [r.attrs["data-status"] for r in rows] == [r.status for r in run.report.rules]


def test_every_failing_rule_shows_status_counts_and_threshold(failing: Run) -> None:
    doc = page(failing)
    not_passing = [r for r in failing.report.rules if r.status != "pass"]
    assert {r.id for r in not_passing} == {"hidden", "tokens", "dupes", "near", "scores",
                                          "labels", "contamination"}
    for r in not_passing:
        status, name, check, severity, violations, share, allowed = cells(rule_row(doc, r.id))
        assert status.text() == r.status.upper()
        # A failed warning is drawn amber ("soft"), a blocking failure red.
        want = r.status if r.blocking else "soft"
        assert status.attrs["class"] == f"status {want}", r.id
        assert name.find("code").text() == r.id
        assert detail(doc, r.id).find("summary").text().startswith(f"{r.id}: ")
        assert (check.text(), severity.text()) == (r.check, r.severity)
        assert violations.text() == f"{r.violations:,}"
        assert share.text().endswith("%")
        assert allowed.text() == "≤0"


def test_failing_rules_expand_to_their_codes_and_examples(failing: Run) -> None:
    doc = page(failing)
    for r in failing.report.rules:
        if r.status != "fail":
            continue
        details = detail(doc, r.id)
        for code, n in r.codes.items():
            assert f"{code} {n:,}" in details.find("p").text()
        rows = details.find("table", class_="examples").find("tbody").find_all("tr")
        assert len(rows) == len(r.examples) > 0
        for ex, tr in zip(r.examples, rows, strict=True):
            where, ident, code, said = (c.text() for c in tr.elements())
            assert where == (str(ex.row) if ex.row is not None else "corpus")
            assert ident == (ex.id or "")
            assert code == ex.code
            assert said.startswith(ex.detail)
            if ex.snippet:
                assert tr.find("div", class_="snippet").text() == f"«{ex.snippet}»"


def test_planted_rows_are_the_examples(failing: Run) -> None:
    doc = page(failing)

    def example_rows(rule_id: str) -> list[str]:
        table = detail(doc, rule_id).find("table", class_="examples")
        return [tr.elements()[0].text() for tr in table.find("tbody").find_all("tr")]

    assert example_rows("hidden") == ["3"]
    assert example_rows("tokens") == ["5"]
    assert example_rows("dupes") == ["8", "9"]
    assert example_rows("near") == ["8", "9", "11"]
    assert sorted(example_rows("scores")) == ["12", "14"]
    assert example_rows("labels") == ["13", "corpus"]


def test_snippet_is_redacted_with_the_invisible_character_made_visible(failing: Run) -> None:
    html = failing.text("html")
    snippet = detail(page(failing), "hidden").find("div", class_="snippet").text()
    assert snippet.startswith("«Xxxxxxxxxxxx<U+200B> Xxxxx")
    assert "&lt;U+200B&gt;" in html
    assert SECRET not in html
    assert "\u200b" not in html


def test_rule_that_could_not_run_says_why(failing: Run) -> None:
    r = failing.report.rule("contamination")
    assert r.status == "error" and r.message
    details = detail(page(failing), "contamination")
    assert details.find("p").text() == f"could not run: {r.message}"


def test_passing_rule_with_allowed_violations_shows_them(passing: Run) -> None:
    status, *_, violations, _share, allowed = cells(rule_row(page(passing), "dupes"))
    assert status.text() == "PASS"
    assert violations.text() == "1"
    assert allowed.text() == "≤5.00%"


# --------------------------------------------------------------------------------- plots


@pytest.mark.parametrize(("fixture", "expected"), [
    ("failing", FAILING_PLOTS), ("passing", PASSING_PLOTS), ("smoke_fail", SMOKE_PLOTS),
])
def test_one_inline_svg_per_expected_plot(fixture: str, expected: dict[str, int],
                                          request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(fixture)
    html = run.text("html")
    doc = parse_html(html)
    figures = plots(doc)
    assert Counter(f.attrs["data-plot"] for f in figures) == expected
    drawn = [p for p in report_plots(run.report) if p.svg]
    for f in figures:  # a plot, or the sentence that replaces a one-bar plot
        assert [c.tag for c in f.elements()] in (["svg"], ["p"])
    assert html.count("<svg") == len(drawn) == len([f for f in figures if f.find_all("svg")])
    assert len(figures) == len(report_plots(run.report))


def test_token_length_plot_marks_the_context_window(failing: Run) -> None:
    svg_text = plot(page(failing), "token_lengths").text()
    assert f"context window {CONTEXT_WINDOW}" in svg_text
    assert "Token lengths" in svg_text


def test_cluster_size_plots_one_per_duplicate_rule(failing: Run) -> None:
    doc = page(failing)
    exact = plot(doc, "cluster_sizes", "dupes: cluster sizes")
    near = plot(doc, "cluster_sizes", "near: cluster sizes").text()
    assert "Cluster sizes (near)" in near
    # the bar labels are the cluster sizes the report holds
    assert failing.report.rule("near").stats["cluster_sizes"] == {"2": 1, "3": 1}
    assert re.search(r"\b3\b", near) and re.search(r"\b2\b", near)
    # one cluster: a sentence, not one bar on a meaningless axis (issue 16, item 13)
    assert failing.report.rule("dupes").stats["cluster_sizes"] == {"3": 1}
    assert exact.find_all("svg") == []
    assert exact.find("p", class_="plot-note").text() == (
        "dupes: cluster sizes: 1 cluster of 3 records")


def test_value_plot_counts_the_outlier_beyond_the_range(failing: Run) -> None:
    text = plot(page(failing), "values", "scores: score").text()
    assert "score: 1 outliers (1 above the range shown)" in text


def test_label_plot_includes_the_absent_class(failing: Run) -> None:
    text = plot(page(failing), "labels").text()
    assert failing.report.rule("labels").stats["absent"] == ["3"]
    for label in ("0", "1", "2", "3"):
        assert re.search(rf"(?<![\d.]){label}(?![\d.])", text), label


def test_smoke_curves_mark_the_first_non_finite_step(smoke_fail: Run) -> None:
    smoke = smoke_fail.report.smoke
    assert smoke is not None and smoke.real is not None
    step = smoke.real.first_bad_step
    assert step is not None
    text = plot(page(smoke_fail), "smoke_curves").text()
    for label in ("loss", "gradient norm", "control", "real", f"real: non-finite at step {step}"):
        assert label in text


def test_smoke_section_blames_the_planted_row(smoke_fail: Run) -> None:
    section = page(smoke_fail).find("div", id="smoke")
    assert section.attrs["data-verdict"] == "data_fault"
    assert "DATA FAULT" in section.text()
    rows = [tr for tr in section.find_all("tr") if tr.elements()[0].text() == "minimal rows"]
    assert len(rows) == 1
    assert rows[0].elements()[1].text().startswith(str(ROW_BIG_TARGET))


# ---------------------------------------------------------------------- environment, data


def test_environment_and_fingerprint_values(failing: Run) -> None:
    table = page(failing).find("table", id="environment")
    shown = {tr.elements()[0].text(): tr.elements()[1].text() for tr in table.find_all("tr")}
    report = failing.report
    assert report.environment
    for key, value in report.environment.items():
        if value is None or value == "":  # an empty field is left out, not shown blank
            assert key not in shown, key
        else:
            assert shown[key] == str(value), key
    assert any(v is None for v in report.environment.values())  # the case above happens
    fingerprint = report.source.fingerprint
    assert shown["data xxh3_128"] == fingerprint["xxh3_128"]
    assert shown["data bytes"] == str(fingerprint["bytes"]) == str(failing.data.stat().st_size)


# ---------------------------------------------------------------- self-contained, escaped

URL_ATTRS = ("src", "href", "xlink:href", "action", "poster", "srcset", "data", "formaction")
NETWORK = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)


@pytest.mark.parametrize("fixture", ["failing", "passing", "smoke_fail", "shown"])
def test_page_is_self_contained(fixture: str, request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(fixture)
    html = run.text("html")
    doc = parse_html(html)
    assert not list(doc.iter("script"))
    assert not list(doc.iter("link"))
    assert not list(doc.iter("iframe"))
    lowered = html.lower()
    for forbidden in ("<script", "@import", "url(http", "url(//", "<link"):
        assert forbidden not in lowered, forbidden
    for node in doc.iter():
        for name in URL_ATTRS:
            value = node.attrs.get(name)
            assert value is None or not NETWORK.match(value), (node.tag, name, value)
        # Every http(s) URL on the page is a namespace or an RDF term, never fetched.
        for name, value in node.attrs.items():
            if value and re.search(r"https?://", value):
                assert name.startswith("xmlns") or name == "rdf:resource", (node.tag, name)
    # and none in the styles (the page's and matplotlib's)
    for style in doc.iter("style"):
        assert not re.search(r"https?://|//", style.text())


@pytest.mark.parametrize("fixture", ["failing", "passing", "smoke_fail", "smoke_pass"])
def test_page_parses_with_every_element_closed(fixture: str,
                                               request: pytest.FixtureRequest) -> None:
    run: Run = request.getfixturevalue(fixture)
    doc = parse_html(run.text("html"))
    html = doc.find("html")
    assert [c.tag for c in html.elements()] == ["head", "body"]
    assert html.find("meta", charset="utf-8")


def test_user_text_is_escaped_never_markup(shown: Run) -> None:
    html = shown.text("html")
    doc = parse_html(html)
    assert not list(doc.iter("script"))
    assert not list(doc.iter("b"))  # the <b>bold</b> in the text stays text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    hidden = detail(doc, "hidden").find("table", class_="examples").find("tbody")
    row = hidden.find("tr")
    assert row.elements()[1].text() == XSS  # the id, as text
    assert row.find("div", class_="snippet").text() == f"«{SECRET}<U+200B> <b>bold</b>»"
    ratings = detail(doc, "ratings").find("div", class_="snippet")
    assert ratings.text() == f"«{XSS}»"


def test_render_html_is_a_function_of_the_report(failing: Run) -> None:
    assert render_html(failing.report) == failing.text("html")
