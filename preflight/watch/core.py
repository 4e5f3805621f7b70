"""The framework-free core of ``preflight.watch``: the first non-finite loss or gradient of
a real training run, checked cheaply every step and investigated once when it happens.

The seam (what an adapter calls; the plain-PyTorch ``Watch`` is one such adapter)::

    core = WatchCore(model, optimizer, rerun=fn, scaler=None, config=WatchConfig(out=...),
                     step_hook=True)
    core.batch(batch, step=None)   # batch start: the batch as the loop got it (its ids ride
                                   # on it, see with_ids); step: the framework's own number
                                   # (None: the count of batch() calls, from 0)
    ok = core.loss(loss)           # the loss, after forward and before backward; False:
                                   # skip this step (on_fault="skip"); raises TrainingFault
                                   # (on_fault="stop")
    # gradients: with step_hook=True an optimizer step pre-hook checks them (nothing to
    # call); a framework that runs backward *inside* optimizer.step() (Lightning's closure
    # runs after the pre-hooks) passes step_hook=False and calls, after backward:
    ok = core.check_gradients(optimizer)
    core.end_step(step=None)       # step end (optional: the next batch() implies it)
    core.flush()                   # judge the steps not checked yet (sync_every > 1)
    core.set_rerun(fn)             # fn(model, batch) -> loss: re-runs a failing batch
    core.close()                   # flush, write stats.jsonl, remove the hooks

``rerun`` is the framework's own forward + loss: plain PyTorch passes ``step_fn``; the
Hugging Face ``Trainer`` adapter passes ``lambda m, b: trainer.compute_loss(m, b)`` and
calls ``batch(inputs, state.global_step)``/``loss`` from wrappers of ``training_step`` and
``compute_loss`` (the Trainer gives callbacks no batch), ``end_step()`` from
``on_step_end`` (no step: ``global_step`` has already moved on by then) and ``flush()``
from ``on_log``/``on_save``; Lightning's callback passes ``lambda m, b:
pl_module.training_step(b, 0)`` (a dict result: its ``"loss"``) and ``step_hook=False``,
and calls ``batch`` from ``on_train_batch_start``, ``loss`` from ``on_before_backward``,
``check_gradients`` from ``on_before_optimizer_step``, ``end_step()`` from
``on_train_batch_end`` and ``flush()`` from ``on_save_checkpoint``.
Under ``torch.distributed`` each rank watches its own batches; the first rank to see a
fault writes ``fault.json`` (with its rank), the others ``fault-rank{N}.json``.

Per step the core keeps the loss and the total gradient norm as tensors (the norm is the
one ``clip_grad_norm_`` returned when the loop clips, else computed once with torch's
foreach kernels, every ``grad_every`` steps) and checks their finiteness every
``sync_every`` steps: on CPU each step (free), on CUDA by default every 10 (one host sync
per check, the batches since the last check kept). ``stats.jsonl`` gets a line every
``log_every`` steps.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from preflight.errors import ConfigError, PreflightError
from preflight.report.model import SmokeFinding, SmokeResult
from preflight.text import first_line
from preflight.watch import amp, stats
from preflight.watch.buffers import BufferSnapshot
from preflight.watch.options import WatchConfig
from preflight.watch.step import MicroBatches, Step


class TrainingFault(PreflightError):
    """Training hit a non-finite loss or gradient (``on_fault="stop"``); ``fault`` is the
    record written to ``path`` (the smoke section's shape)."""

    exit_code = 1

    def __init__(self, fault: SmokeResult, path: Path | None) -> None:
        where = f" (see {path})" if path else ""
        super().__init__(f"preflight.watch: {fault.verdict} at step {fault.step}: "
                         f"{fault.reason}{where}")
        self.fault, self.path = fault, path

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.fault, self.path))


