"""A rules file's contents (a mapping) validated into a ``RuleSet``: each rule against its
check's ``Params`` from the registry, every mistake collected into one ``ConfigError``; and a
``RuleSet`` back to that mapping (``to_dict``) to change and validate again (``rebuild``)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from preflight.checks import registry
from preflight.config.bounded_yaml import settle_words
from preflight.config.messages import _INTERNAL, _did_you_mean, _file_keys, _kind, _messages
from preflight.config.models import RULE_KEYS, Rule, RuleSet
from preflight.errors import ConfigError


class InvalidRules(ConfigError):
    """A rules mapping that does not validate; ``lines`` holds its mistakes, one
    ``key.path: what is wrong`` each (so command-line overrides can name their own)."""

    def __init__(self, message: str, lines: list[str] | None = None) -> None:
        super().__init__(message)
        self.lines = list(lines or [])


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


def _validate(
    data: dict[str, Any],
    *,
    where: str,
    sha256: str | None,
    preset: str | None,
    path: str | None = None,
    given_fields: dict[str, str] | None = None,
) -> RuleSet:
    data = settle_words(data)  # yes/no: a switch's boolean, or a class or column name
    # Keys the loader sets, never a file: one written in a file is an unknown key.
    written = [key for key in _INTERNAL if key in data]
    errors = [f"{key}: unknown key for this section; allowed: {', '.join(_file_keys(RuleSet))}"
              for key in written]
    for key in written:
        del data[key]
    raw_rules = data.pop("rules", None)
    # Reported with the file's other mistakes (a misspelt `fields` key beside it), all at once.
    if raw_rules is None:
        errors.append("rules: missing key `rules` (a list of rules)")
    elif not isinstance(raw_rules, list):
        errors.append(f"rules: `rules` must be a list of rules, got {_kind(raw_rules)}")
    elif not raw_rules:
        errors.append("rules: `rules` is empty; list at least one rule")
    if not isinstance(raw_rules, list):
        raw_rules = []
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
        raise InvalidRules(f"{where}: invalid rules file:\n  " + "\n  ".join(errors), errors)
    assert ruleset is not None
    return ruleset


def _rule(spec: Any, i: int, errors: list[str]) -> Rule | None:
    at = f"rules[{i}]"
    if not isinstance(spec, dict):
        errors.append(f"{at}: expected a mapping like {{id: ..., check: ...}}, got {_kind(spec)}")
        return None
    check_name = spec.get("check")
    if check_name is None:
        # a misspelt `check:` (`chek: empty`) is the likely cause: name it, not only the gap
        typo = next((k for k in spec if isinstance(k, str) and k not in RULE_KEYS
                     and _did_you_mean(k, ["check"])), None)
        hint = f" (the rule has {typo!r} — did you mean 'check'?)" if typo else ""
        errors.append(f"{at}.check: missing{hint}; choose one of "
                      f"{', '.join(registry.names())}")
        return None
    if not isinstance(check_name, str):  # a list or mapping would not even be looked up
        errors.append(f"{at}.check: expected the name of one check, got {_kind(check_name)}; "
                      f"choose one of {', '.join(registry.names())}")
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
