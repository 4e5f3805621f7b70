"""The smoke stage: sample, encode, train on a control batch and on the real sample,
attribute a failure to the data or the code, and localise a data fault to rows."""

from __future__ import annotations

import copy
import math
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from preflight.config import Fields, RuleSet, SmokeConfig
from preflight.errors import ConfigError
from preflight.report.model import SmokeFinding, SmokeResult, SmokeRun
from preflight.sampling import SampleRow
from preflight.smoke import replay as replay_file
from preflight.smoke.checkpoint import load_checkpoint, scan
from preflight.smoke.control import control_rows
from preflight.smoke.encode import Collate, Encoder, compact_vocab, infer_task
from preflight.smoke.localize import minimal_rows
from preflight.smoke.loop import (
    FP16_MAX,
    FP16_TINY,
    Outcome,
    Setup,
    nonfinite_paths,
    per_row_losses,
    seed_everything,
    train,
)
from preflight.smoke.models import build_builtin
from preflight.smoke.user import call_build, load_build
from preflight.tokenizer import TokenCounter

Progress = Callable[[int, int, str], None]
REPLAY_NAME = "smoke-replay.pt"
_WATCH_STEPS = 3
_SHOWN_ACTIVATIONS = 50


def run_smoke(sample: list[SampleRow], rules: RuleSet, *, fields: Fields,
              tokenizer: TokenCounter | None, out_dir: Path | None = None,
              progress: Progress | None = None, sampled_in: float = 0.0) -> SmokeResult:
    """Run the smoke test on ``sample`` (drawn by ``preflight.sampling.Sampler`` while the
    gate read the corpus) and return its result: the report's ``smoke`` section."""
    started = time.perf_counter()
    cfg = rules.smoke
    base = Path(rules.path).parent if rules.path else None
    task = infer_task(rules.task, fields)
    device, precision = resolve_device(cfg)
    result = SmokeResult(verdict="skipped", reason="", task=task, seed=cfg.seed,
                         device=str(device), precision=precision)
    if task is None:
        result.reason = ("no field to train on: declare fields.text, messages, label or "
                         "target (or task:) in the rules file")
        return result
    build = load_build(cfg.model, base=base) if cfg.model else None
    state = load_checkpoint(_beside(cfg.checkpoint, base)) if cfg.checkpoint else None
    timings: dict[str, float] = {"sample": round(sampled_in, 4)}
    result.samples = len(sample)
    result.sample_rows = sorted(s.row for s in sample)
    result.flagged_in_sample = sorted(s.row for s in sample if s.flagged)
    if len(sample) < 2:
        result.reason = f"too few readable records to train on ({len(sample)})"
        return result
    rows = [s.record for s in sample]
    if out_dir is not None:  # a replay from an earlier run must not outlive it
        (out_dir / REPLAY_NAME).unlink(missing_ok=True)
    encoder = Encoder(task, fields, rules.model, tokenizer, max_length=cfg.max_length)

    t0 = time.perf_counter()
    seed_everything(cfg.seed)
    if build is not None:
        assert cfg.model is not None
        model, loss_fn, collate = call_build(build, cfg.model)
        result.model, spec = cfg.model, {}
    else:
        model, loss_fn, collate = None, None, None
    builtin_collate = collate is None
    if builtin_collate and task == "classification":
        encoder.set_classes(encoder.encode(rows))
    control = control_rows(task, fields, rules.model, rows, seed=cfg.seed,
                           vocab_size=encoder.vocab_size, classes=encoder.classes,
                           max_length=cfg.max_length)
    if model is None:
        model, loss_fn, collate, spec = _builtin(task, encoder, rows, control)
        result.model = f"built-in:{task}"
    elif collate is None:
        collate = Collate(encoder)
    problems = encoder.problems(rows) if builtin_collate else [[] for _ in rows]
    timings["encode"] = _since(t0)

    if state is not None:
        result.checkpoint = {"path": str(cfg.checkpoint), **scan(state)}
        bad = result.checkpoint["nonfinite"]
        if bad:
            result.verdict = "code_fault"
            result.reason = (f"checkpoint {cfg.checkpoint} has non-finite tensors: "
                             f"{', '.join(bad[:5])}{' …' if len(bad) > 5 else ''}")
            result.findings.append(SmokeFinding(code="checkpoint_nonfinite", severity="error",
                                                detail=result.reason))
            result.timings = {**timings, "total": _since(started)}
            return result
        try:
            model.load_state_dict(state)
        except RuntimeError as e:
            raise ConfigError(f"checkpoint {cfg.checkpoint} does not fit the model: "
                              f"{str(e).splitlines()[0]}") from e
    rebuild = (lambda: call_build(build, str(cfg.model))[0]) if build is not None else None
    setup = Setup(template=model, initial=copy.deepcopy(model.state_dict()), loss_fn=loss_fn,
                  cfg=cfg, device=device, precision=precision, user=build is not None,
                  rebuild=rebuild)
    result.steps = cfg.steps
    runs = _Runs(setup, collate, cfg, progress, total=3)

    t0 = time.perf_counter()
    control_out = runs.train(control, "control")
    result.control = control_out.run
    timings["control"] = _since(t0)
    bad_rows = [i for i, p in enumerate(problems) if p]
    real_out: Outcome | None = None
    if not bad_rows:
        t0 = time.perf_counter()
        real_out = runs.train(rows, "real", watch=_WATCH_STEPS)
        result.real = real_out.run
        repeat = runs.train(rows, "repeat")
        result.repeat = repeat.run
        timings["real"] = _since(t0)
        _determinism(result, real_out.run, repeat.run, cfg.seed)
        _activations(result, real_out)
        _grad_warnings(result, real_out, cfg.grad_norm_warn)

    if control_out.failed:
        result.verdict = "code_fault"
        result.reason = (f"training fails on the control batch (in spec by construction): "
                         f"{control_out.run.failure}")
        result.first_bad_module = control_out.first_bad_module
        result.first_bad_param = control_out.first_bad_param
    elif bad_rows:
        result.verdict = "data_fault"
        code, detail = problems[bad_rows[0]][0]
        result.reason = (f"{len(bad_rows)} sampled row(s) cannot be trained on; row "
                         f"{sample[bad_rows[0]].row}: {detail} ({code})")
        _minimal(result, sample, bad_rows)
        replayed = runs.train([rows[i] for i in bad_rows], "probe")
        if replayed.failed and out_dir is not None:
            result.replay = _save_replay(out_dir, result, setup, cfg, spec, base,
                                         collate([rows[i] for i in bad_rows]),
                                         replayed.run.failure)
        by_code: dict[str, tuple[str, list[int]]] = {}
        for i in bad_rows:
            for code, detail in problems[i]:  # one finding per code, the first detail shown
                by_code.setdefault(code, (detail, []))[1].append(sample[i].row)
        for code, (detail, where) in by_code.items():
            more = f" ({len(where)} rows)" if len(where) > 1 else ""
            result.findings.append(SmokeFinding(code=code, severity="error",
                                                detail=detail + more, rows=sorted(where)))
    elif real_out is not None and real_out.failed:
        result.verdict = "data_fault"
        result.first_bad_module = real_out.first_bad_module
        result.first_bad_param = real_out.first_bad_param
        t0 = time.perf_counter()
        keep, alone = _localise(runs, setup, collate, rows, real_out)
        timings["localise"] = _since(t0)
        _minimal(result, sample, keep)
        result.reason = (f"training fails on the sample but not on the control batch: "
                         f"{real_out.run.failure}")
        if alone:
            result.findings.append(SmokeFinding(
                code="row_loss_nonfinite", severity="error",
                detail=f"{len(alone)} sampled row(s) have a non-finite loss on their own",
                rows=sorted(sample[i].row for i in alone)))
        batch = collate([rows[i] for i in keep])
        result.anomaly = _anomaly(setup, batch, real_out.run.first_bad_step or 0)
        if out_dir is not None:
            result.replay = _save_replay(out_dir, result, setup, cfg, spec, base, batch,
                                         real_out.run.failure)
    elif not control_out.run.learned:
        result.verdict = "code_fault"
        result.reason = (f"the loss does not fall even on the control batch "
                         f"({_curve(control_out.run)}): the model, loss, optimizer or "
                         f"learning rate cannot learn")
    elif real_out is not None and not real_out.run.learned:
        result.verdict = "data_fault"
        result.reason = (f"the loss does not fall on the sample ({_curve(real_out.run)}) "
                         f"while it does on the control batch: labels may be noise, or the "
                         f"targets unrelated to the inputs")
    else:
        result.verdict = "pass"
        result.reason = (f"{len(rows)} rows trained for {cfg.steps} steps without a fault; "
                         f"loss {_curve(result.real)}"
                         if result.real else "trained without a fault")
        if result.flagged_in_sample:
            result.findings.append(SmokeFinding(
                code="flagged_rows_trained", severity="info",
                detail=f"{len(result.flagged_in_sample)} flagged row(s) in the sample trained "
                       "without a non-finite value", rows=result.flagged_in_sample[:20]))
    result.timings = {**timings, "total": _since(started)}
    return result


