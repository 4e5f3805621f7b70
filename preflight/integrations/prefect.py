"""Preflight as a Prefect task: a failed gate fails the task, and with it the flow run.

>>> from prefect import flow
>>> from preflight.integrations.prefect import preflight_task
>>> gate = preflight_task()
>>> @flow
... def prepare(path: str) -> dict:
...     return gate(path, rules="rules.yaml", out="preflight-report")

Prefect is imported only when ``preflight_task`` is called, so importing this module is cheap;
without Prefect the call is a ``ConfigError`` naming the extra to install.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preflight.integrations import require, summarize

if TYPE_CHECKING:
    from prefect import Task

    from preflight.config import RuleSet
    from preflight.report.model import Report

DEFAULT_ARTIFACT_KEY = "preflight"


def run_gate(
    source: str | Path,
    rules: str | Path | dict[str, Any] | RuleSet | None = None,
    out: str | Path | None = None,
    *,
    preset: str | None = None,
    strict: bool = False,
    smoke: bool | None = False,
    artifact_key: str | None = DEFAULT_ARTIFACT_KEY,
    fail: bool = True,
) -> dict[str, Any]:
    """Run the gate on ``source`` and return ``summarize(report)``; the body of the task.

    Inside a Prefect run, the report's Markdown summary is published as an artifact under
    ``artifact_key`` (None publishes nothing). A failed gate raises ``PreflightFailed`` (its
    message holds the reasons, ``.report`` the report) after the artifact is published;
    ``fail=False`` returns the summary instead, for a gate that only reports. ``smoke`` is
    off by default: a pipeline step rarely wants a training run (None follows the rules file).
    """
    from preflight import run_preflight

    report = run_preflight(source, rules=rules, out=out, preset=preset, strict=strict,
                           smoke=smoke)
    if artifact_key is not None:
        _publish(report, artifact_key)
    if fail:
        report.raise_for_status()
    return summarize(report)


def preflight_task(**task_options: Any) -> Task[..., dict[str, Any]]:
    """A Prefect task running ``run_gate``; ``task_options`` go to ``prefect.task``.

    Defaults: ``name="preflight"`` and no caching (the task's inputs are paths, not the data
    behind them, so a cached verdict could be stale). Raises ``ConfigError`` when Prefect is
    not installed.
    """
    prefect = require("prefect", "prefect")
    cache_policies = require("prefect.cache_policies", "prefect")
    options = {"name": "preflight", "cache_policy": cache_policies.NO_CACHE, **task_options}
    return prefect.task(**options)(run_gate)


def _publish(report: Report, key: str) -> None:
    """Publish the Markdown summary as an artifact, when running inside a flow or task run.

    Outside a run (``run_gate`` called as a plain function, with or without Prefect
    installed) there is nowhere to publish to.
    """
    if "prefect" not in sys.modules:  # not imported, so certainly not inside a Prefect run
        return
    from prefect import artifacts, context

    from preflight.report.markdown import render_markdown

    if context.TaskRunContext.get() is None and context.FlowRunContext.get() is None:
        return

    artifacts.create_markdown_artifact(
        markdown=render_markdown(report), key=key,
        description=f"preflight gate: {report.verdict} on {report.source.path}",
    )
