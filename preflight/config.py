"""Rules files: YAML loaded into pydantic models, with errors that name the file and key path.

A rules file has this shape::

    version: 1
    fields: {text: text, id: id}
    model: {context_window: 4096}
    rules:
      - {id: hidden-chars, check: invisible_unicode, severity: error, fix: strip}

Each rule takes the common keys below plus the parameters of its check (validated against
that check's ``Params`` model from the registry), so a typo anywhere is a ``ConfigError``.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import reprlib
import select
import stat
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
)

from preflight.checks import registry
from preflight.errors import ConfigError
from preflight.limits import INT64_MAX, MAX_CLASSES, MAX_TOKENS, MAX_VOCAB

Severity = Literal["error", "warn", "info"]
Task = Literal["lm", "chat", "classification", "regression"]
FixAction = Literal[
    "repair", "normalize", "strip", "truncate", "drop", "keep_first", "quarantine", "none"
]
RULE_KEYS = ("id", "check", "severity", "max_count", "max_fraction", "fix", "enabled")
DEFAULT_PRESET = "default"
# The sections `--set SECTION.KEY=VALUE` reaches besides rules (they win over a rule that
# has one of these names as its id).
_SET_SECTIONS = ("smoke", "fields", "model")
# RuleSet keys the loader sets (where the rules came from, fields named on the command line).
_INTERNAL = ("path", "sha256", "preset", "given_fields")
# A rules file is a few KB holding a few hundred values. Anchors and aliases may share
# settings, but what they expand to is counted while the file is parsed, so a "billion
# laughs" file fails in milliseconds instead of expanding to billions of values.
MAX_RULES_BYTES = 10 * 2**20
MAX_YAML_VALUES = 100_000
# A rules file may come through a pipe (`--rules <(envsubst < r.yaml)`), but a FIFO with no
# writer would block forever: give up when nothing arrives for this long.
PIPE_WAIT_S = 5.0
# An Adam beta: a decay rate in [0, 1).
Beta = Annotated[StrictFloat, Field(ge=0, lt=1)]
# A wrong value in an error message: its start is enough (bounded whatever its size).
_shown = reprlib.Repr()
_shown.maxlevel, _shown.maxlist, _shown.maxdict, _shown.maxstring = 3, 8, 8, 80
_shown.maxlong, _shown.maxother = 40, 80


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

    enabled: bool = Field(True, description="Run the smoke stage in `preflight check`.")
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
    shrink: bool = Field(
        True, description="hf-config: train the same architecture at 2 layers and a small "
        "width (false: the real size)."
    )


class Rule(_Strict):
    """One rule: a check, how bad a violation is, and how many violations are allowed."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$", description="Unique rule id.")
    check: str = Field(description="The check this rule runs (see `preflight rules list`).")
    severity: Severity = "error"
    max_count: StrictInt | None = Field(
        None, ge=0, le=INT64_MAX, description="Violations allowed (default 0)."
    )
    max_fraction: StrictFloat | None = Field(
        None, ge=0, le=1, description="Fraction of records allowed to violate (0 to 1)."
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


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts the values each node expands to (an alias counts
    as everything it stands for) and stops past ``MAX_YAML_VALUES``, or at an alias that
    refers to a value containing it; and that refuses a key written twice in one mapping
    (PyYAML keeps the last, so `max_count: 0` then `max_count: 100` would open the gate).
    A merge (``<<: *defaults``) may still be overridden by the mapping's own keys."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._sizes: dict[yaml.Node, int] = {}  # nodes hash by identity

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None and target not in self._sizes:
                raise yaml.composer.ComposerError(
                    None, None, f"alias *{event.anchor} refers to a value that contains it",
                    event.start_mark)
        node = super().compose_node(parent, index)
        if node not in self._sizes:
            children: list[yaml.Node] = []
            if isinstance(node, yaml.SequenceNode):
                children = node.value
            elif isinstance(node, yaml.MappingNode):
                children = [part for pair in node.value for part in pair]
                self._refuse_duplicate_keys(node)
            size = 1 + sum(self._sizes[child] for child in children)
            if size > MAX_YAML_VALUES:
                raise yaml.composer.ComposerError(
                    None, None, f"anchors and aliases here expand to more than "
                    f"{MAX_YAML_VALUES:,} values (aliases nested inside aliases); a rules file "
                    "needs far fewer: write the values out", event.start_mark)
            self._sizes[node] = size
        return node

    def _refuse_duplicate_keys(self, node: yaml.MappingNode) -> None:
        # Checked as the mapping is composed, before any merge is flattened into it.
        first: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                key_node, yaml.ScalarNode
            ):
                continue
            if key_node.tag != "tag:yaml.org,2002:str":
                raise yaml.composer.ComposerError(
                    None, None, f"the key {key_node.value!r} is not a string; every key in a "
                    "rules file is a name (quote it if you mean the text)", key_node.start_mark)
            key = (key_node.tag, self.construct_scalar(key_node))
            if key in first:
                line = first[key].start_mark.line + 1
                raise yaml.composer.ComposerError(
                    None, None, f"duplicate key {key_node.value!r} (first at line {line}); a "
                    "key may appear once in a mapping: keep the one you mean",
                    key_node.start_mark)
            first[key] = key_node


