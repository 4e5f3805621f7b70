"""Batch types a loop may hand the watch, re-run and sliced as the loop built them."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F

import preflight
from preflight.watch.rows import take
from tests.watch import tiny

Pair = namedtuple("Pair", "x y")


def _step_fn(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    return F.mse_loss(model(batch.x), batch.y)


def test_a_namedtuple_batch_is_re_run_and_narrowed_to_its_row(tmp_path: Path) -> None:
    """Moving it to the device rebuilt it from one iterable (TypeError: missing 'y'): the
    re-run failed and the fault was judged from the inputs alone."""
    loader = [Pair(b["x"], b["y"]) for b in
              [*tiny.batches(tiny.make_rows(24)), tiny.collate(tiny.make_rows(8, nan_row=3))]]
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=_step_fn, out=tmp_path / "watch") as w:
        tiny.train(w, model, opt, loader, loss_of=_step_fn)
    fault = caught.value.fault
    assert fault.verdict == "data_fault", fault.reason
    assert "fails again from the pre-step weights" in fault.reason
    assert fault.batch_positions == [3]
    assert "watch_investigation_failed" not in [f.code for f in fault.findings]


def test_take_keeps_a_namedtuple() -> None:
    batch = Pair(torch.arange(4.0), torch.arange(4.0) * 2)
    part = take(batch, [1, 3])
    assert isinstance(part, Pair) and part.y.tolist() == [2.0, 6.0]
