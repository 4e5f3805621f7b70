"""The seam a framework adapter uses: gradients checked on call (``step_hook=False``) and
pending steps judged by ``flush``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from preflight.watch import TrainingFault, WatchConfig, WatchCore
from tests.watch import tiny


def test_check_gradients_without_the_step_hook_catches_a_nan_gradient(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    core = WatchCore(model, opt, rerun=tiny.step_fn, config=WatchConfig(out=tmp_path),
                     step_hook=False)
    batches = tiny.batches(tiny.make_rows(16))
    core.batch(batches[0])
    loss = tiny.step_fn(model, batches[0])
    assert core.loss(loss)
    loss.backward()
    assert core.check_gradients(opt)
    opt.step()
    opt.zero_grad()
    core.end_step()
    core.batch(batches[1])
    loss = tiny.step_fn(model, batches[1])
    assert core.loss(loss)
    loss.backward()
    model.head.bias.grad.fill_(math.nan)  # a finite loss, a NaN gradient
    opt.step()  # no pre-hook: the core checks only when asked
    model.head.bias.grad.fill_(math.nan)
    with pytest.raises(TrainingFault, match="gradient norm is nan at step 1"):
        core.check_gradients(opt)
    core.close()


def test_flush_judges_the_steps_not_checked_yet(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    core = WatchCore(model, opt, rerun=tiny.step_fn,
                     config=WatchConfig(out=tmp_path, sync_every=10))
    core.batch(None)
    assert core.loss(torch.tensor(1.0))
    core.batch(None)
    assert core.loss(torch.tensor(math.nan))  # kept for the check, not judged yet
    core.end_step()
    assert core.fault is None and len(core.pending) == 2
    with pytest.raises(TrainingFault, match="loss is nan at step 1"):
        core.flush()
    assert core.fault is not None and core.fault.step == 1
    assert (tmp_path / "fault.json").is_file()
    core.close()