# YAML 1.1 reads `1e-4` (no dot) as a string; read it as the number everyone means (YAML
# 1.2 does), so `lr: 3e-4` is a float and `n: 1e9` a float that an integer field refuses.
_BoundedLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def yaml_load(text: str | bytes) -> Any:
    """Parse YAML safely (plain data only), with alias expansion bounded: a
    ``yaml.YAMLError`` when the text is not valid or expands too far."""
    return yaml.load(text, Loader=_BoundedLoader)


def presets_dir() -> Path:
    """Where the shipped presets live: inside the wheel, or ``rules/`` in a source checkout."""
    packaged = Path(str(resources.files("preflight"))) / "rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "rules"


def preset_names() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in presets_dir().glob("*.yaml"))


def load_rules(
    source: str | Path | dict[str, Any] | None = None, *, preset: str | None = None
) -> RuleSet:
    """Load and validate a rules file, a dict of the same shape, or a shipped preset.

    A ``.toml`` file (``pyproject.toml``) gives the rules in its ``[tool.preflight]`` table,
    read as discovery reads it.

    With neither ``source`` nor ``preset``, the ``default`` preset is used.
    """
    if source is not None and preset is not None:
        raise ConfigError("give either a rules file or --preset, not both")
    if isinstance(source, dict):
        return _validate(source, where="<dict>", sha256=None, preset=None)
    if source is None:
        name = preset or DEFAULT_PRESET
        return _load_file(preset_path(name), preset=name)
    path = Path(source)
    if path.suffix.lower() == ".toml":  # a pyproject.toml: its [tool.preflight] table
        from preflight.discover import toml_rules  # discover reads rules through this module

        rules = toml_rules(path, _read_rules(path))
        if rules is None:
            raise ConfigError(f"{path} has no [tool.preflight] table; put the rules there "
                              "(the keys of a rules file), or give a YAML rules file")
        return rules
    return _load_file(path, preset=None)


def preset_path(name: str) -> Path:
    """The file of the shipped preset ``name`` (``preflight rules show NAME`` prints it)."""
    path = presets_dir() / f"{name}.yaml"
    if name not in preset_names() or not path.is_file():
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(preset_names())}")
    return path


