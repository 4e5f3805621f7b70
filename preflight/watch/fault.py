"""Investigate the first fault of a watched run with the smoke test's own machinery, and
write ``fault.json`` (the smoke section's shape) and a replay file.

From the state before the step (the model's weights, which the optimizer has not touched
yet, copied for every re-run so the user's model, gradients and random streams stay as
they were): scan the weights and optimizer moments (non-finite: a state fault); re-run the
batch with the smoke test's hooks armed (first non-finite module and parameter), once under
``detect_anomaly``; re-run a control batch of rows that already trained (the last good
batch; at the first step, the batch's own rows whose loss is finite alone). The batch fails
and the control does not -> ``data_fault``, narrowed to the fewest rows with the smoke
test's per-row loss and ddmin; both fail -> ``code_fault``. The re-runs call the user's
``step_fn``: they stop at ``rerun_time_limit`` (``smoke.deadline``'s timer), and the fault
is still recorded and handled as ``on_fault`` says.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from preflight.config import SmokeConfig
from preflight.errors import ConfigError
from preflight.report.model import SmokeFinding, SmokeResult, SmokeRun
from preflight.smoke import deadline
from preflight.smoke.checkpoint import scan
from preflight.smoke.localize import minimal_rows
from preflight.smoke.loop import Setup, anomaly, nonfinite_paths, per_row_losses, train
from preflight.smoke.replay_file import WATCH_TASK
from preflight.smoke.replay_file import save as save_replay
from preflight.smoke.spy import bad_param, named, rows_of
from preflight.smoke.user import resolve_spec
from preflight.text import first_line
from preflight.watch import amp, snapshot
from preflight.watch.accum import failing_batch
from preflight.watch.files import REPLAY_NAME
from preflight.watch.rows import batch_rows, batch_size, take
from preflight.watch.stats import num as _num

if TYPE_CHECKING:
    from preflight.watch.core import Step, WatchCore

EMPTY = ("the batch is empty (0 rows along dimension 0: a mean over no rows is NaN); look "
         "for a collate or filter that can drop every row")
NEEDS_STEP_FN = ("attribution needs step_fn: watch(model, optimizer, step_fn=...) re-runs "
                 "the batch and its rows")


def investigate(core: WatchCore, s: Step, detail: str, kind: str) -> SmokeResult:
    """The fault record; the watch's own trouble is noted in it, never raised."""
    started = time.perf_counter()
    model = core.model
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    steps = [h for h in core.history if h is not s] + [s]
    result = SmokeResult(
        verdict="code_fault", reason=detail, task=WATCH_TASK, model=core.cfg.model_spec,
        device=str(device), step=s.step, rank=core.rank, steps=len(steps),
        history_start=steps[0].step, findings=list(core.findings),
        real=SmokeRun(loss=[_num(h.loss) for h in steps], grad_norm=[_num(h.norm) for h in steps],
                      scale=[h.scale for h in steps if h.scale is not None],
                      skipped_steps=sum(h.skipped for h in steps), steps=len(steps),
                      first_bad_step=len(steps) - 1, failure=detail))
    result.batch_rows, result.batch_ids = batch_rows(s.batch)
    # The re-runs call the user's step_fn: one that never returns must not hang their run.
    limit = core.cfg.rerun_limit([h.started for h in steps])
    try:
        with _own_rng(device), amp.paused():
            deadline.call_within(limit, lambda: _investigate(core, s, result, kind, device))
    except deadline.Expired as e:
        _stopped(core, s, result, detail, e)
    except (KeyboardInterrupt, deadline.TimeUp):
        raise
    except BaseException as e:  # a step_fn that raises, a batch that will not move: say so
        # (one that exits too: a SystemExit from a re-run ended the training script with
        # its status, 0 for sys.exit(), after a fault and before any record of it)
        why = f"the step_fn re-run raised {type(e).__name__}: {first_line(e)}"
        result.findings.append(SmokeFinding(code="watch_investigation_failed",
                                            severity="warn", detail=why))
        result.reason = detail
        _grads_only(core, result, _safe_input_rows(s.batch), why)
    if core.cfg.gate_report is not None:
        _link_gate(core, result)
    result.timings = {"investigate": round(time.perf_counter() - started, 4)}
    return result


