"""``timings.report`` counts writing the report: findings.parquet and the rendered files
(html, junit, md); report.json is written last, holding it. ``timings.total`` is the run up
to the report files, which show it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import preflight.report.html
from preflight import run_preflight
from tests.report.conftest import classification_records, classification_rules, write_jsonl

PAUSE = 0.3  # seconds the patched renderer waits: a lower bound, never an upper one


def test_timings_count_the_rendered_files(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    real = preflight.report.html.render_html

    def slow_html(report: Any) -> str:
        seen["timings"] = dict(report.timings)
        time.sleep(PAUSE)
        return real(report)

    monkeypatch.setattr(preflight.report.html, "render_html", slow_html)
    data = write_jsonl(tmp_path / "d.jsonl", classification_records())
    out = tmp_path / "out"
    report = run_preflight(data, classification_rules(), out, smoke=False,
                           formats=("json", "html", "junit", "md"))
    saved = json.loads((out / "report.json").read_text(encoding="utf-8"))["timings"]
    assert saved == report.timings
    # The html was rendered inside the time counted, before report.json was written.
    assert "report" in seen["timings"]
    assert saved["report"] >= seen["timings"]["report"] + PAUSE
    # total is the time up to the report files, which show it: the same in all of them
    assert saved["total"] == seen["timings"]["total"]
    assert (out / "report.html").is_file() and (out / "report.md").is_file()


def test_timings_hold_report_without_an_html_file(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", classification_records())
    report = run_preflight(data, classification_rules(), tmp_path / "out", smoke=False,
                           formats=("json",))
    saved = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert "report" in saved["timings"] and saved["timings"] == report.timings
    assert not (tmp_path / "out" / "report.html").exists()
