"""The plain-PyTorch adapter: ``with preflight.watch(model, optimizer, step_fn=...) as w``
and ``w.step(loss, batch)`` after the loss, before ``loss.backward()``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from preflight.errors import ConfigError
from preflight.watch.core import WatchCore
from preflight.watch.options import CheckpointSource, OnFault, Snapshot, WatchConfig


class Watch:
    """A watched training loop (see ``preflight.watch.watch``)."""

    def __init__(self, core: WatchCore) -> None:
        self.core = core
        self.closed = False

    def step(self, loss: Any, batch: Any = None) -> bool:
        """Check this step's loss (and, through the optimizer's pre-hook, its gradients).
        True: go on; False: skip this step (``on_fault="skip"``); on a fault with
        ``on_fault="stop"`` it writes ``fault.json`` and raises ``TrainingFault``."""
        self._open()
        with self.core.lock:  # this batch with this loss, whichever thread calls
            self.core.batch(batch)
            return self.core.loss(loss)

    @property
    def fault(self) -> Any:
        """The first fault's record (a ``SmokeResult``), or None."""
        return self.core.fault

    def __enter__(self) -> Watch:
        self._open()
        return self

    def _open(self) -> None:
        if self.closed:  # its optimizer hook is gone: gradients would go unchecked
            raise ConfigError(
                "this preflight.watch was closed when its `with` block ended (its gradient "
                "check is removed); create a new preflight.watch(...) for another block, or "
                "put one `with` block around the whole training loop")

    def __exit__(self, *exc: object) -> None:
        self.closed = True
        if exc[0] is None:
            self.core.close()
        else:  # the loop's own exception goes on unchanged
            with contextlib.suppress(Exception):
                self.core.close()


def watch(model: nn.Module, optimizer: torch.optim.Optimizer, *,
          step_fn: Callable[[nn.Module, Any], Any] | None = None, scaler: Any = None,
          out: str | Path = "watch", on_fault: OnFault = "stop",
          grad_norm_alarm: float = 100.0, skipped_steps_alarm: int = 20,
          min_scale: float = 1e-4, log_every: int = 100, sync_every: int | None = None,
          grad_every: int = 1, history: int = 200, snapshot: Snapshot = "memory",
          checkpoint: CheckpointSource | None = None, model_spec: str | None = None,
          gate_report: str | Path | None = None,
          rerun_time_limit: float | None = None) -> Watch:
    """Watch a plain PyTorch training loop for its first non-finite loss or gradient.

    ``step_fn(model, batch) -> loss``: your forward and loss, used only to re-run a failing
    batch and its rows (sliced along dimension 0); without it the fault is localised from
    the step's own tensors. ``scaler``: your ``GradScaler`` (a skipped step is its business
    until ``skipped_steps_alarm`` in a row or a scale below ``min_scale``). ``out``: the
    folder for ``fault.json``, ``replay.pt`` and ``stats.jsonl`` (every ``log_every``
    steps). ``on_fault``: ``stop`` (raise ``TrainingFault``), ``skip`` or ``warn``.
    ``sync_every``: steps per check (default 1 on CPU, 10 on CUDA: one host sync per
    check). ``grad_every``: when the loop does not clip, compute the gradient norm every N
    steps only (the loss is checked every step; a clip's norm is reused every step).
    ``snapshot="none"`` (large models): never copy the model; re-runs load ``checkpoint``
    (a path, or a callable returning the latest) into it, else use its current weights, and
    the replay keeps the batch and the checkpoint's path. ``model_spec``:
    ``package.module:build`` returning ``(model, step_fn, None)``, recorded for
    ``preflight smoke --replay``. ``gate_report``: the gate's ``report.json``, to say which
    of the failing rows it flagged. ``rerun_time_limit``: seconds the re-runs of a fault
    may take before they are stopped (a ``step_fn`` that never returns); None: 5 minutes
    or 100 mean training steps, whichever is longer."""
    config = WatchConfig(out=out, on_fault=on_fault, grad_norm_alarm=grad_norm_alarm,
                         skipped_steps_alarm=skipped_steps_alarm, min_scale=min_scale,
                         log_every=log_every, sync_every=sync_every, grad_every=grad_every,
                         history=history, snapshot=snapshot, checkpoint=checkpoint,
                         model_spec=model_spec, gate_report=gate_report,
                         rerun_time_limit=rerun_time_limit)
    return Watch(WatchCore(model, optimizer, rerun=step_fn, scaler=scaler, config=config))
