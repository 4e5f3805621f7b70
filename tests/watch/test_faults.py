"""A plain loop with planted faults: the first non-finite step is found, localised and
attributed, and its replay reproduces."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch import nn
from torch.utils.data import DataLoader

import preflight
from preflight.cli import main
from preflight.report.model import SmokeResult
from tests.watch import tiny

TINY = str(Path(tiny.__file__).resolve())


def _loader(rows: list[dict], size: int = 8) -> DataLoader:
    ds = preflight.watch.with_ids(rows)
    return DataLoader(ds, batch_size=size, collate_fn=ds.collate(tiny.collate))


def test_nan_row_at_step_k_stops_there_names_module_param_and_row(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    out = tmp_path / "watch"
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=out, model_spec=f"{TINY}:build") as w:
        tiny.train(w, model, opt, _loader(tiny.make_rows(nan_row=37)))
    fault = caught.value.fault
    assert fault.verdict == "data_fault"
    assert fault.step == 4  # rows 32..39: the fifth batch
    assert fault.first_bad_module == "body.0"
    assert fault.first_bad_param == "body.0.weight"  # the first bad module's, not head.bias
    assert fault.minimal_rows == [37] and fault.minimal_ids == ["r37"]
    assert fault.batch_rows == list(range(32, 40)) and fault.batch_positions == [5]
    saved = SmokeResult.model_validate_json((out / "fault.json").read_text())
    assert saved.minimal_ids == ["r37"] and saved.step == 4
    assert saved.real is not None and len(saved.real.loss) == 5 and saved.real.loss[-1] is None
    assert all(torch.isfinite(p).all() for p in model.parameters())  # stopped before step

    result = CliRunner().invoke(main, ["smoke", "--replay", str(out / "replay.pt"),
                                       "--model", f"{TINY}:build", "--json",
                                       ])
    assert result.exit_code == 1, result.output
    replayed = json.loads(result.stdout[result.stdout.index("{"):])
    assert replayed["verdict"] == "data_fault"
    assert replayed["first_bad_module"] == "body.0"
    assert replayed["minimal_ids"] == ["r37"]


def test_replay_without_a_model_says_which_spec_to_pass(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault), preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, _loader(tiny.make_rows(nan_row=3)))
    result = CliRunner().invoke(main, ["smoke", "--replay", str(tmp_path / "replay.pt")])
    assert result.exit_code == 2
    assert "(model, step_fn, None)" in result.output


WRONG = """
from torch import nn
from tests.watch.tiny import step_fn

def build():
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1)), step_fn, None

def build_bad():
    return 42
