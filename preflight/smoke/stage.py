"""The smoke stage: sample, encode, train on a control batch and on the real sample,
attribute a failure to the data or the code, and localise a data fault to rows.

The steps live beside it: ``runs`` trains, ``diagnose`` reads the runs, ``verdict``
attributes, ``rerun`` replays a replay file, ``device`` picks where the runs go."""

from __future__ import annotations

import contextlib
import copy
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from preflight.config import Fields, RuleSet, SmokeConfig
from preflight.errors import ConfigError
from preflight.hf_folder import is_hf_spec
from preflight.paths import find_beside, rules_base
from preflight.report.model import SmokeFinding, SmokeResult
from preflight.sampling import SampleRow
from preflight.smoke import deadline, diagnose, hf, hf_load
from preflight.smoke.checkpoint import load_checkpoint, mismatch, scan
from preflight.smoke.control import control_rows, fix_feature_width
from preflight.smoke.device import device_facts, resolve_device, torch_threads
from preflight.smoke.diagnose import REPLAY_NAME
from preflight.smoke.encode import Collate, Encoder, compact_vocab, infer_task
from preflight.smoke.loop import Outcome, Setup, seed_everything
from preflight.smoke.models import build_builtin
from preflight.smoke.optim import check_optimizer
from preflight.smoke.runs import Progress, Runs
from preflight.smoke.training_args import Resolved
from preflight.smoke.training_args import resolve as resolve_settings
from preflight.smoke.user import call_build, load_build, user_code
from preflight.smoke.verdict import attribute
from preflight.threads import left_by_user
from preflight.tokenizer.counter import TokenCounter

_WATCH_STEPS = 3


@dataclass
class _Model:
    """What the runs train: the model, its loss and collate, the control batch, and the
    encoder's problems per sampled row (rows that cannot be trained on at all)."""

    model: Any
    loss_fn: Any
    collate: Any
    spec: dict[str, Any]
    control: list[dict[str, Any]]
    problems: list[list[tuple[str, str]]]


def check_setup(rules: RuleSet) -> SmokeConfig:
    """Fail fast, before the gate reads any data: the device, the training settings (and
    their training-args file), the user's model module and the checkpoint path must be
    usable (each a ``ConfigError`` with what to do). Returns the smoke config with the
    training settings applied (its seed draws the sample)."""
    try:
        return deadline.call_within(rules.smoke.time_limit, lambda: _check_setup(rules),
                                    before_data=True)
    except deadline.Expired as e:
        model = f" ({rules.smoke.model})" if rules.smoke.model else ""
        raise ConfigError(
            f"the smoke stage ran past smoke.time_limit ({e.seconds:g} s) while {e.label}"
            f"{model}, before the gate read any data: look for a hang in {e.look_in}, or "
            f"raise the limit ({deadline.RAISE_LIMIT})") from None


def _check_setup(rules: RuleSet) -> SmokeConfig:
    base = rules_base(rules)
    cfg = resolve_settings(rules.smoke, base=base).cfg
    check_optimizer(cfg)
    device, _ = resolve_device(cfg)
    if is_hf_spec(cfg.model):
        deadline.phase("folder")
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
    if out_dir is not None:  # the replay goes there even if the user's code changes the cwd
        out_dir = out_dir.absolute()
    with user_code(model) if model else contextlib.nullcontext():
        result = _run_smoke(sample, rules, fields=fields, tokenizer=tokenizer,
                            out_dir=out_dir, progress=progress, sampled_in=sampled_in,
                            records=records)
    if model and (left := left_by_user()):
        names = ", ".join(sorted(t.name for t in left)[:5])
        result.findings.append(SmokeFinding(
            code="user_threads_running",
            detail=f"your code left {len(left)} non-daemon thread(s) running ({names}): a "
                   "training script would wait for them at exit; preflight does not"))
    return result


