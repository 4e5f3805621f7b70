"""Rerunning a replay file (``preflight smoke --replay FILE``): the minimal batch trained
again from the saved initial weights and seed, with the model it was written with or one
the user names."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import torch

from preflight.arguments import check_path_like
from preflight.config import SmokeConfig
from preflight.errors import ConfigError
from preflight.hf_folder import is_hf_spec
from preflight.report.model import SmokeFinding, SmokeResult
from preflight.smoke import deadline, hf, hf_load
from preflight.smoke.device import resolve_device
from preflight.smoke.diagnose import timed_out
from preflight.smoke.loop import Setup, anomaly, train
from preflight.smoke.models import build_builtin
from preflight.smoke.replay_file import WATCH_TASK
from preflight.smoke.replay_file import batch as replay_batch
from preflight.smoke.replay_file import load as load_replay
from preflight.smoke.replay_file import modes as replay_modes
from preflight.smoke.replay_file import weights as replay_weights
from preflight.smoke.user import call_build, load_build, resolve_spec, user_code
from preflight.text import first_line


def replay(path: str | Path, *, model: str | None = None, device: str = "auto") -> SmokeResult:
    """Rerun a replay file: the minimal batch from the saved initial weights and seed.
    The verdict is ``data_fault`` when the failure reproduces, ``pass`` when it does not.

    A replay file names the model it was written with; when that is the user's code, it
    runs only if the caller names a model too (``model``, the CLI's ``--model``): a replay
    file from elsewhere must not import code on its own. The model given is the one used
    (a fixed version of the recorded one, say); a different spec is noted in the result."""
    if path is None:  # a path argument that may be None elsewhere; here one is required
        raise ConfigError("path must name a replay file (smoke-replay.pt), got None")
    check_path_like("path", path)  # 5 or '' said 'expected str...' or '. is a folder'
    data = load_replay(path)
    recorded = data["model"]
    if model is None and is_hf_spec(recorded):
        model = recorded  # a model folder is data: loading it runs no code
    if model is None and data["task"] == WATCH_TASK and not recorded:
        raise ConfigError(
            f"{path} was written by preflight.watch without a model_spec: pass --model "
            "package.module:build, where build() returns (model, step_fn, None) and step_fn "
            "is the one given to watch")
    if model is None and not recorded.startswith("built-in:"):
        raise ConfigError(
            f"{path} was written with your model {recorded!r}; rerunning it imports and runs "
            f"that code, so preflight does so only when you name it: pass --model {recorded} "
            "to confirm (or the spec of the model to rerun it with)")
    # The built-in model by its name, else the user's spec (a file path made absolute).
    builtin = model is None or (model == recorded and recorded.startswith("built-in:"))
    spec = None if builtin else (
        hf_load.parse(str(model)).resolved if is_hf_spec(model) else resolve_spec(str(model)))
    limit = SmokeConfig(**{**data["config"], "device": device}).time_limit
    with user_code(spec) if spec else contextlib.nullcontext():
        try:
            return deadline.call_within(limit, lambda: _replay(path, data, spec, device))
        except deadline.Expired as e:
            result = SmokeResult(verdict="skipped", reason="", task=data["task"],
                                 model=spec or recorded, samples=len(data["rows"]),
                                 minimal_rows=list(data["rows"]), replay=str(path))
            timed_out(result, e, user=spec is not None)
            return result


def _misfit(model: torch.nn.Module, saved: dict[str, Any]) -> str:
    """How a model's weights differ from a replay's: missing, unexpected, other shapes."""
    mine = model.state_dict()
    parts = [(what, names) for what, names in (
        ("missing", [k for k in mine if k not in saved]),
        ("unexpected", [k for k in saved if k not in mine]),
        ("other shape", [f"{k} (saved {tuple(saved[k].shape)}, model {tuple(v.shape)})"
                         for k, v in mine.items()
                         if k in saved and tuple(saved[k].shape) != tuple(v.shape)])) if names]
    return "; ".join(f"{what}: {', '.join(names[:4])}"
                     + (f" (+{len(names) - 4} more)" if len(names) > 4 else "")
                     for what, names in parts) or "the weights do not load"


def _replay(path: str | Path, data: dict[str, Any], spec: str | None,
            device: str) -> SmokeResult:
    started = time.perf_counter()
    cfg = SmokeConfig(**{**data["config"], "device": device})
    dev, precision = resolve_device(cfg)
    task, recorded = data["task"], data["model"]
    name = spec or recorded
    homes: tuple[str, ...] = ()  # the module --model loaded: the batch's classes may be there
    if spec is None:
        model, loss_fn = build_builtin(task, data["spec"])
    elif is_hf_spec(spec):
        model, loss_fn = hf.rebuild(spec, task=task, saved=data["spec"], shrink=cfg.shrink,
                                    device=dev)
    else:  # a watch replay's build returns (model, step_fn, None)
        build = load_build(spec)
        homes = (str(getattr(build, "__module__", "")),)
        model, loss_fn, _ = call_build(build, spec, watch=task == WATCH_TASK)
    step_fn = loss_fn if task == WATCH_TASK else None
    initial = replay_weights(data, path)
    try:
        if initial:  # else a large model's replay taken without a checkpoint: as built
            model.load_state_dict(initial)
    except RuntimeError as e:
        raise ConfigError(f"--model {name!r} does not fit the weights saved in {path} (written "
                          f"with {recorded!r}): {_misfit(model, initial)}") from e
    initial = initial or {k: v.detach().clone() for k, v in model.state_dict().items()}
    # The saved config is the one the runs used: its warm-up is already in smoke steps.
    setup = Setup(template=model, initial=initial, loss_fn=loss_fn, cfg=cfg,
                  device=dev, precision=precision, user=spec is not None,
                  exempt=set(data.get("exempt", [])), warmup=cfg.warmup_steps or 0,
                  step_fn=step_fn, modes=replay_modes(data, model))
    notes: list[str] = []
    batch = replay_batch(data, homes=homes, notes=notes)
    mode = _mode_said(setup.modes, model)
    deadline.run("replay")
    try:
        out = train(setup, [batch], steps=cfg.steps)
    except ConfigError:
        raise  # the user's code broke its contract (a loss that is no scalar tensor): exit 2
    except Exception as e:
        if spec is None:  # the built-in model is preflight's own code: its bug, said so
            raise
        return _raised(e, path, data, name, recorded, dev, precision, cfg, mode, notes,
                       step_fn is not None, started)
    result = SmokeResult(
        verdict="data_fault" if out.failed else "pass", task=task, model=name,
        device=str(dev), precision=precision, seed=cfg.seed, steps=cfg.steps,
        samples=len(data["rows"]), minimal_rows=list(data["rows"]),
        minimal_ids=list(data["ids"]), minimal_files=list(data["files"]),
        first_bad_module=out.first_bad_module, first_bad_param=out.first_bad_param,
        real=out.run, replay=str(path),
        reason=(f"reproduced: {out.run.failure} ({mode})" if out.failed else
                f"did not reproduce (recorded: {data['failure']}) ({mode})"),
    )
    _notes(result, name, recorded, mode, notes)
    if out.failed:
        result.anomaly = anomaly(setup, batch)
    result.timings = {"total": round(time.perf_counter() - started, 4)}
    return result


def _mode_said(modes: tuple[bool, ...] | None, model: torch.nn.Module) -> str:
    """Which mode the rerun ran in, for its reason: dropout and batch norm differ."""
    if modes is None or all(modes):
        return "rerun in train mode" + ("" if modes is None else ", as recorded")
    names = [n for n, _ in model.named_modules()]
    root = "train" if modes[0] else "eval"
    other = [n for n, on in zip(names[1:], modes[1:], strict=False) if on != modes[0]]
    if not other:
        return f"rerun in {root} mode (model.training {modes[0]}), as recorded"
    return (f"rerun in {root} mode with {len(other)} module(s) in "
            f"{'eval' if modes[0] else 'train'} mode, as recorded: "
            + ", ".join(other[:5]) + (" …" if len(other) > 5 else ""))


def _notes(result: SmokeResult, name: str, recorded: str, mode: str,
           notes: list[str]) -> None:
    result.findings.append(SmokeFinding(code="replay_mode", severity="info", detail=mode))
    if name != recorded:
        result.findings.append(SmokeFinding(
            code="replay_model_differs", severity="warn",
            detail=f"the replay was written with {recorded!r}; this rerun uses {name!r}"))
    for note in notes:
        result.findings.append(SmokeFinding(code="replay_batch_class_missing",
                                            severity="warn", detail=note))


def _raised(e: Exception, path: str | Path, data: dict[str, Any], name: str, recorded: str,
            dev: torch.device, precision: str, cfg: SmokeConfig, mode: str,
            notes: list[str], watch: bool, started: float) -> SmokeResult:
    """The user's code raised on the saved batch: a code fault. A replay has no control
    batch to clear the code, and an exception is the code's to handle: it never showed
    whether the rows make the loss non-finite (the recorded failure)."""
    who = "your step_fn" if watch else "your model or loss_fn"
    result = SmokeResult(
        verdict="code_fault", task=data["task"], model=name, device=str(dev),
        precision=precision, seed=cfg.seed, steps=cfg.steps, samples=len(data["rows"]),
        minimal_rows=list(data["rows"]), minimal_ids=list(data["ids"]),
        minimal_files=list(data["files"]), replay=str(path),
        reason=(f"{who} raised {type(e).__name__}: {first_line(e)} on the saved batch "
                f"({mode}); the recorded failure ({data['failure']}) was not reached, so "
                "the rows were not judged: fix the code and rerun the replay"))
    _notes(result, name, recorded, mode, notes)
    result.timings = {"total": round(time.perf_counter() - started, 4)}
    return result
