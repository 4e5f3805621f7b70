"""The pydantic models of a rules file: ``RuleSet`` and its sections (``Fields``,
``ModelFacts``, ``SmokeConfig``) and each ``Rule``, with every key's type, range and
description (``preflight rules list`` and the schema read them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
)

from preflight.config.messages import _kind
from preflight.limits import INT64_MAX, MAX_CLASSES, MAX_TOKENS, MAX_VOCAB

Severity = Literal["error", "warn", "info"]
Task = Literal["lm", "chat", "classification", "regression"]
FixAction = Literal[
    "repair", "normalize", "strip", "truncate", "drop", "keep_first", "quarantine", "none"
]
RULE_KEYS = ("id", "check", "severity", "max_count", "max_fraction", "fix", "enabled")
# An Adam beta: a decay rate in [0, 1).
Beta = Annotated[StrictFloat, Field(ge=0, lt=1)]
# smoke.time_limit: 30 minutes, 12x the slowest normal CPU smoke stage measured (an
# hf-config: folder on a loaded 2-core machine, 147 s; README "Time limit"); a week at most.
SMOKE_TIME_LIMIT = 1800.0
MAX_SMOKE_TIME_LIMIT = 7 * 24 * 3600


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Fields(_Strict):
    """Which record fields hold what; ``None`` means "infer from the data"."""

    text: str | list[str] | None = Field(None, description="Field(s) holding text.")
    messages: str | None = Field(None, description="Field holding a chat: [{role, content}].")
    id: str | None = Field(None, description="Field holding the record's id.")
    label: str | None = Field(None, description="Class label field.")
    target: str | None = Field(None, description="Regression target field.")
    features: str | list[str] | None = Field(None, description="Feature column(s).")
    numeric: str | list[str] | None = Field(None, description="Numeric fields to check.")
    input_ids: str | None = Field(None, description="Field holding token ids (a list).")
    token_labels: str | None = Field(
        None, description="Field holding per-token labels (a list; -100 is ignored)."
    )

    @field_validator("*")
    @classmethod
    def _names_a_column(cls, value: Any) -> Any:
        # `text: []` names no column, and `[text, text]` one column twice: each was read as
        # "declared", then checked nothing (or the same column twice). A column named ''
        # is real (a CSV header left blank), so '' is a name.
        names = [value] if isinstance(value, str) else value or []
        if value is not None and not names:
            raise ValueError("name a column (or a list of columns); leave the key out to "
                             "infer it")
        twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if twice is not None:
            raise ValueError(f"lists {twice!r} twice; name each column once")
        return value

    def text_fields(self) -> list[str]:
        """The declared text fields as a list (empty when none)."""
        return _as_list(self.text)

    def declared(self) -> dict[str, list[str]]:
        """Every declared role with its field names, e.g. ``{"text": ["text"], "id": ["id"]}``."""
        return {
            role: _as_list(value)
            for role, value in self.model_dump().items()
            if value is not None
        }

    def is_empty(self) -> bool:
        """True when no field is declared (the pipeline then infers them)."""
        return not self.declared()


class ModelFacts(_Strict):
    """Facts about the model the corpus is for."""

    context_window: StrictInt | None = Field(
        None, gt=0, le=MAX_TOKENS, description=f"Context length in tokens (1 to {MAX_TOKENS:,})."
    )
    tokenizer: str | None = Field(None, description="tokenizer.json path, tokenizer folder, "
                                   "Hugging Face name in the local cache, or tiktoken:NAME.")

    @field_validator("tokenizer")
    @classmethod
    def _names_a_tokenizer(cls, value: str | None) -> str | None:
        # An empty name was read as "no tokenizer": the estimate, silently.
        if value is not None and not value.strip():
            raise ValueError("name a tokenizer (a tokenizer.json path, a tokenizer folder, a "
                             "Hugging Face name or tiktoken:NAME); leave the key out to "
                             "estimate token counts")
        return value
    num_classes: StrictInt | None = Field(
        None, gt=0, le=MAX_CLASSES, description=f"Number of classes (1 to {MAX_CLASSES:,})."
    )
    labels: list[str | StrictInt] | None = Field(
        None, max_length=MAX_CLASSES, description="The declared label set."
    )
    vocab_size: StrictInt | None = Field(
        None, gt=0, le=MAX_VOCAB, description=f"Vocabulary size for token ids (1 to {MAX_VOCAB:,})."
    )


class SmokeConfig(_Strict):
    """The smoke test: a short, seeded training run on a sample of the corpus."""

    enabled: StrictBool = Field(True, description="Run the smoke stage in `preflight check`.")
    samples: StrictInt = Field(
        100, ge=2, le=10_000, description="Rows in the sample, flagged rows first (2 to 10,000)."
    )
    steps: StrictInt = Field(
        30, ge=4, le=10_000, description="Training steps per run (4 to 10,000)."
    )
    seed: StrictInt = Field(
        0, ge=0, le=INT64_MAX,
        description="Seed for the sample, weights and data order (0 to 2^63-1).",
    )
    lr: StrictFloat = Field(
        1e-2, gt=0, allow_inf_nan=False,
        description="Peak learning rate (positive, finite; a diverging one is a fair test).",
    )
    batch_size: StrictInt | None = Field(
        None, ge=1, le=10_000,
        description="Rows per step (1 to 10,000); default: the whole sample (overfit it).",
    )
    max_length: StrictInt = Field(
        64, ge=2, le=65_536, description="Tokens per row the tiny models see (2 to 65,536)."
    )
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="On CUDA: auto = bf16 where supported, else fp16. CPU: fp32."
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="Where to train.")
    clip: StrictFloat | None = Field(
        1.0, gt=0, allow_inf_nan=False, description="Gradient-norm clipping (None: off)."
    )
    grad_norm_warn: StrictFloat = Field(
        100.0, gt=0, allow_inf_nan=False, description="Warn above this gradient norm."
    )
    min_loss_drop: StrictFloat = Field(
        0.1, ge=0, lt=1,
        description="Fraction the loss must fall when overfitting the sample (0 to below 1).",
    )
    model: str | None = Field(
        None, description="Your model: hf:DIR or hf-config:DIR (a transformers folder), "
        "package.module:build or path/to/file.py:build."
    )
    checkpoint: str | None = Field(
        None, description="Weights to start from: .safetensors or a torch state dict."
    )
    # The real run's training settings (README: "Your training settings"). The defaults
    # are the fixed loop the smoke test always ran: AdamW, lr 1e-2, no decay, constant.
    optimizer: Literal["adamw", "sgd", "adafactor"] = Field(
        "adamw", description="adamw, sgd, or adafactor (needs the [hf] extra)."
    )
    weight_decay: StrictFloat = Field(
        0.0, ge=0, le=10, allow_inf_nan=False,
        description="Weight decay (0 to 10); not on biases and norm scales, as in transformers.",
    )
    betas: tuple[Beta, Beta] = Field(
        (0.9, 0.999), description="AdamW's (beta1, beta2), each 0 to below 1."
    )
    momentum: StrictFloat = Field(
        0.0, ge=0, lt=1, description="SGD momentum (0 to below 1)."
    )
    scheduler: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="Learning-rate schedule over the smoke steps, after warm-up."
    )
    warmup_steps: StrictInt | None = Field(
        None, ge=0, le=INT64_MAX,
        description="The real run's warm-up steps, scaled to the smoke run (wins over the "
                    "ratio when above 0).",
    )
    warmup_ratio: StrictFloat | None = Field(
        None, ge=0, le=1, description="Warm-up as a fraction of the smoke steps (0 to 1)."
    )
    grad_accum: StrictInt = Field(
        1, ge=1, le=1024,
        description="Micro-batches per optimizer step (1 to 1,024); steps count optimizer steps.",
    )
    training_args: str | None = Field(
        None, description="A transformers TrainingArguments JSON/YAML file to read the "
                          "settings above from (explicit smoke: keys win)."
    )
    shrink: StrictBool = Field(
        True, description="hf-config: train the same architecture at 2 layers and a small "
        "width (false: the real size)."
    )
    time_limit: StrictFloat = Field(
        SMOKE_TIME_LIMIT, ge=1, le=MAX_SMOKE_TIME_LIMIT, allow_inf_nan=False,
        description=f"Seconds the smoke stage may take (1 to {MAX_SMOKE_TIME_LIMIT:,}, a "
                    "week); past it the stage stops and the gate fails naming the step and "
                    "phase it was in.",
    )


    @field_validator("model", "checkpoint", "training_args")
    @classmethod
    def _names_something(cls, value: str | None, info: ValidationInfo) -> str | None:
        # An empty value (`model: ${MODEL}` unset) read as "none": the built-in model was
        # tested in place of the user's, and its PASS taken for theirs.
        if value is not None and not value.strip():
            what = {"model": "a model (hf:DIR, hf-config:DIR, package.module:build or "
                             "file.py:build)",
                    "checkpoint": "a checkpoint file",
                    "training_args": "a TrainingArguments file"}[str(info.field_name)]
            raise ValueError(f"is empty (an unset variable?); name {what}, or leave the key "
                             "out")
        return value

class Rule(_Strict):
    """One rule: a check, how bad a violation is, and how many violations are allowed."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$", description="Unique rule id.")
    check: str = Field(description="The check this rule runs (see `preflight rules list`).")
    severity: Severity = "error"
    max_count: StrictInt | None = Field(
        None, ge=0, le=INT64_MAX, description="Violations allowed (default 0)."
    )
    max_fraction: StrictFloat | None = Field(
        None, ge=0, le=1, allow_inf_nan=False,
        description="Fraction of records allowed to violate (0 to 1).",
    )
    fix: FixAction | None = Field(None, description="What `preflight fix` does with violations.")
    enabled: StrictBool = Field(True, description="false: the rule is listed but not run.")
    params: dict[str, Any] = Field(default_factory=dict, description="The check's parameters.")

    def allowed(self) -> tuple[int | None, float | None]:
        """The effective thresholds: ``max_count`` defaults to 0 unless a fraction is given."""
        if self.max_count is None and self.max_fraction is None:
            return 0, None
        return self.max_count, self.max_fraction


