"""report.html layout (issue 16, item 13): data files as a table, no empty GPU rows on CPU,
examples in a full-width row, token-length bins scaled to the data."""

from __future__ import annotations

import json
from pathlib import Path

from preflight import run_preflight
from preflight.report.html import render_html
from tests.report.conftest import parse_html


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def test_data_files_are_a_table_not_a_python_list(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    write_jsonl(shards / "a.jsonl", ["one text", "two text"])
    write_jsonl(shards / "b.jsonl", ["three text"])
    report = run_preflight(shards, smoke=False)
    html = render_html(report)
    assert "[{" not in html and "&#39;name&#39;" not in html
    table = parse_html(html).find("table", id="data-files")
    body = [[c.text() for c in tr.elements()] for tr in table.find("tbody").find_all("tr")]
    files = report.source.fingerprint["files"]
    assert body == [[f["name"], f"{f['bytes']:,}", f["xxh3_128"]] for f in files]
    assert [row[0] for row in body] == ["a.jsonl", "b.jsonl"]


def test_no_empty_gpu_rows_on_cpu(tmp_path: Path) -> None:
    report = run_preflight(write_jsonl(tmp_path / "d.jsonl", ["a text"]), smoke=False)
    assert report.environment["cuda"] is None and report.environment["gpu"] is None
    table = parse_html(render_html(report)).find("table", id="environment")
    shown = [tr.elements()[0].text() for tr in table.find_all("tr")]
    assert "python" in shown
    assert not {"cuda", "gpu", "cudnn"} & set(shown)


def test_examples_span_the_table_below_their_rule(tmp_path: Path) -> None:
    texts = [f"text number {i} with a hidden\u200bspace" for i in range(3)]
    report = run_preflight(write_jsonl(tmp_path / "d.jsonl", texts), smoke=False)
    doc = parse_html(render_html(report))
    row = doc.find("tr", class_="rule", data_rule="hidden-chars")
    assert row.find_all("table") == []  # nothing squeezed into the rule column
    below = doc.find("tr", class_="rule-detail", data_rule="hidden-chars")
    cell = [c for c in below.elements() if c.tag == "td"][1]
    assert cell.attrs["colspan"] == "6"
    examples = cell.find("table", class_="examples").find("tbody").find_all("tr")
    assert [tr.elements()[0].text() for tr in examples] == ["0", "1", "2"]


def test_token_length_bins_follow_short_texts_and_keep_the_window(tmp_path: Path) -> None:
    texts = ["x" * n for n in (2, 4, 8, 16, 32, 64, 128, 256)]
    rules = {"model": {"context_window": 2048},
             "rules": [{"id": "tokens", "check": "token_length"}]}
    report = run_preflight(write_jsonl(tmp_path / "d.jsonl", texts), rules, smoke=False)
    stats = report.rule("tokens").stats
    # The old bins (0 to twice the window) put every text in one or two bins.
    assert sum(1 for c in stats["histogram"]["estimated"] if c) <= 2
    lengths = stats["lengths"]
    assert lengths["log"] is True and sum(lengths["counts"]) == len(texts)
    assert sum(1 for c in lengths["counts"] if c) >= 6
    assert lengths["edges"][-1] >= 2048  # the context window stays on the axis
    svg = parse_html(render_html(report)).find("figure", data_plot="token_lengths").text()
    assert "context window 2,048" in svg and "(log scale)" in svg