def _investigate(core: WatchCore, s: Step, result: SmokeResult, kind: str,
                 device: torch.device) -> None:
    live = core.cfg.snapshot == "none"  # a large model: never copied
    state = core.model.state_dict() if live else {
        k: v.detach().clone() for k, v in core.model.state_dict().items()}
    core.buffers.restore(state)  # the failing forward already wrote BatchNorm's statistics
    if _state_fault(core, state, result):
        return
    if kind == "scale":  # a re-run in fp32 says nothing about fp16's range
        result.reason += ": fp16 overflows even with loss scaling (try bf16 or a lower lr)"
        return
    if s.batch is None:
        result.reason += "; the batch was not given to the watch, so it was not re-run"
        return
    bad_inputs = _nonfinite_input_rows(s.batch)
    if core.rerun is None or (live and core.cfg.on_fault != "stop"):
        _grads_only(core, result, bad_inputs)
        if core.rerun is not None:
            result.reason += "; " + snapshot.NOT_STOPPING.format(core.cfg.on_fault)
        return
    exempt = nonfinite_paths((s.batch, None))
    _note_modes(core, s, result)
    if live:
        setup: Setup = _live_setup(core, result, device, exempt)
        setup.modes = s.modes
    else:
        lr = float(core.optimizer.param_groups[0].get("lr", 1e-3))
        cfg = SmokeConfig(steps=4, lr=lr if math.isfinite(lr) and lr > 0 else 1e-3,
                          clip=None, precision="fp32")
        setup = Setup(template=core.model, initial=state, loss_fn=None, cfg=cfg,
                      device=device, precision="fp32", user=True, step_fn=core.rerun,
                      exempt=exempt, modes=s.modes)
    failing, again = failing_batch(setup, s, result, kind)
    if failing is not s.batch:  # gradient accumulation: an earlier micro-batch's
        bad_inputs = _nonfinite_input_rows(failing)
    batch = (failing, None)
    result.first_bad_module = again.first_bad_module
    result.first_bad_param = again.first_bad_param
    if not again.failed:
        result.reason += ("; it did not reproduce when the batch was re-run from the same "
                          "weights (the failing step's context differs: autocast or a "
                          "scaler outside step_fn, a non-deterministic op, or state the "
                          "re-run does not see)")
        return
    result.anomaly = anomaly(setup, batch)
    control = core.control
    deadline.run("control batch's re-run")
    control_failed = control is not None and train(setup, [(control, None)], steps=1).failed
    if control_failed:
        result.reason = (f"{result.reason}: a control batch of rows that already trained "
                         f"fails too from the same weights{_where(again)}")
        _save_replay(core, result, setup, batch, state, again.run.failure)
        return
    blame = (f"{result.reason}: the batch fails again from the pre-step weights{_where(again)}"
             " and a control batch of rows that already trained does not")
    if control is not None:  # attributed now: a limit that stops the narrowing keeps it
        result.verdict, result.reason = "data_fault", blame
    keep, why, healthy = _narrow(setup, failing, bad_inputs)
    if why == EMPTY:
        blame, result.reason = f"{blame}; {EMPTY}", f"{result.reason}; {EMPTY}"
    if control is None and not (keep and healthy):
        # The first step has no control: only some of its own rows failing alone tells.
        result.reason += ("; not attributed: no control batch yet (the first step) and the "
                          f"batch's rows do not single out a few{f' ({why})' if why else ''}")
        _save_replay(core, result, setup, batch, state, again.run.failure)
        return
    result.verdict, result.reason = "data_fault", blame
    if why:
        result.findings.append(SmokeFinding(code="rows_not_narrowed", detail=why))
    _minimal(result, keep)
    minimal = take(failing, keep) if keep else failing
    _save_replay(core, result, setup, (minimal, None), state, again.run.failure)


def _live_setup(core: WatchCore, result: SmokeResult, device: torch.device,
                exempt: set[str]) -> Setup:
    """Re-runs on the user's model itself (``snapshot="none"``), from the checkpoint when
    there is one, and what that means for the record."""
    try:
        path = snapshot.checkpoint_path(core)
    except Exception as e:  # the user's callable: its failure is not the step_fn's
        result.findings.append(SmokeFinding(
            code="watch_checkpoint_missing", severity="warn",
            detail=f"the checkpoint callable raised {type(e).__name__}: {first_line(e)}; "
                   "the re-runs used the current weights"))
        path = None
    if path is not None and not path.is_file():
        result.findings.append(SmokeFinding(
            code="watch_checkpoint_missing", severity="warn",
            detail=f"checkpoint {path} does not exist; the re-runs used the current weights"))
        path = None
    result.checkpoint = {"path": str(path)} if path is not None else None
    if path is None:
        result.findings.append(SmokeFinding(
            code="attribution_current_weights", severity="info",
            detail="snapshot='none' and no checkpoint: the re-runs used the model's current "
                   "weights (gradients zeroed), not a copy from before the step"))
    cfg = SmokeConfig(steps=4, lr=snapshot.LIVE_LR, optimizer="sgd", clip=None,
                      precision="fp32")
    return snapshot.LiveSetup(template=core.model, initial={}, loss_fn=None, cfg=cfg,
                              device=device, precision="fp32", user=True,
                              step_fn=core.rerun, exempt=exempt, checkpoint=path)


