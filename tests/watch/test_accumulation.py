"""What the watch keeps between steps (memory) and whom it blames when the loop accumulates
gradients over several batches before each optimizer step."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader

import preflight
from tests.watch import tiny


def test_judged_steps_keep_no_batch_alive(tmp_path: Path) -> None:
    """The 200 steps of history are curves: a batch that trained is not kept (it held 200
    batches' tensors alive, on the GPU too), only the control batch is."""
    model, opt = tiny.fresh()
    refs = []
    with preflight.watch(model, opt, step_fn=tiny.step_fn, out=tmp_path / "watch") as w:
        for _ in range(30):
            batch = {"x": torch.randn(8, tiny.WIDTH), "y": torch.randn(8)}
            refs.append(weakref.ref(batch["x"]))
            loss = tiny.step_fn(model, batch)
            assert w.step(loss, batch)
            loss.backward()
            opt.step()
            opt.zero_grad()
            del batch, loss
        gc.collect()
        assert sum(r() is not None for r in refs) <= 2  # the control and the current step


def _step_fn(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    """A finite loss whose gradient is NaN for a row whose x[0] is 0 (sqrt at 0, times 0)."""
    out = model(batch["x"])
    keep = (batch["x"][:, 0] != 0).float()
    return F.mse_loss(out, batch["y"]) + (out * 0 + keep).sqrt().mean()


@pytest.mark.parametrize("sync_every", [1, 3])
def test_an_accumulated_gradient_fault_blames_the_batch_that_fails(tmp_path: Path,
                                                                   sync_every: int) -> None:
    """Four batches per optimizer step; the NaN gradient comes from the second of them. It
    was blamed on the last batch, which does not fail alone: a code_fault that 'did not
    reproduce'."""
    rows = tiny.make_rows(64)
    for r in rows:
        r["x"][0] = 0.5
    rows[21]["x"][0] = 0.0  # batch 5 (of 4 rows), the second of the optimizer step 4-7
    data = preflight.watch.with_ids(rows)
    loader = DataLoader(data, batch_size=4, collate_fn=data.collate(tiny.collate))
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=_step_fn, out=tmp_path / "watch", sync_every=sync_every) as w:
        for i, batch in enumerate(loader):
            loss = _step_fn(model, batch) / 4
            assert w.step(loss, batch)
            loss.backward()
            if i % 4 == 3:
                opt.step()
                opt.zero_grad()
    fault = caught.value.fault
    assert fault.verdict == "data_fault", fault.reason
    assert fault.step == 5
    assert fault.batch_ids == ["r20", "r21", "r22", "r23"]
    assert fault.minimal_ids == ["r21"]
    assert "4 accumulated batches, steps 4-7; batch 2 of them, at step 5" in fault.reason


def test_a_long_accumulation_still_blames_its_first_batches(tmp_path: Path) -> None:
    """70 batches per optimizer step, the NaN gradient from the second: the 64 kept were the
    last ones, so the culprit was gone and the reason said '64 accumulated batches, steps
    6-69' (a code_fault that 'did not reproduce')."""
    rows = tiny.make_rows(4 * 70)
    for r in rows:
        r["x"][0] = 0.5
    rows[5]["x"][0] = 0.0  # batch 1, the second of the one optimizer step
    data = preflight.watch.with_ids(rows)
    loader = DataLoader(data, batch_size=4, collate_fn=data.collate(tiny.collate))
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=_step_fn, out=tmp_path / "watch") as w:
        for batch in loader:
            loss = _step_fn(model, batch) / 70
            assert w.step(loss, batch)
            loss.backward()
        opt.step()
    fault = caught.value.fault
    assert fault.verdict == "data_fault", fault.reason
    assert fault.step == 1
    assert "70 accumulated batches, steps 0-69; batch 2 of them, at step 1" in fault.reason
