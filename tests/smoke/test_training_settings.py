"""The user's training settings in the smoke runs: the optimizer and schedule built from
``smoke:``, a TrainingArguments file read without transformers, the warm-up scaled to the
short run, gradient accumulation in the GradScaler's order, and the report's record."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from preflight.config import SmokeConfig, load_rules
from preflight.errors import ConfigError
from preflight.report.html import render_html
from preflight.report.model import Report
from preflight.smoke import optim
from preflight.smoke.loop import Setup, learning_budget, train
from preflight.smoke.models import build_builtin
from preflight.smoke.optim import build_optimizer, build_scheduler, lr_factor
from preflight.smoke.training_args import read_training_args, resolve, scale_warmup
from tests.smoke.conftest import (
    gate,
    invoke,
    read_report,
    regression_records,
    regression_rules,
    smoke_of,
    write_jsonl,
    write_rules,
)

RULES = {"rules": [{"id": "empty", "check": "empty"}]}


def _setup(**cfg: Any) -> Setup:
    model, loss_fn = build_builtin("regression", {"features": 3, "bias": 0.0})
    return Setup(template=model, initial=copy.deepcopy(model.state_dict()), loss_fn=loss_fn,
                 cfg=SmokeConfig(**cfg), device=torch.device("cpu"), precision="fp32",
                 warmup=cfg.get("warmup_steps") or 0)


def _batch(rows: int = 16, seed: int = 0) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 3, generator=g)
    return {"features": x}, x @ torch.tensor([1.0, -2.0, 0.5])


def _write(path: Path, data: dict[str, Any]) -> Path:
    if path.suffix == ".json":
        path.write_text(json.dumps(data), encoding="utf-8")
    else:  # YAML, written by hand as a user would
        path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in data.items()),
                        encoding="utf-8")
    return path


# --- defaults: the fixed loop the smoke test always ran --------------------------------


def test_defaults_build_todays_optimizer_and_a_constant_schedule() -> None:
    resolved = resolve(SmokeConfig())
    cfg = resolved.cfg
    assert (cfg.clip, cfg.grad_accum, resolved.warmup) == (1.0, 1, 0)
    model, _ = build_builtin("regression", {"features": 3, "bias": 0.0})
    opt = build_optimizer(model, cfg)
    assert type(opt) is torch.optim.AdamW and len(opt.param_groups) == 1
    group = opt.param_groups[0]
    assert group["lr"] == 1e-2 and group["weight_decay"] == 0.0
    assert group["betas"] == (0.9, 0.999) and group["eps"] == 1e-8 and not group["amsgrad"]
    schedule = build_scheduler(opt, cfg, total=30, warmup=resolved.warmup)
    lrs = []
    for _ in range(30):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    assert lrs == [1e-2] * 30
    assert set(resolved.settings.source.values()) == {"default"}  # nothing was set


def test_defaults_give_the_same_losses_as_the_old_fixed_loop() -> None:
    setup = _setup(steps=12)
    out = train(setup, [_batch()], steps=12)
    # The loop before training settings existed, written out.
    torch.manual_seed(0)
    model = setup.fresh()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.0)
    inputs, targets = _batch()
    expected = []
    for _ in range(12):
        opt.zero_grad(set_to_none=True)
        loss = setup.loss_fn(model(inputs), targets)
        expected.append(float(loss.detach()))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
    assert out.run.loss == expected


# --- optimizers and schedules ----------------------------------------------------------


def test_sgd_with_momentum_and_decay_skips_biases() -> None:
    model, _ = build_builtin("regression", {"features": 3, "bias": 0.0})
    opt = build_optimizer(model, SmokeConfig(optimizer="sgd", lr=0.1, momentum=0.9,
                                             weight_decay=0.01))
    assert type(opt) is torch.optim.SGD
    decay = {g["weight_decay"]: g for g in opt.param_groups}
    assert set(decay) == {0.01, 0.0}
    assert all(p.ndim >= 2 for p in decay[0.01]["params"])
    assert all(p.ndim < 2 for p in decay[0.0]["params"])
    assert all(g["momentum"] == 0.9 and g["lr"] == 0.1 for g in opt.param_groups)


def test_adamw_takes_betas_and_decay() -> None:
    model, _ = build_builtin("regression", {"features": 3, "bias": 0.0})
    opt = build_optimizer(model, SmokeConfig(betas=(0.8, 0.95), weight_decay=0.1, lr=3e-4))
    assert type(opt) is torch.optim.AdamW
    assert {g["betas"] for g in opt.param_groups} == {(0.8, 0.95)}
    assert {g["weight_decay"] for g in opt.param_groups} == {0.1, 0.0}


def test_adafactor_comes_from_transformers() -> None:
    pytest.importorskip("transformers")
    from transformers.optimization import Adafactor

    model, _ = build_builtin("regression", {"features": 3, "bias": 0.0})
    opt = build_optimizer(model, SmokeConfig(optimizer="adafactor", lr=1e-3))
    assert type(opt) is Adafactor
    assert opt.param_groups[0]["lr"] == 1e-3 and not opt.param_groups[0]["relative_step"]


def test_adafactor_without_transformers_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = optim.importlib.util.find_spec
    monkeypatch.setattr(optim.importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))
    with pytest.raises(ConfigError, match=r"dataset-preflight\[hf\]"):
        optim.check_optimizer(SmokeConfig(optimizer="adafactor"))
    optim.check_optimizer(SmokeConfig(optimizer="sgd"))  # needs nothing


@pytest.mark.parametrize(("kind", "warmup", "expected"), [
    ("constant", 0, [1.0] * 11),
    ("constant", 2, [0.0, 0.5] + [1.0] * 9),
    ("linear", 2, [0.0, 0.5, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125, 0.0]),
    ("cosine", 0, [0.5 * (1 + math.cos(math.pi * s / 10)) for s in range(11)]),
])
def test_schedule_factors(kind: str, warmup: int, expected: list[float]) -> None:
    got = [lr_factor(s, total=10, warmup=warmup, kind=kind) for s in range(11)]
    assert got == pytest.approx(expected)


def test_cosine_scheduler_sets_the_optimizers_rate() -> None:
    model, _ = build_builtin("regression", {"features": 3, "bias": 0.0})
    cfg = SmokeConfig(lr=0.1, scheduler="cosine")
    opt = build_optimizer(model, cfg)
    schedule = build_scheduler(opt, cfg, total=10, warmup=2)
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    assert lrs[:3] == pytest.approx([0.0, 0.05, 0.1])
    assert lrs[6] == pytest.approx(0.1 * 0.5 * (1 + math.cos(math.pi * 4 / 8)))  # = 0.05
    assert lrs[-1] == pytest.approx(0.1 * 0.5 * (1 + math.cos(math.pi * 7 / 8)))


def test_the_learning_check_asks_a_decaying_schedule_for_its_share() -> None:
    assert learning_budget([1e-2] * 30) == 1.0  # defaults: min_loss_drop as it was
    assert learning_budget([1.0] * 30) == 1.0  # never stricter than the default
    linear = [1e-2 * lr_factor(s, total=30, warmup=3, kind="linear") for s in range(30)]
    assert learning_budget(linear) == pytest.approx(0.5, abs=0.03)
    assert learning_budget([5e-5] * 30) == 0.02 and learning_budget([1e-9] * 30) == 0.02
    out = train(_setup(scheduler="linear", warmup_steps=3), [_batch()], steps=30)
    assert out.run.min_drop == pytest.approx(0.1 * learning_budget(
        [1e-2 * lr_factor(s, total=30, warmup=3, kind="linear") for s in range(30)]))
    assert train(_setup(), [_batch()], steps=30).run.min_drop == 0.1


# --- warm-up scaled to the short run ---------------------------------------------------


def test_warmup_ratio_applies_to_the_smoke_steps() -> None:
    assert scale_warmup(None, 0.1, steps=30, real_steps=None)[0] == 3
    assert scale_warmup(None, 0.05, steps=30, real_steps=10_000)[0] == 2  # ceil, as HF


def test_warmup_steps_keep_their_share_of_a_known_run() -> None:
    used, how = scale_warmup(500, None, steps=30, real_steps=5_000)
    assert used == 3 and "500 of 5,000 real steps" in how


def test_warmup_steps_of_an_unknown_run_are_at_most_a_tenth() -> None:
    assert scale_warmup(500, None, steps=30, real_steps=None)[0] == 3
    assert scale_warmup(2, None, steps=30, real_steps=None)[0] == 2  # already below 10%


def test_warmup_never_outlasts_half_the_run() -> None:
    used, how = scale_warmup(900, None, steps=30, real_steps=1_000)
    assert used == 15 and "capped" in how
    assert scale_warmup(None, 1.0, steps=30, real_steps=None)[0] == 15


def test_warmup_from_max_steps_in_a_training_args_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "args.json", {"warmup_steps": 100, "max_steps": 1000})
    resolved = resolve(SmokeConfig(training_args=str(path)), records=50_000)
    assert resolved.warmup == 3  # 10% of 30, whatever the corpus size
    assert "100 of 1,000 real steps" in (resolved.settings.warmup or "")


def test_warmup_from_epochs_rows_and_batch(tmp_path: Path) -> None:
    # 2 epochs x ceil(8,000 / 16) batches / 2 accumulated = 500 real steps; 50 is 10%.
    path = _write(tmp_path / "args.json", {
        "warmup_steps": 50, "num_train_epochs": 2, "per_device_train_batch_size": 16,
        "gradient_accumulation_steps": 2})
    resolved = resolve(SmokeConfig(training_args=str(path), steps=40), records=8_000)
    assert resolved.warmup == 4 and "50 of 500 real steps" in (resolved.settings.warmup or "")
    # The corpus size unknown: the cautious 10% cap.
    assert resolve(SmokeConfig(training_args=str(path), steps=40)).warmup == 4
    unknown = resolve(SmokeConfig(training_args=str(path), steps=40))
    assert "unknown" in (unknown.settings.warmup or "")


def test_transformers5_warmup_below_one_is_a_ratio(tmp_path: Path) -> None:
    path = _write(tmp_path / "args.json", {"warmup_steps": 0.2})
    assert resolve(SmokeConfig(training_args=str(path))).warmup == 6


# --- the TrainingArguments file --------------------------------------------------------


def test_training_args_keys_map_to_smoke_settings(tmp_path: Path) -> None:
    path = _write(tmp_path / "args.yaml", {
        "learning_rate": 3e-4, "weight_decay": 0.01, "max_grad_norm": 0.5,
        "lr_scheduler_type": "cosine", "gradient_accumulation_steps": 2, "bf16": True,
        "optim": "adamw_torch_fused", "adam_beta1": 0.8, "adam_beta2": 0.95, "seed": 7,
        "output_dir": "runs/x", "report_to": ["wandb"], "logging_steps": 10})
    args = read_training_args(path)
    s = args.settings
    assert (s["lr"], s["weight_decay"], s["clip"], s["scheduler"]) == (3e-4, 0.01, 0.5, "cosine")
    assert (s["grad_accum"], s["precision"], s["optimizer"]) == (2, "bf16", "adamw")
    assert (s["betas"], s["seed"]) == ((0.8, 0.95), 7)
    assert args.ignored == ["logging_steps", "output_dir", "report_to"]


@pytest.mark.parametrize(("optim_name", "expected"), [
    ("adamw_torch", "adamw"), ("adamw_hf", "adamw"), ("adamw_torch_fused", "adamw"),
    ("sgd", "sgd"), ("adafactor", "adafactor")])
def test_optim_names_map(tmp_path: Path, optim_name: str, expected: str) -> None:
    args = read_training_args(_write(tmp_path / "a.json", {"optim": optim_name}))
    assert args.settings["optimizer"] == expected


def test_max_grad_norm_zero_turns_clipping_off(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "args.json", {"max_grad_norm": 0})
    cfg = resolve(SmokeConfig(training_args=str(path))).cfg
    assert cfg.clip is None
    seen: list[float] = []
    clip = torch.nn.utils.clip_grad_norm_

    def spy(params: Any, max_norm: float, *a: Any, **k: Any) -> Any:
        seen.append(max_norm)
        return clip(params, max_norm, *a, **k)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    setup = _setup()
    setup.cfg = cfg
    train(setup, [_batch()], steps=4)
    assert seen == [math.inf] * 4


def test_constant_schedule_has_no_warmup_as_in_transformers(tmp_path: Path) -> None:
    path = _write(tmp_path / "args.json", {"lr_scheduler_type": "constant", "warmup_steps": 50})
    resolved = resolve(SmokeConfig(training_args=str(path)))
    assert resolved.warmup == 0
    assert any("no warm-up" in n for n in resolved.settings.notes)
    with_warmup = _write(tmp_path / "w.json", {"lr_scheduler_type": "constant_with_warmup",
                                               "warmup_ratio": 0.1})
    assert resolve(SmokeConfig(training_args=str(with_warmup))).warmup == 3


@pytest.mark.parametrize(("key", "value"), [
    ("learning_rate", "3e-4"), ("learning_rate", True), ("learning_rate", 0),
    ("gradient_accumulation_steps", 1.5), ("fp16", "yes"), ("optim", 3),
    ("adam_beta2", 1.0), ("max_grad_norm", -1), ("seed", -1), ("lr_scheduler_type", "wavy"),
])
def test_a_wrong_type_names_the_file_and_key(tmp_path: Path, key: str, value: Any) -> None:
    path = _write(tmp_path / "args.json", {key: value})
    with pytest.raises(ConfigError) as e:
        read_training_args(path)
    assert str(path) in str(e.value) and key in str(e.value)


def test_an_optimizer_without_equivalent_needs_smoke_optimizer(tmp_path: Path) -> None:
    path = _write(tmp_path / "args.json", {"optim": "lion_8bit"})
    with pytest.raises(ConfigError, match=r"smoke\.optimizer"):
        resolve(SmokeConfig(training_args=str(path)))
    resolved = resolve(SmokeConfig(training_args=str(path), optimizer="sgd"))
    assert resolved.cfg.optimizer == "sgd" and resolved.settings.source["optimizer"] == "rules"


# --- precedence: defaults < training-args file < smoke: keys ---------------------------


def test_explicit_smoke_keys_win_over_the_file(tmp_path: Path) -> None:
    _write(tmp_path / "args.json", {"learning_rate": 5e-5, "max_grad_norm": 0.5,
                                    "warmup_steps": 100})
    rules = load_rules(write_rules(tmp_path / "rules.yaml", {
        **RULES, "smoke": {"training_args": "args.json", "lr": 1e-3, "warmup_ratio": 0.2}}))
    resolved = resolve(rules.smoke, base=tmp_path)  # the path is beside the rules file
    t = resolved.settings
    assert resolved.cfg.lr == 1e-3 and resolved.cfg.clip == 0.5 and resolved.warmup == 6
    assert t.source["lr"] == "rules" and t.source["clip"] == "training-args"
    assert t.source["warmup_ratio"] == "rules" and "warmup_steps" not in t.source
    assert t.source["optimizer"] == "training-args"  # TrainingArguments' default, adamw
    assert any("smoke.lr = 0.001 in the rules overrides 5e-05" in n for n in t.notes)


def test_check_no_smoke_never_reads_the_training_args_file(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", regression_records(10))
    rules = write_rules(tmp_path / "r.yaml", regression_rules(training_args="missing.json"))
    result = invoke("check", data, "--rules", rules, "--no-smoke", "--out", tmp_path / "o",
                    "--no-progress")
    assert result.exit_code == 0, result.output
    result = invoke("check", data, "--no-smoke", "--training-args", tmp_path / "x.json",
                    "--out", tmp_path / "o")
    assert result.exit_code == 2 and "--training-args" in result.output


# --- gradient accumulation -------------------------------------------------------------


def test_grad_accum_takes_four_backward_passes_per_optimizer_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    scaler = torch.amp.GradScaler
    for name in ("scale", "unscale_", "step", "update"):
        original = getattr(scaler, name)

        def wrapped(self: Any, *a: Any, _n: str = name, _o: Any = original, **k: Any) -> Any:
            calls.append(_n)
            return _o(self, *a, **k)

        monkeypatch.setattr(scaler, name, wrapped)
    backward = torch.Tensor.backward

    def counted(self: torch.Tensor, *a: Any, **k: Any) -> Any:
        calls.append("backward")
        return backward(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "backward", counted)
    setup = _setup(grad_accum=4, steps=5)
    out = train(setup, [_batch(4, seed=i) for i in range(4)], steps=5)
    assert not out.failed and len(out.run.loss) == 5
    one_step = ["scale", "backward"] * 4 + ["unscale_", "step", "update"]
    assert calls == one_step * 5


def test_grad_accum_divides_the_loss() -> None:
    """Four quarter batches accumulated make the same update as the whole batch."""
    inputs, targets = _batch(16)
    quarters = [({"features": inputs["features"][i:i + 4]}, targets[i:i + 4])
                for i in range(0, 16, 4)]
    whole = _setup(optimizer="sgd", lr=0.05, clip=None)
    split = dataclasses.replace(whole, cfg=SmokeConfig(optimizer="sgd", lr=0.05, clip=None,
                                                       grad_accum=4))  # the same weights
    a = train(whole, [(inputs, targets)], steps=4)
    b = train(split, quarters, steps=4)
    assert a.run.loss == pytest.approx(b.run.loss, rel=1e-5)
    assert a.run.grad_norm == pytest.approx(b.run.grad_norm, rel=1e-5)


def test_grad_accum_through_the_gate_finds_a_bad_row(tmp_path: Path) -> None:
    records = regression_records(40)
    records[13]["features"][2] = float("nan")
    smoke = smoke_of(gate(tmp_path, records, regression_rules(grad_accum=4, samples=40)))
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [13]
    assert smoke.settings is not None and smoke.settings.grad_accum == 4


# --- through the gate and the CLI ------------------------------------------------------


@pytest.mark.parametrize("scheduler", ["linear", "cosine"])
def test_a_healthy_model_with_decay_and_warmup_still_learns(tmp_path: Path,
                                                            scheduler: str) -> None:
    args = _write(tmp_path / "args.json", {
        "learning_rate": 1e-2, "lr_scheduler_type": scheduler, "warmup_steps": 300,
        "max_steps": 3000})
    rules = regression_rules(training_args=str(args))
    smoke = smoke_of(gate(tmp_path, regression_records(100), rules))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.control is not None and smoke.control.learned
    assert smoke.real is not None and smoke.real.learned
    assert smoke.settings is not None and smoke.settings.warmup_steps == 3
    assert smoke.settings.scheduler == scheduler


def test_a_diverging_rate_from_the_file_reaches_the_control_run(tmp_path: Path) -> None:
    args = _write(tmp_path / "args.json", {"learning_rate": 1e4, "lr_scheduler_type": "constant",
                                           "max_grad_norm": 0})
    smoke = smoke_of(gate(tmp_path, regression_records(100),
                          regression_rules(training_args=str(args))))
    control = smoke.control
    assert control is not None and smoke.settings is not None and smoke.settings.lr == 1e4
    finite = [x for x in control.loss if x is not None]
    assert control.failure is not None or finite[-1] > 100 * finite[0], control.loss
    assert not control.learned


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_training_args_through_the_cli(tmp_path: Path, suffix: str) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", regression_records(60))
    rules = write_rules(tmp_path / "r.yaml", regression_rules(samples=60))
    args = _write(tmp_path / f"args{suffix}", {
        "learning_rate": 5e-3, "lr_scheduler_type": "linear", "warmup_ratio": 0.1,
        "max_grad_norm": 0, "gradient_accumulation_steps": 2, "output_dir": "x",
        "push_to_hub": False})
    command = "check" if suffix == ".json" else "smoke"
    result = invoke(command, data, "--rules", rules, "--training-args", args, "--out",
                    tmp_path / "o", "--no-progress")
    assert result.exit_code == 0, result.output
    t = read_report(tmp_path / "o")["smoke"]["settings"]
    assert (t["lr"], t["scheduler"], t["warmup_steps"], t["clip"], t["grad_accum"]) == (
        5e-3, "linear", 3, None, 2)
    assert t["source"]["lr"] == "training-args" and t["training_args"] == str(args)
    assert t["ignored"] == ["output_dir", "push_to_hub"]


def test_a_wrong_type_in_the_file_is_exit_2_naming_the_key(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", regression_records(10))
    rules = write_rules(tmp_path / "r.yaml", regression_rules())
    args = _write(tmp_path / "args.json", {"gradient_accumulation_steps": "4"})
    result = invoke("smoke", data, "--rules", rules, "--training-args", args,
                    "--out", tmp_path / "o")
    assert result.exit_code == 2
    assert "gradient_accumulation_steps" in result.output and "args.json" in result.output
    assert not (tmp_path / "o" / "report.json").exists()  # refused before reading


def test_settings_in_the_html_and_old_reports_still_load(tmp_path: Path) -> None:
    args = _write(tmp_path / "args.json", {"learning_rate": 2e-3, "warmup_steps": 10})
    report = gate(tmp_path, regression_records(30),
                  regression_rules(samples=30, training_args=str(args)))
    html = render_html(report)
    assert 'id="smoke-settings"' in html and "0.002" in html and "training-args" in html
    old = report.model_dump(mode="json")
    del old["smoke"]["settings"]
    assert Report.model_validate(old).smoke.settings is None  # type: ignore[union-attr]


def test_a_training_args_json_with_a_repeated_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "args.json"
    path.write_text('{"learning_rate": 1, "learning_rate": 2}')
    with pytest.raises(ConfigError, match="duplicate key 'learning_rate'"):
        read_training_args(path)


def test_a_training_args_json_nested_too_deep_is_refused(tmp_path: Path) -> None:
    # json recursed into a RecursionError ("internal error") on 200 KB of `[`.
    path = tmp_path / "args.json"
    path.write_text('{"learning_rate": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError, match="not valid JSON: arrays or objects nest too deep"):
        read_training_args(path)


def test_a_misspelt_key_is_named_with_the_key_it_resembles(tmp_path: Path) -> None:
    """TrainingArguments refuses a misspelt key; the smoke test reads the file without it,
    so the note must say which key takes its default instead (the console prints it)."""
    from click.testing import CliRunner

    from preflight.cli import main

    path = _write(tmp_path / "args.json", {"learning_rat": 1e-3, "warmup_ration": 0.1,
                                           "output_dir": "runs/x", "seed": 3})
    args = read_training_args(path)
    assert args.settings["lr"] == 5e-5  # the default, as the note says
    misspelt = [n for n in args.notes if "did you mean" in n]
    assert misspelt == [
        f"{path}: 'learning_rat' is not a TrainingArguments key; did you mean 'learning_rate'? "
        "(learning_rate takes its default here; TrainingArguments itself would refuse the "
        "file)",
        f"{path}: 'warmup_ration' is not a TrainingArguments key; did you mean "
        "'warmup_ratio'? (warmup_ratio is unset here; TrainingArguments itself would refuse "
        "the file)"]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": f"record number {i} of a small corpus"}) + "\n"
                            for i in range(120)))
    result = CliRunner().invoke(main, ["check", str(data), "--out", str(tmp_path / "out"),
                                       "--training-args", str(path), "--no-progress"])
    assert result.exit_code == 0, result.output
    shown = " ".join(result.output.split())  # the console wraps long lines
    assert "'learning_rat' is not a TrainingArguments key; did you mean 'learning_rate'?" in shown


@pytest.mark.skipif(torch.cuda.is_available(), reason="the runs would use CUDA")
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precision_asked_for_on_cpu_is_noted(tmp_path: Path, precision: str) -> None:
    """A PASS on CPU vouches for fp32, not the half precision the rules asked for: the
    settings notes (console and report) say so."""
    from click.testing import CliRunner

    from preflight.cli import main

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": f"record number {i} of a small corpus"}) + "\n"
                            for i in range(120)))
    result = CliRunner().invoke(main, ["check", str(data), "--out", str(tmp_path / "out"),
                                       "--set", f"smoke.precision={precision}",
                                       "--no-progress"])
    assert result.exit_code == 0, result.output
    smoke = json.loads((tmp_path / "out" / "report.json").read_text())["smoke"]
    assert smoke["precision"] == "fp32"
    note = (f"precision {precision} was asked for, but the runs are on cpu: fp32 (autocast "
            "and the GradScaler are not exercised; run on a CUDA machine to test them)")
    assert smoke["settings"]["notes"] == [note]
    assert note in " ".join(result.output.split())