def _note_modes(core: WatchCore, s: Step, result: SmokeResult) -> None:
    """Say so when the step did not run with every module training: the re-runs run in the
    step's modes (a model in eval mode, a frozen submodule), not all in train mode."""
    if s.modes is None or all(s.modes):
        return
    names = [n or "the model" for (n, _), mode in zip(core.model.named_modules(), s.modes,
                                                      strict=False) if not mode]
    what = ("the model was in eval mode (model.training False)" if not s.modes[0] else
            f"{len(names)} module(s) were in eval mode: {_few(names)}")
    result.findings.append(SmokeFinding(
        code="rerun_eval_mode", severity="info",
        detail=f"at step {s.step} {what}; the re-runs ran in the same modes"))


def _narrow(setup: Setup, batch: Any,
            known: list[int]) -> tuple[list[int], str | None, bool]:
    """The fewest rows that still fail, as the smoke test narrows its sample; why not, when
    the batch cannot be sliced; whether the batch's other rows train without a fault (the
    control at the first step)."""
    try:
        n = batch_size(batch)
    except ConfigError as e:
        return [], str(e), False
    if n == 0:
        return [], EMPTY, False
    deadline.run("per-row losses")
    losses = per_row_losses(setup, [(take(batch, [i]), None) for i in range(n)])
    deadline.run("re-runs narrowing the rows")

    def fails(idx: list[int]) -> bool:
        rows = [(take(batch, idx), None)]
        try:
            return train(setup, rows, steps=1).failed
        except Exception:  # BatchNorm cannot train on one row: the rows' loss, untrained
            return math.isnan(per_row_losses(setup, rows)[0])

    keep = minimal_rows(n, losses, fails, known=known)
    others = [i for i in range(n) if i not in keep]
    if not others or not fails(others):
        return keep, None, bool(others)
    # The rest fails too: the fewest rows that fail are one of several. Rows that fail
    # alone (a row whose labels are all the ignore index has no loss: 0/0) are all to
    # blame; naming the first of them blamed one row for what every row does.
    alone = [i for i in others if math.isnan(losses[i])]
    if not alone:
        return keep, None, False
    keep = sorted({*keep, *alone})
    who = "every row" if len(keep) == n else f"{len(keep)} of its {n} rows"
    return keep, (f"{who} of the batch fail(s) alone (each one's own loss is non-finite; "
                  "a row whose labels are all the ignore index, -100, has none): all are "
                  "named, not narrowed to one"), False


def _stopped(core: WatchCore, s: Step, result: SmokeResult, detail: str,
             e: deadline.Expired) -> None:
    """The re-runs ran past ``rerun_time_limit`` and were stopped: a data fault found
    before that stands (only its rows were not narrowed); otherwise the fault is judged
    from the step's own tensors, as when the step_fn raises."""
    where = f"{e.label} in the {e.run}" if e.run else "before the first re-run"
    why = f"the step_fn re-run did not finish in {e.seconds:g} s ({where})"
    result.findings.append(SmokeFinding(
        code="rerun_time_limit", severity="warn",
        detail=f"{why} and was stopped: look for a hang in your step_fn (the re-runs call it "
               "on a copy of the model, one batch at a time: a collective that waits for the "
               "other ranks, a lock the training loop holds, a loop that never ends), or "
               "raise rerun_time_limit if the re-runs are only slow"))
    if result.verdict == "data_fault":
        result.reason += f"; the rows were not narrowed: {why}"
        return
    result.reason = detail
    _grads_only(core, result, _safe_input_rows(s.batch), why)


def _state_fault(core: WatchCore, state: dict[str, torch.Tensor], result: SmokeResult) -> bool:
    """Weights or optimizer moments already non-finite: a state fault, named."""
    weights = scan(state)["nonfinite"]
    moments = []
    for p, st in core.optimizer.state.items():
        for key, value in st.items():
            if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(
                    torch.isfinite(value).all()):
                moments.append(f"{key} of {core.names.get(id(p), '?')}")
    if not weights and not moments:
        return False
    parts = []
    if weights:
        parts.append(f"weights already non-finite: {_few(weights)}")
        result.first_bad_param = weights[0]
    if moments:
        parts.append(f"optimizer state non-finite: {_few(moments)}")
    result.verdict = "code_fault"
    result.reason = f"{result.reason}: state fault, {'; '.join(parts)} (an earlier step " \
                    "diverged: check the learning rate, warm-up and optimizer settings)"
    result.findings.append(SmokeFinding(code="state_nonfinite", severity="error",
                                        detail="; ".join(parts)))
    return True


