"""Buffers a forward writes (BatchNorm's running statistics): the failing forward has
already put NaN into them, so the re-runs and the state scan start from the copy taken
before that forward, and a NaN row is a data fault, not a state fault."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

import preflight
from tests.watch import tiny


def _bn_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(tiny.WIDTH, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))


def _step_fn(model: nn.Module, batch: dict) -> torch.Tensor:
    return ((model(batch["x"]).squeeze(-1) - batch["y"]) ** 2).mean()


@pytest.mark.parametrize("sync_every", [1, 3])
def test_a_nan_row_through_batchnorm_is_a_data_fault_naming_the_row(tmp_path: Path,
                                                                    sync_every: int) -> None:
    model = _bn_model()
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    ds = preflight.watch.with_ids(tiny.make_rows(64, nan_row=21))
    loader = DataLoader(ds, batch_size=8, collate_fn=ds.collate(tiny.collate))
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=_step_fn, out=tmp_path, sync_every=sync_every) as w:
        tiny.train(w, model, opt, loader, loss_of=_step_fn)
    fault = caught.value.fault
    assert not torch.isfinite(model[1].running_mean).all()  # the forward wrote NaN
    assert fault.verdict == "data_fault", fault.reason
    assert "state fault" not in fault.reason
    assert fault.step == 2 and fault.minimal_ids == ["r21"]
    assert not (fault.first_bad_param or "").startswith("1.running")
    saved = torch.load(tmp_path / "replay.pt", weights_only=True)
    weights = saved["initial"] if "initial" in saved else saved["state"]
    assert torch.isfinite(weights["1.running_mean"]).all()


def test_buffers_already_non_finite_before_the_step_are_still_a_state_fault(
        tmp_path: Path) -> None:
    model = _bn_model()
    opt = torch.optim.SGD(model.parameters(), 1e-3)
    first, second = tiny.batches(tiny.make_rows(16))
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=_step_fn, out=tmp_path) as w:
        loss = _step_fn(model, first)
        assert w.step(loss, first)
        loss.backward()
        model[1].running_var.fill_(float("nan"))  # as if this step's forward wrote it
        opt.step()
        opt.zero_grad()
        model.eval()  # eval normalises with the running statistics: the loss is NaN
        w.step(_step_fn(model, second), second)
    fault = caught.value.fault
    assert fault.verdict == "code_fault" and "1.running_var" in fault.reason
