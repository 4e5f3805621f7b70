"""Airflow: ``PreflightOperator``, the gate as a task that fails on a failed gate.

>>> from preflight.integrations.airflow import PreflightOperator
>>> gate = PreflightOperator(task_id="preflight", path="/data/{{ ds }}/train.jsonl",
...                          rules="rules.yaml", out="/reports/{{ ds }}")

``execute`` runs ``run_preflight`` and pushes ``summarize(report)`` (JSON-able: verdict,
reasons, per-rule status and counts, report path) to XCom, both under key ``"preflight"``
and as the return value (``return_value``), *before* judging it, so a downstream task
with ``trigger_rule="all_done"`` can read why a gate failed. A failed gate raises
``AirflowFailException``: retrying cannot fix bad data, so retries are skipped. A
``ConfigError`` (a wrong rules file) fails the same way; an ``InputError`` (the input is
missing or unreadable) is left to Airflow's retries, since the file may still be arriving.

Importing this module without Airflow raises ``ConfigError`` naming the extra to install,
because the operator subclasses Airflow's ``BaseOperator``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from preflight.integrations import require, summarize

require("airflow", "airflow")

try:  # Airflow 3 moved the authoring API to the task SDK
    from airflow.sdk import BaseOperator
    from airflow.sdk.exceptions import AirflowFailException
except ImportError:  # Airflow 2
    from airflow.exceptions import AirflowFailException
    from airflow.models import BaseOperator

from preflight import run_preflight  # noqa: E402
from preflight.choices import DEFAULT_FORMATS  # noqa: E402
from preflight.config import RuleSet  # noqa: E402
from preflight.errors import ConfigError  # noqa: E402

__all__ = ["XCOM_KEY", "AirflowFailException", "PreflightOperator", "summarize"]

XCOM_KEY = "preflight"


class PreflightOperator(BaseOperator):
    """Run the preflight gate on ``path``; fail the task (without retries) when it fails.

    ``path``, ``rules`` (when a path or a dict) and ``out`` are templated. ``rules``,
    ``preset``, ``smoke``, ``strict``, ``limit`` and ``formats`` mean what they mean for
    ``run_preflight``; ``smoke`` defaults to False here, since a micro-training inside a
    scheduler slot is rarely what a DAG wants. Returns (and pushes under ``xcom_key``) the
    ``summarize`` of the report.
    """

    template_fields: Sequence[str] = ("path", "rules", "out")
    ui_color = "#fde9c9"

    def __init__(
        self,
        *,
        path: str | Path,
        rules: str | Path | dict[str, Any] | RuleSet | None = None,
        out: str | Path | None = None,
        preset: str | None = None,
        smoke: bool | None = False,
        strict: bool = False,
        limit: int | None = None,
        formats: str | Iterable[str] = DEFAULT_FORMATS,
        xcom_key: str = XCOM_KEY,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.path = path
        self.rules = rules
        self.out = out
        self.preset = preset
        self.smoke = smoke
        self.strict = strict
        self.limit = limit
        # one comma-separated string, as run_preflight and --format take it (a tuple of
        # its characters was refused at run time: unknown format 'j')
        self.formats = formats if isinstance(formats, str) else tuple(formats)
        self.xcom_key = xcom_key

    def execute(self, context: Any) -> dict[str, Any]:
        """Run the gate, push the summary to XCom, raise ``AirflowFailException`` on fail."""
        try:
            report = run_preflight(self.path, rules=self.rules, out=self.out,
                                   preset=self.preset, smoke=self.smoke, strict=self.strict,
                                   limit=self.limit, formats=self.formats)
        except ConfigError as e:  # a wrong rules file stays wrong on retry
            raise AirflowFailException(f"preflight: {e}") from e
        summary = summarize(report)
        context["ti"].xcom_push(key=self.xcom_key, value=summary)
        self.log.info("preflight verdict %s on %s records", report.verdict,
                      report.source.records)
        if not report.passed:
            failed = [rid for rid, r in summary["rules"].items()
                      if r["blocking"] and r["status"] != "pass"]
            reasons = "; ".join(report.reasons) or "rules failed: " + ", ".join(failed)
            where = f" (report: {summary['report']})" if summary["report"] else ""
            raise AirflowFailException(f"preflight gate failed: {reasons}{where}")
        return summary