def replay(path: str | Path, *, device: str = "auto") -> SmokeResult:
    """Rerun a replay file: the minimal batch from the saved initial weights and seed.
    The verdict is ``data_fault`` when the failure reproduces, ``pass`` when it does not."""
    started = time.perf_counter()
    data = replay_file.load(path)
    cfg = SmokeConfig(**{**data["config"], "device": device})
    dev, precision = resolve_device(cfg)
    task, name = data["task"], data["model"]
    if name.startswith("built-in:"):
        model, loss_fn = build_builtin(task, data["spec"])
    else:
        model, loss_fn, _ = call_build(load_build(name), name)
    model.load_state_dict(data["initial"])
    setup = Setup(template=model, initial=data["initial"], loss_fn=loss_fn, cfg=cfg,
                  device=dev, precision=precision, user=not name.startswith("built-in:"))
    batch = (data["inputs"], data["targets"])
    out = train(setup, [batch], steps=cfg.steps)
    result = SmokeResult(
        verdict="data_fault" if out.failed else "pass", task=task, model=name,
        device=str(dev), precision=precision, seed=cfg.seed, steps=cfg.steps,
        samples=len(data["rows"]), minimal_rows=list(data["rows"]),
        minimal_ids=list(data["ids"]), minimal_files=list(data["files"]),
        first_bad_module=out.first_bad_module, first_bad_param=out.first_bad_param,
        real=out.run, replay=str(path),
        reason=(f"reproduced: {out.run.failure}" if out.failed else
                f"did not reproduce (recorded: {data['failure']})"),
    )
    if out.failed:
        result.anomaly = _anomaly(setup, batch, out.run.first_bad_step or 0)
    result.timings = {"total": _since(started)}
    return result


