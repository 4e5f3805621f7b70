"""``preflight init DATA``: a commented rules file written from what inference finds in the
data's first batch: the fields, the preset that suits them (its rules copied in), and the
model facts to fill in. The file validates and runs as written; a person then edits it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from preflight.batch import Batch
from preflight.checks.class_names import suspect_names
from preflight.checks.string_fields import holds_strings
from preflight.config import Fields, load_rules, preset_path, yaml_load
from preflight.defaults import applicable, inferred_rules, suggest_preset
from preflight.errors import InputError
from preflight.infer import CHAT_NAMES, LABEL_NAMES, infer_fields
from preflight.source import open_source

# The task of each preset init may suggest.
_TASKS = {"sft-chat": "chat", "classification": "classification", "pretrain-text": "lm",
          "regression": "regression"}
# More label names than this is not a class set to write down.
_MAX_NAMES = 100
# Batches read to find one with records (the first may hold only malformed lines).
_MAX_BATCHES = 8
# Columns a regression corpus is known by (inference proper names text, messages, id, label).
_REGRESSION = ("target", "features")
_FACTS = (
    ("context_window", "4096", "the model's context length in tokens"),
    ("tokenizer", "path/to/tokenizer.json",
     "exact counts (tokenizer.json, a folder, tiktoken:NAME); else estimated"),
    ("num_classes", "2", "classes the model predicts: labels must be in [0, num_classes)"),
    ("labels", "[negative, positive]", "the label set, when labels are names"),
    ("vocab_size", "32000", "rows of the model's embedding, for token ids"),
)


@dataclass
class Scaffold:
    """What ``init`` found and the rules file it makes of it."""

    fields: Fields
    why: dict[str, str]
    preset: str
    facts: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    # For the default preset, as check runs it with no rules file (``_default_rules``): its
    # rules that apply, the rules the fields add, and those left out (rule, why).
    rules: list[dict[str, Any]] | None = None
    left_out: list[tuple[dict[str, Any], str]] = field(default_factory=list)

    def render(self, data: str) -> str:
        """The rules file's text, with comments saying where each value came from."""
        preset = _preset_data(self.preset)
        lines = [
            f"# preflight rules for {data}, written by `preflight init` from what it inferred.",
            "# Check the fields, fill in the model facts, then run `preflight check DATA`: a",
            "# preflight.yaml in the working directory is used when --rules is not given.",
            f"# Suggested preset: {self.preset} (its rules are below; `preflight rules show",
            f"# {self.preset}` prints it with its comments). `preflight rules list` shows every",
            "# check and its parameters.",
            "version: 1",
        ]
        if self.preset in _TASKS:
            lines.append(f"task: {_TASKS[self.preset]}")
        declared = self.fields.model_dump(exclude_none=True)
        # A section header alone with commented lines under it (never `model: {}`): any
        # line uncommented as it stands keeps the file valid YAML.
        lines.append("fields:" if declared else "fields:  # none found: name them (ROLE: COLUMN)")
        for role, column in declared.items():
            lines.append(f"  {role}: {_scalar(column)}  # {self.why.get(role, 'as given')}")
        facts = {**preset.get("model", {}), **self.facts}
        lines.append("model:  # uncomment what you know")
        for key, example, meaning in _FACTS:
            if key in facts:
                note = self.notes.get(key) or f"the {self.preset} preset's; set your model's"
                lines.append(f"  {key}: {_scalar(facts[key])}  # {note}")
            else:
                lines.append(f"  # {key}: {example}  # {meaning}")
        lines.append("rules:")
        for rule in preset["rules"] if self.rules is None else self.rules:
            lines.append(f"  - {_flow(rule)}")
        for rule, why in self.left_out:
            lines.append(f"  # - {_flow(rule)}  # left out: {why}")
        return "\n".join(lines) + "\n"


