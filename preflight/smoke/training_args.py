"""The smoke runs' training settings: the ``smoke:`` section, filled from a Hugging Face
``TrainingArguments`` file, with the warm-up scaled to the short run.

Precedence, lowest first (``LAYERS``): preflight's defaults (the fixed loop the smoke test
always ran), then the training-args file (a key it leaves out takes the TrainingArguments
default, since that is what the real run gets), then the keys set in the rules file's
``smoke:`` section or on the command line. The report says which layer each setting came
from and notes where an explicit key overrode the file.

The file is read without importing transformers (or torch): it is plain JSON or YAML, and
only the keys below mean something to a 30-step run; the others are listed as ignored.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from preflight.config import MAX_RULES_BYTES, SmokeConfig, yaml_load
from preflight.errors import ConfigError
from preflight.limits import INT64_MAX
from preflight.paths import find_beside
from preflight.report.model import SmokeSettings

LAYERS = ("default", "training-args", "rules")
# The settings the smoke runs take from the real run (the report lists these).
SETTINGS = ("optimizer", "lr", "weight_decay", "betas", "momentum", "scheduler",
            "warmup_steps", "warmup_ratio", "clip", "grad_accum", "precision", "seed")
# A warm-up longer than this share of the smoke steps leaves too few to judge learning.
MAX_WARMUP_SHARE = 0.5
# warmup_steps with the real run's length unknown: at most this share of the smoke steps.
UNKNOWN_LENGTH_SHARE = 0.1

# TrainingArguments' defaults (transformers 5) for the keys read, when a file leaves one out.
HF_DEFAULTS: dict[str, Any] = {
    "learning_rate": 5e-5, "warmup_steps": 0, "weight_decay": 0.0, "max_grad_norm": 1.0,
    "lr_scheduler_type": "linear", "gradient_accumulation_steps": 1, "fp16": False,
    "bf16": False, "optim": "adamw_torch_fused", "adam_beta1": 0.9, "adam_beta2": 0.999,
    "seed": 42, "max_steps": -1, "num_train_epochs": 3.0, "per_device_train_batch_size": 8,
}
_OPTIMIZERS = {"adamw_torch": "adamw", "adamw_hf": "adamw", "adamw_torch_fused": "adamw",
               "sgd": "sgd", "adafactor": "adafactor"}
# Other schedules run as their closest shape over 30 steps, with a note.
_SCHEDULERS = {"linear": "linear", "cosine": "cosine", "constant": "constant",
               "constant_with_warmup": "constant", "cosine_with_restarts": "cosine",
               "cosine_with_min_lr": "cosine", "cosine_warmup_with_min_lr": "cosine",
               "polynomial": "linear", "inverse_sqrt": "constant",
               "reduce_lr_on_plateau": "constant", "warmup_stable_decay": "constant",
               "greedy": "constant"}
_EXACT_SCHEDULERS = ("linear", "cosine", "constant", "constant_with_warmup")


@dataclass
class TrainingArgs:
    """What a TrainingArguments file says, in smoke terms."""

    path: str
    settings: dict[str, Any] = field(default_factory=dict)  # smoke key -> value
    real_steps: int | None = None  # max_steps when set
    epochs: float = 3.0
    batch_size: int = 8
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unsupported_optimizer: str | None = None


@dataclass(frozen=True)
class Resolved:
    """The smoke config the runs use (warm-up resolved to ``warmup`` steps of
    ``cfg.steps``) and what the report says about it."""

    cfg: SmokeConfig
    warmup: int
    settings: SmokeSettings


def resolve(cfg: SmokeConfig, *, base: Path | None = None,
            records: int | None = None) -> Resolved:
    """Apply ``cfg.training_args`` (a path, tried as given, then beside the rules file
    in ``base``) under the explicitly set ``smoke:`` keys, and scale the warm-up.
    ``records``: the corpus's record count, for a real-run length from epochs."""
    explicit = {k: getattr(cfg, k) for k in SETTINGS if k in cfg.model_fields_set}
    defaults = {k: getattr(SmokeConfig(), k) for k in SETTINGS}
    args = (read_training_args(find_beside(cfg.training_args, base, what="training-args file"))
            if cfg.training_args else None)
    layers = (defaults, args.settings if args else {}, explicit)
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for name, layer in zip(LAYERS, layers, strict=True):
        for key, value in layer.items():
            values[key], source[key] = value, name
    notes = list(args.notes) if args else []
    if args is not None:
        if args.unsupported_optimizer and "optimizer" not in explicit:
            raise ConfigError(
                f"{args.path}: optim {args.unsupported_optimizer!r} has no smoke-test "
                "equivalent; set smoke.optimizer to adamw, sgd or adafactor (the closest)")
        for key in sorted(set(explicit) & set(args.settings)):
            if explicit[key] != args.settings[key]:
                notes.append(f"smoke.{key} = {_show(explicit[key])} in the rules overrides "
                             f"{_show(args.settings[key])} from {args.path}")
    # A warm-up set in the rules replaces the file's whole (steps or ratio).
    for given, other in (("warmup_steps", "warmup_ratio"), ("warmup_ratio", "warmup_steps")):
        if given in explicit and other not in explicit:
            values.pop(other, None)
            source.pop(other, None)
    data = {**cfg.model_dump(exclude_unset=True), **values, "training_args": None}
    try:
        merged = SmokeConfig(**data)
    except ValidationError as e:  # a file's value outside the smoke test's range
        problems = "; ".join(f"smoke.{'.'.join(map(str, err['loc']))}: {err['msg']} "
                             f"(got {_show(err.get('input'))})" for err in e.errors())
        raise ConfigError(f"{args.path if args else 'smoke'}: {problems}") from e
    real = real_length(args, records, args.settings["grad_accum"]) if args else None
    warmup, how = scale_warmup(merged.warmup_steps, merged.warmup_ratio, steps=merged.steps,
                               real_steps=real)
    # The config the runs (and a replay) use: warm-up as resolved steps, nothing to re-read.
    final = merged.model_copy(update={"warmup_steps": warmup, "warmup_ratio": None})
    settings = SmokeSettings(
        optimizer=final.optimizer, lr=final.lr, weight_decay=final.weight_decay,
        betas=list(final.betas) if final.optimizer == "adamw" else None,
        momentum=final.momentum if final.optimizer == "sgd" else None,
        scheduler=final.scheduler, warmup_steps=warmup, warmup=how, clip=final.clip,
        grad_accum=final.grad_accum, precision=final.precision,
        training_args=args.path if args else None,
        source={k: source[k] for k in SETTINGS if k in source},
        ignored=args.ignored if args else [], notes=notes)
    return Resolved(cfg=final, warmup=warmup, settings=settings)


