"""The driver's side of every scheduler (the process pool, Ray): start the checks on the
corpus's first batch as the local loop does, tell the workers how to set theirs up, and
say which checks want the corpus read again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from preflight.config import Rule, RuleSet
from preflight.infer import infers
from preflight.paths import find_beside, rules_base
from preflight.shards import ShardShapes
from preflight.source import Source

if TYPE_CHECKING:
    from preflight.checks.base import Context
    from preflight.config import Fields
    from preflight.executor.local import Running
    from preflight.sampling import Sampler
    from preflight.tokenizer.counter import TokenCounter

@dataclass
class Started:
    """The driver's checks, started on the first batch, and the workers' setup."""

    fields: Fields
    inferred: dict[str, Any]
    ctx: Context
    running: list[Running]
    setup: dict[str, Any]  # ``Worker``'s keyword arguments
    shapes: ShardShapes | None  # shards of another shape are not scanned (``shards``)


def start(src: Source, rules: RuleSet, rule_list: list[Rule], *,
          tokenizer: TokenCounter | None, eval_path: str | None, sampler: Sampler | None,
          limit: int | None = None) -> Started:
    """Infer the fields from the first batch with records (the first ``limit`` records of
    it: ``local.first_with_records``), start the checks and make their calibrations
    (``scan_plan``) on it, as the local loop does."""
    from preflight.executor.local import first_with_records, start_checks

    batches = src.batches()
    try:
        first, _ = first_with_records(batches, limit)
    finally:
        batches.close()
    fields, inferred, ctx, running = start_checks(rules, rule_list, first,
                                                  tokenizer=tokenizer, eval_path=eval_path,
                                                  shards=len(src.files) > 1)
    scan_plans = {}
    if first is not None:
        for index, r in enumerate(running):
            if r.error is None and (values := r.check.scan_plan(first)):
                scan_plans[index] = values
    if sampler is not None:
        sampler.id_field = fields.id
    if src.format == "csv" and src.files:
        _note_dialects(src)
    shapes = ShardShapes(fields) if infers(rules) and len(src.files) > 1 else None
    setup = {"rules": portable(rules), "fields": fields, "strings": ctx.strings,
             "keep_ids": any(r.reports_at_finish for r in running), "plans": scan_plans,
             "sample": (sampler.k, sampler.seed) if sampler is not None else None,
             "shapes": shapes is not None}
    return Started(fields, inferred, ctx, running, setup, shapes)


def _note_dialects(src: Source) -> None:
    """Every CSV file's delimiter and warning, noted on ``src`` in file order as the local
    reader notes them while it reads: the workers' readers keep their notes (where this
    process reads the files itself, its read notes them again, ``--limit``'s only some)."""
    from preflight.source.csv_dialect import note_dialect

    state: dict[str, Any] = {"delimiter": src.delimiter, "dialects": [], "warnings": []}
    for path in src.files:
        note_dialect(path, state)
    src.dialects, src.warnings = state["dialects"], state["warnings"]


def revisit_plans(running: list[Running]) -> tuple[dict[int, dict[str, Any]],
                                                   set[int] | None]:
    """The checks that want the corpus read again (by rule position) with their plans, and
    the record keys they need (None: every record)."""
    plans, needed = {}, []
    for index, r in enumerate(running):
        if r.error is None and r.check.wants_revisit():
            plans[index] = r.check.revisit_plan()
            needed.append(r.check.revisit_records())
    if not plans or any(keys is None for keys in needed):
        return plans, None
    return plans, set(np.concatenate(needed).tolist())


def portable(rules: RuleSet) -> RuleSet:
    """The rules with the files they name (tokenizer, eval file) as absolute paths: workers
    may not run in the driver's folder."""
    from preflight.resolve import rules_eval_path

    base = rules_base(rules)
    model = rules.model
    if model.tokenizer and not model.tokenizer.startswith("tiktoken:"):
        found = find_beside(model.tokenizer, base, what="tokenizer")
        model = model.model_copy(update={"tokenizer": str(found.resolve())})
    eval_path = rules_eval_path(rules)
    return rules.model_copy(update={
        "model": model, "eval": str(Path(eval_path).resolve()) if eval_path else None})
