"""The exceptions preflight raises for problems a user must fix.

Bad *data* never raises: it becomes a finding. What raises is a problem with how preflight
was called, each class carrying the exit code the CLI maps it to::

    PreflightError              (exit 2 unless a subclass says otherwise)
    ├── ConfigError             a rules file or option is wrong            exit 2
    ├── InputError              the input cannot be read at all            exit 3
    ├── OutputError             an output cannot be written (disk full,    exit 3
    │                           read-only folder, permission)
    ├── WorkerError             a worker process died (killed, out of      exit 3
    │                           memory) during the run
    └── PreflightFailed         raised by Report.raise_for_status()        exit 1
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from preflight.report.model import Report


class PreflightError(Exception):
    """Base class: a problem the user must fix; the message says what to do."""

    exit_code: int = 2


class ConfigError(PreflightError):
    """A rules file, preset or option is wrong (unknown key, wrong type, unknown check)."""

    exit_code = 2


class InputError(PreflightError):
    """The input could not be read at all (missing, unknown format, corrupt container)."""

    exit_code = 3


class OutputError(PreflightError):
    """An output could not be written: no space left, a read-only folder, no permission.
    Like an unreadable input, an I/O failure the user must fix where the files live."""

    exit_code = 3


class WorkerError(PreflightError):
    """A worker process of the pool (``--workers``) died: killed, or out of memory. The
    run stops; nothing is written."""

    exit_code = 3


class PreflightFailed(PreflightError):
    """The gate failed; carries the report that says why."""

    exit_code = 1

    def __init__(self, report: Report) -> None:
        failed = [r.id for r in report.rules if r.status != "pass" and r.blocking]
        reasons = "; ".join(report.reasons) or "rules failed: " + ", ".join(failed)
        super().__init__(f"preflight gate failed: {reasons}")
        self.report = report

    def __reduce__(self) -> tuple[type[PreflightFailed], tuple[Report]]:
        # Rebuilt from the report, not the message (orchestrators pickle exceptions).
        return (type(self), (self.report,))
