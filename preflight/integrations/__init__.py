"""Thin wrappers that make preflight a step in data-prep pipelines. Each imports its
framework lazily (only when used) and maps the gate's verdict to that framework's own idea
of failure; a missing framework is a ``ConfigError`` saying which extra to install."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from preflight.errors import ConfigError

if TYPE_CHECKING:
    from preflight.report.model import Report


def require(module: str, extra: str) -> Any:
    """Import ``module`` or say how to install it: ``pip install 'dataset-preflight[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(f"{module} is not installed: pip install -c constraints.txt "
                          f"'dataset-preflight[{extra}]'") from e


def summarize(report: Report) -> dict[str, Any]:
    """What a pipeline step passes on (an XCom, a task result): small, JSON-able, rules keyed
    by id, with the path of report.json when one was written."""
    return {
        "verdict": report.verdict,
        "reasons": list(report.reasons),
        "records": report.source.records,
        "malformed": report.source.malformed,
        "rules": {
            r.id: {"check": r.check, "severity": r.severity, "status": r.status,
                   "blocking": r.blocking, "violations": r.violations, "codes": dict(r.codes)}
            for r in report.rules
        },
        "smoke": report.smoke.verdict if report.smoke is not None else None,
        "report": report.outputs.get("report"),
        "outputs": dict(report.outputs),
    }
