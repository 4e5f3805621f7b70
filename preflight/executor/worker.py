"""Scanning batches away from the driver, and merging what came back in read order.

A ``Worker`` holds its own instance of every rule's check and scans the batches it is given;
for each batch it returns a ``Scanned``: the findings located (row, file index, id), the
state the scans built (``Check.export_state``), the keyed rows of duplicate checks, the ids
corpus-wide findings may need, and the records the smoke sample could keep. ``Merge`` feeds
those into the driver's checks, findings sink and sampler in read order, so the run ends
exactly as the local loop's would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from preflight.batch import Batch, record_key
from preflight.checks.base import Context
from preflight.config import Fields, RuleSet
from preflight.findings import FindingsSink, batch_ids, locate
from preflight.sampling import Sampler, SampleRow
from preflight.shards import Shape, ShardShapes, batch_shape


@dataclass
class Scanned:
    """What one batch gave a worker."""

    file_index: int
    file: str | None
    records: int
    malformed: int
    progress: int
    columns: list[str]
    findings: list[pl.DataFrame | None]  # per rule, located
    states: list[dict[str, Any]]  # per rule
    keyed: list[pl.DataFrame | None]  # per rule: duplicate checks' keyed rows
    ids: tuple[np.ndarray, pl.Series] | None = None  # record keys and ids
    sample: list[SampleRow] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # per rule, worker time
    shape: Shape | None = None  # a shard's first batch, with inferred fields: its shape


class Worker:
    """The rules' checks, scanning batches on a worker."""

    def __init__(self, rules: RuleSet, fields: Fields, *, keep_ids: bool,
                 sample: tuple[int, int] | None = None,
                 plans: dict[int, dict[str, Any]] | None = None, shapes: bool = False,
                 strings: bool = False) -> None:
        """``strings``: the driver's first batch held strings besides the text (the rules
        it started, ``resolve.resolved``, keep the character checks then)."""
        from preflight.executor.local import start_rule
        from preflight.resolve import rules_eval_path, rules_for, rules_tokenizer

        self.fields = fields
        self.ctx = Context(fields=fields, model=rules.model, tokenizer=rules_tokenizer(rules),
                           eval_path=rules_eval_path(rules), strings=strings)
        self.running = [start_rule(rule, self.ctx) for rule in rules_for(rules, fields,
                                                                           strings=strings)]
        for index, plan in (plans or {}).items():  # the driver's ``scan_plan``s
            self.running[index].check.apply_plan(plan)
        self.keep_ids = keep_ids
        self.sampler = Sampler(*sample, id_field=fields.id) if sample else None
        self.shapes = shapes

    def scan(self, batch: Batch, *, first: bool = False) -> Scanned:
        """Scan one batch with every rule that can run; ``first``: it is the first batch
        with records of its piece (whose shape ``Merge`` compares, with ``shapes``)."""
        shape = batch_shape(batch) if self.shapes and first else None
        if self.ctx.text_fields or self.ctx.messages:
            batch.texts(self.ctx.text_fields, self.ctx.messages)  # shared by the text checks
        ids = batch_ids(batch, self.fields.id)
        found, states, keyed, seconds = [], [], [], []
        for r in self.running:
            t0 = time.perf_counter()
            frame = r.check.scan(batch) if r.error is None else None
            seconds.append(time.perf_counter() - t0)
            found.append(locate(frame, batch, ids) if frame is not None and frame.height
                         else None)
            states.append(r.check.export_state() if r.error is None else {})
            keyed.append(r.check.keyed_rows() if r.error is None else None)
        keys = record_key(np.full(len(batch), batch.file_index), batch.rows)
        out = Scanned(file_index=batch.file_index, file=batch.file, records=len(batch),
                      malformed=len(batch.malformed), progress=batch.progress,
                      columns=batch.seen(self.ctx.text_fields), findings=found, states=states,
                      keyed=keyed, ids=(keys, ids) if self.keep_ids and ids is not None else None,
                      seconds=seconds, shape=shape)
        if self.sampler is not None:
            located = [f.select("file_index", "row").drop_nulls() for f in found if f is not None]
            both = pl.concat(located) if located else None
            hit = (np.unique(record_key(both.get_column("file_index").to_numpy(),
                                        both.get_column("row").to_numpy()))
                   if both is not None else np.zeros(0, np.int64))
            out.sample = self.sampler.candidates(batch, hit)
        return out

    def revisit(self, batch: Batch, plans: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Revisit one batch for the rules with a plan (by rule position); their state."""
        if self.ctx.text_fields or self.ctx.messages:
            batch.texts(self.ctx.text_fields, self.ctx.messages)
        out = {}
        for index, plan in plans.items():
            check = self.running[index].check
            check.apply_plan(plan)
            check.revisit(batch)
            out[index] = check.export_state(revisit=True)
        return out


class Merge:
    """The driver's side: what workers scanned, merged in read order."""

    def __init__(self, running: list[Any], sink: FindingsSink, sampler: Sampler | None,
                 shapes: ShardShapes | None = None) -> None:
        self.running = running
        self.shapes = shapes
        self.sink = sink
        self.sampler = sampler
        self.records = self.malformed = self.progress = 0
        self.seen: set[str] = set()

    def add(self, scanned: Scanned, *, with_keyed: bool = True) -> None:
        """Merge one batch's results (call in read order). Without ``with_keyed`` the
        keyed rows are left out: the caller merges the shared ones (``add_keyed``). A
        shard of another shape than the first (``shapes``) counts only its malformed lines,
        as in the local loop."""
        same = self.shapes is None or self.shapes.matches_shape(
            scanned.file_index, scanned.file, scanned.shape)
        self.records += scanned.records
        self.malformed += scanned.malformed
        self.progress += scanned.progress
        self.seen.update(scanned.columns)
        self.sink.label(scanned.file_index, scanned.file)
        if scanned.ids is not None:
            self.sink.keep_ids(*scanned.ids)
        for r, frame, part, keyed, seconds in zip(self.running, scanned.findings,
                                                  scanned.states, scanned.keyed,
                                                  scanned.seconds, strict=True):
            r.seconds += seconds  # time spent by workers, summed
            if r.error is not None or not (same or r.rule.check == "malformed"):
                continue
            self.sink.add_located(r.rule, frame, scan=True, remember=r.reports_at_finish)
            r.check.merge_state(part)
            if with_keyed and keyed is not None:
                r.check.merge_keyed(keyed)
        if self.sampler is not None and same:
            self.sampler.take(scanned.sample)