class RuleSet(_Strict):
    """A validated rules file."""

    version: Literal[1] = 1
    task: Task | None = None
    fields: Fields = Fields()
    model: ModelFacts = ModelFacts()
    eval: str | None = Field(None, description="Eval file for the `overlap` check.")
    smoke: SmokeConfig = SmokeConfig()
    rules: list[Rule]
    path: str | None = Field(None, exclude=True)
    sha256: str | None = Field(None, exclude=True)
    preset: str | None = Field(None, exclude=True)
    # Fields named on the command line (role -> the option that named it) over rules that
    # declared none: the other roles are still inferred, and a named column the data lacks
    # is exit 2 listing the columns found.
    given_fields: dict[str, str] = Field(default_factory=dict, exclude=True)

    @field_validator("fields", "model", "smoke", mode="before")
    @classmethod
    def _empty_section_is_none(cls, value: Any) -> Any:
        # `model:` with every line under it commented out (as `preflight init` writes it)
        # reads as null: the same as writing no section.
        return {} if value is None else value

    @field_validator("version", mode="before")
    @classmethod
    def _version_is_the_integer_1(cls, value: Any) -> Any:
        # Literal[1] alone takes True and 1.0 (both == 1); a format version is an integer.
        if type(value) is not int:
            raise ValueError(f"write `version: 1`, the integer, not {_kind(value)}")
        return value


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
