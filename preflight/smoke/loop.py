"""One seeded training run with every step checked.

Each step checks the inputs, the loss, the gradients and the parameters for non-finite
values and records the loss, the gradient norm (before clipping) and the AMP scale. Index
tensors are range-checked before the embedding or the loss sees them: the comparison is safe
on any device, the lookup of a bad index on CUDA is a device-side assert that poisons the
process. On CUDA, autocast runs in bf16 or fp16; fp16 adds a GradScaler in the one correct
order: scale -> backward -> unscale_ -> clip -> step -> update. With gradient accumulation
each optimizer step takes ``grad_accum`` micro-batches, each loss divided by that count and
scaled and backpropagated on its own; unscale_, clip, step and update run once, after the
last. The optimizer and the schedule are the user's (``preflight.smoke.optim``).
"""

from __future__ import annotations

import copy
import math
import random
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from preflight.config import SmokeConfig
from preflight.errors import ConfigError
from preflight.report.model import SmokeRun
from preflight.smoke import deadline
from preflight.smoke.broadcast import refuse_outer_comparison
from preflight.smoke.encode import IGNORE
from preflight.smoke.optim import build_optimizer, build_scheduler, run_warmup
from preflight.smoke.spy import IndexFault, Spy, bad_param, named, rows_of, to_device
from preflight.text import first_line

Batch = tuple[Any, Any]
FP16_MAX = 65504.0
DEFAULT_LR = SmokeConfig.model_fields["lr"].default  # what min_loss_drop was tuned with
LEARN_FLOOR = 0.02


@dataclass
class Setup:
    """What every run of one smoke test shares: the model, its first weights, the loss."""

    template: nn.Module
    initial: dict[str, torch.Tensor]
    loss_fn: Callable[[Any, Any], Any]
    cfg: SmokeConfig
    device: torch.device
    precision: str
    user: bool = False
    exempt: set[str] = field(default_factory=set)  # inputs non-finite by design (masks)
    # Builds a new model when the template cannot be deep-copied (it holds an OS handle).
    rebuild: Callable[[], nn.Module] | None = None
    warmup: int = 0  # warm-up optimizer steps for a run of cfg.steps
    # The in-flight watch's form: ``step_fn(model, batch) -> loss`` replaces
    # ``loss_fn(model(inputs), targets)``; a batch is then ``(batch, None)``.
    step_fn: Callable[[nn.Module, Any], Any] | None = None
    shapes_seen: bool = False  # the loss's first call, checked once (smoke/broadcast.py)
    # The watch: each module's ``training`` flag at the failing step, in ``modules()``
    # order (a model in eval mode, a frozen submodule); None: every module trains.
    modes: tuple[bool, ...] | None = None

    def fresh(self) -> nn.Module:
        """The model at its initial weights, on the device."""
        deadline.phase("copy")
        try:
            model = copy.deepcopy(self.template)
        except Exception:
            if self.rebuild is None:
                raise
            model = self.rebuild()
        model.load_state_dict(self.initial)
        return model.to(self.device)