def with_overrides(
    ruleset: RuleSet,
    *,
    context_window: int | None = None,
    tokenizer: str | None = None,
    num_classes: int | None = None,
    eval_path: str | None = None,
    sets: list[str] = (),  # type: ignore[assignment]
    smoke: dict[str, Any] | None = None,
    fields: dict[str, str | None] | None = None,
) -> RuleSet:
    """Apply command-line overrides: model facts, smoke settings, fields (a role to its
    column, e.g. ``{"text": "body"}``) and ``RULE_ID.PARAM=VALUE`` settings (VALUE read as
    YAML, so ``0.01``, ``true`` and ``[a, b]`` keep their types; ``smoke.PARAM``,
    ``fields.ROLE`` and ``model.FACT`` set those sections). Naming a model fact adds the rule
    that uses it when the rules lack one. The result is validated like a rules file."""
    data = to_dict(ruleset)
    given = dict(ruleset.given_fields)
    for role, column in (fields or {}).items():
        if column is not None:
            data["fields"][role] = column
            given[role] = f"--{role.replace('_', '-')}-field"
    data["smoke"].update({k: v for k, v in (smoke or {}).items() if v is not None})
    facts = {"context_window": context_window, "tokenizer": tokenizer, "num_classes": num_classes}
    data["model"].update({k: v for k, v in facts.items() if v is not None})
    checks = {r["check"] for r in data["rules"]}
    if (context_window or tokenizer) and "token_length" not in checks:
        data["rules"].append({"id": "token-length", "check": "token_length"})
    if num_classes and "label_range" not in checks and registry.get("label_range"):
        data["rules"].append({"id": "labels", "check": "label_range"})
    if eval_path:
        data["eval"] = eval_path
        if "overlap" not in checks:
            data["rules"].append({"id": "eval-overlap", "check": "overlap"})
    by_id = {r["id"]: r for r in data["rules"]}
    for item in sets:
        _add_inferred(ruleset, data, by_id, item.partition("=")[0].rpartition(".")[0])
        target, sep, raw = item.partition("=")
        rule_id, dot, key = target.rpartition(".")
        if not sep or not dot or not rule_id or not key:
            raise ConfigError(
                f"--set {item!r}: write RULE_ID.PARAM=VALUE, e.g. exact-dupes.max_fraction=0.01"
            )
        section = data[rule_id] if rule_id in _SET_SECTIONS else by_id.get(rule_id)
        if section is None:
            raise ConfigError(f"--set {item!r}: no rule {rule_id!r}; rules: {', '.join(by_id)}"
                              " (or smoke.PARAM, fields.ROLE, model.FACT)")
        try:
            section[key] = yaml_load(raw) if raw else None
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {item!r}: the value is not valid YAML: "
                              f"{getattr(e, 'problem', None) or e}") from e
        if rule_id == "fields":
            _check_field_set(item, key, section[key], fields or {})
            given[key] = f"--set {target}"
    if not ruleset.fields.is_empty() and not ruleset.given_fields:
        given = {}  # the rules declared their fields: nothing else is inferred
    where = ruleset.path or (f"preset {ruleset.preset}" if ruleset.preset else "<rules>")
    return rebuild(ruleset, data, where=f"{where} with command-line overrides",
                   given_fields={r: o for r, o in given.items() if data["fields"].get(r)})


def _check_field_set(item: str, role: str, value: Any, options: dict[str, str | None]) -> None:
    """Refuse ``--set fields.ROLE=VALUE`` naming no column, or naming another column than
    ``--ROLE-field`` does (two answers to one question: neither silently wins)."""
    names = [value] if isinstance(value, str) else value if isinstance(value, list) else None
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"--set {item!r}: name a column (fields.{role}=COLUMN or "
                          f"fields.{role}=[A, B]); leave fields.{role} out to infer it")
    option = options.get(role)
    if option is not None and [option] != names:
        raise ConfigError(f"--set {item!r} conflicts with --{role.replace('_', '-')}-field "
                          f"{option!r}; give the column once")


def rebuild(ruleset: RuleSet, data: dict[str, Any], *, where: str,
            given_fields: dict[str, str] | None = None) -> RuleSet:
    """``data`` (``to_dict`` of ``ruleset``, changed) validated like a rules file, keeping
    where ``ruleset`` came from (path, hash, preset) and the fields named on the command
    line (``given_fields``, else the rule set's own)."""
    return _validate(data, where=where, sha256=ruleset.sha256, preset=ruleset.preset,
                     path=ruleset.path,
                     given_fields=ruleset.given_fields if given_fields is None else given_fields)


def rules_from_mapping(data: dict[str, Any], *, where: str, path: str | None = None,
                       sha256: str | None = None) -> RuleSet:
    """Validate a rules file's contents already parsed (``[tool.preflight]`` of a
    ``pyproject.toml``); ``where`` names it in errors, ``path`` anchors relative paths."""
    return _validate(data, where=where, sha256=sha256, preset=None, path=path)


def _add_inferred(ruleset: RuleSet, data: dict[str, Any], by_id: dict[str, Any],
                  rule_id: str) -> None:
    """Make a rule that inference would add to the default rule set (``values``,
    ``labels``, ``chat-format``) a listed one, so ``--set values.dtype=fp16`` can set it."""
    from preflight.defaults import INFERRED, candidate_ids

    if rule_id in by_id or rule_id not in candidate_ids(ruleset):
        return
    rule = next(r for _, r in INFERRED if r.id == rule_id)
    by_id[rule_id] = {**rule.model_dump(exclude={"params"}, exclude_none=True), **rule.params}
    data["rules"].append(by_id[rule_id])


