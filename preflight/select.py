"""Choosing rules from the command line: ``--only ID[,ID]`` and ``--skip ID[,ID]``.

Both set ``enabled: false`` on the rules left out, as a rules file would, except the
``malformed`` rule, which always runs (``--skip malformed`` is refused); an id the rule set
does not know is a ``ConfigError`` (exit 2) listing the ids it knows. The ids known are the
listed rules, the implicit ``malformed`` rule, and for the default rule set the rules that
inference may add (``chat-format``, ``labels``, ``values``): leaving one of those out lists
it, not enabled, so inference does not add it.
"""

from __future__ import annotations

from collections.abc import Iterable

from preflight.config import RuleSet, rebuild, to_dict
from preflight.defaults import INFERRED, candidate_ids
from preflight.errors import ConfigError
from preflight.resolve import IMPLICIT_MALFORMED


def parse_ids(values: Iterable[str], option: str) -> list[str]:
    """Rule ids from the repeatable, comma-separated ``option`` (``a,b`` ``c``), blanks
    dropped; given with no id at all (``--only ''``) it is a ``ConfigError``, not "every
    rule"."""
    values = list(values)
    ids = [part.strip() for value in values for part in value.split(",") if part.strip()]
    if values and not ids:
        raise ConfigError(f"{option}: no rule ids given")
    return ids


def select_rules(rules: RuleSet, *, only: list[str] | None = None,
                 skip: list[str] | None = None) -> RuleSet:
    """``rules`` with every rule not in ``only`` (when given) and every rule in ``skip`` not
    enabled."""
    only, skip = only or [], skip or []
    if not only and not skip:
        return rules
    extra = {r.id: r for _, r in INFERRED if r.id in candidate_ids(rules)}
    if not any(r.check == "malformed" for r in rules.rules):
        extra[IMPLICIT_MALFORMED.id] = IMPLICIT_MALFORMED
    known = [r.id for r in rules.rules] + list(extra)
    for option, ids in (("--only", only), ("--skip", skip)):
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ConfigError(f"{option}: unknown rule id(s) {', '.join(map(repr, unknown))}; "
                              f"the rules here are: {', '.join(known)}")
    # Unreadable lines are never silently dropped (DESIGN): `malformed` runs whatever the
    # selection, and skipping it by name is refused rather than ignored.
    always = {r.id for r in rules.rules if r.check == "malformed"} | (
        {IMPLICIT_MALFORMED.id} if IMPLICIT_MALFORMED.id in extra else set())
    if refused := [i for i in skip if i in always]:
        raise ConfigError(f"--skip: rule {refused[0]!r} cannot be skipped: unreadable lines are "
                          "always reported, never silently dropped (--set "
                          f"{refused[0]}.severity=warn lets them pass the gate, still reported)")
    left_out = {i for i in known if ((only and i not in only) or i in skip) and i not in always}
    data = to_dict(rules)
    for rule in data["rules"]:
        if rule["id"] in left_out:
            rule["enabled"] = False
    for rule_id, rule in extra.items():
        if rule_id in left_out:  # listed, not enabled: neither implied nor inferred
            data["rules"].append({**rule.model_dump(exclude={"params"}, exclude_none=True),
                                  **rule.params, "enabled": False})
    running = {r["id"] for r in data["rules"] if r.get("enabled") is not False}
    running |= extra.keys() - left_out
    if not running - always and not always & set(only):  # malformed alone, not asked for
        off = {r.id for r in rules.rules if not r.enabled}
        disabled = [i for i in only if i in off]
        why = (f" ({', '.join(map(repr, disabled))}: enabled: false in the rules; --only does "
               f"not turn a rule on: --set {disabled[0]}.enabled=true does)" if disabled else "")
        runnable = [i for i in known if i not in off]
        raise ConfigError(f"--only/--skip leave no rule to run{why}; the rules that can run "
                          f"here are: {', '.join(runnable)}")
    where = rules.path or (f"preset {rules.preset}" if rules.preset else "<rules>")
    return rebuild(rules, data, where=f"{where} with --only/--skip")
