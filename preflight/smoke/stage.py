"""The smoke stage: sample, encode, train on a control batch and on the real sample,
attribute a failure to the data or the code, and localise a data fault to rows."""

from __future__ import annotations

import contextlib
import copy
import math
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from preflight.config import Fields, RuleSet, SmokeConfig
from preflight.cores import compute_threads
from preflight.errors import ConfigError
from preflight.hf_folder import is_hf_spec
from preflight.paths import find_beside
from preflight.report.model import SmokeFinding, SmokeResult, SmokeRun
from preflight.sampling import SampleRow
from preflight.smoke import hf
from preflight.smoke import replay as replay_file
from preflight.smoke.checkpoint import load_checkpoint, scan
from preflight.smoke.control import control_rows
from preflight.smoke.encode import Collate, Encoder, compact_vocab, infer_task
from preflight.smoke.localize import minimal_rows
from preflight.smoke.loop import (
    FP16_MAX,
    Outcome,
    Setup,
    anomaly,
    nonfinite_paths,
    per_row_losses,
    seed_everything,
    train,
)
from preflight.smoke.models import build_builtin
from preflight.smoke.optim import check_optimizer
from preflight.smoke.spy import FP16_TINY
from preflight.smoke.training_args import resolve as resolve_settings
from preflight.smoke.user import CONTRACT, call_build, load_build, resolve_spec, user_code
from preflight.smoke.verdict import Blocked, attribute
from preflight.text import first_line
from preflight.tokenizer.counter import TokenCounter

Progress = Callable[[int, int, str], None]
REPLAY_NAME = "smoke-replay.pt"
WATCH_TASK = "watch"  # a replay written by preflight.watch: its batch goes to step_fn
_WATCH_STEPS = 3
_SHOWN_ACTIVATIONS = 50
_UNDERFLOW_SHARE = 0.01  # of a module's nonzero outputs, at least, to be worth a word


def check_setup(rules: RuleSet) -> SmokeConfig:
    """Fail fast, before the gate reads any data: the device, the training settings (and
    their training-args file), the user's model module and the checkpoint path must be
    usable (each a ``ConfigError`` with what to do). Returns the smoke config with the
    training settings applied (its seed draws the sample)."""
    base = Path(rules.path).parent if rules.path else None
    cfg = resolve_settings(rules.smoke, base=base).cfg
    check_optimizer(cfg)
    device, _ = resolve_device(cfg)
    if is_hf_spec(cfg.model):
        hf.check(str(cfg.model), base=base, task=infer_task(rules.task, rules.fields),
                 device=device, rows=cfg.batch_size or cfg.samples, max_length=cfg.max_length,
                 shrink=cfg.shrink,
                 needs_tokenizer=not (rules.model.tokenizer or rules.fields.input_ids))
    elif cfg.model:
        load_build(cfg.model, base=base)
    if cfg.checkpoint:
        find_beside(cfg.checkpoint, base, what="checkpoint")
    return cfg


def run_smoke(sample: list[SampleRow], rules: RuleSet, *, fields: Fields,
              tokenizer: TokenCounter | None, out_dir: Path | None = None,
              progress: Progress | None = None, sampled_in: float = 0.0,
              records: int | None = None) -> SmokeResult:
    """Run the smoke test on ``sample`` (drawn by ``preflight.sampling.Sampler`` while the
    gate read the corpus) and return its result: the report's ``smoke`` section.
    ``records``: the corpus's record count (the real run's length, for the warm-up)."""
    model = rules.smoke.model
    with user_code(model) if model else contextlib.nullcontext():
        return _run_smoke(sample, rules, fields=fields, tokenizer=tokenizer, out_dir=out_dir,
                          progress=progress, sampled_in=sampled_in, records=records)


