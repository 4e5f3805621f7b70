"""The Hugging Face Trainer adapter when the run raises: the watch closes, the run's own
exception goes on.

The Trainer has no exception event: a crash left ``training_step``/``compute_loss``
wrapped until the next ``train()`` and the steps ``sync_every`` had not checked yet
unjudged (a NaN among them never written). transformers is real here, but its Trainer
needs accelerate, which the test environment lacks: ``Loop`` is a ``transformers.Trainer``
subclass that skips its ``__init__`` and drives the callback as the Trainer's loop does
(``on_init_end`` from ``__init__``, ``on_train_begin``, ``training_step``,
``optimizer.step``, ``on_step_end``, ``on_train_end``). The real-Trainer tests are
``tests/integrations/test_trainer.py``."""

from __future__ import annotations

import types
import warnings
from pathlib import Path
from typing import Any

import pytest

transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

from preflight.report.model import SmokeResult  # noqa: E402
from preflight.watch.hf import PreflightCallback  # noqa: E402
from tests.watch import tiny  # noqa: E402


class Loop(transformers.Trainer):
    """The Trainer's callback interface, on ``tiny`` batches; ``crash`` raises at that
    batch, ``where`` says from where: the data loading or inside ``compute_loss``."""

    def __init__(self, callback: PreflightCallback, batches: list[Any], *, crash: int,
                 where: str, init: bool = True) -> None:
        self.model, self.optimizer = tiny.fresh()
        self.accelerator = types.SimpleNamespace()  # no GradScaler (fp32)
        self.args = types.SimpleNamespace(remove_unused_columns=False, label_names=None)
        self.state = types.SimpleNamespace(global_step=0)
        self.train_dataset, self.data_collator = batches, None
        self.cb, self.crash, self.where = callback, crash, where
        if init:  # the Trainer's __init__ ends with on_init_end; add_callback does not
            callback.on_init_end(self.args, self.state, None, model=self.model)

    def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if self.where == "loss" and self.state.global_step == self.crash:
            raise RuntimeError("CUDA error: an illegal memory access")
        return tiny.step_fn(model, inputs)

    def training_step(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        loss = self.compute_loss(model, inputs)
        loss.backward()
        return loss.detach()

    def train(self, *args: Any, **kwargs: Any) -> None:
        self.cb.on_train_begin(self.args, self.state, None, model=self.model)
        for i, batch in enumerate(self.train_dataset):
            if self.where == "data" and i == self.crash:
                raise OSError("the data loader's file is gone")
            self.training_step(self.model, batch)
            self.optimizer.step()
            self.optimizer.zero_grad()
            self.cb.on_step_end(self.args, self.state, None)
            self.state.global_step += 1
        self.cb.on_train_end(self.args, self.state, None)


def _batches() -> list[Any]:
    # batch 2 holds a NaN row; sync_every=5 has not checked it when batch 3 crashes
    return tiny.batches(tiny.make_rows(32, nan_row=19))


@pytest.mark.parametrize(("where", "init"), [("data", True), ("loss", True), ("loss", False)])
def test_a_crash_closes_the_watch_and_writes_the_unchecked_fault(
        tmp_path: Path, where: str, init: bool) -> None:
    cb = PreflightCallback(out=tmp_path / "watch", sync_every=5)
    loop = Loop(cb, _batches(), crash=3, where=where, init=init)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises((OSError, RuntimeError)) as caught:
            loop.train()
    assert "preflight" not in str(caught.value)  # the run's own exception, unchanged
    assert "training_step" not in vars(loop) and "compute_loss" not in vars(loop)
    assert cb.core is not None and cb.core.handle is not None
    assert not cb.watching and not loop.optimizer._optimizer_step_pre_hooks
    fault = SmokeResult.model_validate_json((tmp_path / "watch" / "fault.json").read_text())
    assert fault.step == 2 and fault.verdict == "data_fault" and fault.batch_positions == [3]
    assert any("data_fault at step 2" in str(w.message) for w in seen)


def test_a_clean_run_keeps_its_train(tmp_path: Path) -> None:
    cb = PreflightCallback(out=tmp_path / "watch")
    loop = Loop(cb, tiny.batches(tiny.make_rows(16)), crash=-1, where="data")
    loop.train()
    loop.train()  # the guard wraps once
    assert not cb.watching and "training_step" not in vars(loop)
    assert not (tmp_path / "watch" / "fault.json").exists()
    assert all(torch.isfinite(p).all() for p in loop.model.parameters())
