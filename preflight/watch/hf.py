"""The Hugging Face ``Trainer`` adapter: ``PreflightCallback(out=...)`` watches the run.

The Trainer gives its callbacks no batch and no loss, so the callback finds its Trainer
when training starts (the ``Trainer`` whose ``train()`` calls ``on_train_begin``) and
wraps two of its public, overridable methods on that instance: ``training_step`` sees each
batch as the data loader produced it (its ids still on it) and ``compute_loss`` the loss
before backward; both are restored when training ends. Gradients are checked by the core's
step pre-hook on the Trainer's optimizer (the torch optimizer inside accelerate's wrapper),
and with fp16 the accelerator's ``GradScaler`` is the scaler. ``step`` is
``state.global_step`` while the step runs (the optimizer steps before it: resume from
``checkpoint-{step}`` to train that batch again); with gradient accumulation each
micro-batch is checked under its step's number. Re-runs call the Trainer's own
``compute_loss``.

Ids: the Trainer's column removal (``remove_unused_columns``) rebuilds each row, dropping
what ``with_ids`` put on it; :meth:`PreflightCallback.collate` is the ``data_collator`` that
does that removal itself after reading the ids, so ``TrainingArguments(
remove_unused_columns=False)`` goes with it. Rows that are not ``with_ids`` rows (an eval
set) are collated as the Trainer would.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from preflight.errors import ConfigError
from preflight.integrations import require
from preflight.watch.core import TrainingFault, WatchCore
from preflight.watch.options import config
from preflight.watch.rows import _Collate, with_ids

transformers = require("transformers", "trainer")


class PreflightCallback(transformers.TrainerCallback):
    """Watch a ``transformers.Trainer`` run for its first non-finite loss or gradient.

    ``out`` and ``**options`` are ``preflight.watch``'s (``on_fault``, ``grad_norm_alarm``,
    ``log_every``, ``sync_every``, ``model_spec``, ``gate_report``, ...). Give it to the
    Trainer (``callbacks=[cb]``); ``cb.collate(collator)`` as its ``data_collator`` carries
    the ids of a ``with_ids`` train set. ``cb.fault`` is the first fault's record."""

    def __init__(self, out: str | Path = "watch", **options: Any) -> None:
        self.config = config(out, options)
        self.core: WatchCore | None = None
        self.collates: list[TrainerCollate] = []
        self.restore: list[str] = []
        self.trainer: Any = None
        self.watching = False
        self.in_step = False

    @property
    def fault(self) -> Any:
        """The first fault's record (a ``SmokeResult``), or None."""
        return None if self.core is None else self.core.fault

    def collate(self, data_collator: Callable[[list[Any]], Any] | None = None) -> TrainerCollate:
        """The ``data_collator`` to give the Trainer: ``data_collator`` (default: the
        Trainer's ``default_data_collator``) sees the rows the model takes, and a batch of
        ``with_ids`` rows carries their ids and row numbers."""
        made = TrainerCollate(data_collator or transformers.default_data_collator)
        self.collates.append(made)
        return made

    # -- the Trainer's events -------------------------------------------------------------

    def on_init_end(self, args: Any, state: Any, control: Any, model: Any = None,
                    **kwargs: Any) -> None:
        if model is not None:
            self._columns(model, args)
        trainer = _find_trainer(required=False)
        if trainer is not None:
            self._guard(trainer)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       optimizer: Any = None, **kwargs: Any) -> None:
        self._close()
        trainer = _find_trainer()
        self._columns(trainer.model, args)
        dataset = trainer.train_dataset
        if isinstance(dataset, with_ids):
            if args.remove_unused_columns:
                raise ConfigError(
                    "PreflightCallback: the train set is a with_ids dataset, but the Trainer's "
                    "column removal drops its ids; pass TrainingArguments(remove_unused_columns="
                    "False) and data_collator=callback.collate(your_collator) (it removes the "
                    "columns the model does not take itself)")
            if not any(c is trainer.data_collator for c in self.collates):
                raise ConfigError(
                    "PreflightCallback: the train set is a with_ids dataset; give the Trainer "
                    "data_collator=callback.collate(your_collator) so its batches carry the ids")
            for c in self.collates:
                c.id_field = dataset.id_field
        inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)  # accelerate's wrapper
        scaler = getattr(trainer.accelerator, "scaler", None)
        self.trainer = trainer
        self.core = WatchCore(trainer.model, inner, rerun=None, scaler=scaler,
                              config=self.config)
        compute_loss = trainer.compute_loss
        self.core.set_rerun(lambda m, b: compute_loss(m, dict(b) if isinstance(b, Mapping)
                                                      else b))
        self._wrap(trainer)
        self.watching = True

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.watching and self.core is not None:
            self.core.end_step()

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._flush()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._flush()  # a checkpoint is saved after its steps are judged

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._close()

    # -- inside the Trainer ---------------------------------------------------------------

    def _wrap(self, trainer: Any) -> None:
        training_step, compute_loss = trainer.training_step, trainer.compute_loss

        def watched_step(model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            assert self.core is not None
            self.core.batch(inputs, step=trainer.state.global_step)
            self.in_step = True
            try:
                return training_step(model, inputs, *args, **kwargs)
            except TrainingFault:
                self._close()
                raise
            except BaseException:
                self._crashed()  # a callback added after the Trainer was built: no guard
                raise
            finally:
                self.in_step = False

        def watched_loss(model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            out = compute_loss(model, inputs, *args, **kwargs)
            if not self.in_step or self.core is None:  # evaluation
                return out
            self.in_step = False
            loss = out[0] if isinstance(out, tuple) else out
            if self.core.loss(loss):
                return out
            # on_fault="skip": a loss with no gradient, so this batch moves nothing
            zero = torch.zeros((), device=loss.device, dtype=loss.dtype, requires_grad=True)
            return (zero, *out[1:]) if isinstance(out, tuple) else zero

        trainer.training_step, trainer.compute_loss = watched_step, watched_loss
        self.restore = ["training_step", "compute_loss"]

    def _guard(self, trainer: Any) -> None:
        """Wrap the Trainer's ``train`` (on the instance, once) so that a run that raises
        closes the watch: ``training_step``/``compute_loss`` restored, the hooks removed and
        the steps not checked yet (``sync_every``) judged. The Trainer has no exception
        event (Lightning's ``on_exception``), and its loop raises from places the wrapped
        methods never see (the data loader, the optimizer, another callback)."""
        train = trainer.train
        if getattr(train, "preflight_guard", None) is self:
            return

        @functools.wraps(train)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return train(*args, **kwargs)
            except BaseException:
                self._crashed()
                raise

        guarded.preflight_guard = self  # type: ignore[attr-defined]
        trainer.train = guarded

    def _crashed(self) -> None:
        """The run raised: close the watch; the run's own exception goes on. A fault found
        now among the steps not checked yet is written and warned about, never raised in
        its place."""
        try:
            self._close()
        except TrainingFault as fault:
            warnings.warn(f"{fault}", RuntimeWarning, stacklevel=3)
        except Exception as e:
            warnings.warn(f"preflight.watch could not close: {e}", RuntimeWarning,
                          stacklevel=3)

    def _columns(self, model: Any, args: Any) -> None:
        """What the model takes (as the Trainer's own column removal computes it)."""
        model = getattr(model, "get_base_model", lambda: model)()
        names = [*inspect.signature(model.forward).parameters,
                 "label", "label_ids", *(args.label_names or [])]
        for c in self.collates:
            c.columns = names

    def _flush(self) -> None:
        if self.watching and self.core is not None:
            self.core.flush()

    def _close(self) -> None:
        """Restore the Trainer's methods and remove the hooks (the record stays)."""
        if not self.watching:
            return
        self.watching = False
        for name in self.restore:
            self.trainer.__dict__.pop(name, None)
        self.restore = []
        assert self.core is not None
        self.core.close()


class TrainerCollate:
    """Picklable (worker processes get a copy): rows to the user's collator as the Trainer
    would give them, the ids of ``with_ids`` rows on the batch."""

    def __init__(self, data_collator: Callable[[list[Any]], Any]) -> None:
        self.data_collator = data_collator
        self.columns: list[str] | None = None
        self.id_field: str | None = "id"

    def __call__(self, features: list[Any]) -> Any:
        if features and all(hasattr(f, "row") for f in features):
            return _Collate(self._collate, self.id_field)(features)
        return self._collate(features)

    def _collate(self, features: list[Any]) -> Any:
        keep = self.columns
        if keep is None:  # the callback has not met the Trainer: drop only the id
            rows = [{k: v for k, v in f.items() if k != self.id_field} if isinstance(
                f, Mapping) else f for f in features]
        else:
            rows = [{k: v for k, v in f.items() if k in keep} if isinstance(f, Mapping)
                    else f for f in features]
        return self.data_collator(rows)


def _find_trainer(*, required: bool = True) -> Any:
    """The ``transformers.Trainer`` whose training loop (or ``__init__``) is calling this
    callback; None when there is none and it is not ``required``."""
    frame = inspect.currentframe()
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, transformers.Trainer):
            return owner
        frame = frame.f_back
    if not required:
        return None
    raise ConfigError("PreflightCallback: no transformers.Trainer is training; give the "
                      "callback to one (Trainer(..., callbacks=[callback])) and call train()")
