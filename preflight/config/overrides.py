"""Command-line overrides of a rule set: model facts, smoke settings, fields and
``--set RULE_ID.PARAM=VALUE``, applied to the rules-file form and validated again."""

from __future__ import annotations

from typing import Any

import yaml

from preflight.checks import registry
from preflight.config.bounded_yaml import yaml_load
from preflight.config.models import RuleSet
from preflight.config.validate import InvalidRules, rebuild, to_dict
from preflight.errors import ConfigError

# The sections `--set SECTION.KEY=VALUE` reaches besides rules (they win over a rule that
# has one of these names as its id).
_SET_SECTIONS = ("smoke", "fields", "model")
# Smoke settings that name a file or model: an empty --set value is refused, never "none".
_SMOKE_PATHS = {"model": "a model (hf:DIR, hf-config:DIR, package.module:build or file.py:build)",
                "checkpoint": "a checkpoint file", "training_args": "a TrainingArguments file"}


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
        if column is not None and not column:
            raise ConfigError(f"--{role.replace('_', '-')}-field: name a column; leave the "
                              f"option out to infer the {role} field")
        if column is not None:
            data["fields"][role] = column
            given[role] = f"--{role.replace('_', '-')}-field"
    if tokenizer is not None and not tokenizer.strip():
        raise ConfigError("--tokenizer: name a tokenizer (a tokenizer.json path, a tokenizer "
                          "folder, a Hugging Face name or tiktoken:NAME); leave the option out "
                          "to estimate token counts")
    data["smoke"].update({k: v for k, v in (smoke or {}).items() if v is not None})
    facts = {"context_window": context_window, "tokenizer": tokenizer, "num_classes": num_classes}
    data["model"].update({k: v for k, v in facts.items() if v is not None})
    # Where each command-line value lands in the rules-file form, and the option that put it
    # there: a mistake there is the option's, not the (packaged or user's) rules file's.
    origins = {f"model.{k}": (f"--{k.replace('_', '-')}", f"model.{k}")
               for k, v in facts.items() if v is not None}
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
                f"--set {_shown(item)}: write RULE_ID.PARAM=VALUE, "
                "e.g. exact-dupes.max_fraction=0.01"
            )
        section = data[rule_id] if rule_id in _SET_SECTIONS else by_id.get(rule_id)
        if section is None:
            raise ConfigError(f"--set {_shown(item)}: no rule {_shown(rule_id)}; rules: "
                              f"{', '.join(by_id)} (or smoke.PARAM, fields.ROLE, model.FACT)")
        if rule_id == "smoke" and key in _SMOKE_PATHS and not raw.strip():
            # `--set smoke.model=$MODEL` with the variable unset: the built-in model would be
            # tested in place of the user's; null says "none" on purpose.
            raise ConfigError(f"--set {_shown(item)}: is empty (an unset variable?); name "
                              f"{_SMOKE_PATHS[key]}, or write smoke.{key}=null for none")
        try:
            section[key] = yaml_load(raw, words=True) if raw else None
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {_shown(item)}: the value is not valid YAML: "
                              f"{getattr(e, 'problem', None) or e}") from e
        rule_at = ("" if rule_id in _SET_SECTIONS else
                   f"rules[{next(i for i, r in enumerate(data['rules']) if r is section)}]")
        at = f"{rule_at}.{key}" if rule_at else f"{rule_id}.{key}"
        origins[at] = (f"--set {_shown(item)}", target)
        if rule_at:  # a mistake of the whole rule (bands without rows) is its --set's too
            option, _ = origins.get(rule_at, ("", ""))
            origins[rule_at] = (f"{option}, {_shown(item)}" if option
                                else f"--set {_shown(item)}", f"rule {rule_id!r}")
        if rule_id == "fields":
            _check_field_set(item, key, section[key], fields or {})
            given[key] = f"--set {target}"
    if not ruleset.fields.is_empty() and not ruleset.given_fields:
        given = {}  # the rules declared their fields: nothing else is inferred
    where = ruleset.path or (f"preset {ruleset.preset}" if ruleset.preset else "<rules>")
    try:
        return rebuild(ruleset, data, where=f"{where} with command-line overrides",
                       given_fields={r: o for r, o in given.items() if data["fields"].get(r)})
    except InvalidRules as e:
        raise _blamed(e, origins) from e


def _blamed(error: InvalidRules, origins: dict[str, tuple[str, str]]) -> ConfigError:
    """``error`` with each mistake an option made named by that option (``--set
    'model.context_window=-1': model.context_window: Input should be greater than 0``);
    when every mistake is an option's, the rules file is not named at all (it was valid
    before the options)."""
    lines, all_options = [], True
    for line in error.lines:
        # the longest match: rules[5].bands before rules[5] (a mistake of the whole rule)
        at = next((at for at in sorted(origins, key=len, reverse=True)
                   if line.startswith(at) and line[len(at):len(at) + 1] in (":", ".", "[")), None)
        all_options &= at is not None
        if at is None:
            lines.append(line)
            continue
        option, target = origins[at]
        rest = line[len(at):]
        lines.append(f"{option}: {target}{rest}")
    if not all_options:
        head = str(error).split("\n", 1)[0]
        return ConfigError(head + "\n  " + "\n  ".join(lines))
    if len(lines) == 1:
        return ConfigError(lines[0])
    return ConfigError("invalid command-line settings:\n  " + "\n  ".join(lines))


def _check_field_set(item: str, role: str, value: Any, options: dict[str, str | None]) -> None:
    """Refuse ``--set fields.ROLE=VALUE`` naming no column, or naming another column than
    ``--ROLE-field`` does (two answers to one question: neither silently wins)."""
    names = [value] if isinstance(value, str) else value if isinstance(value, list) else None
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"--set {_shown(item)}: name a column (fields.{role}=COLUMN or "
                          f"fields.{role}=[A, B]); leave fields.{role} out to infer it")
    option = options.get(role)
    if option is not None and [option] != names:
        raise ConfigError(f"--set {_shown(item)} conflicts with --{role.replace('_', '-')}-field "
                          f"{option!r}; give the column once")


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


def _shown(item: str, limit: int = 80) -> str:
    """``item`` quoted for a message, its middle elided past ``limit`` characters (a pasted
    document as a value is not echoed whole)."""
    if len(item) <= limit:
        return repr(item)
    half = limit // 2
    return repr(f"{item[:half]}…{item[-half:]}") + f" ({len(item):,} characters)"
