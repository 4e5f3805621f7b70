"""The consoles the commands print to (rich loads on first use): standard error for progress,
notes and errors, standard output for the summary, and the progress bar fed by the pipeline."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def new_console(**kwargs: Any) -> Console:
    """A rich console (rich loads on first use) whose closed output raises
    ``BrokenPipeError``."""
    from preflight.report.console import PipeConsole

    return PipeConsole(**kwargs)


@functools.cache
def err_console() -> Console:
    """The console on standard error (progress, notes and errors)."""
    return new_console(stderr=True, soft_wrap=True)


def out_console() -> Console:
    """A console for the summary; 120 columns when stdout is not a terminal (logs, pipes)."""
    console = new_console()
    return console if console.is_terminal else new_console(width=120)


class ProgressBar:
    """A rich progress bar fed by the pipeline's ``(done, total, unit)`` callback."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._bar: Progress | None = None
        self._task: Any = None
        self._unit = ""

    def __enter__(self) -> Callable[[int, int, str], None] | None:
        if not self._enabled:
            return None
        return self.update

    def update(self, done: int, total: int, unit: str) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        if self._bar is not None and unit != self._unit:  # a new stage: a new bar
            self._bar.stop()
            self._bar = None
        if self._bar is None:
            self._unit = unit
            label = "smoke test" if unit == "runs" else "reading"
            columns: list[Any] = [TextColumn(label), BarColumn()]
            if unit == "bytes":
                columns += [DownloadColumn(), TransferSpeedColumn()]
            else:
                columns += [MofNCompleteColumn()]
            self._bar = Progress(*columns, TimeRemainingColumn(), console=err_console(),
                                 transient=True)
            self._bar.start()
            self._task = self._bar.add_task("read", total=total or None)
        self._bar.update(self._task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