def _run_smoke(sample: list[SampleRow], rules: RuleSet, *, fields: Fields,
               tokenizer: TokenCounter | None, out_dir: Path | None,
               progress: Progress | None, sampled_in: float,
               records: int | None) -> SmokeResult:
    started = time.perf_counter()
    base = None if (found := rules_base(rules)) is None else found.absolute()
    settings = resolve_settings(rules.smoke, base=base, records=records)
    cfg = settings.cfg
    task = infer_task(rules.task, fields)
    device, precision = resolve_device(cfg)
    result = SmokeResult(verdict="skipped", reason="", task=task, seed=cfg.seed,
                         device=str(device), precision=precision, settings=settings.settings,
                         **device_facts(device))
    if cfg.precision in ("fp16", "bf16") and precision != cfg.precision:
        settings.settings.notes.append(
            f"precision {cfg.precision} was asked for, but the runs are on {device.type}: "
            f"{precision} (autocast and the GradScaler are not exercised; run on a CUDA "
            "machine to test them)")
    result.samples = len(sample)
    result.sample_rows = sorted(s.row for s in sample)
    result.flagged_in_sample = sorted(s.row for s in sample if s.flagged)
    if out_dir is not None:  # a replay from an earlier run must not outlive it
        # (a folder that refuses the unlink refuses the report too, which says so clearly)
        with contextlib.suppress(OSError):
            (out_dir / REPLAY_NAME).unlink(missing_ok=True)
    if task is None:
        result.reason = ("no field to train on: declare fields.text, messages, label or "
                         "target (or task:) in the rules file")
        return result
    timings: dict[str, float] = {"sample": round(sampled_in, 4)}
    try:
        deadline.call_within(cfg.time_limit, lambda: _train_sample(
            result, sample, rules, settings, task=task, fields=fields, tokenizer=tokenizer,
            device=device, base=base, out_dir=out_dir, progress=progress, timings=timings,
            started=started))
    except deadline.Expired as e:
        diagnose.timed_out(result, e, user=cfg.model is not None)
        result.timings = {**timings, "total": _since(started)}
    return result


def _train_sample(result: SmokeResult, sample: list[SampleRow], rules: RuleSet,
                  settings: Resolved, *, task: str, fields: Fields,
                  tokenizer: TokenCounter | None, device: torch.device, base: Path | None,
                  out_dir: Path | None, progress: Progress | None,
                  timings: dict[str, float], started: float) -> None:
    """Load the model, encode the sample, train and judge, into ``result`` (under the
    time limit: everything here may run the user's code)."""
    cfg = settings.cfg
    if is_hf_spec(cfg.model):
        deadline.phase("folder")
    folder = hf_load.parse(cfg.model, base=base) if is_hf_spec(cfg.model) else None
    build = load_build(cfg.model, base=base) if cfg.model and folder is None else None
    deadline.phase("checkpoint")
    state = (load_checkpoint(find_beside(cfg.checkpoint, base, what="checkpoint"))
             if cfg.checkpoint else None)
    if len(sample) < 2:
        result.reason = f"too few readable records to train on ({len(sample)})"
        return
    rows = [s.record for s in sample]

    t0 = time.perf_counter()
    made = _prepare(result, rules, cfg, task=task, fields=fields, tokenizer=tokenizer,
                    rows=rows, folder=folder, build=build, device=device)
    if made is None:
        return
    timings["encode"] = _since(t0)

    if state is not None:
        result.checkpoint = {"path": str(cfg.checkpoint), **scan(state)}
        if result.checkpoint["nonfinite"]:
            diagnose.broken_checkpoint(result, cfg)
            result.timings = {**timings, "total": _since(started)}
            return
        try:
            (made.model.model if folder is not None else made.model).load_state_dict(state)
        except RuntimeError as e:
            raise ConfigError(f"checkpoint {cfg.checkpoint} does not fit the model: "
                              f"{mismatch(e)}") from e
    rebuild = (lambda: call_build(build, str(cfg.model))[0]) if build is not None else None
    setup = Setup(template=made.model, initial=copy.deepcopy(made.model.state_dict()),
                  loss_fn=made.loss_fn, cfg=cfg, device=device, precision=result.precision,
                  user=build is not None or folder is not None, rebuild=rebuild,
                  warmup=settings.warmup)
    result.steps = cfg.steps
    runs = Runs(setup, made.collate, cfg, progress, total=3)
    with torch_threads() as result.threads:
        _train_and_judge(result, runs, made, sample, rows, base=base, out_dir=out_dir,
                         timings=timings)
    result.timings = {**timings, "total": _since(started)}


