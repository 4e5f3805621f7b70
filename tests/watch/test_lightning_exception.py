"""Lightning's ``on_exception`` with steps not checked yet: the run's own exception goes on.

Lightning calls ``on_exception`` and then tears the run down; a ``TrainingFault`` raised
from the hook (a NaN among the steps ``sync_every`` had not checked yet, the default on
CUDA) skipped that teardown and took the place of the run's own exception. Lightning
itself is stubbed here (only ``Callback`` is needed), so this runs without the extra; the
real-framework tests are ``tests/integrations/test_lightning.py``."""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from pathlib import Path

import pytest

from tests.watch import tiny


def test_a_fault_found_while_closing_on_an_exception_is_written_not_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub = types.ModuleType("lightning.pytorch")
    stub.Callback = type("Callback", (), {})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lightning.pytorch", stub)
    monkeypatch.delitem(sys.modules, "preflight.watch.lightning", raising=False)
    adapter = importlib.import_module("preflight.watch.lightning")
    monkeypatch.delitem(sys.modules, "preflight.watch.lightning")  # not the stubbed one later

    model, opt = tiny.fresh()
    model.training_step = lambda batch, i: tiny.step_fn(model, batch)  # type: ignore[assignment]
    cb = adapter.PreflightCallback(out=tmp_path / "watch", sync_every=5)
    trainer = types.SimpleNamespace(optimizers=[opt], precision_plugin=None, global_step=0)
    cb.on_train_start(trainer, model)
    loader = [*tiny.batches(tiny.make_rows(16)), tiny.collate(tiny.make_rows(8, nan_row=3))]
    for i, batch in enumerate(loader):  # what Lightning calls around each batch
        trainer.global_step = i
        cb.on_train_batch_start(trainer, model, batch, i)
        loss = tiny.step_fn(model, batch)
        cb.on_before_backward(trainer, model, loss)
        loss.backward()
        cb.on_before_optimizer_step(trainer, model, opt)
        opt.step()
        opt.zero_grad()
        cb.on_train_batch_end(trainer, model, None, batch, i)
    assert cb.fault is None  # step 2's NaN is not checked yet (sync_every=5)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        cb.on_exception(trainer, model, RuntimeError("the run's own error"))
    assert cb.fault is not None and cb.fault.verdict == "data_fault"
    assert (tmp_path / "watch" / "fault.json").is_file()
    assert any("data_fault at step 2" in str(w.message) for w in seen)