def scale_warmup(warmup_steps: int | None, warmup_ratio: float | None, *, steps: int,
                 real_steps: int | None) -> tuple[int, str | None]:
    """The warm-up steps of a ``steps``-step smoke run, and how they were scaled.

    ``warmup_steps`` (when above 0, it wins, as in transformers) becomes the same share of
    the smoke run as of the real run when its length is known, else at most 10% of the
    smoke steps; ``warmup_ratio`` applies to the smoke steps. Either is capped at half the
    run: a warm-up that outlasts it would make every healthy setup look unable to learn."""
    if warmup_steps:
        if real_steps:
            want = -(-steps * min(warmup_steps, real_steps) // real_steps)  # ceil, exactly
            how = (f"warmup_steps {warmup_steps:,} of {real_steps:,} real steps "
                   f"({warmup_steps / real_steps:.1%}) -> {want} of {steps}")
        else:
            want = min(warmup_steps, int(steps * UNKNOWN_LENGTH_SHARE))
            how = (f"warmup_steps {warmup_steps:,}, real run's length unknown -> at most "
                   f"{UNKNOWN_LENGTH_SHARE:.0%} of {steps} smoke steps: {want}")
    elif warmup_ratio:
        want = math.ceil(round(steps * warmup_ratio, 9))  # 30 x 0.1 is 3, not 4
        how = f"warmup_ratio {warmup_ratio:g} of {steps} smoke steps -> {want}"
    else:
        return 0, None
    cap = int(steps * MAX_WARMUP_SHARE)
    if want > cap:
        how += f", capped at {cap} (half the run, so learning can still be judged)"
        want = cap
    return want, how


def real_length(args: TrainingArgs, records: int | None, grad_accum: int) -> int | None:
    """The real run's optimizer steps: ``max_steps``, else epochs x the steps per epoch
    (``records`` rows in batches of ``per_device_train_batch_size``, ``grad_accum`` per
    step, on one device), as the Trainer counts them; None when neither is known."""
    if args.real_steps:
        return args.real_steps
    if not records:
        return None
    per_epoch = max(math.ceil(records / args.batch_size) // grad_accum, 1)
    total = args.epochs * per_epoch
    if not math.isfinite(total):  # 1e308 epochs: a run that never ends, not a crash
        return INT64_MAX
    return max(math.ceil(total), 1)


def _misspelt(path: Path, ignored: list[str]) -> list[str]:
    """Notes for ignored keys that look like a misspelt key the smoke test reads
    (``learning_rat``): the real run would refuse them; here the default applies."""
    read = [*HF_DEFAULTS, "warmup_ratio"]
    notes = []
    for key in ignored:
        if close := difflib.get_close_matches(key, read, n=1, cutoff=0.8):
            notes.append(f"{path}: {key!r} is not a TrainingArguments key; did you mean "
                         f"{close[0]!r}? ({close[0]} "
                         + ("takes its default" if close[0] in HF_DEFAULTS else "is unset")
                         + " here; TrainingArguments itself would refuse the file)")
    return notes


def read_training_args(path: Path) -> TrainingArgs:
    """Read a TrainingArguments JSON or YAML file (e.g. ``TrainingArguments.to_json_string``,
    or the YAML a training script parses into one). A key of the wrong type or range is a
    ``ConfigError`` naming the file and the key."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_RULES_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read training-args file {path}: {e.strerror}") from e
    if len(raw) > MAX_RULES_BYTES:
        raise ConfigError(f"{path}: a training-args file is at most "
                          f"{MAX_RULES_BYTES // 2**20} MiB; this one is larger")
    try:
        data = (json.loads(raw, object_pairs_hook=_unique_keys) if path.suffix == ".json"
                else yaml_load(raw))
    except (ValueError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}"
                          f": {getattr(e, 'problem', None) or e}") from e
    except RecursionError as e:  # json nests arrays by recursion: `[[[[...` deep
        raise ConfigError(f"{path}: not valid JSON: arrays or objects nest too deep; a "
                          "TrainingArguments file is one flat mapping") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of TrainingArguments keys, got "
                          f"{type(data).__name__}")
    given = {k: data[k] for k in HF_DEFAULTS if k in data}
    if "warmup_ratio" in data and data["warmup_ratio"] is not None:
        given["warmup_ratio"] = data["warmup_ratio"]
    a = {**HF_DEFAULTS, **given}
    out = TrainingArgs(path=str(path))
    out.ignored = sorted(str(k) for k in data if k not in HF_DEFAULTS and k != "warmup_ratio")
    out.notes += _misspelt(path, out.ignored)
    defaulted = sorted(k for k in HF_DEFAULTS if k not in given)
    if defaulted:
        out.notes.append(f"{path} leaves out {', '.join(defaulted)}: the TrainingArguments "
                         "defaults apply, as in the real run")
    s = out.settings
    s["lr"] = _number(path, "learning_rate", a, low=0.0, open_low=True)
    s["weight_decay"] = _number(path, "weight_decay", a, low=0.0)
    clip = _number(path, "max_grad_norm", a, low=0.0, nullable=True)
    s["clip"] = clip if clip else None  # 0 (or null) turns clipping off, as in transformers
    s["grad_accum"] = _integer(path, "gradient_accumulation_steps", a, low=1)
    s["betas"] = (_number(path, "adam_beta1", a, low=0.0, below=1.0),
                  _number(path, "adam_beta2", a, low=0.0, below=1.0))
    s["seed"] = _integer(path, "seed", a, low=0)
    fp16, bf16 = _boolean(path, "fp16", a), _boolean(path, "bf16", a)
    if fp16 and bf16:
        raise ConfigError(f"{path}: fp16 and bf16 are both true; the real run would refuse "
                          "that too: keep one")
    s["precision"] = "fp16" if fp16 else "bf16" if bf16 else "fp32"
    _optimizer(path, _string(path, "optim", a), out)
    scheduler = _string(path, "lr_scheduler_type", a)
    if scheduler not in _SCHEDULERS:
        raise ConfigError(f"{path}: lr_scheduler_type {scheduler!r} is not a transformers "
                          f"schedule; expected one of {', '.join(_SCHEDULERS)}")
    s["scheduler"] = _SCHEDULERS[scheduler]
    if scheduler not in _EXACT_SCHEDULERS:
        out.notes.append(f"lr_scheduler_type {scheduler!r} runs as {s['scheduler']!r} "
                         "(the closest shape over a short run)")
    _warmup(path, a, out, constant=scheduler == "constant")
    max_steps = _integer(path, "max_steps", a, low=-1)
    out.real_steps = max_steps if max_steps > 0 else None
    out.epochs = _number(path, "num_train_epochs", a, low=0.0, open_low=True)
    out.batch_size = _integer(path, "per_device_train_batch_size", a, low=1)
    return out


def _optimizer(path: Path, optim: str, out: TrainingArgs) -> None:
    if optim in _OPTIMIZERS:
        out.settings["optimizer"] = _OPTIMIZERS[optim]
    elif optim.startswith(("adamw", "paged_adamw", "stable_adamw")):
        out.settings["optimizer"] = "adamw"
        out.notes.append(f"optim {optim!r} runs as torch's AdamW (same update rule)")
    else:
        out.unsupported_optimizer = optim


def _warmup(path: Path, a: dict[str, Any], out: TrainingArgs, *, constant: bool) -> None:
    """transformers 5 reads a ``warmup_steps`` below 1 as a ratio; 4 had ``warmup_ratio``,
    which a ``warmup_steps`` above 0 overrides. ``constant`` has no warm-up at all."""
    steps = _number(path, "warmup_steps", a, low=0.0)
    ratio = (_number(path, "warmup_ratio", a, low=0.0, high=1.0)
             if "warmup_ratio" in a else 0.0)
    if 0 < steps < 1:
        steps, ratio = 0, steps
    elif steps != int(steps):
        raise ConfigError(f"{path}: warmup_steps must be a whole number of steps (or a ratio "
                          f"below 1), got {steps!r}")
    if constant and (steps or ratio):
        out.notes.append("lr_scheduler_type 'constant' has no warm-up in transformers: "
                         "the file's warm-up is not used")
        steps, ratio = 0, 0.0
    out.settings["warmup_steps"] = int(steps)
    out.settings["warmup_ratio"] = float(ratio)


def _number(path: Path, key: str, a: dict[str, Any], *, low: float | None = None,
            high: float | None = None, below: float | None = None, open_low: bool = False,
            nullable: bool = False) -> float:
    value = a[key]
    if value is None and nullable:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong(path, key, "a number", value)
    value = float(value)
    if not math.isfinite(value):
        raise _wrong(path, key, "a finite number", value)
    if low is not None and (value < low or (open_low and value == low)):
        raise _wrong(path, key, f"a number {'above' if open_low else 'at least'} {low:g}", value)
    if high is not None and value > high:
        raise _wrong(path, key, f"a number at most {high:g}", value)
    if below is not None and value >= below:
        raise _wrong(path, key, f"a number below {below:g}", value)
    return value


def _integer(path: Path, key: str, a: dict[str, Any], *, low: int) -> int:
    value = a[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(path, key, "an integer", value)
    if value < low:
        raise _wrong(path, key, f"an integer at least {low}", value)
    return value


def _boolean(path: Path, key: str, a: dict[str, Any]) -> bool:
    if not isinstance(a[key], bool):
        raise _wrong(path, key, "true or false", a[key])
    return a[key]


def _string(path: Path, key: str, a: dict[str, Any]) -> str:
    if not isinstance(a[key], str):
        raise _wrong(path, key, "a string", a[key])
    return a[key]


def _wrong(path: Path, key: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{path}: {key} must be {expected}, got {_show(value)} "
                       "(fix the training-args file, or override it with smoke.KEY)")


def _show(value: Any) -> str:
    text = repr(tuple(value) if isinstance(value, list) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys appear once (a repeated key is refused, as in rules files)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}: a key may appear once; keep the one "
                             "you mean")
        out[key] = value
    return out