def _grads_only(core: WatchCore, result: SmokeResult, bad_inputs: list[int],
                why: str = NEEDS_STEP_FN) -> None:
    """Without a re-run (no step_fn, or one that failed: ``why``): the failing step's own
    tensors (inputs, gradients) only."""
    if not result.first_bad_param:
        result.first_bad_param = bad_param(core.model, result.first_bad_module)
    if bad_inputs:
        result.verdict = "data_fault"
        result.reason += (f"; the batch holds non-finite inputs in {len(bad_inputs)} row(s) "
                          f"(not re-run: {why})")
        _minimal(result, bad_inputs)
    else:
        result.verdict = "skipped"
        result.reason += f"; not attributed: {why}"
    if why == NEEDS_STEP_FN:
        result.findings.append(SmokeFinding(code="no_step_fn", severity="info",
                                            detail=NEEDS_STEP_FN))


def _minimal(result: SmokeResult, keep: list[int]) -> None:
    """The minimal rows by their position in the batch, row number and id."""
    rows, ids = result.batch_rows, result.batch_ids
    result.batch_positions = list(keep)
    if rows:
        result.minimal_rows = [rows[i] for i in keep if i < len(rows)]
        result.minimal_ids = [str(ids[i]) for i in keep if i < len(ids) and ids[i] is not None]


def _safe_input_rows(batch: Any) -> list[int]:
    """``_nonfinite_input_rows``, or none when a tensor type cannot be read."""
    try:
        return _nonfinite_input_rows(batch)
    except Exception:
        return []


def _nonfinite_input_rows(batch: Any) -> list[int]:
    """Positions in the batch of rows with a non-finite float input."""
    bad: set[int] = set()
    if batch is None:
        return []
    carried = len(batch_rows(batch)[0])  # rows with ids: only tensors whose rows they are
    for _, t in named(("", batch)):
        if carried and t.ndim > 0 and t.shape[0] != carried:
            continue
        # a tensor on the meta device has no values to read (reading one raises)
        if (t.is_floating_point() or t.is_complex()) and t.ndim > 0 and not t.is_meta:
            mask = ~torch.isfinite(t)
            if bool(mask.any()):
                bad.update(rows_of(mask))
    return sorted(bad)


def _save_replay(core: WatchCore, result: SmokeResult, setup: Setup, batch: Any,
                 state: dict[str, torch.Tensor], failure: str | None) -> None:
    """The replay file: the batch and the weights, or for a large model
    (``snapshot="none"``) the batch and the checkpoint's path (absolute)."""
    spec = core.cfg.model_spec
    model = resolve_spec(spec) if spec else ""
    live = isinstance(setup, snapshot.LiveSetup)
    checkpoint = str(setup.checkpoint.resolve()) if live and setup.checkpoint else None
    try:
        path = save_replay(
            core.cfg.out / REPLAY_NAME, task=WATCH_TASK, model=model, spec={},
            config=setup.cfg.model_dump(), batch=batch, initial={} if live else state,
            rows=result.minimal_rows, ids=result.minimal_ids, files=[], failure=failure,
            exempt=sorted(setup.exempt), checkpoint=checkpoint,
            # the step's modes, by module name: --replay reruns in them too
            modes=None if setup.modes is None else list(zip(
                [n for n, _ in core.model.named_modules()], setup.modes, strict=False)))
    except Exception as e:  # out= gone, full or read-only (torch.save raises RuntimeError
        # there, not OSError): the verdict stands
        result.findings.append(SmokeFinding(code="replay_not_written", severity="warn",
                                            detail=first_line(e)))
        return
    result.replay = str(path)
    if not spec:
        result.findings.append(SmokeFinding(
            code="replay_needs_model", severity="info",
            detail="the replay needs --model package.module:build (build() returns "
                   "(model, step_fn, None)); pass model_spec= to watch to record it"))


def _link_gate(core: WatchCore, result: SmokeResult) -> None:
    from preflight.watch.gate import load_gate

    try:
        gate = load_gate(core.cfg.gate_report)
    except Exception as e:
        result.findings.append(SmokeFinding(code="gate_report_unreadable", detail=str(e)))
        return
    positions = result.batch_positions or list(range(len(result.batch_rows)))
    for i in positions:
        row = result.batch_rows[i] if i < len(result.batch_rows) else None
        id_ = result.batch_ids[i] if i < len(result.batch_ids) else None
        result.gate.append(gate.link(row, id_))


@contextlib.contextmanager
def _own_rng(device: torch.device) -> Iterator[None]:
    """Re-runs reseed every generator: give the user's run its streams back afterwards."""
    py, npy = random.getstate(), np.random.get_state()
    devices = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)


def _where(out: Any) -> str:
    """`` (first non-finite output: M)`` from a re-run's outcome, when it named one."""
    return f" (first non-finite output: {out.first_bad_module})" if out.first_bad_module else ""


def _few(names: list[str]) -> str:
    return ", ".join(names[:5]) + (" …" if len(names) > 5 else "")
