"""Re-runs run in the mode the failing step ran in: a model trained with a frozen
submodule in eval mode (or entirely in eval mode) was re-run with every module training,
so a module that behaves differently in train mode (dropout, batch norm) made the control
fail too and a NaN row read as a code fault."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import preflight
from tests.watch import tiny


class NaNWhenTraining(nn.Module):
    """Identity in eval mode; NaN in train mode (a frozen part that cannot train)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.nan if self.training else x


def _model() -> tuple[nn.Module, torch.optim.Optimizer]:
    model, _ = tiny.fresh()
    model.body.append(NaNWhenTraining())
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


@pytest.mark.parametrize("whole", [False, True])
def test_re_runs_use_the_step_s_modes(tmp_path: Path, whole: bool) -> None:
    model, opt = _model()
    model.train(not whole)
    model.body[2].eval()  # frozen: eval mode while the rest trains
    batches = tiny.batches(tiny.make_rows(32, nan_row=19))
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, batches)
    fault = caught.value.fault
    assert fault.step == 2 and fault.verdict == "data_fault", fault.reason
    assert fault.batch_positions == [3]
    note = next(f.detail for f in fault.findings if f.code == "rerun_eval_mode")
    assert ("model.training False" in note) if whole else ("1 module(s)" in note
                                                           and "body.2" in note)
    assert model.training is not whole and not model.body[2].training  # left as they were


def test_a_training_model_gets_no_mode_note(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    batches = tiny.batches(tiny.make_rows(32, nan_row=19))
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, batches)
    assert not [f for f in caught.value.fault.findings if f.code == "rerun_eval_mode"]