def to_dict(ruleset: RuleSet) -> dict[str, Any]:
    """The rules-file form of a rule set (each rule's parameters inline)."""
    data = ruleset.model_dump(exclude={"rules"}, exclude_none=True)
    data.setdefault("model", {})
    data["fields"] = ruleset.fields.model_dump(exclude_none=True)
    # Only the keys that were set (None is a setting there: clip off), so the smoke
    # settings can tell an explicit key from a default (a training-args file fills those).
    data["smoke"] = ruleset.smoke.model_dump(exclude_unset=True)
    data["rules"] = [
        {**rule.model_dump(exclude={"params"}, exclude_none=True), **rule.params}
        for rule in ruleset.rules
    ]
    return data


def _load_file(path: Path, *, preset: str | None) -> RuleSet:
    raw = _read_rules(path)
    if len(raw) > MAX_RULES_BYTES:
        raise ConfigError(f"{path}: a rules file is at most {MAX_RULES_BYTES // 2**20} MiB; "
                          "this one is larger (is it the right file?)")
    try:
        data = yaml_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML{yaml_problem(e, raw)}") from e
    if data is None:
        raise ConfigError(f"{path}: the rules file is empty; it needs at least `rules:`")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {_kind(data)}")
    return _validate(data, where=str(path), sha256=hashlib.sha256(raw).hexdigest(), preset=preset,
                     path=str(path))


