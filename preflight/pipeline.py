"""The gate: read batches, run each rule's check, collect findings, decide, write outputs.

``run`` is the one place the flow lives; ``judge`` and ``decide`` are pure functions of the
findings' counts and the rules, so the verdict can be tested without any data.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from preflight.batch import Batch
from preflight.checks import registry
from preflight.checks.base import Check, Context
from preflight.choices import DEFAULT_FORMATS
from preflight.config import Fields, Rule, RuleSet
from preflight.cores import available_cores
from preflight.defaults import applicable, inferred_rules, not_checked, suggest_preset
from preflight.environment import environment, model_facts
from preflight.errors import ConfigError
from preflight.executor.pool import scan_on_pool, uses_pool
from preflight.findings import FindingsSink, Tally
from preflight.hf_folder import folder_of, is_hf_spec, read_facts
from preflight.infer import resolve_fields
from preflight.paths import find_beside
from preflight.report.model import (
    Report,
    RuleResult,
    RulesInfo,
    Skipped,
    SmokeResult,
    SourceInfo,
)
from preflight.report.writer import write_report
from preflight.sampling import Sampler, SampleRow
from preflight.shards import ShardShapes
from preflight.source import Source, open_source
from preflight.source.csv import describe_dialects
from preflight.source.stdin import csv_note, is_stdin
from preflight.tempfiles import sweep, sweep_temp_dirs
from preflight.threads import shared_pool
from preflight.tokenizer.counter import TokenCounter
from preflight.tokenizer.load import load_tokenizer

Progress = Callable[[int, int, str], None]
IMPLICIT_MALFORMED = Rule(id="malformed", check="malformed", severity="error")
IMPLICIT_VOCAB = Rule(id="vocab", check="vocab", severity="error")


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


def run(
    source: Any,
    rules: RuleSet,
    *,
    out: str | Path | None = None,
    limit: int | None = None,
    strict: bool = False,
    show_text: bool = False,
    progress: Progress | None = None,
    smoke: bool = False,
    formats: tuple[str, ...] = DEFAULT_FORMATS,
    md_max_chars: int | None = None,
    executor: str = "local",
    address: str | None = None,
    findings_dir: Path | None = None,
    workers: int | None = 1,
) -> Report:
    """Run the gate over ``source`` with ``rules``; write outputs into ``out`` if given
    (with no ``out``, ``findings_dir`` receives ``findings.parquet`` alone, for
    ``Report.findings()``).
    With ``smoke``, the smoke test runs after the checks (on a sample that includes rows
    they flagged) and its verdict joins the gate's. ``executor`` is ``local`` (this
    process) or ``ray`` (Ray Data; ``address`` names the cluster, default: start one
    locally or join ``RAY_ADDRESS``); ``workers``: processes of the local executor (1: this
    process alone; more: a process pool, for inputs large enough; None: one per core from
    250 MB of input on 4 cores or more, see ``pool.default_workers``). All give the same
    findings."""
    started = time.perf_counter()
    rules, notes = with_model_folder(rules)
    tokenizer = rules_tokenizer(rules)  # a config error: exit 2 before any data is read
    eval_path = rules_eval_path(rules)
    smoke_cfg = rules.smoke
    if smoke:
        from preflight.smoke import check_setup

        # A bad --model, --checkpoint or --training-args, before the read, not after it;
        # the training-args file may set the seed, which draws the sample.
        smoke_cfg = check_setup(rules)
    src = source if isinstance(source, Source) else open_source(source)
    out_dir = Path(out) if out is not None else None
    if out_dir is not None:
        check_out_dir(out_dir, src)
        sweep(out_dir)  # what killed runs left there
    sweep_temp_dirs()
    # The smoke test's sample is drawn while reading; the sink tells it the flagged rows.
    sampler = Sampler(smoke_cfg.samples, smoke_cfg.seed) if smoke else None
    sink = FindingsSink(out_dir if out_dir is not None else findings_dir, show_text=show_text,
                        flagged=sampler.flagged if sampler is not None else None)
    # Whatever stops the run (an error, Ctrl-C during the smoke stage), no half-written
    # findings file stays behind; after a successful close this does nothing.
    try:
        timings: dict[str, float] = {"read": 0.0}
        rule_list = gate_rules(rules)
        if rule_list and rule_list[0] is IMPLICIT_MALFORMED:
            notes.append("added rule 'malformed' (severity error): unreadable lines never pass")
        if any(r.check == "vocab" for r in rule_list) and not any(
                r.check == "vocab" for r in rules.rules):
            notes.append(f"added rule {rule_list[-1].id!r} (severity error): the model is "
                         "known, so its embedding is checked against the tokenizer and corpus")
        if off := [repr(r.id) for r in rules.rules if not r.enabled]:
            notes.append(f"rule(s) {', '.join(off)} not run (enabled: false, --only, --skip)")

        if workers is None:
            from preflight.executor.pool import default_workers

            workers = default_workers(src, rule_list) if executor == "local" else 1
        elif executor == "local" and workers > (usable := available_cores()):
            notes.append(f"workers: {workers} asked, {usable} run: this process may use "
                         f"{usable} core(s) (its affinity and cgroup quota), and a worker "
                         "past them adds memory, not speed")
            workers = usable
        if executor == "ray":
            from preflight.executor.ray import scan_on_ray

            read = scan_on_ray(src, rules, rule_list, tokenizer=tokenizer, eval_path=eval_path,
                               sink=sink, sampler=sampler, limit=limit, address=address,
                               timings=timings, progress=progress)
        elif executor == "local" and uses_pool(src, workers):
            read = scan_on_pool(src, rules, rule_list, workers=workers, tokenizer=tokenizer,
                                eval_path=eval_path, sink=sink, sampler=sampler, limit=limit,
                                timings=timings, progress=progress)
        else:
            read = _read_local(src, rules, rule_list, tokenizer=tokenizer, eval_path=eval_path,
                               sink=sink, sampler=sampler, limit=limit, timings=timings,
                               progress=progress)
            _second_read(src, read.running, read.ctx, limit=limit, records=read.records,
                         timings=timings, progress=progress)
        running, fields = read.running, read.fields
        if not running:
            raise ConfigError("no rule to run: enabled: false, --only or --skip left none "
                              "that applies to this data")
        kept = {r.rule.id for r in running}
        added = [r.rule for r in running if r.rule not in rule_list]
        if dropped := [repr(r.id) for r in rule_list if r.id not in kept]:
            notes.append(f"rule(s) {', '.join(dropped)} not run: the data has no text field")
        notes += [f"added rule {r.id!r} ({r.check}, severity {r.severity}): the data has "
                  f"{_role_of(r, fields)}" for r in added]
        records, malformed = read.records, read.malformed
        for r in running:
            if r.error is None:
                t0 = time.perf_counter()
                sink.add(r.rule, frame=r.check.finish())
                r.stats = r.check.summary()
                r.seconds += time.perf_counter() - t0
            timings[f"rule:{r.rule.id}"] = round(r.seconds, 4)

        if read.mixed is not None:  # on the schema rule, else the first one
            target = next((r for r in running if r.rule.check == "schema"), running[0])
            sink.add(target.rule, frame=read.mixed)
        total = records + malformed
        results = []
        for r in running:
            error = r.error or _could_not_run(r.check, read.seen, records)
            results.append(_result(r.rule, sink.tally(r.rule.id), total=total, error=error,
                                   stats=r.stats, strict=strict,
                                   notes=r.check.notes() if error is None else []))
        smoke_result = None
        if sampler is not None:
            t0 = time.perf_counter()
            smoke_result = _smoke(src, rules, fields=fields, tokenizer=tokenizer, sampler=sampler,
                                  out_dir=out_dir, limit=limit, records=records, progress=progress,
                                  fetch=read.fetch)
            timings["smoke"] = round(time.perf_counter() - t0, 4)
        verdict, reasons = decide(results, records=records, smoke=smoke_result)
        delimiter, delimiter_from = describe_dialects(src.dialects)
        timings["read"] = round(timings["read"], 4)
        report = Report(
            verdict=verdict,
            strict=strict,
            reasons=reasons,
            source=SourceInfo(
                path=src.path,
                format=src.format,
                files=len(src.files) or 1,
                records=records,
                malformed=malformed,
                total=total,
                limit=limit,
                fingerprint=src.fingerprint(),
                skipped=[Skipped(path=name, reason=why) for name, why in src.skipped],
                delimiter=delimiter,
                delimiter_from=delimiter_from,
                warnings=list(src.warnings) + _stdin_notes(src, records, malformed),
            ),
            rules_file=RulesInfo(
                path=rules.path,
                preset=rules.preset,
                sha256=rules.sha256,
                fields=fields.model_dump(exclude_none=True),
                inferred=read.inferred,
                notes=notes,
                not_checked=not_checked(rules, fields, added),
                suggested_preset=suggest_preset(fields) if read.inferred else None,
            ),
            rules=results,
            timings=timings,
            environment=environment(),
            smoke=smoke_result,
        )
        report.environment["executor"] = executor
        if executor == "local":
            report.environment["workers"] = read.cluster.get("workers", 1)
        if executor == "ray":
            report.environment["ray"] = read.cluster
        if smoke_result is not None:
            report.environment.update(seed=smoke_result.seed, cuda=smoke_result.cuda,
                                      cudnn=smoke_result.cudnn, gpu=smoke_result.gpu)
            base = Path(rules.path).parent if rules.path else None
            spec = smoke_result.model or ""
            if base is not None and ".py:" in spec and not Path(spec.split(":")[0]).exists():
                spec = str(base / spec)  # a module named beside the rules file
            report.environment.update(model_facts(
                spec if not spec.startswith("built-in:") else None,
                (smoke_result.checkpoint or {}).get("path")))
        t0 = time.perf_counter()
        if out_dir is not None:

            def stamp() -> None:
                report.timings["report"] = round(time.perf_counter() - t0, 4)

            report.outputs = sink.close()
            stamp()
            # total: the run up to the report files, which show it (so report.json renders
            # them again identically); report: findings.parquet and the files rendered.
            report.timings["total"] = round(time.perf_counter() - started, 4)
            write_report(report, out_dir, formats, md_max_chars=md_max_chars,
                         before_json=stamp)
        else:
            if findings_dir is not None:
                report._findings_file = Path(sink.close()["findings"])
            report.timings["total"] = round(time.perf_counter() - started, 4)
        return report
    finally:
        sink.abort()


def check_out_dir(out: Path, src: Source) -> None:
    """A ``ConfigError`` (exit 2, before any work) when ``out`` cannot be the report
    folder: it is a file (the input, say), or it lies in a folder being read, where the
    next run would read the reports as data."""
    for probe in (out, *out.parents):
        if probe.is_dir():
            break
        if probe.exists():
            is_input = any(probe.resolve() == f.resolve() for f in src.files)
            what = "the input" if is_input else "a file"
            where = "is " + what if probe == out else f"lies under {probe}, which is {what}"
            raise ConfigError(f"--out {out} {where}; --out names the folder for the report "
                              "(e.g. --out preflight-report)")
    root = Path(src.path)
    if src.files and root.is_dir():
        root, target = root.resolve(), out.resolve()
        if target == root or root in target.parents:
            where = "is" if target == root else "is inside"
            raise ConfigError(f"--out {out} {where} the input folder {src.path}, whose files "
                              "are being read; write the report elsewhere")


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


def _read_local(src: Source, rules: RuleSet, rule_list: list[Rule], *,
                tokenizer: TokenCounter | None, eval_path: str | None, sink: FindingsSink,
                sampler: Sampler | None, limit: int | None, timings: dict[str, float],
                progress: Progress | None) -> Read:
    """The local executor: read batches in order and scan each with every rule."""
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
                    rules, rule_list, first, tokenizer=tokenizer, eval_path=eval_path)
                timings["setup"] = round(time.perf_counter() - t_setup, 4)
                keep_ids = any(r.reports_at_finish for r in running)
                if inferred and len(src.files) > 1:
                    shapes = ShardShapes(fields)
            # A shard unlike the first (chat among text): its lines are still read.
            same = shapes is None or shapes.matches(batch)
            seen.update(batch.frame.columns)
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
    return Read(running=running, fields=fields, ctx=ctx, inferred=inferred, seen=seen,
                records=records, malformed=malformed,
                mixed=shapes.finding() if shapes is not None else None)


def _smoke(src: Source, rules: RuleSet, *, fields: Fields, tokenizer: TokenCounter | None,
           sampler: Sampler, out_dir: Path | None, limit: int | None, records: int,
           progress: Progress | None,
           fetch: Callable[[set[int]], list[SampleRow]] | None = None) -> SmokeResult:
    """The smoke stage (torch is imported here, only when it runs)."""
    if records == 0:
        return SmokeResult(verdict="skipped", reason="no readable records",
                           seed=rules.smoke.seed)
    from preflight.smoke import run_smoke

    t0 = time.perf_counter()
    if fetch is not None:  # rows flagged at the end, fetched where they were read
        if missing := sampler.missing():
            sampler.hold(fetch(missing))
        sample = sampler.finish(iter(()), limit=limit)
    else:
        with contextlib.closing(src.batches()) as batches:
            sample = sampler.finish(batches, limit=limit)
    return run_smoke(sample, rules, fields=fields, tokenizer=tokenizer, out_dir=out_dir,
                     progress=progress, sampled_in=time.perf_counter() - t0, records=records)


def gate_rules(rules: RuleSet) -> list[Rule]:
    """The rules as the gate runs them: with an implicit `malformed` rule first when none is
    listed, since unreadable lines never pass, and an implicit `vocab` rule last when the
    model is known (an ``hf:`` folder, or ``model.vocab_size`` with a tokenizer) and none is
    listed, since an id past the embedding kills the run."""
    listed = rules.rules  # a rule listed but not enabled is not replaced by an implicit one
    out = [r for r in listed if r.enabled]
    if not any(r.check == "malformed" for r in listed):
        out.insert(0, IMPLICIT_MALFORMED)
    known = is_hf_spec(rules.smoke.model) or (rules.model.vocab_size and rules.model.tokenizer)
    if known and not any(r.check == "vocab" for r in listed):
        taken = {r.id for r in listed}
        rule = IMPLICIT_VOCAB
        if rule.id in taken:
            rule = rule.model_copy(update={"id": "model-vocab"})
        out.append(rule)
    return out


def rules_for(rules: RuleSet, fields: Fields) -> list[Rule]:
    """Every rule the gate runs once the fields are known: ``gate_rules`` and, for the
    default rule set, the rules the fields call for (``preflight.defaults``)."""
    return _resolved(rules, gate_rules(rules), fields)


def _resolved(rules: RuleSet, rule_list: list[Rule], fields: Fields) -> list[Rule]:
    return [*applicable(rules, rule_list, fields)[0], *inferred_rules(rules, fields)]


def _stdin_notes(src: Source, records: int, malformed: int) -> list[str]:
    """A note for CSV piped into ``-`` (read as JSON Lines, every line malformed)."""
    if not (is_stdin(src.path) and src.files):
        return []
    note = csv_note(src.files[0], records=records, malformed=malformed)
    return [note] if note else []


def _role_of(rule: Rule, fields: Fields) -> str:
    declared = fields.declared()
    for role in ("messages", "label", "numeric", "target", "features"):
        if role in declared and (rule.check != "label_range" or role == "label"):
            names = ", ".join(map(repr, declared[role]))
            return f"a {role} field ({names})" if role != "numeric" else f"numbers in {names}"
    return "the fields it needs"


def with_model_folder(rules: RuleSet) -> tuple[RuleSet, list[str]]:
    """The rules with what an ``hf:``/``hf-config:`` model folder (``smoke.model``) tells the
    gate, read from its files without building the model: ``model.tokenizer`` (its
    tokenizer) and ``model.vocab_size`` (its embedding rows), each only where the rules
    leave it unset; and notes saying what was read."""
    spec = rules.smoke.model
    if not is_hf_spec(spec):
        return rules, []
    assert spec is not None
    base = Path(rules.path).parent if rules.path else None
    folder = folder_of(spec, base=base)
    facts = read_facts(folder)
    update: dict[str, Any] = {}
    if rules.model.tokenizer is None and facts.tokenizer is not None:
        update["tokenizer"] = str(facts.tokenizer)
    if rules.model.vocab_size is None and facts.vocab_size is not None:
        update["vocab_size"] = facts.vocab_size
    if not update:
        return rules, []
    read = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                     for k, v in update.items())
    model = rules.model.model_copy(update=update)
    return rules.model_copy(update={"model": model}), [f"model facts from {spec}: {read}"]


def rules_tokenizer(rules: RuleSet) -> TokenCounter | None:
    """Load the tokenizer the rules name (relative paths also tried beside the rules file)."""
    if not rules.model.tokenizer:
        return None
    base = Path(rules.path).parent if rules.path else None
    return load_tokenizer(rules.model.tokenizer, base=base)


def rules_eval_path(rules: RuleSet) -> str | None:
    """The eval file the rules name, tried as given and beside the rules file."""
    if not rules.eval:
        return None
    base = Path(rules.path).parent if rules.path else None
    return str(find_beside(rules.eval, base, what="eval file"))


def _second_read(src: Source, running: list[Running], ctx: Context, *, limit: int | None,
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
                 tokenizer: TokenCounter | None, eval_path: str | None
                 ) -> tuple[Fields, dict[str, Any], Context, list[Running]]:
    """The fields (inferred from the corpus's first batch when the rules name none), the
    checks' context, and every rule's check started: what both executors begin with."""
    fields, inferred = rules.fields, {}
    if first is not None:
        fields, inferred = resolve_fields(rules, first)
    ctx = Context(fields=fields, model=rules.model, tokenizer=tokenizer, eval_path=eval_path)
    return fields, inferred, ctx, [start_rule(r, ctx) for r in _resolved(rules, rule_list, fields)]


def start_rule(rule: Rule, ctx: Context) -> Running:
    cls = registry.get(rule.check)
    assert cls is not None  # the rules loader checked the name
    check = cls(cls.Params(**rule.params), ctx)
    return Running(rule=rule, check=check, error=check.config_problem())


def _could_not_run(check: Check, seen: set[str], records: int) -> str | None:
    if records == 0:
        return None
    missing = [f for f in check.required_fields() if f not in seen]
    if missing:
        have = ", ".join(sorted(seen)) or "none"
        return f"field(s) {', '.join(missing)} not found in the data (fields seen: {have})"
    return None


def _result(rule: Rule, tally: Tally, *, total: int, error: str | None,
            stats: dict[str, Any], strict: bool, notes: list[str]) -> RuleResult:
    max_count, max_fraction = rule.allowed()
    status = "error" if error else judge(tally.violations, total, rule)
    blocking = status == "error" or rule.severity == "error" or (
        strict and rule.severity == "warn"
    )
    return RuleResult(
        id=rule.id,
        check=rule.check,
        severity=rule.severity,
        status=status,
        blocking=blocking,
        violations=tally.violations,
        findings=tally.findings,
        fraction=round(violation_share(tally.violations, total), 6),
        threshold={"max_count": max_count, "max_fraction": max_fraction},
        codes=dict(sorted(tally.codes.items())),
        examples=tally.examples,
        message=error,
        stats=stats,
        fix=rule.fix,
        notes=notes,
    )


def violation_share(violations: int, total: int) -> float:
    """Violations per record checked, at most 1: a corpus-level finding ("class 3 never
    occurs") is a violation of its own, so with every record flagged the count can pass
    the records."""
    return min(violations / total, 1.0) if total else 0.0


def judge(violations: int, total: int, rule: Rule) -> str:
    """A rule's status from its violation count: ``pass`` or ``fail``."""
    max_count, max_fraction = rule.allowed()
    fraction = violation_share(violations, total)
    over_count = max_count is not None and violations > max_count
    over_fraction = max_fraction is not None and fraction > max_fraction
    return "fail" if over_count or over_fraction else "pass"


def decide(results: list[RuleResult], *, records: int,
           smoke: SmokeResult | None = None) -> tuple[str, list[str]]:
    """The gate's verdict and its reasons, from the rule results and the smoke test."""
    reasons = []
    if records == 0:
        reasons.append("no readable records in the input")
    for r in results:
        if r.blocking and r.status == "error":
            reasons.append(f"rule {r.id!r} could not run: {r.message}")
        elif r.blocking and r.status == "fail":
            reasons.append(f"rule {r.id!r} ({r.severity}) failed: {r.violations} violation(s)")
    if smoke is not None and smoke.failed:
        files = smoke.minimal_files or [None] * len(smoke.minimal_rows)
        rows = ", ".join(f"{f}:{r}" if f else str(r)
                         for f, r in zip(files[:10], smoke.minimal_rows[:10], strict=False))
        more = " …" if len(smoke.minimal_rows) > 10 else ""
        reasons.append(f"smoke test: {smoke.verdict}: {smoke.reason}"
                       + (f" (rows {rows}{more})" if rows else ""))
    return ("fail" if reasons else "pass"), reasons
