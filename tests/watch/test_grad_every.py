"""``grad_every``: without a clip the gradient norm is computed every N steps only; a
gradient fault between two checks is caught by the next step's loss (the weights it
reached) or the next checked norm, and a clip's norm is still checked every step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import preflight
from tests.watch import tiny

BAD_STEP = 5  # with grad_every=4 the norm is computed at steps 0, 4, 8, ...


def _loss_with_a_nan_gradient_at(step: int):
    """The tiny loss; at ``step`` a finite term whose gradient is NaN (sqrt of a zero)."""
    calls = [0]

    def loss_of(model: nn.Module, batch: dict) -> torch.Tensor:
        loss = tiny.step_fn(model, batch)
        if calls[0] == step:
            loss = loss + (model.head.bias * 0).abs().sqrt().sum()
        calls[0] += 1
        return loss
    return loss_of


def _fault(tmp_path: Path, *, grad_every: int, clip: float | None):
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path, grad_every=grad_every) as w:
        tiny.train(w, model, opt, tiny.batches(tiny.make_rows(96)), clip=clip,
                   loss_of=_loss_with_a_nan_gradient_at(BAD_STEP))
    return caught.value.fault


def test_every_step_catches_the_gradient_fault_at_its_step(tmp_path: Path) -> None:
    fault = _fault(tmp_path, grad_every=1, clip=None)
    assert fault.step == BAD_STEP and fault.reason.startswith("gradient norm is nan")


def test_an_unchecked_gradient_fault_is_caught_by_the_next_loss_or_check(
        tmp_path: Path) -> None:
    fault = _fault(tmp_path, grad_every=4, clip=None)
    assert BAD_STEP < fault.step <= 8
    # the NaN gradient reached the weights: the next step's loss is NaN, from its state
    assert fault.verdict == "code_fault" and "weights already non-finite" in fault.reason


def test_a_clipping_loop_is_checked_every_step_whatever_grad_every(tmp_path: Path) -> None:
    fault = _fault(tmp_path, grad_every=4, clip=1.0)
    assert fault.step == BAD_STEP and fault.reason.startswith("gradient norm is nan")