class WatchCore:
    """Per-step checks, history and statistics; a fault handed to ``investigate``."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                 rerun: Callable[[nn.Module, Any], Any] | None = None,
                 scaler: Any = None, config: WatchConfig | None = None,
                 step_hook: bool = True) -> None:
        if not isinstance(model, nn.Module):
            raise ConfigError(f"watch: model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ConfigError("watch: optimizer must be a torch.optim.Optimizer, "
                              f"got {type(optimizer).__name__}")
        if rerun is not None and not callable(rerun):
            raise ConfigError("watch: step_fn must be your forward + loss, step_fn(model, batch) "
                              f"-> loss, or None; got {type(rerun).__name__}")
        if scaler is not None and not all(callable(getattr(scaler, m, None))
                                          for m in ("get_scale", "is_enabled")):
            raise ConfigError("watch: scaler must be your torch.amp.GradScaler (or None), got "
                              f"{type(scaler).__name__}")
        self.cfg = config or WatchConfig()
        self.model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
        if type(self.model).__name__ == "DistributedDataParallel":
            self.model = self.model.module
        self.optimizer, self.rerun, self.scaler = optimizer, rerun, scaler
        self.names = {id(p): n for n, p in self.model.named_parameters()}
        self.modules = list(self.model.modules())  # their training flags, read every step
        self.rank = _rank()
        device = next((p.device for p in self.model.parameters()), torch.device("cpu"))
        self.sync_every = self.cfg.sync_every or (1 if device.type == "cpu" else 10)
        self.history: deque[Step] = deque(maxlen=self.cfg.history)
        self.pending: list[Step] = []  # steps not yet checked (sync_every > 1)
        # the batches since the last gradient check (gradient accumulation), bounded
        self.micro = MicroBatches()
        self.current: Step | None = None
        self.control: Any = None  # the last batch that trained without a fault
        self.count = 0
        self.grad_calls = 0  # gradient checks so far (grad_every counts them)
        self.skipped_in_row = 0
        self.last_scale: float | None = (
            float(scaler.get_scale()) if scaler is not None and scaler.is_enabled() else None)
        self.findings: list[SmokeFinding] = []
        self.fault: SmokeResult | None = None
        self.faults = 0
        self.alarms = 0
        self.disabled: str | None = None
        # Loops that call the watch from several threads: one step's batch and loss, one
        # gradient check and one investigation at a time (re-entrant: a fault is found
        # while the step holds it). Uncontended, it costs well under a microsecond.
        self.lock = threading.RLock()
        try:
            self.cfg.out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"watch: cannot create out={str(self.cfg.out)!r}: {e}") from e
        self.stats_path = self.cfg.out / "stats.jsonl"
        if self.rank in (None, 0):  # an earlier run's claim, fault and replay
            from preflight.watch.files import clear_stale

            clear_stale(self.cfg.out)
        self.buffers = BufferSnapshot(self.model)  # before each forward (fault re-runs)
        self.order = amp.OrderCheck(self, optimizer, scaler)
        self.handle = optimizer.register_step_pre_hook(self._pre_step) if step_hook else None

    # -- the seam -------------------------------------------------------------------------

    def batch(self, batch: Any, step: int | None = None) -> None:
        """A batch starts (``step``: the framework's step number; default the count)."""
        if self.current is not None:
            self.end_step()
        self.current = Step(step=self.count if step is None else int(step), batch=batch,
                            modes=tuple(m.training for m in self.modules))
        self.count += 1
        if batch is not None:
            self.micro.append((self.current.step, batch))

    def loss(self, loss: Any) -> bool:
        """The loss after forward, before backward: False means skip this step."""
        if self.current is None:
            self.batch(None)
        entry = self.current
        if isinstance(loss, int | float) and not isinstance(loss, bool):
            loss = torch.tensor(float(loss))
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            got = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise ConfigError(f"w.step(loss, batch): loss must be a scalar tensor (the value "
                              f"backward() is called on), got {got}")
        entry.loss = loss.detach()
        if loss.is_meta and not self.disabled:  # a shape-only dry run: no values to check
            self._disable(ConfigError("the loss is on the meta device (no values to check)"))
        if self.disabled or self.sync_every > 1:
            return True
        value = float(entry.loss.float())
        entry.loss = value
        if not math.isfinite(value):
            return self._fault(entry, f"loss is {value} at step {entry.step}", kind="loss")
        return True

    def end_step(self, step: int | None = None) -> None:
        """A step ends: read the AMP scale, write statistics, keep the history."""
        entry, self.current = self.current, None
        if entry is None:
            return
        if step is not None:
            entry.step = int(step)
        if self.disabled:
            return
        try:
            if self.scaler is not None and self.scaler.is_enabled():
                entry.scale = float(self.scaler.get_scale())
            self.pending.append(entry)
            if len(self.pending) >= self.sync_every:
                self._check()
        except TrainingFault:
            raise
        except Exception as e:  # never kill the user's run with the watch's own error
            self._disable(e)

    def check_gradients(self, optimizer: torch.optim.Optimizer) -> bool:
        """Check this step's gradients now, for a framework that runs backward inside
        ``optimizer.step()`` (built with ``step_hook=False``): call it after backward,
        before the optimizer applies them. The norm is computed here (a clip that runs
        later is the framework's). False: skip this step (its gradients are dropped)."""
        self.order.take_norm()  # a clip since the last check belongs to an earlier step
        try:
            return self._gradients(optimizer, None)
        finally:
            self.micro.clear()

    def flush(self) -> None:
        """Judge the steps not checked yet (``sync_every`` > 1): call it where the loop
        makes something durable (a log line, a checkpoint)."""
        if not self.pending or self.disabled:
            return
        try:
            self._check()
        except TrainingFault:
            raise
        except Exception as e:
            self._disable(e)

    def set_rerun(self, fn: Callable[[nn.Module, Any], Any]) -> None:
        """The framework's forward + loss, ``fn(model, batch) -> loss``, for re-runs."""
        self.rerun = fn

    def close(self) -> None:
        """Check what is pending, then remove the hooks."""
        try:
            if self.current is not None and not self.disabled:
                self.end_step()
            self.flush()
        finally:
            if self.handle is not None:
                self.handle.remove()
            self.order.remove()

    # -- per step -------------------------------------------------------------------------

    def _pre_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        """The optimizer's step pre-hook: the loop's clip norm, if it clipped, is reused."""
        with self.lock:
            try:
                self._gradients(optimizer, self.order.take_norm())
            finally:
                self.micro.clear()

    def _gradients(self, optimizer: torch.optim.Optimizer, norm: torch.Tensor | None) -> bool:
        """Before the optimizer applies the gradients: their norm, checked (or kept for the
        check). False: skip (the gradients are dropped)."""
        if self.disabled:
            return True
        if self.current is None:
            self.batch(None)
        entry = self.current
        assert entry is not None
        entry.micro, entry.micro_seen = list(self.micro), self.micro.seen
        try:
            grads = [p.grad for g in optimizer.param_groups for p in g["params"]
                     if p.grad is not None]
            due = self.grad_calls % self.cfg.grad_every == 0
            self.grad_calls += 1
            if norm is None and grads and due:  # a clip's norm is free: used every step
                norm = torch.nn.utils.get_total_norm(grads, foreach=True)
            entry.norm = None if norm is None else norm.detach()
            entry.lr = float(optimizer.param_groups[0].get("lr", math.nan))
            if entry.step % self.cfg.log_every == 0 and grads:
                entry.grad_max = stats.grad_max(self.names, optimizer)
        except Exception as e:
            self._disable(e)
            return True
        if entry.norm is None:
            self.buffers.keep(entry.loss)
            return True
        if self.sync_every > 1:
            # Not checked yet: keep a non-finite step from reaching the weights without a
            # host sync (a 0-dim mask zeroes every gradient), so the check finds the batch.
            bad = ~torch.isfinite(entry.norm)
            for g in grads:
                g.masked_fill_(bad, 0.0)
            self.buffers.keep(entry.loss, entry.norm)
            return True
        value = float(entry.norm)
        entry.norm = value
        if math.isfinite(value):
            self.buffers.keep(entry.loss)
        elif not self._fault(entry, f"gradient norm is {value} at step {entry.step}",
                             kind="grad"):
            _drop_grads(optimizer)  # skip: the optimizer has nothing to apply
            return False
        return True

    def _check(self) -> None:
        """Judge the pending steps: one host sync for all of them."""
        steps, self.pending = self.pending, []
        tensors = [x for s in steps for x in (s.loss, s.norm) if isinstance(x, torch.Tensor)]
        if tensors:
            values = iter(torch.stack([t.float().reshape(()) for t in tensors]).tolist())
            for s in steps:
                s.loss = next(values) if isinstance(s.loss, torch.Tensor) else s.loss
                s.norm = next(values) if isinstance(s.norm, torch.Tensor) else s.norm
        for s in steps:
            self._judge(s)

    def _judge(self, s: Step) -> None:
        self.history.append(s)
        bad = None
        if s.loss is not None and not math.isfinite(s.loss):
            bad = f"loss is {s.loss} at step {s.step}"
        elif s.norm is not None and not math.isfinite(s.norm):
            bad = f"gradient norm is {s.norm} at step {s.step}"
        if s.scale is not None:
            if self.last_scale is not None and s.scale < self.last_scale:
                s.skipped = True  # the scaler found inf gradients and skipped the step
            self.last_scale = s.scale
        self.skipped_in_row = self.skipped_in_row + 1 if s.skipped else 0
        if bad is None and self.skipped_in_row >= self.cfg.skipped_steps_alarm:
            bad = (f"the GradScaler skipped {self.skipped_in_row} steps in a row "
                   f"(inf/NaN gradients even with loss scaling) at step {s.step}")
        elif bad is None and s.scale is not None and s.scale < self.cfg.min_scale:
            bad = (f"the loss scale collapsed to {s.scale:g} (below min_scale "
                   f"{self.cfg.min_scale:g}) at step {s.step}")
        if bad is None and s.norm is not None and s.norm > self.cfg.grad_norm_alarm:
            self._alarm(s)
        if s.checked or (s.step % self.cfg.log_every == 0):
            stats.log(self, s)
        if bad is not None and not s.checked:
            s.checked = True
            self._fault(s, bad, kind="scale" if "scale" in bad or "GradScaler" in bad
                        else "loss" if bad.startswith("loss") else "grad")
        elif bad is None and not s.skipped:
            self.control = s.batch
        s.checked = True
        # Judged: only the control (and a fault's own step, investigated above) needs its
        # batch. The history keeps curves, not batches: 200 batches held there kept 200
        # batches' tensors alive (GPU memory) for the whole run.
        s.batch, s.micro, s.modes = None, [], None

    def _alarm(self, s: Step) -> None:
        self.alarms += 1
        if self.alarms <= 5:
            warnings.warn(f"preflight.watch: gradient norm {s.norm:.4g} at step {s.step} is "
                          f"above grad_norm_alarm ({self.cfg.grad_norm_alarm:g})",
                          RuntimeWarning, stacklevel=4)
        if len(self.findings) < 50:
            self.findings.append(SmokeFinding(
                code="grad_norm_high", step=s.step,
                detail=f"gradient norm {s.norm:.4g} at step {s.step} is above "
                       f"grad_norm_alarm ({self.cfg.grad_norm_alarm:g})"))

    # -- faults ---------------------------------------------------------------------------

    def _fault(self, s: Step, detail: str, *, kind: str) -> bool:
        """Investigate the first fault, write it, then stop, skip or warn (False: skip)."""
        from preflight.watch.fault import investigate
        from preflight.watch.files import write

        with self.lock:  # another thread's fault waits for this one's record
            s.checked = True
            self.faults += 1
            if self.fault is None:
                result = investigate(self, s, detail, kind)
                path = write(self, result)
                self.fault, self.path = result, path
            else:
                result = self.fault
        if self.cfg.on_fault == "stop":
            raise TrainingFault(result, getattr(self, "path", None))
        if self.faults <= 5:
            action = "skipped" if self.cfg.on_fault == "skip" else "kept (on_fault='warn')"
            warnings.warn(f"preflight.watch: {detail}; the step is {action}; first fault: "
                          f"{result.verdict} (see {getattr(self, 'path', None)})",
                          RuntimeWarning, stacklevel=4)
        return self.cfg.on_fault == "warn"

    def _disable(self, e: BaseException) -> None:
        """The watch's own failure: say so once and stay out of the run's way."""
        if isinstance(e, TrainingFault):
            raise e
        self.disabled = f"{type(e).__name__}: {first_line(e)}"
        warnings.warn(f"preflight.watch stopped watching (training goes on): {self.disabled}",
                      RuntimeWarning, stacklevel=4)


def _drop_grads(optimizer: torch.optim.Optimizer) -> None:
    for g in optimizer.param_groups:
        for p in g["params"]:
            p.grad = None


def _rank() -> int | None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return None

