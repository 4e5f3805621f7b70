"""Gradient accumulation: which of the batches an optimizer step accumulated to blame for
its non-finite gradients."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from preflight.report.model import SmokeResult
from preflight.smoke import deadline
from preflight.smoke.loop import Outcome, Setup, train
from preflight.watch.rows import batch_rows

if TYPE_CHECKING:
    from preflight.watch.step import Step


def failing_batch(setup: Setup, s: Step, result: SmokeResult,
                  kind: str) -> tuple[Any, Outcome]:
    """The batch to blame and its re-run: the step's own, or with gradient accumulation
    (a gradient fault, the optimizer step applying several steps' gradients) the first of
    the accumulated batches that fails alone when the last one does not."""
    deadline.run("failing batch's re-run")
    again = train(setup, [(s.batch, None)], steps=1)
    if again.failed or kind != "grad" or len(s.micro) < 2:
        return s.batch, again
    first, last, n = s.micro[0][0], s.micro[-1][0], max(s.micro_seen, len(s.micro))
    span = f"step {first}" if first == last else f"steps {first}-{last}"  # HF: one step
    for i, (step, batch) in enumerate(s.micro[:-1]):
        deadline.run(f"re-run of accumulated batch {i + 1} of {n}")
        out = train(setup, [(batch, None)], steps=1)
        if out.failed:
            result.reason += (f" (the optimizer step applied the gradients of {n} "
                              f"accumulated batches, {span}; batch {i + 1} of them, at step "
                              f"{step}, fails alone)")
            result.step = step
            result.batch_rows, result.batch_ids = batch_rows(batch)
            return batch, out
    k = len(s.micro)
    kept = "" if n == k else f", of which the first {k - 1} and the last were kept"
    result.reason += f" (the gradients of {n} accumulated batches, {span}{kept}: none fails alone)"
    return s.batch, again
