"""Shared seam for check tests: write a tiny JSONL, run one rule through the real pipeline."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preflight import run_preflight
from preflight.report.model import Report, RuleResult

RULE_ID = "r"


@dataclass
class Gate:
    """One run: the report plus the findings written next to it."""

    report: Report
    out: Path

    @property
    def result(self) -> RuleResult:
        return self.report.rule(RULE_ID)

    def findings(self, rule: str = RULE_ID) -> pl.DataFrame:
        frame = pl.read_parquet(self.out / "findings.parquet")
        return frame.filter(pl.col("rule") == rule)

    def rows(self, code: str | None = None) -> list[int]:
        """Rows with a finding (of ``code`` when given), sorted and deduplicated."""
        frame = self.findings()
        if code is not None:
            frame = frame.filter(pl.col("code") == code)
        return sorted(set(frame.get_column("row").to_list()))

    def codes_by_row(self) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        for row, code in self.findings().select("row", "code").iter_rows():
            out.setdefault(row, set()).add(code)
        return out


def _line(record: Any, i: int) -> str:
    if isinstance(record, str):
        record = {"id": f"r{i}", "text": record}
    return json.dumps(record, ensure_ascii=False)


@pytest.fixture
def gate(tmp_path: Path) -> Callable[..., Gate]:
    """``gate(records, check, **params)``: run one rule named ``r`` over ``records``.

    A record is a dict, or a str meaning ``{"id": "r<i>", "text": str}``. ``lines`` gives raw
    JSONL lines instead (for malformed input). ``fields`` defaults to ``{text: text, id: id}``.
    """
    counter = itertools.count()

    def run(
        records: Sequence[Any] = (),
        check: str = "invisible_unicode",
        *,
        lines: Sequence[str] | None = None,
        fields: dict[str, Any] | None = None,
        rule: dict[str, Any] | None = None,
        strict: bool = False,
        **params: Any,
    ) -> Gate:
        n = next(counter)
        path = tmp_path / f"data{n}.jsonl"
        body = list(lines) if lines is not None else [_line(r, i) for i, r in enumerate(records)]
        path.write_bytes("".join(f"{line}\n" for line in body).encode("utf-8"))
        spec = {"id": RULE_ID, "check": check, **(rule or {}), **params}
        rules = {"fields": fields or {"text": "text", "id": "id"}, "rules": [spec]}
        out = tmp_path / f"out{n}"
        # report.json only: these tests read findings, not the rendered pages (tests/report).
        return Gate(run_preflight(path, rules=rules, out=out, strict=strict, smoke=False,
                                  formats=["json"]), out)

    return run
