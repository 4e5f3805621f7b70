"""User code that misbehaves while ``smoke --replay`` reruns a watch's saved batch: a clear
verdict or message, never a traceback or "a bug in preflight", and the exit code the
smoke test's attribution contract gives (a fault: 1; a broken contract: 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import preflight
from preflight.cli import main
from preflight.config import SmokeConfig
from preflight.smoke.replay_file import WATCH_TASK, save
from tests.watch import tiny

HOSTILE = '''
import torch
from torch.nn import functional as F
from tests.watch import tiny


def _build(fn):
    def build():
        torch.manual_seed(0)
        return tiny.Net(), fn, None
    return build


def raises(model, batch):
    raise ValueError("boom in forward")


def logits_only(model, batch):
    return {"logits": model(batch["x"])}


def with_loss(model, batch):
    return {"loss": F.mse_loss(model(batch["x"]), batch["y"])}


def generator(model, batch):
    return (F.mse_loss(model(batch["x"]), batch["y"]) for _ in range(1))


def scales_in_place(model, batch):
    batch["x"].mul_(1e6)  # fine once per batch, as training calls it; inf if repeated
    return F.mse_loss(model(batch["x"]), batch["y"])


build_raises = _build(raises)
build_logits_only = _build(logits_only)
build_with_loss = _build(with_loss)
build_generator = _build(generator)
build_scales_in_place = _build(scales_in_place)
'''


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A watch's replay file of a NaN row, and the file of hostile builds."""
    where = tmp_path_factory.mktemp("replay")
    spec = f"{Path(tiny.__file__).resolve()}:build"
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault), preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=where / "watch", model_spec=spec) as w:
        tiny.train(w, model, opt, tiny.batches(tiny.make_rows(32, nan_row=19)))
    hostile = where / "hostile.py"
    hostile.write_text(HOSTILE, encoding="utf-8")
    return where / "watch" / "replay.pt", hostile


def _replay(path: Path, spec: str, *more: str):
    return CliRunner().invoke(main, ["smoke", "--replay", str(path), "--model", spec, *more])


def test_a_step_fn_that_raises_is_a_code_fault_not_an_internal_error(
        saved: tuple[Path, Path]) -> None:
    replay, hostile = saved
    result = _replay(replay, f"{hostile}:build_raises", "--json")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "bug in preflight" not in result.output
    replayed = json.loads(result.stdout[result.stdout.index("{"):])
    assert replayed["verdict"] == "code_fault"
    assert replayed["reason"].startswith("your step_fn raised ValueError: boom in forward "
                                         "on the saved batch")
    assert "the rows were not judged" in replayed["reason"]


@pytest.mark.parametrize(("build", "said"), [
    ("build_logits_only", "your step_fn must return a scalar tensor, got dict with keys "
                          "logits and no 'loss'"),
    ("build_with_loss", "got dict with keys loss: return its loss tensor, out['loss']"),
    ("build_generator", "your step_fn must return a scalar tensor, got generator"),
])
def test_a_step_fn_returning_no_scalar_tensor_is_exit_2(saved: tuple[Path, Path],
                                                        build: str, said: str) -> None:
    replay, hostile = saved
    result = _replay(replay, f"{hostile}:{build}")
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())
    assert "Traceback" not in result.output and "bug in preflight" not in result.output


def test_a_step_fn_that_edits_its_batch_in_place_sees_a_fresh_batch_each_step(
        saved: tuple[Path, Path], tmp_path: Path) -> None:
    """The rerun trained the one saved batch for several steps: a step_fn that scales it
    in place scaled it again each step (1e6, then 1e12: an inf gradient norm), and a clean batch
    was called a reproduced data fault."""
    _, hostile = saved
    spec = f"{hostile}:build_scales_in_place"
    torch.manual_seed(0)
    net = tiny.Net()
    batch = tiny.collate(tiny.make_rows(2))
    path = save(tmp_path / "replay.pt", task=WATCH_TASK, model=spec, spec={},
                config=SmokeConfig(steps=4, clip=None, precision="fp32").model_dump(),
                batch=(batch, None), initial=net.state_dict(), rows=[0, 1], ids=[],
                files=[], failure="loss is inf at step 0", exempt=[])
    result = _replay(path, spec, "--json")
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.stdout[result.stdout.index("{"):])
    assert replayed["verdict"] == "pass" and replayed["reason"].startswith("did not reproduce")
    assert replayed["real"]["steps"] == 4


def test_re_runs_leave_a_batch_edited_in_place_for_the_loop_s_own_backward(
        tmp_path: Path) -> None:
    """With on_fault='warn' the loop goes on to ``loss.backward()``: the watch's re-runs
    edited the batch in place (on CPU, moving it to the device is no copy) and that
    backward raised "modified by an inplace operation"."""

    def clamps(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        batch["x"].clamp_(-1e6, 1e6)  # the same values, but a new version each time
        return torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])

    model, opt = tiny.fresh()
    with pytest.warns(RuntimeWarning, match="kept"), preflight.watch(
            model, opt, step_fn=clamps, out=tmp_path, on_fault="warn") as w:
        tiny.train(w, model, opt, tiny.batches(tiny.make_rows(32, nan_row=19)),
                   loss_of=clamps)
    assert w.fault is not None and w.fault.verdict == "data_fault", w.fault
