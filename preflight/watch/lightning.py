"""The Lightning adapter: ``PreflightCallback(out=...)`` for ``lightning.Trainer`` (or
``pytorch_lightning.Trainer``: the same callback, built on whichever is installed).

``on_train_batch_start`` gives the core the batch (``with_ids`` batches keep their ids
through Lightning's device transfer, which calls the batch's own ``to``),
``on_before_backward`` the loss, ``on_train_batch_end`` ends the step. Gradients are
checked in ``on_before_optimizer_step`` (the core's step pre-hook would run too early:
Lightning's automatic optimization calls ``optimizer.step(closure)`` and the closure runs
forward and backward), for ``trainer.optimizers[0]`` (the first optimizer, when a module
has several), with the precision plugin's ``GradScaler`` under 16-bit mixed precision.
``step`` is ``trainer.global_step`` while the batch trains. Re-runs call the module's
``training_step(batch, 0)`` (a dict result: its ``"loss"``) on a copy.
``on_fault="skip"`` cannot stop Lightning's backward: the step's gradients are dropped
after it, so the optimizer applies nothing (with gradient accumulation, the whole
accumulated step).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from preflight.errors import ConfigError
from preflight.watch.core import TrainingFault, WatchCore
from preflight.watch.options import config


def _framework() -> Any:
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ConfigError("lightning is not installed: pip install -c constraints.txt "
                      "'dataset-preflight[lightning]'")


pl = _framework()


class PreflightCallback(pl.Callback):
    """Watch a Lightning ``Trainer`` run for its first non-finite loss or gradient.

    ``out`` and ``**options`` are ``preflight.watch``'s (``on_fault``, ``grad_norm_alarm``,
    ``log_every``, ``sync_every``, ``model_spec``, ``gate_report``, ...).
    ``Trainer(callbacks=[cb])``; ``cb.fault`` is the first fault's record."""

    def __init__(self, out: str | Path = "watch", **options: Any) -> None:
        self.config = config(out, options)
        self.core: WatchCore | None = None
        self.watching = False
        self.skip = False

    @property
    def fault(self) -> Any:
        """The first fault's record (a ``SmokeResult``), or None."""
        return None if self.core is None else self.core.fault

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._close()
        if not trainer.optimizers:
            raise ConfigError("PreflightCallback: the LightningModule has no optimizer "
                              "(configure_optimizers) to watch")
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        # Lightning runs forward and backward in a closure *inside* optimizer.step(), after
        # the step pre-hooks: the gradients are checked in on_before_optimizer_step instead.
        self.core = WatchCore(pl_module, trainer.optimizers[0], rerun=_rerun,
                              scaler=scaler, config=self.config, step_hook=False)
        self.watching = True

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int) -> None:
        if self.watching:
            assert self.core is not None
            self.core.batch(batch, step=trainer.global_step)

    def on_before_backward(self, trainer: Any, pl_module: Any, loss: Any) -> None:
        if self.watching:
            assert self.core is not None
            self.skip = not self._guard(lambda: self.core.loss(loss))

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        core = self.core
        if self.watching and core is not None and optimizer is core.optimizer:
            self._guard(lambda: core.check_gradients(optimizer))

    def on_after_backward(self, trainer: Any, pl_module: Any) -> None:
        if self.skip:  # on_fault="skip": nothing of this step reaches the weights
            self.skip = False
            for optimizer in trainer.optimizers:
                optimizer.zero_grad(set_to_none=True)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.watching:
            assert self.core is not None
            self._guard(self.core.end_step)

    def on_save_checkpoint(self, trainer: Any, pl_module: Any,
                           checkpoint: dict[str, Any]) -> None:
        core = self.core  # a checkpoint is saved after its steps are judged
        if self.watching and core is not None:
            self._guard(core.flush)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._close()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # The run's own exception goes on, and Lightning's teardown runs: a fault found now
        # in the steps not checked yet (sync_every > 1) is written and warned about, never
        # raised in its place (it skipped the teardown and hid the exception).
        try:
            self._close()
        except TrainingFault as fault:
            warnings.warn(f"{fault}", RuntimeWarning, stacklevel=2)
        except Exception as e:
            warnings.warn(f"preflight.watch could not close: {e}", RuntimeWarning, stacklevel=2)

    def _guard(self, fn: Any) -> Any:
        try:
            return fn()
        except TrainingFault:
            self._close()
            raise

    def _close(self) -> None:
        if self.watching:
            self.watching = False
            assert self.core is not None
            self.core.close()


def _rerun(model: nn.Module, batch: Any) -> Any:
    """The module's own ``training_step`` on a copy (its ``self.log`` calls go nowhere)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*self.log.*")
        out = model.training_step(batch, 0)
    return out["loss"] if isinstance(out, Mapping) else out
