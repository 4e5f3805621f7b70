"""Mistakes and hostile inputs: each a clear message, never the watch's own traceback in
the user's training."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

import preflight
from preflight.errors import ConfigError
from tests.watch import tiny


def _nan_loader(rows=None) -> DataLoader:
    ds = preflight.watch.with_ids(rows or tiny.make_rows(nan_row=12))
    return DataLoader(ds, batch_size=8, collate_fn=ds.collate(tiny.collate))


def test_a_step_fn_that_raises_on_the_rerun_still_gives_a_fault(tmp_path: Path) -> None:
    calls = []

    def step_fn(model, batch):
        calls.append(1)
        raise ValueError("my step_fn is broken")

    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, _nan_loader())
    fault = caught.value.fault
    assert calls and fault.step == 1
    assert "the step_fn re-run raised ValueError: my step_fn is broken" in fault.reason
    assert (tmp_path / "fault.json").is_file()
    # not re-run: the step's own tensors still name the NaN row, as without step_fn
    assert fault.verdict == "data_fault" and fault.minimal_ids == ["r12"]


def test_a_step_fn_returning_no_tensor_falls_back_to_the_steps_own_tensors(
        tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=lambda m, b: {"loss": 1}, out=tmp_path) as w:
        tiny.train(w, model, opt, _nan_loader())
    fault = caught.value.fault
    assert fault.verdict == "data_fault" and fault.minimal_ids == ["r12"]
    assert "the step_fn re-run raised ConfigError" in fault.reason


def test_a_failed_rerun_without_bad_inputs_is_unattributed_not_a_code_fault(
        tmp_path: Path) -> None:
    def step_fn(model, batch):
        raise RuntimeError("boom")

    def loss_of(model, batch):  # the second step's loss is NaN: no input says why
        scale = float("nan") if batch["y"][0] == 2.0 else 1.0
        return tiny.step_fn(model, batch) * scale

    rows = tiny.make_rows(16)
    rows[8]["y"] = 2.0
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, _nan_loader(rows), loss_of=loss_of)
    fault = caught.value.fault
    assert fault.step == 1 and fault.verdict == "skipped"
    assert "not attributed: the step_fn re-run raised RuntimeError: boom" in fault.reason


def test_a_batch_that_cannot_be_sliced_is_attributed_without_rows(tmp_path: Path) -> None:
    def step_fn(model, batch):
        return tiny.step_fn(model, batch["data"])

    model, opt = tiny.fresh()
    good = [{"data": b, "n": torch.zeros(3)} for b in tiny.batches(tiny.make_rows(16))]
    bad = {"data": tiny.collate(tiny.make_rows(8, nan_row=2)), "n": torch.zeros(3)}
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=step_fn, out=tmp_path) as w:
        for batch in [*good, bad]:
            loss = step_fn(model, batch)
            w.step(loss, batch)
            loss.backward()
            opt.step()
            opt.zero_grad()
    fault = caught.value.fault
    assert fault.verdict == "data_fault" and fault.minimal_rows == []
    [note] = [f for f in fault.findings if f.code == "rows_not_narrowed"]
    assert "cannot be sliced into rows" in note.detail and "[3, 8]" in note.detail


def test_an_out_that_is_a_file_is_refused_before_training(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    (tmp_path / "taken").write_text("x")
    with pytest.raises(ConfigError, match="is a file; give a folder"):
        preflight.watch(model, opt, out=tmp_path / "taken")


@pytest.mark.parametrize(("loss", "got"), [(torch.ones(3), r"\(3,\)"), ("0.5", "str")])
def test_a_loss_that_is_not_a_scalar_tensor_is_a_clear_error(tmp_path: Path, loss,
                                                             got: str) -> None:
    model, opt = tiny.fresh()
    with preflight.watch(model, opt, out=tmp_path) as w, pytest.raises(
            ConfigError, match=f"loss must be a scalar tensor.*got {got}"):
        w.step(loss, None)


def test_a_python_float_loss_is_checked_too(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with preflight.watch(model, opt, out=tmp_path, on_fault="skip") as w:
        assert w.step(0.5)
        with pytest.warns(RuntimeWarning, match="loss is nan"):
            assert not w.step(float("nan"))


@pytest.mark.parametrize(("key", "value", "match"), [
    ("on_fault", "explode", "on_fault must be one of"),
    ("log_every", 0, "log_every must be a positive integer"),
    ("sync_every", -1, "sync_every must be a positive integer"),
    ("grad_every", 0, "grad_every must be a positive integer"),
    ("grad_every", 2.5, "grad_every must be a positive integer"),
    # accepted, then a string failed every step's comparison and the watch turned itself off
    ("grad_norm_alarm", "100", "grad_norm_alarm must be a number above 0"),
    ("grad_norm_alarm", float("nan"), "grad_norm_alarm must be a number above 0"),
    ("grad_norm_alarm", 0, "grad_norm_alarm must be a number above 0"),
    ("min_scale", "1e-4", "min_scale must be a number 0 or more"),
    ("min_scale", float("inf"), "min_scale must be a number 0 or more"),
    ("model_spec", "", "model_spec must be package.module:build"),
    # accepted, and failed only at the first fault's re-run
    ("step_fn", 3, "step_fn must be your forward"),
    ("scaler", "yes", "scaler must be your torch.amp.GradScaler"),
])
def test_bad_settings_are_config_errors(tmp_path: Path, key: str, value, match: str) -> None:
    model, opt = tiny.fresh()
    with pytest.raises(ConfigError, match=match):
        preflight.watch(model, opt, out=tmp_path, **{key: value})


@pytest.mark.parametrize("out", ["", " ", None])
def test_an_empty_out_is_refused_not_the_working_directory(out) -> None:
    # out="" (an unset variable) wrote fault.json and stats.jsonl among the user's files.
    model, opt = tiny.fresh()
    with pytest.raises(ConfigError, match="watch out must name a folder"):
        preflight.watch(model, opt, out=out)


def test_not_a_model_or_optimizer_is_a_clear_error(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with pytest.raises(ConfigError, match=r"optimizer must be a torch\.optim\.Optimizer"):
        preflight.watch(model, "adam", out=tmp_path)
    with pytest.raises(ConfigError, match=r"model must be a torch\.nn\.Module"):
        preflight.watch(lambda x: x, opt, out=tmp_path)


def test_the_watch_removes_its_hook_when_the_block_ends(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with preflight.watch(model, opt, out=tmp_path) as w:
        tiny.train(w, model, opt, tiny.batches(tiny.make_rows(16)))
    model.head.weight.grad = torch.full_like(model.head.weight, float("nan"))
    opt.step()  # no watch any more: nothing raises
    assert not torch.isfinite(model.head.weight).all()


def test_a_closed_watch_refuses_to_be_entered_or_stepped_again(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    w = preflight.watch(model, opt, out=tmp_path)
    with w:
        tiny.train(w, model, opt, tiny.batches(tiny.make_rows(8)))
    with pytest.raises(ConfigError, match=r"create a new preflight\.watch"), w:
        pass
    with pytest.raises(ConfigError, match="was closed"):
        w.step(model(torch.ones(2, tiny.WIDTH)).sum())


def test_a_stats_file_that_cannot_be_written_warns_once_and_the_checks_go_on(
        tmp_path: Path) -> None:
    out = tmp_path / "w"
    model, opt = tiny.fresh()
    loader = list(_nan_loader(tiny.make_rows(48, nan_row=40)))
    with pytest.warns(RuntimeWarning, match="cannot write") as caught, pytest.raises(
            preflight.watch.TrainingFault) as fault, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=out, log_every=1) as w:
        for i, batch in enumerate(loader):
            if i == 2:  # the folder goes away mid-run
                for f in out.iterdir():
                    f.unlink()
                out.rmdir()
                out.write_text("now a file")
            tiny.train(w, model, opt, [batch])
    mine = [x for x in caught if "cannot write" in str(x.message)]
    assert len(mine) == 1 and mine[0].filename == str(Path(tiny.__file__).resolve())
    assert fault.value.fault.verdict == "data_fault" and fault.value.fault.step == 5
    assert fault.value.fault.minimal_ids == ["r40"]
    assert any(f.code == "replay_not_written" for f in fault.value.fault.findings)


@pytest.mark.parametrize(("content", "match"), [
    (None, "report not found"), ("{not json", "is not a preflight report.json")])
def test_a_gate_report_missing_or_corrupt_is_refused_when_the_watch_starts(
        tmp_path: Path, content: str | None, match: str) -> None:
    report = tmp_path / "gate" / "report.json"
    if content is not None:
        report.parent.mkdir()
        report.write_text(content)
    model, opt = tiny.fresh()
    with pytest.raises(ConfigError, match=f"watch gate_report: .*{match}"):
        preflight.watch(model, opt, out=tmp_path / "w", gate_report=report)


@pytest.mark.parametrize("exit_with", [SystemExit(0), GeneratorExit()],
                         ids=["sys.exit", "GeneratorExit"])
def test_a_step_fn_that_exits_on_the_rerun_is_not_the_runs_exit(tmp_path: Path,
                                                                 exit_with) -> None:
    # sys.exit(0) in a re-run left w.step as SystemExit: the training script ended with
    # status 0 after a NaN, with no fault.json.
    def step_fn(model, batch):
        raise exit_with

    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, _nan_loader())
    fault = caught.value.fault
    assert f"the step_fn re-run raised {type(exit_with).__name__}" in fault.reason
    assert (tmp_path / "fault.json").is_file()
    assert fault.verdict == "data_fault" and fault.minimal_ids == ["r12"]