def _run_smoke(sample: list[SampleRow], rules: RuleSet, *, fields: Fields,
               tokenizer: TokenCounter | None, out_dir: Path | None,
               progress: Progress | None, sampled_in: float,
               records: int | None) -> SmokeResult:
    started = time.perf_counter()
    base = Path(rules.path).parent if rules.path else None
    settings = resolve_settings(rules.smoke, base=base, records=records)
    cfg = settings.cfg
    task = infer_task(rules.task, fields)
    device, precision = resolve_device(cfg)
    result = SmokeResult(verdict="skipped", reason="", task=task, seed=cfg.seed,
                         device=str(device), precision=precision, settings=settings.settings,
                         **_device_facts(device))
    result.samples = len(sample)
    result.sample_rows = sorted(s.row for s in sample)
    result.flagged_in_sample = sorted(s.row for s in sample if s.flagged)
    if out_dir is not None:  # a replay from an earlier run must not outlive it
        (out_dir / REPLAY_NAME).unlink(missing_ok=True)
    if task is None:
        result.reason = ("no field to train on: declare fields.text, messages, label or "
                         "target (or task:) in the rules file")
        return result
    folder = hf.parse(cfg.model, base=base) if is_hf_spec(cfg.model) else None
    build = load_build(cfg.model, base=base) if cfg.model and folder is None else None
    state = (load_checkpoint(find_beside(cfg.checkpoint, base, what="checkpoint"))
             if cfg.checkpoint else None)
    if len(sample) < 2:
        result.reason = f"too few readable records to train on ({len(sample)})"
        return result
    rows = [s.record for s in sample]
    timings: dict[str, float] = {"sample": round(sampled_in, 4)}

    t0 = time.perf_counter()
    if folder is not None:  # a transformers model trains on text, with its own tokenizer
        fields = fields.model_copy(update={"features": None})
        if not (fields.text or fields.messages or fields.input_ids):
            raise ConfigError(f"--model {cfg.model!r}: a transformers model trains on text; "
                              "declare fields.text or fields.messages in the rules file")
        if tokenizer is None and not fields.input_ids:
            tokenizer = hf.folder_tokenizer(folder)
    encoder = Encoder(task, fields, rules.model, tokenizer, max_length=cfg.max_length)
    seed_everything(cfg.seed)
    model, loss_fn, collate = call_build(build, str(cfg.model)) if build else (None, None, None)
    builtin_collate = collate is None
    if builtin_collate:
        skip = _untrainable(task, encoder, rows, fields, declared=rules.model.labels)
        if skip:
            result.reason = skip
            return result
        if task == "classification":
            encoder.set_classes(encoder.encode(rows))
    center, scale = _target_scale(encoder, rows) if task == "regression" else (0.0, 1.0)
    spec: dict[str, Any] = {}
    if folder is not None:
        made = hf.build(folder, task=task, encoder=encoder, shrink=cfg.shrink, device=device,
                        rows=cfg.batch_size or len(rows), center=center, scale=scale)
        model, loss_fn, collate, spec = made.model, made.loss_fn, made.collate, made.spec
        result.findings += [SmokeFinding(code=c, severity="info", detail=d)
                            for c, d in made.notes]
    control = control_rows(task, fields, rules.model, rows, seed=cfg.seed,
                           vocab_size=encoder.vocab_size, classes=encoder.classes,
                           max_length=cfg.max_length, center=center, scale=scale)
    if model is None:
        model, loss_fn, collate, spec = _builtin(task, encoder, rows, control, center, scale)
        result.model = f"built-in:{task}"
    else:
        result.model = cfg.model
        collate = collate or Collate(encoder)
    problems = encoder.problems(rows) if builtin_collate else [[] for _ in rows]
    timings["encode"] = _since(t0)

    if state is not None:
        result.checkpoint = {"path": str(cfg.checkpoint), **scan(state)}
        if result.checkpoint["nonfinite"]:
            _broken_checkpoint(result, cfg)
            result.timings = {**timings, "total": _since(started)}
            return result
        try:
            (model.model if folder is not None else model).load_state_dict(state)
        except RuntimeError as e:
            raise ConfigError(f"checkpoint {cfg.checkpoint} does not fit the model: "
                              f"{str(e).splitlines()[0]}") from e
    rebuild = (lambda: call_build(build, str(cfg.model))[0]) if build is not None else None
    setup = Setup(template=model, initial=copy.deepcopy(model.state_dict()), loss_fn=loss_fn,
                  cfg=cfg, device=device, precision=precision,
                  user=build is not None or folder is not None, rebuild=rebuild,
                  warmup=settings.warmup)
    result.steps = cfg.steps
    runs = _Runs(setup, collate, cfg, progress, total=3)

    with _threads() as result.threads:
        t0 = time.perf_counter()
        control_out = runs.train(control, "control", exempt_from=True)
        result.control = control_out.run
        timings["control"] = _since(t0)
        bad_rows = [i for i, p in enumerate(problems) if p]
        real_out: Outcome | None = None
        if not bad_rows:
            t0 = time.perf_counter()
            real_out = runs.train(rows, "real", watch=_WATCH_STEPS)
            result.real = real_out.run
            result.repeat = runs.train(rows, "repeat").run
            timings["real"] = _since(t0)
            _determinism(result, real_out.run, result.repeat, cfg.seed)
            _activations(result, real_out)
            _grad_warnings(result, real_out, cfg.grad_norm_warn)

        blocked = _blocked(problems, sample, bad_rows)
        result.verdict, result.reason = attribute(  # type: ignore[assignment]
            control_out.run, real_out.run if real_out else None, blocked)
        failing = control_out if control_out.failed else real_out
        if failing is not None and failing.failed:
            result.first_bad_module = failing.first_bad_module
            result.first_bad_param = failing.first_bad_param
        # The sample's data faults are listed whatever the verdict: a code fault found on
        # the control batch must not hide them (nor they it).
        keep: list[int] = []
        if bad_rows:
            keep = bad_rows[:1]  # each fails on its own: the first is the fewest
            _problem_findings(result, problems, sample, bad_rows)
        elif real_out is not None and real_out.failed and not control_out.failed:
            t0 = time.perf_counter()
            keep, alone = _localise(runs, setup, collate, rows, real_out)
            timings["localise"] = _since(t0)
            if alone:
                result.findings.append(SmokeFinding(
                    code="row_loss_nonfinite", severity="error",
                    detail=f"{len(alone)} sampled row(s) have a non-finite loss on their own",
                    rows=sorted(sample[i].row for i in alone)))
        if keep:
            _minimal(result, sample, keep)
            _replay_and_anomaly(result, runs, setup, rows, keep, spec, base, out_dir)
        if control_out.failed and result.anomaly is None:
            result.anomaly = _control_anomaly(runs, setup, control)
        if result.verdict == "pass" and "learning_inconclusive" in result.reason:
            result.findings.append(SmokeFinding(
                code="learning_inconclusive",
                detail="the loss barely falls on the control batch under these settings "
                       "(learning rate, warm-up): the smoke run is too short to judge whether "
                       "the sample's labels are learnable; raise smoke.steps or smoke.lr to "
                       "judge it"))
        if result.verdict == "pass" and result.flagged_in_sample:
            result.findings.append(SmokeFinding(
                code="flagged_rows_trained", severity="info",
                detail=f"{len(result.flagged_in_sample)} flagged row(s) in the sample trained "
                       "without a non-finite value", rows=result.flagged_in_sample[:20]))
    result.timings = {**timings, "total": _since(started)}
    return result


