"""Planning: what each finding's fix action does to its record."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from preflight.checks import registry
from preflight.checks.nested_strings import KEY, key_characters
from preflight.config import Rule

ORDER = ("repair", "normalize", "strip", "truncate", "drop", "keep_first", "quarantine")
TRANSFORMS = ("repair", "normalize", "strip", "truncate")
# What each transform can mend; any other code under it sends the record to the quarantine.
_MENDS = {
    "repair": {"mojibake", "not_nfc"},
    "normalize": {"not_nfc"},
    "truncate": {"too_long"},  # not too_long_estimated: truncating needs a tokenizer
}


@dataclass
class Plan:
    """What happens to each record that has findings, by (file label, row)."""

    transforms: dict[tuple[str | None, int], set[str]] = field(default_factory=dict)
    quarantine: dict[tuple[str | None, int], list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    risky: bool = False  # a transform that could create a new finding was planned
    # The characters found hiding in key names: records not flagged may hold such a key too
    # (null), and are looked at for them (``Mender.may_rename_keys``); none else is.
    keys: frozenset[str] = frozenset()


def plan(findings: pl.DataFrame, rules: list[Rule], *, can_truncate: bool, chat: bool) -> Plan:
    """Decide, per record, the transforms to apply or the quarantine, from its findings."""
    actions = {r.id: r.fix or default_fix(r.check) for r in rules}
    result = Plan()
    for row, file, rule, check, code, detail, cluster in findings.select(
        "row", "file", "rule", "check", "code", "detail", "cluster"
    ).iter_rows():
        if check == "invisible_unicode" and f"{KEY}:" in (detail or ""):
            result.keys |= key_characters(detail)
        if row is None:  # a corpus-level finding names no record
            continue
        action = actions.get(rule, "none")
        if action == "none":
            continue
        key = (file, row)
        mends = action == "strip" or code in _MENDS.get(action, set())
        if action == "truncate" and (not can_truncate or chat):
            mends = False
        # Counted under what really happens: a transform that cannot mend a code quarantines.
        result.counts[(rule, action if mends or action not in TRANSFORMS else "quarantine")] += 1
        if action in TRANSFORMS and mends:
            result.transforms.setdefault(key, set()).add(action)
            # Folding for duplicates ignores case, NFC and format characters, so stripping
            # those or normalising cannot make two records equal; a repair, a truncation or
            # deleting a control character can.
            if action in ("repair", "truncate") or code == "control_character":
                result.risky = True
            continue
        reason = {
            "rule": rule,
            "check": check,
            "code": code,
            "detail": detail,
            "action": action if action not in TRANSFORMS else "quarantine",
        }
        if cluster is not None:
            reason["kept_row"] = cluster
        result.quarantine[key].append(reason)
    return result


def default_fix(check: str) -> str:
    cls = registry.get(check)
    return cls.fixes[0] if cls else "none"