@dataclass
class Outcome:
    """A run's curves plus what localisation and the report need."""

    run: SmokeRun
    first_bad_module: str | None = None
    first_bad_param: str | None = None
    bad_rows: list[int] = field(default_factory=list)
    bad_batch: int | None = None  # which of the batches held bad_rows
    activations: dict[str, list[float]] = field(default_factory=dict)
    grad_warnings: list[tuple[int, float]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.run.failure is not None


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (every device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def train(setup: Setup, batches: list[Batch], *, steps: int, watch: int = 0,
          anomaly: bool = False, into: SmokeRun | None = None) -> Outcome:
    """Train a fresh copy of the model on ``batches`` (cycled, ``grad_accum`` of them per
    step) for ``steps`` optimizer steps; stop at the first non-finite value. ``watch``:
    record activation ranges for that many steps; ``into``: the run record to fill."""
    cfg, device = setup.cfg, setup.device
    seed_everything(cfg.seed)
    model = setup.fresh()
    model.train()
    if setup.modes is not None:  # the modes the watched step ran in
        for module, mode in zip(model.modules(), setup.modes, strict=False):
            module.training = mode
    deadline.phase("setup")
    opt = build_optimizer(model, cfg)
    schedule = build_scheduler(opt, cfg, total=steps, warmup=run_warmup(
        setup.warmup, steps=steps, base_steps=cfg.steps))
    accum = cfg.grad_accum
    amp, dtype = _autocast(setup.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=setup.precision == "fp16")
    run = into if into is not None else SmokeRun()
    out = Outcome(run=run)
    spy = Spy(model, out)
    params = [p for p in model.parameters() if p.requires_grad]
    rates: list[float] = []  # the learning rate of each step, as the schedule set it
    before = 0.0
    if len(batches) > 1:
        try:
            before = _mean_loss(setup, model, batches)
        except Exception:  # a batch that cannot even run: the loop below reports it
            before = math.nan
    # One filter for the whole run, not one per step: leaving catch_warnings resets what
    # Python remembers as shown, and a warning from the user's code (a loss broadcasting
    # two shapes) would print again at every step.
    with warnings.catch_warnings():
        # a step the scaler skipped is not a misorder
        warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*")
        try:
            for step in range(steps):
                deadline.step(step)
                spy.record = step < watch
                rates.append(float(opt.param_groups[0]["lr"]))
                opt.zero_grad(set_to_none=True)
                total = 0.0
                for micro in range(step * accum, (step + 1) * accum):
                    out.bad_batch = micro % len(batches)
                    inputs, targets = batches[out.bad_batch]
                    value = _backward(setup, model, opt, scaler, spy, inputs, targets, step=step,
                                      accum=accum, anomaly=anomaly, amp=amp, dtype=dtype)
                    if value is None:
                        break
                    total += value
                if run.failure:
                    break
                out.bad_batch = None
                deadline.phase("optimizer")
                loss_value = total / accum  # the mean over the micro-batches
                scaler.unscale_(opt)
                norm = float(torch.nn.utils.clip_grad_norm_(
                    params, max_norm=cfg.clip if cfg.clip else math.inf))
                run.loss.append(loss_value)
                run.grad_norm.append(norm if math.isfinite(norm) else None)
                if scaler.is_enabled():
                    run.scale.append(float(scaler.get_scale()))
                if math.isfinite(norm) and norm > cfg.grad_norm_warn:
                    out.grad_warnings.append((step, norm))
                if not math.isfinite(norm):
                    if scaler.is_enabled():  # fp16 overflow: the scaler skips this step, by design
                        run.skipped_steps += 1
                        if run.skipped_steps > steps // 2:
                            run.failure = (f"gradients non-finite in {run.skipped_steps} steps "
                                           "even with loss scaling")
                            run.first_bad_step = step
                            break
                    else:
                        _diagnose(setup, model, opt, spy, inputs, targets, amp=amp, dtype=dtype)
                        run.failure = _what_failed(out, f"gradient norm is {norm} at step {step}")
                        run.first_bad_step = step
                        break
                scaler.step(opt)
                scaler.update()
                schedule.step()
                bad_param = next((n for n, p in model.named_parameters()
                                  if not torch.isfinite(p.detach()).all()), None)
                if bad_param is not None:
                    run.failure = f"parameter {bad_param} is non-finite after step {step}"
                    run.first_bad_step = step
                    break
        finally:
            spy.remove()
    deadline.step(None)
    run.steps = len(run.loss)
    run.min_drop = cfg.min_loss_drop * learning_budget(rates)
    run.lr_mean = sum(rates) / len(rates) if rates else None
    if run.failure:
        run.learned = None
    elif len(batches) > 1:  # minibatches: step losses are of different rows; judge the sample
        run.learned = learned([before, *[_mean_loss(setup, model, batches)] * 3], run.min_drop)
    else:
        run.learned = learned(run.loss, run.min_drop)
    return out


def _backward(setup: Setup, model: nn.Module, opt: torch.optim.Optimizer,
              scaler: torch.amp.GradScaler, spy: Spy, inputs: Any, targets: Any, *,
              step: int, accum: int, anomaly: bool, amp: bool, dtype: torch.dtype) -> float | None:
    """One micro-batch: check its inputs, forward, check the loss, scale and backpropagate
    ``loss / accum``. Its loss, or None with the run's failure set."""
    out = spy.out
    run = out.run
    problem = _nonfinite_inputs(inputs, targets, setup.exempt)
    if problem is not None:
        out.bad_rows, run.failure = problem
        run.first_bad_step = step
        return None
    # A copy each step: code that edits its batch in place (x.mul_(s), batch["x"] = ...)
    # saw a fresh batch each step of the real run, not its own edits of earlier re-runs
    moved = to_device(inputs, setup.device, copy=True), to_device(targets, setup.device,
                                                                  copy=True)
    try:
        with torch.autograd.set_detect_anomaly(anomaly):
            # Autocast covers the forward and the loss only; backward runs outside.
            with (torch.autocast(setup.device.type, dtype=dtype, enabled=amp),
                  refuse_outer_comparison(not setup.shapes_seen and setup.step_fn is None)):
                loss = forward_loss(setup, model, *moved)
            setup.shapes_seen = True
            _check_loss(loss, setup.user, step=setup.step_fn is not None)
            loss_value = float(loss.detach().float())
            if not math.isfinite(loss_value):
                run.loss.append(None)
                _diagnose(setup, model, opt, spy, inputs, targets, amp=amp, dtype=dtype)
                run.failure = _what_failed(out, f"loss is {loss_value} at step {step}")
                run.first_bad_step = step
                return None
            deadline.phase("backward")
            scaler.scale(loss / accum if accum > 1 else loss).backward()
    except IndexFault as e:
        out.bad_rows, run.failure = e.rows, e.detail
        run.first_bad_step = step
        return None
    except RuntimeError as e:
        if anomaly and "nan" in str(e).lower():
            run.failure = f"anomaly: {first_line(e)}"
            run.first_bad_step = step
            return None
        raise
    return loss_value


def _diagnose(setup: Setup, model: nn.Module, opt: torch.optim.Optimizer, spy: Spy,
              inputs: Any, targets: Any, *, amp: bool, dtype: torch.dtype) -> None:
    """Redo a micro-batch's forward and backward with the hooks on: the first module whose
    output and the first parameter whose gradient went non-finite (the hooks cost as much
    as the step, so they run only after a failure)."""
    spy.diagnosing = True
    try:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(setup.device.type, dtype=dtype, enabled=amp):
            redo = forward_loss(setup, model, to_device(inputs, setup.device, copy=True),
                                to_device(targets, setup.device, copy=True))
        if spy.out.first_bad_module is None and not torch.isfinite(redo.detach()).all():
            spy.out.first_bad_module = "loss_fn"  # every module's output was finite
        deadline.phase("backward")
        redo.float().backward()  # outside autocast, as AMP wants
        spy.out.first_bad_param = bad_param(model, spy.out.first_bad_module,
                                            spy.out.first_bad_param)
    except Exception:  # the diagnosis is best effort; the failure stands
        pass
    finally:
        spy.diagnosing = False


def _mean_loss(setup: Setup, model: nn.Module, batches: list[Batch]) -> float:
    """The model's mean loss over every batch, without training (for minibatch runs)."""
    values = _losses(setup, model, batches)
    return sum(values) / len(values)


def learning_budget(rates: list[float]) -> float:
    """The share of ``min_loss_drop`` a run with these per-step rates is asked for: its mean
    rate against the default constant 1e-2, between 2% and all of it. Defaults ask for all;
    a warm-up and a decay (linear, cosine) spend about half the rate and are asked for about
    half; a fine-tuning rate (5e-5) over 30 steps of a tiny model still has to move the
    loss, by 2% of the drop (a rate that cannot move it at all, 1e-9, stays a fault)."""
    if not rates:
        return 1.0
    return min(1.0, max(LEARN_FLOOR, sum(rates) / len(rates) / DEFAULT_LR))


def learned(losses: list[float | None], min_drop: float) -> bool:
    """True when the mean of the last three losses is at least ``min_drop`` below the first."""
    finite = [x for x in losses if x is not None]
    if len(finite) < 4:
        return False
    first, last = finite[0], sum(finite[-3:]) / 3
    if first <= 1e-6:  # already at zero: learned means staying there
        return last <= 1e-6
    return last <= first * (1 - min_drop)


def per_row_losses(setup: Setup, batches: list[Batch]) -> list[float]:
    """The initial model's loss on each one-row batch (NaN where it is not finite)."""
    seed_everything(setup.cfg.seed)
    model = setup.fresh()
    model.eval()
    return _losses(setup, model, batches)


def _losses(setup: Setup, model: nn.Module, batches: list[Batch]) -> list[float]:
    """The loss of each batch without training; NaN where it is not finite or a batch has
    a non-finite input or an index out of range."""
    amp, dtype = _autocast(setup.precision)
    losses = []
    with torch.no_grad(), torch.autocast(setup.device.type, dtype=dtype, enabled=amp):
        for inputs, targets in batches:
            try:
                if _nonfinite_inputs(inputs, targets, setup.exempt) is not None:
                    raise IndexFault([0], "non-finite input")
                inputs = to_device(inputs, setup.device, copy=True)
                targets = to_device(targets, setup.device, copy=True)
                value = float(forward_loss(setup, model, inputs, targets).detach().float())
            except IndexFault:
                value = math.nan
            losses.append(value if math.isfinite(value) else math.nan)
    return losses


def forward_loss(setup: Setup, model: nn.Module, inputs: Any, targets: Any) -> Any:
    """The loss of one batch: ``loss_fn(model(inputs), targets)`` with the targets
    range-checked, or the watch's ``step_fn(model, inputs)``."""
    deadline.phase("forward")
    if setup.step_fn is not None:
        return setup.step_fn(model, inputs)
    outputs = model(inputs)
    _check_targets(outputs, targets)
    deadline.phase("loss")
    return setup.loss_fn(outputs, targets)


def anomaly(setup: Setup, batch: Batch) -> str | None:
    """Replay a batch under ``detect_anomaly``: the backward op that made NaN, or the
    exception the run raised. (torch's own warning with the forward traceback is silenced:
    the op name is kept.)"""
    deadline.run("detect_anomaly replay")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = train(setup, [batch], steps=setup.cfg.steps, anomaly=True)
    except Exception as e:
        return f"{type(e).__name__}: {first_line(e)}"
    failure = out.run.failure or ""
    return failure.removeprefix("anomaly: ") if failure.startswith("anomaly: ") else None


def _check_targets(outputs: Any, targets: Any) -> None:
    """Integer targets against the class dimension of float outputs (cross-entropy)."""
    if not isinstance(outputs, torch.Tensor) or not isinstance(targets, torch.Tensor):
        return
    if targets.is_floating_point() or targets.dtype == torch.bool or outputs.ndim < 2:
        return
    if tuple(targets.shape) == tuple(outputs.shape[:-1]):
        classes = outputs.shape[-1]
    elif tuple(targets.shape) == (outputs.shape[0], *outputs.shape[2:]):
        classes = outputs.shape[1]
    else:
        return
    bad = ((targets < 0) | (targets >= classes)) & (targets != IGNORE)
    if bool(bad.any()):
        value = int(targets[bad].flatten()[0])
        rows = rows_of(bad)
        raise IndexFault(rows, f"target {value} outside [0, {classes})")


def _check_loss(loss: Any, user: bool, *, step: bool = False) -> None:
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        got = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        who = "your step_fn" if step else "your loss_fn" if user else "the loss"
        if isinstance(loss, Mapping):  # a model's output dict, a transformers ModelOutput
            keys = ", ".join(map(str, list(loss)[:8]))
            got = (f"{got} with keys {keys or '(none)'}: return its loss tensor, "
                   "out['loss']" if "loss" in loss else
                   f"{got} with keys {keys or '(none)'} and no 'loss'")
        raise ConfigError(f"{who} must return a scalar tensor, got {got}")


def _nonfinite_inputs(inputs: Any, targets: Any, exempt: set[str]) -> tuple[list[int], str] | None:
    for path, t in named(("inputs", inputs), ("targets", targets)):
        if path in exempt or not t.is_floating_point() or t.is_meta:  # meta: no values
            continue
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            rows = rows_of(bad)
            value = float(t[bad].flatten()[0])
            return rows, f"{path} holds {value}"
    return None


def nonfinite_paths(batch: Batch) -> set[str]:
    """Float tensors of a batch that hold a non-finite value (e.g. -inf attention masks)."""
    return {path for path, t in named(("inputs", batch[0]), ("targets", batch[1]))
            if t.is_floating_point() and not t.is_meta and not bool(torch.isfinite(t).all())}


def _autocast(precision: str) -> tuple[bool, torch.dtype]:
    """Whether to autocast, and to what (``resolve_device`` keeps CPU runs in fp32)."""
    if precision == "bf16":
        return True, torch.bfloat16
    return precision == "fp16", torch.float16


def _what_failed(out: Outcome, what: str) -> str:
    if out.first_bad_module:
        return f"{what} (first non-finite output: {out.first_bad_module})"
    return what
