"""The manifest of a fix run, and the dry run's summary."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from preflight.fix.mend import Mender
from preflight.fix.plan import ORDER, Plan
from preflight.fix.units import Input, units
from preflight.fix.writers import malformed_refusal
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
        "findings_per_rule_and_action": dict(actions),
        "order": list(ORDER),
        "rounds": rounds,
        "gate_verdict_before": report.verdict,
    }


def dry_run(found: Input, the_plan: Plan, mender: Mender, report: Report, *,
            findings: pl.DataFrame, out_format: str, show_text: bool = False
            ) -> dict[str, Any]:
    """What fix would do, with a few before/after examples (redacted unless ``show_text``);
    ``findings``: the gate's, for the malformed units kept as written."""
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
            for name in [*mender.ctx.text_fields]:
                before, changed = record.get(name), after.get(name)
                if before != changed:
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
        "would_change": len(the_plan.transforms.keys() - the_plan.quarantine.keys()),
        "would_quarantine": len(the_plan.quarantine)
        + _unwritable(found, the_plan, findings, out_format),
        "findings_per_rule_and_action": dict(actions),
        "examples": examples,
        "not_checked": _not_checked(found, out_format),
    }


def _not_checked(found: Input, out_format: str) -> str | None:
    """What only the real run finds: whether a table format can hold every kept JSON or CSV
    record (the writer types them once the whole output is known)."""
    if out_format not in ("parquet", "arrow") or found.syntax == "arrow":
        return None
    return (f"not checked in a dry run: whether {out_format} can hold every kept record "
            "(a field whose types clash, a number past 64 bits, a lone surrogate); the "
            "real run refuses those with exit 2 and writes nothing")


def _around(text: str, at: int, radius: int = 40) -> str:
    """The text near position ``at`` (where before and after first differ)."""
    start, end = max(0, at - radius), at + radius
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def _unwritable(found: Input, the_plan: Plan, findings: pl.DataFrame, out_format: str) -> int:
    """How many malformed units, kept under their rule's ``none``, the output cannot hold as
    written (``malformed_refusal``): the run sets them aside. The input is read again only
    where that depends on the unit's text (a JSON array's elements to JSON Lines)."""
    bad = findings.filter(pl.col("check") == "malformed", pl.col("row").is_not_null())
    keys = {(file, row) for row, file in bad.select("row", "file").iter_rows()}
    keys -= the_plan.quarantine.keys()
    if not keys or out_format == "csv":
        return 0
    if out_format != "jsonl" or found.syntax != "json":
        return len(keys)
    if found.format == "jsonl":  # a line stays one line
        return 0
    return sum(1 for unit in units(found) if (unit.file, unit.row) in keys
               and malformed_refusal(unit, out_format) is not None)