def yaml_problem(e: yaml.YAMLError, raw: bytes) -> str:
    """Where and what a YAML syntax error is: `` at line L, column C: PROBLEM``, then the
    offending line with a caret under the column, and a hint when it is about indentation."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    if mark is None:
        return f": {problem}"
    lines = raw.decode("utf-8", "replace").splitlines()
    out = f" at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    if mark.line < len(lines):
        line = lines[mark.line][:200].replace("\t", "→")  # one column each, as YAML counts
        out += f"\n  {mark.line + 1} | {line}\n  {' ' * len(str(mark.line + 1))} | " \
               f"{' ' * min(mark.column, len(line))}^"
    if "\t" in problem or "'\\t'" in problem:
        out += "\n  hint: YAML indents with spaces, not tabs"
    elif any(p in problem for p in ("block end", "mapping values", "expected <block",
                                    "expected '-'", "block mapping", "block collection")):
        out += ("\n  hint: check the indentation: the items of one list (`- `) or mapping start "
                "in the same column, and a nested one starts further right (spaces, not tabs)")
    return out


def _read_rules(path: Path) -> bytes:
    """The rules file's bytes, at most ``MAX_RULES_BYTES + 1`` of them. A device, socket or
    folder is refused before it is opened; a pipe is read without blocking for ever."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError as e:
        raise ConfigError(f"rules file not found: {path}") from e
    except OSError as e:
        raise ConfigError(f"cannot read rules file {path}: {e.strerror}") from e
    if stat.S_ISDIR(mode):
        raise ConfigError(f"rules file {path} is a folder; give a YAML file")
    if stat.S_ISFIFO(mode):
        return _read_pipe(path)
    if not stat.S_ISREG(mode):
        raise ConfigError(f"rules file {path} is not a regular file (a device or socket); "
                          "give a YAML file")
    try:
        with path.open("rb") as f:
            return f.read(MAX_RULES_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read rules file {path}: {e.strerror}") from e


def _read_pipe(path: Path) -> bytes:
    """Read a FIFO (or ``<(cmd)``) to its end, failing when nothing comes for
    ``PIPE_WAIT_S`` seconds (no writer, or one that stalls) instead of hanging."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # does not wait for a writer
    except OSError as e:
        raise ConfigError(f"cannot read rules file {path}: {e.strerror}") from e
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= MAX_RULES_BYTES:
            ready, _, _ = select.select([fd], [], [], PIPE_WAIT_S)
            if not ready:
                got = f"after {size:,} bytes" if size else "before any byte came"
                raise ConfigError(
                    f"rules file {path} is a named pipe and nothing was written to it for "
                    f"{PIPE_WAIT_S:g} s ({got}); start its writer first, or give a YAML file")
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise ConfigError(f"cannot read rules file {path}: {e.strerror}") from e
    finally:
        os.close(fd)
    return b"".join(chunks)


def _validate(
    data: dict[str, Any],
    *,
    where: str,
    sha256: str | None,
    preset: str | None,
    path: str | None = None,
    given_fields: dict[str, str] | None = None,
) -> RuleSet:
    data = dict(data)
    # Keys the loader sets, never a file: one written in a file is an unknown key.
    written = [key for key in _INTERNAL if key in data]
    errors = [f"{key}: unknown key for this section; allowed: {', '.join(_file_keys(RuleSet))}"
              for key in written]
    for key in written:
        del data[key]
    raw_rules = data.pop("rules", None)
    if raw_rules is None:
        raise ConfigError(f"{where}: missing key `rules` (a list of rules)")
    if not isinstance(raw_rules, list):
        raise ConfigError(f"{where}: `rules` must be a list of rules, got {_kind(raw_rules)}")
    if not raw_rules:
        raise ConfigError(f"{where}: `rules` is empty; list at least one rule")
    rules = [r for i, spec in enumerate(raw_rules) if (r := _rule(spec, i, errors))]
    # Ids as written, so a duplicate is reported beside the other errors of its rule.
    seen: set[str] = set()
    for i, spec in enumerate(raw_rules):
        rule_id = spec.get("id", spec.get("check")) if isinstance(spec, dict) else None
        if not isinstance(rule_id, str):
            continue
        if rule_id in seen:
            errors.append(f"rules[{i}].id: duplicate rule id {rule_id!r}; ids must be unique")
        seen.add(rule_id)
    try:
        ruleset = RuleSet(**data, rules=rules, path=path, sha256=sha256, preset=preset,
                          given_fields=given_fields or {})
    except ValidationError as e:
        errors = _messages(e, prefix="", model=RuleSet) + errors
        ruleset = None
    if errors:
        raise ConfigError(f"{where}: invalid rules file:\n  " + "\n  ".join(errors))
    assert ruleset is not None
    return ruleset


def _rule(spec: Any, i: int, errors: list[str]) -> Rule | None:
    at = f"rules[{i}]"
    if not isinstance(spec, dict):
        errors.append(f"{at}: expected a mapping like {{id: ..., check: ...}}, got {_kind(spec)}")
        return None
    check_name = spec.get("check")
    if check_name is None:
        errors.append(f"{at}.check: missing; choose one of {', '.join(registry.names())}")
        return None
    check = registry.get(check_name)
    if check is None:
        hint = _did_you_mean(str(check_name), registry.names())
        errors.append(f"{at}.check: unknown check {check_name!r}{hint}")
        return None
    common = {k: v for k, v in spec.items() if k in RULE_KEYS}
    common.setdefault("id", check_name)
    params = {k: v for k, v in spec.items() if k not in RULE_KEYS}
    before = len(errors)
    try:
        validated = check.Params(**params)
    except ValidationError as e:
        errors.extend(
            _messages(e, prefix=at, model=check.Params, extra_keys=RULE_KEYS, check=check_name)
        )
        validated = None
    fix = common.get("fix")
    if fix is not None and fix not in check.fixes:
        errors.append(
            f"{at}.fix: {check_name} cannot {fix!r}; allowed: {', '.join(check.fixes)}"
        )
    try:
        rule = Rule(**common, params=validated.model_dump() if validated else {})
    except ValidationError as e:
        errors.extend(_messages(e, prefix=at, model=Rule))
        return None
    if check_name == "malformed" and rule.enabled is False:
        errors.append(f"{at}.enabled: the malformed rule cannot be disabled: unreadable lines "
                      "are always reported, never silently dropped (severity: warn lets them "
                      "pass the gate, still reported)")
    return rule if len(errors) == before else None


def _messages(
    e: ValidationError,
    *,
    prefix: str,
    model: type[BaseModel],
    extra_keys: tuple[str, ...] = (),
    check: str | None = None,
) -> list[str]:
    out = []
    for err in e.errors():
        loc = prefix
        for part in err["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        if err["type"] == "extra_forbidden":
            key = str(err["loc"][-1])
            section = _section(model, err["loc"][:-1])
            known = [*(extra_keys if section is model else ()), *_file_keys(section)]
            owner = f"check {check!r}" if check and section is model else "this section"
            hint = _did_you_mean(key, known)
            out.append(f"{loc}: unknown key for {owner}{hint}; allowed: {', '.join(known)}")
        else:
            out.append(f"{loc}: {err['msg']} (got {_shown.repr(err.get('input'))})")
    return out


def _file_keys(model: type[BaseModel]) -> list[str]:
    """The keys of ``model`` a rules file may write."""
    return [k for k in model.model_fields if k not in ("params", *_INTERNAL)]


def _section(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel]:
    """The nested model a validation error's location points into."""
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            break
    return model


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" — did you mean {close[0]!r}?" if close else ""


def _kind(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
