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


def test_smoke_replay_reruns_in_the_recorded_modes(tmp_path: Path) -> None:
    """``smoke --replay`` trained the saved batch with every module in train mode: a frozen
    module that is NaN when training (eval at the step) was blamed (body.2) for a row whose
    values overflow the loss (inf), and the output did not say which mode it used."""
    import json

    from click.testing import CliRunner

    from preflight.cli import main

    spec = f"{Path(tiny.__file__).resolve()}:build_frozen"
    model = tiny.frozen_net()
    model.body[2].eval()  # frozen: eval mode while the rest trains
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rows = tiny.make_rows(32)
    rows[19]["x"] = [1e30] * tiny.WIDTH  # finite, but its squared error is inf
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path, model_spec=spec) as w:
        tiny.train(w, model, opt, tiny.batches(rows))
    fault = caught.value.fault
    assert fault.verdict == "data_fault" and fault.batch_positions == [3], fault.reason
    result = CliRunner().invoke(main, ["smoke", "--replay", str(tmp_path / "replay.pt"),
                                       "--model", spec, "--json"])
    assert result.exit_code == 1, result.output
    replayed = json.loads(result.stdout[result.stdout.index("{"):])
    assert replayed["verdict"] == "data_fault" and replayed["reason"].startswith("reproduced")
    assert replayed["first_bad_module"] != "body.2"  # train mode made body.2 the NaN
    said = "rerun in train mode with 1 module(s) in eval mode, as recorded: body.2"
    assert said in replayed["reason"]
    assert said in " ".join(result.stderr.split())  # the console says it too


def test_a_replay_file_s_malformed_modes_are_a_config_error() -> None:
    from preflight.errors import ConfigError
    from preflight.smoke.replay_file import modes

    model = tiny.frozen_net()
    assert modes({}, model) is None  # a smoke test's replay: every module trains
    assert modes({"modes": [["body.2", False]]}, model) == (True, True, True, True, False, True)
    with pytest.raises(ConfigError, match="not \\(module name, training\\) pairs"):
        modes({"modes": [["body.2"]]}, model)


def test_the_rerun_names_the_modules_whose_mode_differs_from_the_model_s() -> None:
    """A model in eval mode with a module switched back to train (a fine-tuned adapter)
    was said to be "rerun in eval mode", naming none: the other way round is named too."""
    from preflight.smoke.rerun import _mode_said

    model = tiny.frozen_net()
    model.eval()
    model.body[2].train()
    modes = tuple(m.training for m in model.modules())
    assert _mode_said(modes, model) == ("rerun in eval mode with 1 module(s) in train mode, "
                                        "as recorded: body.2")
    model.train()
    model.body[2].eval()
    assert _mode_said(tuple(m.training for m in model.modules()), model) == (
        "rerun in train mode with 1 module(s) in eval mode, as recorded: body.2")
    model.eval()
    assert _mode_said(tuple(m.training for m in model.modules()), model) == (
        "rerun in eval mode (model.training False), as recorded")
    assert _mode_said(None, model) == "rerun in train mode"