def resolve_device(cfg: SmokeConfig) -> tuple[torch.device, str]:
    """The device and the precision the runs use (fp32 on CPU; on CUDA, ``auto`` means bf16
    where the GPU supports it, else fp16 with a GradScaler)."""
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("smoke.device is cuda but torch sees no CUDA device; "
                          "use device: auto or cpu")
    use_cuda = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    if not use_cuda:
        return torch.device("cpu"), "fp32"
    if cfg.precision == "auto":
        return torch.device("cuda"), "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return torch.device("cuda"), cfg.precision


class _Runs:
    """Collates rows into batches and trains, turning an exception into a failed run."""

    def __init__(self, setup: Setup, collate: Any, cfg: SmokeConfig,
                 progress: Progress | None, total: int) -> None:
        self.setup, self.collate, self.cfg = setup, collate, cfg
        self.progress, self.total, self.done = progress, total, 0
        self.exempt_known = False

    def batches(self, rows: list[dict[str, Any]]) -> tuple[list[Any], list[list[int]]]:
        size = self.cfg.batch_size or len(rows)
        index = [list(range(i, min(i + size, len(rows)))) for i in range(0, len(rows), size)]
        return [self.collate([rows[i] for i in idx]) for idx in index], index

    def train(self, rows: list[dict[str, Any]], name: str, *, watch: int = 0) -> Outcome:
        try:
            batches, index = self.batches(rows)
            if not self.exempt_known:  # the control batch: what is non-finite by design
                self.setup.exempt = nonfinite_paths(batches[0])
                self.exempt_known = True
            out = train(self.setup, batches, steps=self.cfg.steps, watch=watch)
        except ConfigError:
            raise
        except Exception as e:
            out = Outcome(run=SmokeRun(failure=f"{type(e).__name__}: {_first_line(e)}",
                                       first_bad_step=0))
            index = []
        if out.bad_rows and index:
            step = out.run.first_bad_step or 0
            idx = index[step % len(index)]
            out.bad_rows = sorted({idx[j] for j in out.bad_rows if j < len(idx)})
        self.done += 1
        if self.progress is not None and name in ("control", "real", "repeat"):
            self.progress(self.done, self.total, "runs")
        return out

    def fails(self, rows: list[dict[str, Any]]) -> bool:
        return self.train(rows, "probe").failed


def _builtin(task: str, encoder: Encoder, rows: list[dict[str, Any]],
             control: list[dict[str, Any]]) -> tuple[Any, Any, Collate, dict[str, Any]]:
    encoded = encoder.encode(rows + control)
    spec: dict[str, Any] = {"classes": encoder.classes}
    vocab = None
    if encoder.uses_text:
        vocab = compact_vocab(encoded, encoder.vocab_size)
        spec["vocab"] = len(vocab) + 1
    widths = [len(e.features) for e in encoded if e.features is not None]
    if widths:
        spec["features"] = max(widths)
    if task == "regression":
        finite = [e.target for e in encoded[: len(rows)]
                  if e.target is not None and math.isfinite(e.target) and abs(e.target) < 1e15]
        spec["bias"] = statistics.median(finite) if finite else 0.0
    model, loss_fn = build_builtin(task, spec)
    return model, loss_fn, Collate(encoder, vocab), spec