def replay(path: str | Path, *, model: str | None = None, device: str = "auto") -> SmokeResult:
    """Rerun a replay file: the minimal batch from the saved initial weights and seed.
    The verdict is ``data_fault`` when the failure reproduces, ``pass`` when it does not.

    A replay file names the model it was written with; when that is the user's code, it
    runs only if the caller names a model too (``model``, the CLI's ``--model``): a replay
    file from elsewhere must not import code on its own. The model given is the one used
    (a fixed version of the recorded one, say); a different spec is noted in the result."""
    data = replay_file.load(path)
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
        hf.parse(str(model)).resolved if is_hf_spec(model) else resolve_spec(str(model)))
    with user_code(spec) if spec else contextlib.nullcontext():
        return _replay(path, data, spec, device)


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
    if spec is None:
        model, loss_fn = build_builtin(task, data["spec"])
    elif is_hf_spec(spec):
        model, loss_fn = hf.rebuild(spec, task=task, saved=data["spec"], shrink=cfg.shrink,
                                    device=dev)
    else:  # a watch replay's build returns (model, step_fn, None)
        model, loss_fn, _ = call_build(load_build(spec), spec, watch=task == WATCH_TASK)
    step_fn = loss_fn if task == WATCH_TASK else None
    initial = replay_file.weights(data, path)
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
                  step_fn=step_fn)
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
    if name != recorded:
        result.findings.append(SmokeFinding(
            code="replay_model_differs", severity="warn",
            detail=f"the replay was written with {recorded!r}; this rerun uses {name!r}"))
    if out.failed:
        result.anomaly = anomaly(setup, batch)
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

    def batch(self, rows: list[dict[str, Any]]) -> Any:
        """``collate(rows)``, held to its contract: an ``(inputs, targets)`` pair."""
        made = self.collate(rows)
        if not isinstance(made, tuple | list) or len(made) != 2:
            got = f"a {len(made)}-item {type(made).__name__}" if isinstance(
                made, tuple | list) else type(made).__name__
            raise ConfigError(f"collate must return (inputs, targets), got {got}; {CONTRACT}")
        return tuple(made)

    def batches(self, rows: list[dict[str, Any]]) -> tuple[list[Any], list[list[int]]]:
        """Micro-batches of ``batch_size`` rows; without one, the sample split into
        ``grad_accum`` parts, so that each optimizer step still sees the whole sample."""
        size = self.cfg.batch_size or -(-len(rows) // self.cfg.grad_accum)
        index = [list(range(i, min(i + size, len(rows)))) for i in range(0, len(rows), size)]
        return [self.batch([rows[i] for i in idx]) for idx in index], index

    def train(self, rows: list[dict[str, Any]], name: str, *, watch: int = 0,
              exempt_from: bool = False) -> Outcome:
        """Train on ``rows``; ``exempt_from``: these rows are the control batch, whose
        non-finite inputs are there by design (e.g. -inf attention masks)."""
        try:
            batches, index = self.batches(rows)
            if exempt_from:
                self.setup.exempt = nonfinite_paths(batches[0])
            # Overfitting needs every row seen a few times: with minibatches, at least
            # three passes over the sample whatever smoke.steps says.
            steps = max(self.cfg.steps, -(-3 * len(batches) // self.cfg.grad_accum))
            out = train(self.setup, batches, steps=steps, watch=watch)
        except ConfigError:
            raise
        except Exception as e:
            out = Outcome(run=SmokeRun(failure=f"{type(e).__name__}: {first_line(e)}",
                                       first_bad_step=0))
            index = []
        if out.bad_rows and index:
            at = out.bad_batch if out.bad_batch is not None else out.run.first_bad_step or 0
            idx = index[at % len(index)]
            out.bad_rows = sorted({idx[j] for j in out.bad_rows if j < len(idx)})
        self.done += 1
        if self.progress is not None and name in ("control", "real", "repeat"):
            self.progress(self.done, self.total, "runs")
        return out

    def fails(self, rows: list[dict[str, Any]]) -> bool:
        return self.train(rows, "probe").failed


def _builtin(task: str, encoder: Encoder, rows: list[dict[str, Any]],
             control: list[dict[str, Any]], center: float,
             scale: float) -> tuple[Any, Any, Collate, dict[str, Any]]:
    encoded = encoder.encode(rows + control)
    encoder.size_for_builtin(encoded)
    spec: dict[str, Any] = {"classes": encoder.classes, "center": center, "scale": scale}
    vocab = None
    if encoder.uses_text:
        vocab = compact_vocab(encoded, encoder.vocab_size)
        spec["vocab"] = len(vocab) + 1
    widths = [len(e.features) for e in encoded if e.features is not None]
    if widths:
        spec["features"] = max(widths)
    model, loss_fn = build_builtin(task, spec)
    return model, loss_fn, Collate(encoder, vocab), spec


def _untrainable(task: str, encoder: Encoder, rows: list[dict[str, Any]], fields: Fields, *,
                 declared: list[str | int] | None) -> str | None:
    """Why the built-in model cannot train on these fields at all (a skip, not a fault)."""
    if task in ("classification", "regression") and not (encoder.uses_text or fields.features):
        return (f"nothing to learn {task} from: declare fields.features or fields.text "
                "beside the " + ("label" if task == "classification" else "target"))
    if task == "classification" and declared is None:
        labels = [r.get(fields.label or "") for r in rows]
        if any(isinstance(v, str) for v in labels) and not any(
            isinstance(v, int | float) and not isinstance(v, bool) for v in labels
        ):
            return ("class labels are strings but the classes are not declared: set "
                    "model.labels (or model.num_classes with integer labels)")
    return None


def _target_scale(encoder: Encoder, rows: list[dict[str, Any]]) -> tuple[float, float]:
    """The real targets' median and robust spread (1.4826 MAD, else the standard deviation,
    else 1), from the finite ones below 1e15 (a planted 1e30 must not set the scale)."""
    values = [e.target for e in encoder.encode(rows)
              if e.target is not None and math.isfinite(e.target) and abs(e.target) < 1e15]
    if not values:
        return 0.0, 1.0
    center = statistics.median(values)
    spread = 1.4826 * statistics.median(abs(v - center) for v in values)
    if spread <= 0 and len(values) > 1:
        spread = statistics.pstdev(values)
    return center, spread if spread > 0 else 1.0


def _broken_checkpoint(result: SmokeResult, cfg: SmokeConfig) -> None:
    assert result.checkpoint is not None
    bad = result.checkpoint["nonfinite"]
    result.verdict = "code_fault"
    result.reason = (f"checkpoint {cfg.checkpoint} has non-finite tensors: "
                     f"{', '.join(bad[:5])}{' …' if len(bad) > 5 else ''}")
    result.findings.append(SmokeFinding(code="checkpoint_nonfinite", severity="error",
                                        detail=result.reason))


def _blocked(problems: list[list[tuple[str, str]]], sample: list[SampleRow],
             bad_rows: list[int]) -> Blocked | None:
    if not bad_rows:
        return None
    code, detail = problems[bad_rows[0]][0]
    return Blocked(row=sample[bad_rows[0]].row, code=code, detail=detail, count=len(bad_rows))


def _problem_findings(result: SmokeResult, problems: list[list[tuple[str, str]]],
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


def _replay_and_anomaly(result: SmokeResult, runs: _Runs, setup: Setup,
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
        result.replay = _save_replay(out_dir, result, setup, setup.cfg, spec, base, batch,
                                     replayed.run.failure)


@contextlib.contextmanager
def _threads() -> Iterator[int]:
    """Torch threads for the runs: the cores this process may use and that are idle now, at
    most the physical cores and 4, never more than the caller set (``OMP_NUM_THREADS``,
    ``torch.set_num_threads``); the caller's setting is restored after. The tiny models gain
    nothing from more, and a thread that waits for a busy core stalls the others."""
    before = torch.get_num_threads()
    threads = max(1, min(compute_threads(), before))
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def _device_facts(device: torch.device) -> dict[str, str | None]:
    if device.type != "cuda":
        return {}
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(device),
            "cudnn": str(cudnn) if cudnn else None}


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
    if is_hf_spec(cfg.model):
        model = hf.parse(str(cfg.model), base=base).resolved
    else:
        model = resolve_spec(cfg.model, base=base) if cfg.model else str(result.model)
    return str(replay_file.save(
        out_dir / REPLAY_NAME, task=str(result.task), model=model, spec=spec,
        config=cfg.model_dump(), batch=batch, initial=setup.initial, rows=result.minimal_rows,
        ids=result.minimal_ids, files=result.minimal_files, failure=failure,
        exempt=sorted(setup.exempt)))


def _control_anomaly(runs: _Runs, setup: Setup, control: list[dict[str, Any]]) -> str | None:
    """A code fault's backward op, from the control batch itself (when it collates)."""
    try:
        batch = runs.batch(control)
    except Exception:  # collate itself is the fault: nothing to run backward on
        return None
    return anomaly(setup, batch)


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


def _grad_warnings(result: SmokeResult, out: Outcome, limit: float) -> None:
    if out.grad_warnings:
        step, norm = out.grad_warnings[0]
        result.findings.append(SmokeFinding(
            code="grad_norm_high", step=step,
            detail=f"gradient norm {norm:.4g} at step {step} is above smoke.grad_norm_warn "
                   f"({limit:g}); {len(out.grad_warnings)} step(s) in all"))


def _since(t0: float) -> float:
    return round(time.perf_counter() - t0, 4)
