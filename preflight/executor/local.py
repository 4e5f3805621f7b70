"""The local executor (``--workers 1``, the reference every other schedule must equal):
read the batches in order in this process and scan each with every rule; then read the
source again for the checks that asked to revisit it.

Its first steps are every executor's: ``first_with_records`` picks the batch the fields are
inferred from, ``start_checks`` starts each rule's check (``Running``) on them; the process
pool and Ray begin the same way (``executor.driver``, ``executor.worker``). Each returns a
``Read``: the checks, not finished yet, and what the read counted.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from preflight.batch import Batch
from preflight.checks import registry
from preflight.checks.base import Check, Context
from preflight.checks.string_fields import holds_strings
from preflight.config import Fields, Rule, RuleSet
from preflight.cores import available_cores
from preflight.findings import FindingsSink
from preflight.infer import infers, resolve_fields
from preflight.resolve import resolved
from preflight.sampling import Sampler, SampleRow
from preflight.shards import ShardShapes
from preflight.source import Source
from preflight.threads import shared_pool
from preflight.tokenizer.counter import TokenCounter

if TYPE_CHECKING:
    from preflight.pipeline import Progress

# Batches read ahead, at most, for the first that holds records (the fields are inferred
# from it): a file or shard that starts with malformed lines only.
HOLD_BATCHES = 64


@dataclass
class Running:
    """A rule and its live check while the run goes on."""

    rule: Rule
    check: Check
    seconds: float = 0.0
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def reports_at_finish(self) -> bool:
        return type(self.check).finish is not Check.finish


@dataclass
class Read:
    """What reading and scanning the corpus left: the running checks (not finished yet),
    the fields they used, and counts."""

    running: list[Running]
    fields: Fields
    ctx: Context
    inferred: dict[str, Any] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    records: int = 0
    malformed: int = 0
    cluster: dict[str, Any] = field(default_factory=dict)  # where a distributed run ran
    # Fetches records by record key where they were read (a distributed run); None: the
    # smoke sample reads the source again for them.
    fetch: Callable[[set[int]], list[SampleRow]] | None = None
    mixed: Any = None  # the ``mixed_shards`` finding (a frame), when shards differ


def scan_local(src: Source, rules: RuleSet, rule_list: list[Rule], *,
               tokenizer: TokenCounter | None, eval_path: str | None, sink: FindingsSink,
               sampler: Sampler | None, limit: int | None, timings: dict[str, float],
               progress: Progress | None) -> Read:
    """The local executor: read batches in order and scan each with every rule, then read
    again for the checks that revisit the corpus; leave the checks ready for ``finish``."""
    running: list[Running] | None = None
    shapes: ShardShapes | None = None
    keep_ids = False
    fields, inferred = rules.fields, {}
    ctx = Context(fields=fields, model=rules.model, tokenizer=tokenizer, eval_path=eval_path)
    seen: set[str] = set()
    records = malformed = done = 0
    source_batches = src.batches()
    # Read the next batch while the checks run on this one; run the rules' scans side by
    # side (their work is in polars/Arrow, which release the GIL). Findings are still added
    # in rule order, so the output does not depend on which scan finished first.
    reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="read")
    try:
        t0 = time.perf_counter()
        first, batches = first_with_records(source_batches, limit)
        pending = reader.submit(next, batches, None)
        while True:
            batch = pending.result()
            timings["read"] += time.perf_counter() - t0
            if batch is None:
                break
            if limit is not None and records + len(batch) >= limit:
                batch = batch.head(limit - records)
            elif limit is None or records + len(batch) < limit:
                pending = reader.submit(next, batches, None)
            if running is None:
                t_setup = time.perf_counter()
                fields, inferred, ctx, running = start_checks(
                    rules, rule_list, first, tokenizer=tokenizer, eval_path=eval_path,
                    shards=len(src.files) > 1)
                timings["setup"] = round(time.perf_counter() - t_setup, 4)
                keep_ids = any(r.reports_at_finish for r in running)
                # compared even when the first shard's fields inferred none (a first
                # shard of lists where later ones hold the text: they went unchecked)
                if infers(rules) and len(src.files) > 1:
                    shapes = ShardShapes(fields)
            # A shard unlike the first (chat among text): its lines are still read.
            same = shapes is None or shapes.matches(batch)
            seen.update(batch.seen(ctx.text_fields))
            records += len(batch)
            malformed += len(batch.malformed)
            sink.open_batch(batch, fields.id, keep_ids=keep_ids)
            if ctx.text_fields or ctx.messages:
                batch.texts(ctx.text_fields, ctx.messages)  # shared by the text checks
            active = [r for r in running
                      if r.error is None and (same or r.rule.check == "malformed")]
            for r, (frame, seconds) in zip(
                active, _scan_pool().map(lambda r, b=batch: _scan(r.check, b), active),
                strict=True,
            ):
                r.seconds += seconds
                sink.add(r.rule, batch=batch, frame=frame, remember=r.reports_at_finish)
            if sampler is not None and same:
                sampler.id_field = fields.id
                sampler.offer(batch)
            done += batch.progress
            if progress is not None:
                progress(done, src.total, src.unit)
            if limit is not None and records >= limit:
                break
            t0 = time.perf_counter()
    finally:
        reader.shutdown(wait=True)
        source_batches.close()
    if running is None:  # no batch at all: still judge every rule
        fields, inferred, ctx, running = start_checks(rules, rule_list, None,
                                                      tokenizer=tokenizer, eval_path=eval_path)
    read = Read(running=running, fields=fields, ctx=ctx, inferred=inferred, seen=seen,
                records=records, malformed=malformed,
                mixed=shapes.finding() if shapes is not None else None)
    _revisit(src, running, ctx, limit=limit, records=records, timings=timings,
             progress=progress)
    return read


def _revisit(src: Source, running: list[Running], ctx: Context, *, limit: int | None,
             records: int, timings: dict[str, float], progress: Progress | None) -> None:
    """Read the source once more for the checks that asked to revisit it (exact Jaccard of
    near-duplicate candidates needs their text, which compact state does not keep)."""
    revisiting = []
    for r in running:
        if r.error is None:
            t0 = time.perf_counter()
            if r.check.wants_revisit():
                revisiting.append(r)
            r.seconds += time.perf_counter() - t0
    if not revisiting:
        return
    seen = done = 0
    batches = src.batches()
    try:
        while seen < (limit if limit is not None else records + 1):
            t0 = time.perf_counter()
            batch = next(batches, None)
            timings["read"] += time.perf_counter() - t0
            if batch is None:
                break
            if limit is not None:
                batch = batch.head(limit - seen)
            seen += len(batch)
            if ctx.text_fields or ctx.messages:
                batch.texts(ctx.text_fields, ctx.messages)
            for r in revisiting:
                t0 = time.perf_counter()
                r.check.revisit(batch)
                r.seconds += time.perf_counter() - t0
            done += batch.progress
            if progress is not None:
                progress(done, src.total, src.unit)
    finally:
        batches.close()


def _scan(check: Check, batch: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    frame = check.scan(batch)
    return frame, time.perf_counter() - t0


def _scan_pool() -> ThreadPoolExecutor:
    return shared_pool("scan", available_cores)


def first_with_records(batches: Iterator[Batch], limit: int | None
                       ) -> tuple[Batch | None, Iterator[Batch]]:
    """The batch the fields are inferred from: the first that holds records (within
    ``HOLD_BATCHES``; batches of malformed lines only come first when a file or shard
    starts with them), cut to ``limit``; and all the batches, in read order."""
    held: list[Batch] = []
    for batch in batches:
        held.append(batch)
        if len(batch) or len(held) >= HOLD_BATCHES:
            break
    first = next((b for b in held if len(b)), held[0] if held else None)
    if first is not None and limit is not None and len(first) > limit:
        first = first.head(limit)
    return first, itertools.chain(held, batches)


def start_checks(rules: RuleSet, rule_list: list[Rule], first: Batch | None, *,
                 tokenizer: TokenCounter | None, eval_path: str | None, shards: bool = False
                 ) -> tuple[Fields, dict[str, Any], Context, list[Running]]:
    """The fields (inferred from the corpus's first batch when the rules name none), the
    checks' context, and every rule's check started: what both executors begin with."""
    fields, inferred = rules.fields, {}
    if first is not None:
        fields, inferred = resolve_fields(rules, first, shards=shards)
    text = tuple(fields.text_fields())
    strings = first is not None and holds_strings(first, text, fields.messages)
    ctx = Context(fields=fields, model=rules.model, tokenizer=tokenizer, eval_path=eval_path,
                  strings=strings)
    return fields, inferred, ctx, [start_rule(r, ctx) for r in resolved(rules, rule_list, fields,
                                                                         strings=strings)]


def start_rule(rule: Rule, ctx: Context) -> Running:
    """``rule``'s check, started on ``ctx``; ``config_problem()`` is its error (None: it runs)."""
    cls = registry.get(rule.check)
    assert cls is not None  # the rules loader checked the name
    check = cls(cls.Params(**rule.params), ctx)
    return Running(rule=rule, check=check, error=check.config_problem())
