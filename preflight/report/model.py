"""The report model: everything a gate run found and decided, versioned.

Every output format is rendered from this model alone; renderers compute nothing new.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, SerializationInfo, model_serializer

SCHEMA_VERSION = "1.0"

Status = Literal["pass", "fail", "error"]


def utf8_safe(text: str) -> str:
    """``text`` as valid UTF-8: a POSIX file name that is not UTF-8 (Python holds its bytes
    as surrogates) shows them escaped, ``caf\\xe9.jsonl``, as in a terminal."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate that is no byte of a name
            return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _utf8(value: Any) -> Any:
    if isinstance(value, str):
        return value if value.isascii() else utf8_safe(value)
    if isinstance(value, dict):
        return {k: _utf8(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8(v) for v in value]
    return value


class _Utf8Json(BaseModel):
    """A model whose JSON never fails on a path that is not UTF-8 (pydantic raised
    ``PydanticSerializationError`` and report.json, fault.json and --json were lost)."""

    @model_serializer(mode="wrap")
    def _utf8_json(self, handler: Any, info: SerializationInfo) -> Any:
        data = handler(self)
        return _utf8(data) if info.mode_is_json() else data


class Example(BaseModel):
    """One example finding, with a snippet that is redacted unless ``--show-text``."""

    row: int | None = Field(None, description="None for a finding about the whole corpus.")
    file: str | None = None
    id: str | None = None
    code: str
    detail: str
    snippet: str | None = None


class RuleResult(BaseModel):
    """One rule's outcome."""

    id: str
    check: str
    severity: Literal["error", "warn", "info"]
    status: Status
    blocking: bool = Field(description="True when this rule's status fails the gate.")
    violations: int = Field(description="Records with at least one finding.")
    findings: int = Field(description="Findings (a record can have several).")
    fraction: float = Field(description="violations / records checked, at most 1 (a "
                            "corpus-level finding counts as a violation of its own).")
    threshold: dict[str, int | float | None] = Field(
        description="The effective max_count and max_fraction."
    )
    codes: dict[str, int] = Field(default_factory=dict, description="Findings per code.")
    examples: list[Example] = Field(default_factory=list)
    message: str | None = Field(None, description="Why the rule errored, when it did.")
    stats: dict[str, Any] = Field(default_factory=dict, description="Check-specific numbers.")
    fix: str | None = None
    notes: list[str] = Field(
        default_factory=list,
        description="How the verdict was reached where it matters: estimates, assumptions.")


class Skipped(BaseModel):
    """An entry of a folder of shards that was not read, and why."""

    path: str = Field(description="Relative to the folder.")
    reason: str


class SourceInfo(BaseModel):
    """What was read."""

    path: str
    format: str
    files: int
    records: int = Field(description="Readable records checked.")
    malformed: int = Field(description="Lines or elements that were not readable records.")
    total: int = Field(description="records + malformed: the denominator of every fraction.")
    limit: int | None = None
    fingerprint: dict[str, Any] = Field(default_factory=dict)
    skipped: list[Skipped] = Field(
        default_factory=list,
        description="Entries of a folder of shards that were not read (sub-folders, names "
                    "starting with '.' or '_', files of no known format), with the reason.")
    delimiter: str | None = Field(
        None, description="CSV: the delimiter used (per file when the files differ, "
                          "'name: d; ...').")
    delimiter_from: str | None = Field(
        None, description="CSV: how the delimiter was chosen: '--delimiter', '.tsv' or "
                          "'sniffed'.")
    warnings: list[str] = Field(default_factory=list,
                                description="About how the input was read (a delimiter that "
                                            "leaves the header one column).")

    def dialect(self) -> str:
        """`` (delimiter ';', sniffed)`` for a CSV input, else nothing."""
        if self.delimiter is None:
            return ""
        shown = "tab" if self.delimiter == "\t" else repr(self.delimiter)
        return f" (delimiter {shown}, {self.delimiter_from})"


class RulesInfo(BaseModel):
    """Which rules ran and where they came from."""

    path: str | None = None
    preset: str | None = None
    sha256: str | None = None
    fields: dict[str, Any] = Field(default_factory=dict)
    inferred: dict[str, str] = Field(default_factory=dict, description="Fields inferred, why.")
    records_in: str | None = Field(
        None, description="With no text found: the top-level field that holds a list of "
                          "objects (records wrapped in records), as inference found it.")
    notes: list[str] = Field(default_factory=list)
    not_checked: list[str] = Field(
        default_factory=list,
        description="What the rules could not check without facts about the model, and the "
                    "option that supplies them.")
    suggested_preset: str | None = Field(
        None, description="The shipped preset that fits the inferred fields.")
    suggested_options: list[str] | None = Field(
        default_factory=list,
        description="The --ROLE-field options the suggested preset needs to read the inferred "
                    "columns (its field names differ); null: a rules file is needed.")


class SmokeRun(BaseModel):
    """One training run of the smoke test: its curves and where it went wrong."""

    loss: list[float | None] = Field(default_factory=list, description="Loss per step.")
    grad_norm: list[float | None] = Field(
        default_factory=list, description="Gradient norm per step, before clipping."
    )
    scale: list[float] = Field(default_factory=list, description="AMP loss scale per step.")
    skipped_steps: int = Field(0, description="Steps the GradScaler skipped (inf gradients).")
    steps: int = 0
    first_bad_step: int | None = Field(None, description="First step with a non-finite value.")
    failure: str | None = Field(None, description="What went non-finite, or why it stopped.")
    learned: bool | None = Field(None, description="The loss fell by min_drop.")
    min_drop: float | None = Field(
        None, description="The fall asked for: min_loss_drop scaled by the run's mean rate "
                          "against the default 1e-2 (2% to all of it).")
    lr_mean: float | None = Field(None, description="The run's mean learning rate.")
    cut_short: bool = Field(
        False, description="Stopped by smoke.time_limit before its last step: loss, grad_norm "
                           "and scale hold the steps it completed (steps of them).")


class SmokeFinding(BaseModel):
    """Something the smoke test noticed (a warning unless the verdict says otherwise)."""

    code: str
    severity: Literal["error", "warn", "info"] = "warn"
    detail: str
    rows: list[int] = Field(default_factory=list)
    step: int | None = None


class SmokeSettings(BaseModel):
    """The training settings the smoke runs used (control and sample alike), and where
    each came from: ``default``, ``training-args`` (the file, or a TrainingArguments
    default for a key it leaves out) or ``rules`` (the rules file or the command line)."""

    optimizer: str = "adamw"
    lr: float = 1e-2
    weight_decay: float = 0.0
    betas: list[float] | None = Field(None, description="AdamW's betas (None for sgd).")
    momentum: float | None = Field(None, description="SGD's momentum (None otherwise).")
    scheduler: str = "constant"
    warmup_steps: int = Field(0, description="Warm-up steps in the smoke run.")
    warmup: str | None = Field(None, description="How the warm-up was scaled to the smoke run.")
    clip: float | None = Field(1.0, description="Gradient-norm clipping (None: off).")
    grad_accum: int = Field(1, description="Micro-batches per optimizer step.")
    precision: str = Field("auto", description="As asked; SmokeResult.precision is as run.")
    training_args: str | None = Field(None, description="The TrainingArguments file read.")
    source: dict[str, str] = Field(
        default_factory=dict, description="Per setting: default, training-args or rules."
    )
    ignored: list[str] = Field(
        default_factory=list, description="Keys of the training-args file the smoke test ignores."
    )
    notes: list[str] = Field(default_factory=list, description="Mappings and overrides.")


class GateLink(BaseModel):
    """What the gate said about one row of a batch that failed in training (the watch)."""

    row: int | None = None
    id: str | None = None
    flagged: bool = False
    rules: list[str] = Field(default_factory=list, description="Rules that flagged it.")
    codes: list[str] = Field(default_factory=list, description="Their finding codes.")
    allowed: list[str] = Field(
        default_factory=list, description="Rules that flagged it and passed anyway "
                                          "(within max_count / max_fraction).")
    detail: str = ""


class SmokeResult(_Utf8Json):
    """The smoke test: a seeded micro-training on a sample, and whose fault a failure is."""

    verdict: Literal["pass", "data_fault", "code_fault", "skipped"]
    reason: str
    task: str | None = None
    model: str | None = Field(None, description="built-in:TASK or the user's build spec.")
    device: str = "cpu"
    cuda: str | None = Field(None, description="CUDA version, when it trained on a GPU.")
    gpu: str | None = Field(None, description="The GPU's name, when it trained on one.")
    cudnn: str | None = Field(None, description="cuDNN's version, when it trained on a GPU.")
    precision: str = "fp32"
    threads: int | None = Field(
        None, description="torch CPU threads the runs used: the cores this process may use "
                          "and found idle, at most the physical cores and 4.")
    seed: int = 0
    steps: int = 0
    samples: int = Field(0, description="Rows in the sample.")
    sample_rows: list[int] = Field(default_factory=list, description="Rows sampled, sorted.")
    flagged_in_sample: list[int] = Field(
        default_factory=list, description="Sampled rows that a rule flagged."
    )
    minimal_rows: list[int] = Field(default_factory=list)
    minimal_ids: list[str] = Field(default_factory=list)
    minimal_files: list[str | None] = Field(default_factory=list)
    first_bad_module: str | None = None
    first_bad_param: str | None = None
    anomaly: str | None = Field(None, description="detect_anomaly's report on the replay.")
    control: SmokeRun | None = None
    real: SmokeRun | None = None
    repeat: SmokeRun | None = Field(None, description="The real run again, same seed.")
    activations: list[dict[str, Any]] = Field(
        default_factory=list, description="Per-module activation abs-max/abs-min, first steps."
    )
    findings: list[SmokeFinding] = Field(default_factory=list)
    checkpoint: dict[str, Any] | None = None
    settings: SmokeSettings | None = Field(None, description="The training settings used.")
    replay: str | None = Field(None, description="The replay file, when one was written.")
    timings: dict[str, float] = Field(default_factory=dict)
    # In flight (preflight.watch's fault.json): where in the real run, and which rows.
    step: int | None = Field(
        None, description="watch: the training step of the fault (0-based count of w.step "
                          "calls, or the framework's global step).")
    rank: int | None = Field(None, description="watch: the distributed rank that saw it.")
    history_start: int | None = Field(
        None, description="watch: the step of real.loss[0] (real holds the last N steps).")
    batch_rows: list[int] = Field(
        default_factory=list, description="watch: the failing batch's rows (with_ids).")
    batch_ids: list[str | None] = Field(
        default_factory=list, description="watch: the failing batch's ids (with_ids).")
    batch_positions: list[int] = Field(
        default_factory=list, description="watch: the minimal rows' positions in the batch.")
    gate: list[GateLink] = Field(
        default_factory=list, description="watch: what the gate said about the minimal rows.")

    @property
    def failed(self) -> bool:
        """True when the smoke test found a fault (which fails the gate)."""
        return self.verdict in ("data_fault", "code_fault")


class Report(_Utf8Json):
    """A gate run: the verdict, each rule's result, and how it was reached."""

    schema_version: str = SCHEMA_VERSION
    verdict: Literal["pass", "fail"]
    strict: bool = False
    reasons: list[str] = Field(default_factory=list)
    source: SourceInfo
    rules_file: RulesInfo
    rules: list[RuleResult]
    timings: dict[str, float] = Field(default_factory=dict, description="Seconds per stage.")
    environment: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, str] = Field(default_factory=dict, description="Files written.")
    fix: dict[str, Any] | None = Field(None, description="The fix manifest, when fix ran.")
    smoke: SmokeResult | None = Field(None, description="The smoke test, when it ran.")
    # findings.parquet of a run the API gave no ``out`` (a temporary file, kept while the
    # report lives)
    _findings_file: Path | None = PrivateAttr(None)

    @property
    def passed(self) -> bool:
        """True when the gate passed."""
        return self.verdict == "pass"

    def raise_for_status(self) -> Report:
        """Raise ``PreflightFailed`` when the gate failed; return self otherwise."""
        from preflight.errors import PreflightFailed

        if not self.passed:
            raise PreflightFailed(self)
        return self

    def findings(self) -> Any:
        """Every finding of the run as a polars DataFrame (``findings.parquet``'s columns:
        row, file, rule, check, code, detail, id, cluster, partner), not only the examples."""
        import polars as pl

        from preflight.errors import ConfigError

        path = self._findings_file or (Path(self.outputs["findings"])
                                       if "findings" in self.outputs else None)
        if path is None:
            raise ConfigError("this report has no findings file (a fix dry run, or a report "
                              "built by hand); run the gate with out=FOLDER")
        try:
            return pl.read_parquet(path)
        except (OSError, pl.exceptions.ComputeError) as e:
            raise ConfigError(f"cannot read the findings file {path} ({e}); it was moved or "
                              "deleted: run the gate again") from e

    def rule(self, rule_id: str) -> RuleResult:
        """The result of one rule by id; a ``KeyError`` naming the report's rule ids when
        there is none by that id (the rules that ran were inferred or renamed)."""
        for r in self.rules:
            if r.id == rule_id:
                return r
        ids = ", ".join(r.id for r in self.rules) or "none"
        raise KeyError(f"no rule {rule_id!r} in this report; its rules: {ids}")


def load_report(path: str | Path) -> Report:
    """Read a ``report.json``; a ``ConfigError`` when it is missing or not a report."""
    from preflight.errors import ConfigError

    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except FileNotFoundError as e:
        raise ConfigError(f"report not found: {p}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read report {p}: {e}") from e
    try:
        data = json.loads(text)
        if isinstance(data, dict) and "rules" not in data and "verdict" in data:
            return _fault_report(SmokeResult.model_validate(data), p)
        return Report.model_validate(data)
    except ValueError as e:
        first = str(e).splitlines()[0]
        raise ConfigError(f"{p} is not a preflight report.json or watch fault.json "
                          f"({first})") from e


def _fault_report(fault: SmokeResult, path: Path) -> Report:
    """A watch ``fault.json`` (a smoke section on its own) as a report with only that
    section, so every renderer shows it as it shows the smoke test."""
    where = f" at step {fault.step}" if fault.step is not None else ""
    return Report(verdict="fail" if fault.failed else "pass",
                  reasons=[f"training {fault.verdict}{where}: {fault.reason}"],
                  source=SourceInfo(path=str(path), format="watch", files=0, records=0,
                                    malformed=0, total=0),
                  rules_file=RulesInfo(), rules=[], smoke=fault)