def _prepare(result: SmokeResult, rules: RuleSet, cfg: SmokeConfig, *, task: str,
             fields: Fields, tokenizer: TokenCounter | None, rows: list[dict[str, Any]],
             folder: hf_load.Folder | None, build: Any, device: torch.device) -> _Model | None:
    """Encode the sample and make what the runs train: the built-in model, the user's
    ``build()`` or a model folder's, and the control batch. None, with ``result.reason``
    set, when the built-in model has nothing it can train on (a skip, not a fault)."""
    if folder is not None:  # a transformers model trains on text, with its own tokenizer
        fields = fields.model_copy(update={"features": None})
        if not (fields.text is not None or fields.messages or fields.input_ids):
            raise ConfigError(f"--model {cfg.model!r}: a transformers model trains on text; "
                              "declare fields.text or fields.messages in the rules file")
        if tokenizer is None and not fields.input_ids:
            tokenizer = hf.folder_tokenizer(folder)
    deadline.phase("encode")
    encoder = Encoder(task, fields, rules.model, tokenizer, max_length=cfg.max_length)
    seed_everything(cfg.seed)
    model, loss_fn, collate = call_build(build, str(cfg.model)) if build else (None, None, None)
    deadline.phase("encode")
    builtin_collate = collate is None
    if builtin_collate:
        skip = (_untrainable(task, encoder, rows, fields, declared=rules.model.labels)
                or fix_feature_width(task, encoder, rows, fields))
        if skip:
            result.reason = skip
            return None
        if task == "classification":
            encoder.set_classes(encoder.encode(rows))
    center, scale = _target_scale(encoder, rows) if task == "regression" else (0.0, 1.0)
    spec: dict[str, Any] = {}
    if folder is not None:
        deadline.phase("folder")
        made = hf.build(folder, task=task, encoder=encoder, shrink=cfg.shrink, device=device,
                        rows=cfg.batch_size or len(rows), center=center, scale=scale)
        model, loss_fn, collate, spec = made.model, made.loss_fn, made.collate, made.spec
        result.findings += [SmokeFinding(code=c, severity="info", detail=d)
                            for c, d in made.notes]
    deadline.phase("encode")
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
    return _Model(model=model, loss_fn=loss_fn, collate=collate, spec=spec, control=control,
                  problems=problems)


def _train_and_judge(result: SmokeResult, runs: Runs, made: _Model, sample: list[SampleRow],
                     rows: list[dict[str, Any]], *, base: Path | None, out_dir: Path | None,
                     timings: dict[str, float]) -> None:
    """The control run, then (when every sampled row encodes) the real run and its repeat;
    the verdict; the findings; and for a data fault the minimal rows and their replay."""
    setup, cfg, problems = runs.setup, runs.cfg, made.problems
    t0 = time.perf_counter()
    control_out = runs.train(made.control, "control", exempt_from=True)
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
        diagnose.determinism(result, real_out.run, result.repeat, cfg.seed)
        diagnose.activations(result, real_out)
        diagnose.grad_warnings(result, real_out, cfg.grad_norm_warn)

    blocked = diagnose.blocked(problems, sample, bad_rows)
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
        diagnose.problem_findings(result, problems, sample, bad_rows)
    elif real_out is not None and real_out.failed and not control_out.failed:
        t0 = time.perf_counter()
        keep, alone = diagnose.localise(runs, setup, runs.collate, rows, real_out)
        timings["localise"] = _since(t0)
        if alone:
            result.findings.append(SmokeFinding(
                code="row_loss_nonfinite", severity="error",
                detail=f"{len(alone)} sampled row(s) have a non-finite loss on their own",
                rows=sorted(sample[i].row for i in alone)))
    if keep:
        diagnose.minimal(result, sample, keep)
        diagnose.replay_and_anomaly(result, runs, setup, rows, keep, made.spec, base, out_dir)
    if control_out.failed and result.anomaly is None:
        result.anomaly = diagnose.control_anomaly(runs, setup, made.control)
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
    if encoder.feature_width is not None:
        spec["features"] = encoder.feature_width
    elif widths:
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
    if task == "lm" and not fields.token_labels and all(
        len(e.ids or ()) < 2 for e in encoder.encode(rows)
    ):  # a loss of 0 on 0 tokens would "learn" (0 -> 0) and pass
        return ("nothing to learn: no sampled row has two tokens (every text is empty or a "
                "single token), so there is no next token to predict")
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


def _since(t0: float) -> float:
    return round(time.perf_counter() - t0, 4)