def _localise(runs: _Runs, setup: Setup, collate: Any, rows: list[dict[str, Any]],
              real: Outcome) -> tuple[list[int], list[int]]:
    """The minimal failing rows, and the rows whose loss alone is already non-finite."""
    try:
        losses = per_row_losses(setup, [collate([r]) for r in rows])
    except ConfigError:
        raise
    except Exception:
        losses = [0.0] * len(rows)
    keep = minimal_rows(len(rows), losses, lambda idx: runs.fails([rows[i] for i in idx]),
                        known=real.bad_rows)
    return keep, [i for i, x in enumerate(losses) if math.isnan(x)]


def _save_replay(out_dir: Path, result: SmokeResult, setup: Setup, cfg: SmokeConfig,
                 spec: dict[str, Any], base: Path | None, batch: Any,
                 failure: str | None) -> str:
    model = _model_name(cfg.model, base) if cfg.model else str(result.model)
    return str(replay_file.save(
        out_dir / REPLAY_NAME, task=str(result.task), model=model, spec=spec,
        config=cfg.model_dump(), batch=batch, initial=setup.initial, rows=result.minimal_rows,
        ids=result.minimal_ids, files=result.minimal_files, failure=failure))


def _anomaly(setup: Setup, batch: Any, step: int) -> str | None:
    """Replay the minimal batch under ``detect_anomaly``: the backward op that made NaN.
    (torch's own warning with the forward traceback is silenced: the op name is kept.)"""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = train(setup, [batch], steps=step + 1, anomaly=True)
    except Exception as e:
        return f"{type(e).__name__}: {_first_line(e)}"
    failure = out.run.failure or ""
    return failure.removeprefix("anomaly: ") if failure.startswith("anomaly: ") else None


def _minimal(result: SmokeResult, sample: list[SampleRow], keep: list[int]) -> None:
    picked = sorted((sample[i] for i in keep), key=lambda s: (s.file_index, s.row))
    result.minimal_rows = [s.row for s in picked]
    result.minimal_ids = [s.id for s in picked if s.id is not None]
    result.minimal_files = [s.file for s in picked] if any(s.file for s in picked) else []


def _determinism(result: SmokeResult, a: SmokeRun, b: SmokeRun, seed: int) -> None:
    if a.loss == b.loss:
        return
    step = next((i for i, (x, y) in enumerate(zip(a.loss, b.loss, strict=False)) if x != y),
                min(len(a.loss), len(b.loss)))
    result.findings.append(SmokeFinding(
        code="nondeterministic_loss", step=step,
        detail=f"two runs with seed {seed} differ from step {step}: an unseeded random "
               "source, random augmentation or a non-deterministic op (the bad batch would "
               "change from run to run)"))


def _activations(result: SmokeResult, out: Outcome) -> None:
    ranked = sorted(out.activations.items(), key=lambda kv: -kv[1][0])
    result.activations = [
        {"module": name, "abs_max": top, "abs_min": None if math.isinf(low) else low}
        for name, (top, low) in ranked[:_SHOWN_ACTIVATIONS]
    ]
    over = [name for name, (top, _) in ranked if top >= FP16_MAX]
    if over:
        result.findings.append(SmokeFinding(
            code="fp16_overflow_risk",
            detail=f"activations reach {ranked[0][1][0]:.3g} (fp16 max {FP16_MAX:g}) in "
                   f"{', '.join(over[:5])}: fp16 autocast would overflow; use bf16"))
    under = [name for name, (_, low) in ranked if 0 < low < FP16_TINY]
    if under:
        result.findings.append(SmokeFinding(
            code="fp16_underflow_risk", severity="info",
            detail=f"activations below fp16's smallest value ({FP16_TINY:.3g}) in "
                   f"{', '.join(under[:5])}: they flush to zero in fp16"))


def _grad_warnings(result: SmokeResult, out: Outcome, limit: float) -> None:
    if out.grad_warnings:
        step, norm = out.grad_warnings[0]
        result.findings.append(SmokeFinding(
            code="grad_norm_high", step=step,
            detail=f"gradient norm {norm:.4g} at step {step} is above smoke.grad_norm_warn "
                   f"({limit:g}); {len(out.grad_warnings)} step(s) in all"))


def _curve(run: SmokeRun | None) -> str:
    if run is None or not run.loss:
        return "no steps"
    finite = [x for x in run.loss if x is not None]
    if not finite:
        return "no finite loss"
    return f"{finite[0]:.4g} → {sum(finite[-3:]) / len(finite[-3:]):.4g}"


def _model_name(spec: str, base: Path | None) -> str:
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file() and base is not None and (base / target).is_file():
            path = base / target
        return f"{path.resolve()}:{attr}"
    return spec


def _beside(path: str | None, base: Path | None) -> str:
    assert path is not None
    if base is not None and not Path(path).exists() and (base / path).exists():
        return str(base / path)
    return path


def _since(t0: float) -> float:
    return round(time.perf_counter() - t0, 4)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
