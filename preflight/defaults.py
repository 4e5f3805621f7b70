"""The default rule set grows with what inference found: a gate that checks less than the data
calls for, because nobody named a preset, fails open.

The ``default`` preset lists the checks every corpus gets (unreadable lines, schema, empty
text, hidden characters, encoding, exact duplicates). When the rules are that preset, the
fields in use (declared or inferred from the first batch) add the checks they call for:

- a ``messages`` field: ``chat_format``;
- a ``label`` of class ids or class names: ``label_range`` with the classes taken from the
  data (``infer_classes``), so NaN, null, blank names, wrong types, negative labels and
  stray or variant spellings of a class still fail;
- numeric fields (``numeric``, ``target``, ``features``): ``numeric``.

What still needs facts about the model is named as not checked, with the option that
supplies it; and the preset that fits the data is suggested.
"""

from __future__ import annotations

import json
import shlex

from preflight.checks import registry
from preflight.config import DEFAULT_PRESET, Fields, Rule, RuleSet

# role(s) of the fields -> the rule they add, in this order, after the preset's own rules.
INFERRED: tuple[tuple[tuple[str, ...], Rule], ...] = (
    (("messages",), Rule(id="chat-format", check="chat_format", severity="error",
                         fix="quarantine")),
    (("label", "input_ids", "token_labels"),
     Rule(id="labels", check="label_range", severity="error", fix="quarantine",
          params={"infer_classes": True})),
    (("numeric", "target", "features"), Rule(id="values", check="numeric", severity="error",
                                             fix="quarantine")),
)


def infers_rules(rules: RuleSet) -> bool:
    """True when ``rules`` is the default rule set, which inference extends."""
    return rules.preset == DEFAULT_PRESET


def candidate_ids(rules: RuleSet) -> list[str]:
    """The ids of the rules inference may add to ``rules`` (known to --only/--skip before
    any data is read)."""
    if not infers_rules(rules):
        return []
    taken = {r.check for r in rules.rules} | {r.id for r in rules.rules}
    return [rule.id for _, rule in INFERRED if rule.check not in taken and rule.id not in taken]


def inferred_rules(rules: RuleSet, fields: Fields) -> list[Rule]:
    """The rules the fields in use add to the default rule set (none for another rule set,
    and none for a check the rules already list, enabled or not)."""
    if not infers_rules(rules):
        return []
    declared = fields.declared()
    ids = set(candidate_ids(rules))
    out = []
    for roles, rule in INFERRED:
        if rule.id in ids and any(role in declared for role in roles):
            if rule.check == "label_range" and (rules.model.num_classes or rules.model.labels):
                rule = rule.model_copy(update={"params": {}})
            out.append(rule)
    return out


def applicable(rules: RuleSet, rule_list: list[Rule], fields: Fields, *,
               strings: bool = False) -> tuple[list[Rule], list[Rule]]:
    """``rule_list`` split into the rules that apply to the fields in use and, for the
    default rule set only, those that do not: its text checks when the data has no text
    (a regression table), instead of rules that cannot run. With ``strings`` (the data
    holds string fields or lists of strings all the same: an NER corpus's ``tokens``) the
    character checks that read them stay."""
    if not infers_rules(rules) or fields.text is not None or fields.messages:
        return rule_list, []
    keep, drop = [], []
    for rule in rule_list:
        cls = registry.get(rule.check)
        needs = cls is not None and cls.needs_text and not (
            strings and cls.reads_without_text(rule.params))
        (drop if needs else keep).append(rule)
    return keep, drop


def not_checked(rules: RuleSet, fields: Fields, added: list[Rule]) -> list[str]:
    """What the default rule set could not check without facts about the model, each with
    the option that supplies them."""
    if not infers_rules(rules):
        return []
    checks = {r.check for r in rules.rules if r.enabled} | {r.check for r in added}
    out = []
    if (fields.text is not None or fields.messages) and "token_length" not in checks:
        out.append("token lengths: needs --context-window (and --tokenizer for exact counts)")
    if fields.label and any(r.params.get("infer_classes") for r in added):
        out.append("labels the model has no class for: needs --num-classes (for class names: "
                   "--set model.labels=[...])")
    if (fields.input_ids and not rules.model.vocab_size
            and any(r.check == "label_range" for r in added)):
        out.append("token ids past the model's vocabulary: needs --set model.vocab_size=N")
    if any(r.check == "numeric" and not r.params.get("dtype") for r in added):
        out.append("values that overflow the training dtype: needs --set values.dtype=fp16 "
                   "(or bf16)")
    return out


def suggest_preset(fields: Fields) -> str | None:
    """The shipped preset that fits the fields, or None."""
    if fields.messages:
        return "sft-chat"
    if fields.label:
        return "classification"
    if fields.target or fields.features or (fields.numeric and fields.text is None):
        return "regression"
    if fields.text is not None:  # "" names a column too (a JSON key "")
        return "pretrain-text"
    return None


# Roles a command-line option names (--text-field COLUMN ...); others need a rules file.
_FIELD_OPTIONS = ("text", "label", "messages", "id")
# The check that reads a role a preset may not name.
_READ_BY = {"input_ids": "label_range", "token_labels": "label_range", "label": "label_range",
            "numeric": "numeric", "target": "numeric", "features": "numeric"}


def suggested_options(preset: str, fields: Fields) -> list[str] | None:
    """The ``--ROLE-field COLUMN`` options that make ``preset`` read the columns inference
    found where its own field names differ (``--text-field output`` for the pretrain-text
    preset, which names ``text``): followed bare, it would find no text at all. None when a
    difference has no such option (a regression target not named ``target``): a rules file
    is needed then."""
    from preflight.config import load_rules

    rules = load_rules(preset=preset)
    declared, checks = rules.fields, {r.check for r in rules.rules}
    options: list[str] = []
    for role, ours in fields.model_dump().items():
        theirs = getattr(declared, role)
        if ours is None or ours == theirs:
            continue
        if theirs is None:
            # A role the preset does not name (token ids beside a class label, numbers
            # beside the text): left out, the preset would not read the column the
            # default just checked, and pass where the default failed.
            if _READ_BY.get(role) not in checks:
                return None  # no rule of the preset reads it: a rules file is needed
            options += ["--set", shlex.quote(f"fields.{role}={_yaml_value(ours)}")]
        elif role not in _FIELD_OPTIONS or not isinstance(ours, str):
            return None
        else:
            options += [f"--{role}-field", shlex.quote(ours)]
    return options


def _yaml_value(value: str | list[str]) -> str:
    """``value`` as ``--set`` reads it back (YAML): bare where that is the same string,
    else JSON (``"yes"``, ``"1"``), a list in brackets."""
    from preflight.config.bounded_yaml import yaml_load

    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    try:
        same = yaml_load(value) == value and "," not in value and value.strip() == value
    except Exception:  # anything YAML cannot read back is quoted
        same = False
    return value if same else json.dumps(value, ensure_ascii=False)