def scaffold(data: Path, *, given: dict[str, str] | None = None) -> Scaffold:
    """Read the first records of ``data`` and infer what a rules file for it needs;
    ``given`` (role -> column) are fields named on the command line."""
    batch = _first_batch(data)
    named = {k: v for k, v in (given or {}).items() if v}
    why: dict[str, str] = {}
    # A column of mixed types (a fault in some records) is held as text in the frame:
    # judge the shapes by the values as written.
    for role in _REGRESSION:
        if role not in named and role in batch.frame.columns:
            named[role], why[role] = role, f"{role!r} (by name)"
    chat = next((n for n in CHAT_NAMES if _mostly(batch, n, list)), None)
    if chat and "messages" not in named and "text" not in named:
        named["messages"], why["messages"] = chat, f"{chat!r} (lists of turns, by name)"
    # Label names ("pos", "neg") are a class set too: the gate infers them only when they
    # repeat (``class_names``), but a rules file written for the data names the label
    # column whatever it holds, but lists: a label per token (``labels`` beside
    # ``input_ids``) is ``token_labels``, which inference finds; written as the class
    # label, check's label and text rules could not run on the file init wrote.
    label = next((n for n in LABEL_NAMES
                  if n in batch.frame.columns and not _mostly(batch, n, list)), None)
    if label and "label" not in named and label not in named.values():
        named["label"], why["label"] = label, f"{label!r} (by name)"
    fields, inferred = infer_fields(batch, given=named)
    preset = suggest_preset(fields) or "default"
    out = Scaffold(fields=fields, why={**inferred, **why}, preset=preset)
    if preset == "classification":
        _label_facts(out, batch)
    if preset == "default":
        _default_rules(out, batch)
    return out


def _default_rules(out: Scaffold, batch: Batch) -> None:
    """The default preset's rules as check runs them on this data with no rules file: the
    text checks left out when there is no text (they could not run: a file init wrote
    failed where check alone passed), the rules the fields add (token ids, numbers) in."""
    rules = load_rules()
    strings = holds_strings(batch, tuple(out.fields.text_fields()), out.fields.messages)
    keep, drop = applicable(rules, rules.rules, out.fields, strings=strings)
    written = {r["id"]: r for r in _preset_data("default")["rules"]}
    out.rules = [written[r.id] for r in keep] + [
        {"id": r.id, "check": r.check, "severity": r.severity, "fix": r.fix, **r.params}
        for r in inferred_rules(rules, out.fields)]
    out.left_out = [(written[r.id], "the data has no text field (set fields.text to run it)")
                    for r in drop]


def _label_facts(out: Scaffold, batch: Batch) -> None:
    """``num_classes`` from integer labels, else ``labels`` from names, so the label rule
    runs as written; the comment asks for the model's own value."""
    seen = f"in the first {len(batch):,} records"
    values = batch.values(out.fields.label) if out.fields.label else []
    names = [v for v in values if isinstance(v, str)]
    classes = _classes(values)
    if classes and not _mostly(batch, out.fields.label or "", str):
        out.facts["num_classes"] = classes
        out.notes["num_classes"] = f"CHECK: largest label {seen} + 1; set your model's"
    elif names and len(set(names)) <= _MAX_NAMES:
        # A blank name, and a variant spelling or typo of a class (what the gate would flag),
        # are not written as classes: declared, they would pass as the model's own.
        counts = Counter(n for n in names if n.strip())
        suspects = suspect_names(dict(counts), out.fields.label or "")
        out.facts["labels"] = sorted(n for n in counts if n not in suspects)
        left = [repr(n) for n in sorted(set(names) - set(counts))] + [
            f"{n!r} ({code})" for n, (code, _) in sorted(suspects.items())]
        also = f"; left out: {', '.join(left)}" if left else ""
        out.notes["labels"] = f"CHECK: the label names {seen}; set your model's{also}"


def _first_batch(data: Path) -> Batch:
    src = open_source(data)
    for i, batch in enumerate(src.batches()):
        if len(batch) or i + 1 >= _MAX_BATCHES:
            return batch
    raise InputError(f"{data}: no readable record to infer the fields from")


def _mostly(batch: Batch, name: str, kind: type) -> bool:
    """True when most present values of the field are of ``kind``."""
    if not batch.has(name):
        return False
    values = [v for v in batch.values(name) if v is not None]
    return bool(values) and sum(isinstance(v, kind) for v in values) * 2 > len(values)


def _classes(values: list[Any]) -> int | None:
    """The class count the labels suggest: the largest non-negative integer label + 1 (a
    negative one, like any wrong type, is for the label rule to flag)."""
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
    return max(ints) + 1 if ints else None


def _preset_data(name: str) -> dict[str, Any]:
    return yaml_load(preset_path(name).read_bytes())


def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix(
        "\n...").strip()


def _flow(rule: dict[str, Any]) -> str:
    return yaml.safe_dump(rule, default_flow_style=True, sort_keys=False, width=10_000).strip()

