"""The runs of one smoke test: rows collated into batches and trained, an exception in
the user's code or the data turned into a failed run, and the progress reported."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from preflight.config import SmokeConfig
from preflight.errors import ConfigError
from preflight.report.model import SmokeRun
from preflight.smoke import deadline
from preflight.smoke.loop import Outcome, Setup, nonfinite_paths, train
from preflight.smoke.user import CONTRACT
from preflight.text import first_line

Progress = Callable[[int, int, str], None]


class CollateDroppedRows(Exception):
    """The user's collate returned fewer rows than it was given: a fault of the code (the
    control batch goes through it too), never a pass on the rows it kept."""


def _rows_of(value: Any) -> int | None:
    """The rows a collated tensor holds (its first dimension); None for a scalar or what
    is not a tensor (a list of targets may be per row or per tensor: it does not say)."""
    shape = getattr(value, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else None


def _parts(inputs: Any) -> list[Any]:
    """The values of collated inputs: a mapping's values (a ``BatchEncoding`` too), a list's
    or tuple's items, else itself. The most rows among them is the batch's (a shared
    ``(1, L)`` position tensor broadcasts)."""
    if isinstance(inputs, Mapping):
        return list(inputs.values())
    return list(inputs) if isinstance(inputs, list | tuple) else [inputs]


class Runs:
    """Collates rows into batches and trains, turning an exception into a failed run."""

    def __init__(self, setup: Setup, collate: Any, cfg: SmokeConfig,
                 progress: Progress | None, total: int) -> None:
        self.setup, self.collate, self.cfg = setup, collate, cfg
        self.progress, self.total, self.done = progress, total, 0

    def batch(self, rows: list[dict[str, Any]]) -> Any:
        """``collate(rows)``, held to its contract: an ``(inputs, targets)`` pair."""
        deadline.phase("collate")
        made = self.collate(rows)
        if not isinstance(made, tuple | list) or len(made) != 2:
            got = f"a {len(made)}-item {type(made).__name__}" if isinstance(
                made, tuple | list) else type(made).__name__
            raise ConfigError(f"collate must return (inputs, targets), got {got}; {CONTRACT}")
        inputs, targets = made
        given = len(rows)
        got_rows = _rows_of(targets)
        if got_rows is None:
            got_rows = max((n for v in _parts(inputs) if (n := _rows_of(v)) is not None),
                           default=None)
        if got_rows is not None and got_rows < given:
            raise CollateDroppedRows(
                f"collate returned {got_rows} row(s) for the {given} it was given: the rest "
                "were never trained on (their data never judged); collate must return one "
                "row per input row (a collate that packs several rows into one sequence "
                "cannot tell a row's fault from another's: pass one that keeps them apart "
                "for the smoke test)")
        return tuple(made)

    def batches(self, rows: list[dict[str, Any]]) -> tuple[list[Any], list[list[int]]]:
        """Micro-batches of ``batch_size`` rows; without one, the sample split into
        ``grad_accum`` parts, so that each optimizer step still sees the whole sample."""
        size = self.cfg.batch_size or -(-len(rows) // self.cfg.grad_accum)
        index = [list(range(i, min(i + size, len(rows)))) for i in range(0, len(rows), size)]
        return [self.batch([rows[i] for i in idx]) for idx in index], index

    def train(self, rows: list[dict[str, Any]], name: str, *, watch: int = 0,
              exempt_from: bool = False) -> Outcome:
        """Train on ``rows``; ``exempt_from``: these rows are the control batch, whose
        non-finite inputs are there by design (e.g. -inf attention masks)."""
        record = SmokeRun()  # filled step by step: a run stopped by the time limit keeps it
        deadline.run(name, record)
        try:
            batches, index = self.batches(rows)
            if exempt_from:
                self.setup.exempt = nonfinite_paths(batches[0])
            # Overfitting needs every row seen a few times: with minibatches, at least
            # three passes over the sample whatever smoke.steps says.
            steps = max(self.cfg.steps, -(-3 * len(batches) // self.cfg.grad_accum))
            out = train(self.setup, batches, steps=steps, watch=watch, into=record)
        except ConfigError:
            raise
        except Exception as e:
            # The steps it completed stay (loss, gradient norm); the failure is the step
            # after them (0 when collate or the first forward raised).
            record.failure = f"{type(e).__name__}: {first_line(e)}"
            record.first_bad_step = record.steps = len(record.loss)
            record.learned = None
            out = Outcome(run=record)
            index = []
        if out.bad_rows and index:
            at = out.bad_batch if out.bad_batch is not None else out.run.first_bad_step or 0
            idx = index[at % len(index)]
            out.bad_rows = sorted({idx[j] for j in out.bad_rows if j < len(idx)})
        self.done += 1
        if self.progress is not None and name in ("control", "real", "repeat"):
            self.progress(self.done, self.total, "runs")
        return out

    def fails(self, rows: list[dict[str, Any]]) -> bool:
        """Whether training on ``rows`` alone fails (a probe while localising)."""
        return self.train(rows, "probe").failed