"""


def test_replay_with_the_wrong_model_says_which_weights_do_not_fit(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault), preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path, model_spec=f"{TINY}:build") as w:
        tiny.train(w, model, opt, _loader(tiny.make_rows(nan_row=3)))
    wrong = tmp_path / "wrong.py"
    wrong.write_text(WRONG)
    replay = ["smoke", "--replay", str(tmp_path / "replay.pt"), "--model"]
    result = CliRunner().invoke(main, [*replay, f"{wrong}:build"])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "missing: 0.weight, 0.bias, 2.weight, 2.bias" in flat
    assert "unexpected: body.0.weight, body.0.bias, head.weight, head.bias" in flat
    result = CliRunner().invoke(main, [*replay, f"{wrong}:build_bad"])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "build() returned int" in flat and "(model, step_fn, None)" in flat
    assert "loss_fn" not in flat and "Traceback" not in flat


class ZeroNorm(nn.Module):
    """A code fault: after ``k`` training forwards a bug zeroes the buffer the output is
    divided by the norm of."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.net = tiny.Net()
        self.k, self.calls = k, 0
        self.register_buffer("gain", torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.training and self.calls > self.k:
            self.gain.zero_()
        return self.net(x) / self.gain.norm()


def test_division_by_a_zero_norm_after_step_k_is_a_code_fault(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ZeroNorm(k=3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, _loader(tiny.make_rows()))
    fault = caught.value.fault
    assert fault.step == 3
    assert fault.verdict == "code_fault"
    assert "control batch" in fault.reason and fault.minimal_rows == []


def test_weights_already_non_finite_are_a_named_state_fault(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    batches = tiny.batches(tiny.make_rows())
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path) as w:
        for i, batch in enumerate(batches):
            if i == 2:
                with torch.no_grad():
                    model.head.weight[0, 1] = math.inf
            loss = tiny.step_fn(model, batch)
            w.step(loss, batch)
            loss.backward()
            opt.step()
            opt.zero_grad()
    fault = caught.value.fault
    assert fault.step == 2 and fault.verdict == "code_fault"
    assert "head.weight" in fault.reason and "state fault" in fault.reason
    assert any(f.code == "state_nonfinite" for f in fault.findings)


def test_a_gradient_fault_is_caught_by_the_optimizer_pre_hook(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    batches = tiny.batches(tiny.make_rows())
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, out=tmp_path) as w:
        for i, batch in enumerate(batches):
            loss = tiny.step_fn(model, batch)
            assert w.step(loss, batch)
            loss.backward()
            if i == 5:
                model.body[0].weight.grad[0, 0] = math.nan
            opt.step()
            opt.zero_grad()
    fault = caught.value.fault
    assert fault.step == 5 and "gradient norm is nan" in fault.reason
    assert fault.first_bad_param == "body.0.weight"
    assert "step_fn" in fault.reason  # without it, no attribution
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_skip_mode_skips_the_bad_steps_and_training_goes_on(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    rows = tiny.make_rows(nan_row=37)
    rows[50]["x"][0] = math.nan
    with warnings.catch_warnings(record=True) as seen, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path, on_fault="skip") as w:
        warnings.simplefilter("always")
        went = tiny.train(w, model, opt, _loader(rows))
    assert went == [True] * 4 + [False] + [True] + [False] + [True]
    assert all(torch.isfinite(p).all() for p in model.parameters())
    fault = SmokeResult.model_validate_json((tmp_path / "fault.json").read_text())
    assert fault.step == 4 and fault.minimal_ids == ["r37"]  # the first fault is kept
    assert sum("the step is skipped" in str(x.message) for x in seen) == 2


def test_warn_mode_warns_and_keeps_the_step(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with pytest.warns(RuntimeWarning, match="kept"), preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path, on_fault="warn") as w:
        went = tiny.train(w, model, opt, _loader(tiny.make_rows(nan_row=37)))
    assert all(went)
    assert (tmp_path / "fault.json").is_file()
    assert not all(torch.isfinite(p).all() for p in model.parameters())  # it was kept


def test_grad_norm_alarm_is_a_warning_with_the_step(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with pytest.warns(RuntimeWarning, match=r"gradient norm .* at step 0 is above"), \
            preflight.watch(model, opt, step_fn=tiny.step_fn, out=tmp_path,
                            grad_norm_alarm=0.01) as w:
        tiny.train(w, model, opt, _loader(tiny.make_rows(16)), clip=None)
    assert not (tmp_path / "fault.json").exists()


def test_checked_every_few_steps_the_fault_still_names_its_step_and_rows(
        tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path, sync_every=4) as w:
        went = tiny.train(w, model, opt, _loader(tiny.make_rows(nan_row=45)))
        assert went == [True] * 8  # the check comes later
    fault = caught.value.fault
    assert fault.step == 5 and fault.verdict == "data_fault"
    assert fault.minimal_ids == ["r45"]
    assert all(torch.isfinite(p).all() for p in model.parameters())  # its grads were zeroed


def test_at_the_first_step_the_batchs_own_good_rows_are_the_control(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, _loader(tiny.make_rows(nan_row=3)))
    fault = caught.value.fault
    assert fault.step == 0 and fault.verdict == "data_fault" and fault.minimal_ids == ["r3"]


def test_a_code_fault_keeps_a_replay_of_the_whole_batch(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ZeroNorm(k=0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, _loader(tiny.make_rows()))
    fault = caught.value.fault
    assert fault.step == 0 and fault.verdict == "code_fault"
    assert "not attributed: no control batch yet" in fault.reason
    assert fault.replay is not None and Path(fault.replay).is_file()


def test_without_step_fn_the_parameter_named_is_the_first_in_forward_order(
        tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, out=tmp_path) as w:
        for i, batch in enumerate(tiny.batches(tiny.make_rows(32))):
            loss = tiny.step_fn(model, batch)
            w.step(loss, batch)
            if i == 2:  # a NaN that enters at the first layer: every gradient is NaN
                loss = tiny.step_fn(model, {"x": batch["x"] * math.nan, "y": batch["y"]})
            loss.backward()
            opt.step()
            opt.zero_grad()
    assert caught.value.fault.first_bad_param == "body.0.weight"  # not head.bias
