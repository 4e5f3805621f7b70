"""What the smoke stage reads from its runs once they have trained: determinism, activation
ranges, gradient norms, the rows that cannot be trained on, the minimal failing rows and
their replay file, a code fault's backward op, and a checkpoint that is broken already."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from preflight.choices import REPLAY_NAME
from preflight.config import SmokeConfig
from preflight.errors import ConfigError
from preflight.hf_folder import is_hf_spec
from preflight.report.model import SmokeFinding, SmokeResult, SmokeRun
from preflight.sampling import SampleRow
from preflight.smoke import deadline, hf_load
from preflight.smoke.localize import minimal_rows
from preflight.smoke.loop import FP16_MAX, Outcome, Setup, anomaly, per_row_losses
from preflight.smoke.replay_file import save as save_replay
from preflight.smoke.runs import Runs
from preflight.smoke.spy import FP16_TINY
from preflight.smoke.user import resolve_spec
from preflight.smoke.verdict import Blocked

_SHOWN_ACTIVATIONS = 50
_UNDERFLOW_SHARE = 0.01  # of a module's nonzero outputs, at least, to be worth a word


def determinism(result: SmokeResult, a: SmokeRun, b: SmokeRun, seed: int) -> None:
    """A finding when two runs with the same seed give different losses."""
    if a.loss == b.loss:
        return
    step = next((i for i, (x, y) in enumerate(zip(a.loss, b.loss, strict=False)) if x != y),
                min(len(a.loss), len(b.loss)))
    result.findings.append(SmokeFinding(
        code="nondeterministic_loss", step=step,
        detail=f"two runs with seed {seed} differ from step {step}: an unseeded random "
               "source, random augmentation or a non-deterministic op (the bad batch would "
               "change from run to run)"))


def activations(result: SmokeResult, out: Outcome) -> None:
    """The largest activations per module, and findings when fp16 would overflow or flush
    a share of them to zero."""
    ranked = sorted(out.activations.items(), key=lambda kv: -kv[1][0])
    result.activations = [
        {"module": name, "abs_max": top, "abs_min": None if math.isinf(low) else low}
        for name, (top, low, _) in ranked[:_SHOWN_ACTIVATIONS]
    ]
    over = [name for name, (top, _, _) in ranked if top >= FP16_MAX]
    if over:
        result.findings.append(SmokeFinding(
            code="fp16_overflow_risk",
            detail=f"activations reach {ranked[0][1][0]:.3g} (fp16 max {FP16_MAX:g}) in "
                   f"{', '.join(over[:5])}: fp16 autocast would overflow; use bf16"))
    # One tiny value flushing to zero changes nothing; a share of a tensor does.
    under = sorted(((share, name) for name, (_, _, share) in ranked
                    if share >= _UNDERFLOW_SHARE), reverse=True)
    if under:
        result.findings.append(SmokeFinding(
            code="fp16_underflow_risk", severity="info",
            detail=f"{under[0][0]:.0%} of the nonzero activations are below fp16's smallest "
                   f"value ({FP16_TINY:.3g}) in {', '.join(n for _, n in under[:5])}: they "
                   "flush to zero in fp16"))


def grad_warnings(result: SmokeResult, out: Outcome, limit: float) -> None:
    """A finding when a gradient norm went above ``smoke.grad_norm_warn``."""
    if out.grad_warnings:
        step, norm = out.grad_warnings[0]
        result.findings.append(SmokeFinding(
            code="grad_norm_high", step=step,
            detail=f"gradient norm {norm:.4g} at step {step} is above smoke.grad_norm_warn "
                   f"({limit:g}); {len(out.grad_warnings)} step(s) in all"))


def broken_checkpoint(result: SmokeResult, cfg: SmokeConfig) -> None:
    """The verdict for a checkpoint with non-finite tensors: a code fault, no run."""
    assert result.checkpoint is not None
    bad = result.checkpoint["nonfinite"]
    result.verdict = "code_fault"
    result.reason = (f"checkpoint {cfg.checkpoint} has non-finite tensors: "
                     f"{', '.join(bad[:5])}{' …' if len(bad) > 5 else ''}")
    result.findings.append(SmokeFinding(code="checkpoint_nonfinite", severity="error",
                                        detail=result.reason))


def timed_out(result: SmokeResult, e: deadline.Expired, *, user: bool) -> None:
    """The verdict for a stage stopped at ``smoke.time_limit``: a code fault (the model's
    code, or settings too large for the limit), naming the phase, the step and the run. A
    fault already found (a data fault being localised) keeps its verdict."""
    failure = f"ran past smoke.time_limit ({e.seconds:g} s) in {e.label}" + (
        f" at step {e.step}" if e.step is not None else "")
    todo = (f"look for a hang in {e.look_in}, or raise the limit if it is only slow"
            if user else "raise the limit, or train less (smoke.samples, smoke.steps, "
            "smoke.max_length)")
    stopped = (f"the smoke stage ran past smoke.time_limit ({e.seconds:g} s) in {e.where()} "
               "and was stopped")
    detail = stopped
    if e.run in ("control", "real", "repeat"):
        setattr(result, e.run, _cut_short(e, failure))
        detail += _completed(result, e.run)
    if result.failed:  # the fault stands; what was cut short is said in the finding
        detail += f": {result.verdict} found before it; raise the limit to see the rest"
    else:
        result.verdict = "code_fault"
        result.reason = f"{stopped}: {todo} ({deadline.RAISE_LIMIT})"
    result.findings.append(SmokeFinding(code="time_limit", severity="error", detail=detail,
                                        step=e.step))


def _cut_short(e: deadline.Expired, failure: str) -> SmokeRun:
    """The run the limit stopped, with the curves of the steps it completed."""
    run = e.record if isinstance(e.record, SmokeRun) else SmokeRun()
    run.failure, run.first_bad_step, run.cut_short = failure, e.step, True
    run.steps, run.learned = len(run.loss), None
    return run


def _completed(result: SmokeResult, stopped: str) -> str:
    """What the runs did before the stop, for the finding: each run's steps and loss
    (whether training was getting anywhere)."""
    said = []
    for name in ("control", "real", "repeat"):
        run = getattr(result, name)
        if run is None:
            continue
        losses = [x for x in run.loss if x is not None]
        curve = f", loss {losses[0]:.4g} → {losses[-1]:.4g}" if losses else ""
        ran = f"{run.steps} step{'' if run.steps == 1 else 's'}"
        said.append(f"the {name} run {'was stopped after' if name == stopped else 'ran'} "
                    f"{ran}{curve}")
    return " (" + "; ".join(said) + ")" if said else ""


def blocked(problems: list[list[tuple[str, str]]], sample: list[SampleRow],
            bad_rows: list[int]) -> Blocked | None:
    """The first row the encoder refused, for the verdict (None when none was)."""
    if not bad_rows:
        return None
    code, detail = problems[bad_rows[0]][0]
    return Blocked(row=sample[bad_rows[0]].row, code=code, detail=detail, count=len(bad_rows))


def problem_findings(result: SmokeResult, problems: list[list[tuple[str, str]]],
                     sample: list[SampleRow], bad_rows: list[int]) -> None:
    """One error finding per code, listing its rows (the first detail shown)."""
    by_code: dict[str, tuple[str, list[int]]] = {}
    for i in bad_rows:
        for code, detail in problems[i]:
            by_code.setdefault(code, (detail, []))[1].append(sample[i].row)
    for code, (detail, where) in by_code.items():
        more = f" ({len(where)} rows)" if len(where) > 1 else ""
        result.findings.append(SmokeFinding(code=code, severity="error", detail=detail + more,
                                            rows=sorted(where)))


def localise(runs: Runs, setup: Setup, collate: Any, rows: list[dict[str, Any]],
             real: Outcome) -> tuple[list[int], list[int]]:
    """The minimal failing rows, and the rows whose loss alone is already non-finite."""
    deadline.run("per-row loss")
    try:
        losses = per_row_losses(setup, [collate([r]) for r in rows])
    except ConfigError:
        raise
    except Exception:
        losses = [0.0] * len(rows)
    keep = minimal_rows(len(rows), losses, lambda idx: runs.fails([rows[i] for i in idx]),
                        known=real.bad_rows)
    return keep, [i for i, x in enumerate(losses) if math.isnan(x)]


def minimal(result: SmokeResult, sample: list[SampleRow], keep: list[int]) -> None:
    """The minimal failing rows by row number, id and file, in read order."""
    picked = sorted((sample[i] for i in keep), key=lambda s: (s.file_index, s.row))
    result.minimal_rows = [s.row for s in picked]
    result.minimal_ids = [s.id for s in picked if s.id is not None]
    result.minimal_files = [s.file for s in picked] if any(s.file for s in picked) else []


def replay_and_anomaly(result: SmokeResult, runs: Runs, setup: Setup,
                       rows: list[dict[str, Any]], keep: list[int], spec: dict[str, Any],
                       base: Path | None, out_dir: Path | None) -> None:
    """Replay the minimal rows once under detect_anomaly and save them as a replay file."""
    try:
        batch = runs.batch([rows[i] for i in keep])
    except ConfigError:
        raise
    except Exception:  # the rows cannot even be collated: nothing to replay
        return
    result.anomaly = anomaly(setup, batch)
    replayed = runs.train([rows[i] for i in keep], "probe")
    if out_dir is not None and replayed.failed:
        result.replay = _write_replay(out_dir, result, setup, setup.cfg, spec, base, batch,
                                      replayed.run.failure)


def _write_replay(out_dir: Path, result: SmokeResult, setup: Setup, cfg: SmokeConfig,
                  spec: dict[str, Any], base: Path | None, batch: Any,
                  failure: str | None) -> str:
    if is_hf_spec(cfg.model):
        model = hf_load.parse(str(cfg.model), base=base).resolved
    else:
        model = resolve_spec(cfg.model, base=base) if cfg.model else str(result.model)
    return str(save_replay(
        out_dir / REPLAY_NAME, task=str(result.task), model=model, spec=spec,
        config=cfg.model_dump(), batch=batch, initial=setup.initial, rows=result.minimal_rows,
        ids=result.minimal_ids, files=result.minimal_files, failure=failure,
        exempt=sorted(setup.exempt)))


def control_anomaly(runs: Runs, setup: Setup, control: list[dict[str, Any]]) -> str | None:
    """A code fault's backward op, from the control batch itself (when it collates)."""
    try:
        batch = runs.batch(control)
    except Exception:  # collate itself is the fault: nothing to run backward on
        return None
    return anomaly(setup, batch)
