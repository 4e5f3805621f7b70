"""The manifest of a fix run, and the dry run's summary."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preflight.checks.nested_strings import shown as path_shown
from preflight.checks.nested_strings import turn_strings, value_at
from preflight.checks.string_fields import inner_strings, other_strings
from preflight.field_paths import record_value
from preflight.fix.mend import Mender
from preflight.fix.plan import ORDER, Plan
from preflight.fix.units import Input, units
from preflight.report.model import Report
from preflight.source.tracked import hash_file
from preflight.text import redact, visible

if TYPE_CHECKING:
    from preflight.fix import FixOptions

_EXAMPLES = 5


def manifest(
    src: Path,
    clean: Path,
    quarantined: Path,
    counts: dict[str, Any],
    the_plan: Plan,
    report: Report,
    rounds: int,
    options: FixOptions,
) -> dict[str, Any]:
    actions: dict[str, dict[str, int]] = defaultdict(dict)
    for (rule, action), n in sorted(the_plan.counts.items()):
        actions[rule][action] = n
    return {
        "input": {
            "path": str(src),
            "records": counts["input"],
            "blank_lines": counts["blank"],
            "fingerprint": report.source.fingerprint.get("xxh3_128"),
            "limit": report.source.limit,  # set: only the first N records were fixed
        },
        "clean": {
            "path": str(options.out),
            "records": counts["clean"],
            "changed": counts["changed"],
            "xxh3_128": hash_file(clean),
        },
        "quarantine": {
            "path": str(options.quarantine),
            "records": counts["quarantined"],
            "xxh3_128": hash_file(quarantined),
        },
        "balanced": counts["clean"] + counts["quarantined"] == counts["input"],
        # Struct fields whose names hid characters, renamed in a Parquet/Arrow clean
        # output's schema (or kept, and why): writers.renames.
        "renamed_fields": counts.get("renamed_fields", []),
        "renamed_keys": renamed_keys(counts),
        "findings_per_rule_and_action": dict(actions),
        "order": list(ORDER),
        "rounds": rounds,
        "gate_verdict_before": report.verdict,
    }


def dry_run(found: Input, the_plan: Plan, mender: Mender, report: Report, *,
            counts: dict[str, Any], verified: bool, show_text: bool = False
            ) -> dict[str, Any]:
    """What fix would do, with a few before/after examples (redacted unless ``show_text``);
    ``counts``: round one's, written nowhere (``dry_round``); ``verified``: whether the real
    run would gate its output again (a fix that can make a new finding was planned)."""
    src = found.path
    shown = visible if show_text else redact
    examples = []
    for unit in units(found):
        if len(examples) >= _EXAMPLES:
            break
        key = (unit.file, unit.row)
        record = unit.record() if key in the_plan.transforms else None
        if record is not None:
            after = mender.apply(record, the_plan.transforms[key])
            text = mender.ctx.text_fields
            pairs = [(name, record_value(record, name), record_value(after, name))
                     for name in [*text, *other_strings(record, mender.ctx)]]
            pairs += [(where, item, value_at(after, path))
                      for path, item in inner_strings(record, mender.ctx)
                      if (where := path_shown(path)) not in text]  # data.text: read above
            if messages := mender.ctx.messages:
                pairs += [(path_shown(path), item, value_at(after, path))
                          for path, item in turn_strings(record.get(messages), messages)]
            for name, before, changed in pairs:
                if isinstance(changed, str) and before != changed:  # None: a key renamed
                    at = next(
                        (
                            k
                            for k, (x, y) in enumerate(zip(before, changed, strict=False))
                            if x != y
                        ),
                        min(len(before), len(changed)),
                    )
                    examples.append(
                        {
                            "row": unit.row,
                            "field": name,
                            "before": shown(_around(before, at)),
                            "after": shown(_around(changed, at)),
                        }
                    )
    actions: dict[str, dict[str, int]] = defaultdict(dict)
    for (rule, action), n in sorted(the_plan.counts.items()):
        actions[rule][action] = n
    return {
        "dry_run": True,
        "input": {"path": str(src), "records": report.source.total,
                  "limit": report.source.limit},
        "would_change": len(counts["changed"]),
        "would_quarantine": counts["quarantined"],
        "findings_per_rule_and_action": dict(actions),
        "renamed_fields": counts.get("renamed_fields", []),
        "renamed_keys": renamed_keys(counts),
        "examples": examples,
        "not_checked": None if not verified else (
            "not checked in a dry run: the real run gates its clean output again (a repair, "
            "a truncation or a deleted control character can make two records equal) and "
            "sets aside what that finds"),
    }


_RENAMED = 100


def renamed_keys(counts: dict[str, Any]) -> list[dict[str, Any]]:
    """The keys the fix renamed (a hidden character stripped from a JSON key, a map's key),
    by place: ``{"key": 'meta["so\\u200burce"]', "to": "source", "records": 3}``; the
    first 100 places."""
    return [{"key": key, **renamed}
            for key, renamed in list(counts.get("renamed_keys", {}).items())[:_RENAMED]]


def _around(text: str, at: int, radius: int = 40) -> str:
    """The text near position ``at`` (where before and after first differ)."""
    start, end = max(0, at - radius), at + radius
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
