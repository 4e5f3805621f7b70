"""The gate: read batches, run each rule's check, collect findings, decide, write outputs.

``run`` is the one place the flow lives, as a few named steps: the rules as the gate runs
them (``preflight.resolve``), the read and scan where the executor says
(``preflight.executor.schedule``: the local loop, the process pool or Ray), the checks
finished, the smoke stage, the verdict (``preflight.verdict``: pure functions of the
findings' counts and the rules), and the report built and written.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from preflight.choices import DEFAULT_FORMATS
from preflight.config import Fields, Rule, RuleSet, SmokeConfig
from preflight.defaults import not_checked, suggest_preset, suggested_options
from preflight.environment import environment, model_facts
from preflight.errors import ConfigError
from preflight.executor.local import Read, Running
from preflight.executor.schedule import scan, worker_count
from preflight.findings import FindingsSink
from preflight.fix_commit import refuse_pending
from preflight.infer import RECORDS_IN
from preflight.out_folder import check_out_dir, clear_unread, locked_out_dir
from preflight.paths import find_beside, rules_base
from preflight.report.model import (
    Report,
    RuleResult,
    RulesInfo,
    Skipped,
    SmokeResult,
    SourceInfo,
)
from preflight.report.writer import clear_stale, write_report
from preflight.resolve import (
    IMPLICIT_MALFORMED,
    gate_rules,
    role_of,
    rules_eval_path,
    rules_tokenizer,
    with_model_folder,
)
from preflight.sampling import Sampler, SampleRow
from preflight.source import Source, open_source
from preflight.source.csv_dialect import describe_dialects
from preflight.source.jsonl_layout import layout_note
from preflight.source.stdin import is_stdin, stdin_note
from preflight.tempfiles import sweep, sweep_temp_dirs
from preflight.tokenizer.counter import TokenCounter
from preflight.verdict import could_not_run, decide, rule_result
from preflight.wrapped import nothing_checked, one_object_note, wrapped_records

__all__ = ["Progress", "check_out_dir", "clear_unread", "run"]

Progress = Callable[[int, int, str], None]


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
    refuse_pending(src.files)  # an output of a fix run killed while putting it in place
    if out is not None and not str(out).strip():  # Path("") is the working directory
        raise ConfigError("out is empty; name the folder for the report "
                          "(e.g. out='preflight-report'), or None to write none")
    out_dir = Path(out) if out is not None else None
    with contextlib.ExitStack() as stack:
        if out_dir is not None:
            checkpoint = (find_beside(smoke_cfg.checkpoint, rules_base(rules), what="checkpoint")
                          if smoke and smoke_cfg.checkpoint else None)
            check_out_dir(out_dir, src, eval_path=eval_path, checkpoint=checkpoint)
            stack.enter_context(locked_out_dir(out_dir))  # one run at a time writes there
            sweep(out_dir)  # what killed runs left there
            clear_stale(out_dir)  # and the last run's report files, in every format
        return _gate(src, rules, out_dir=out_dir, findings_dir=findings_dir, notes=notes,
                     tokenizer=tokenizer, eval_path=eval_path, smoke_cfg=smoke_cfg,
                     smoke=smoke, limit=limit, strict=strict, show_text=show_text,
                     progress=progress, formats=formats, md_max_chars=md_max_chars,
                     executor=executor, address=address, workers=workers, started=started)


def _gate(src: Source, rules: RuleSet, *, out_dir: Path | None, findings_dir: Path | None,
          notes: list[str], tokenizer: TokenCounter | None, eval_path: str | None,
          smoke_cfg: SmokeConfig, smoke: bool, limit: int | None, strict: bool,
          show_text: bool, progress: Progress | None, formats: tuple[str, ...],
          md_max_chars: int | None, executor: str, address: str | None,
          workers: int | None, started: float) -> Report:
    """The run once its outputs are settled: read and check, judge, smoke test, write."""
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
        notes += _rule_notes(rules, rule_list)
        workers, worker_notes = worker_count(workers, executor, src, rule_list)
        notes += worker_notes
        read = scan(src, rules, rule_list, executor=executor, workers=workers,
                    address=address, tokenizer=tokenizer, eval_path=eval_path, sink=sink,
                    sampler=sampler, limit=limit, timings=timings, progress=progress)
        if not read.running:
            raise ConfigError("no rule to run: enabled: false, --only or --skip left none "
                              "that applies to this data")
        added = [r.rule for r in read.running if r.rule not in rule_list]
        notes += _read_notes(rule_list, read.running, added, read.fields)
        results = _rule_results(read, sink, timings, strict=strict)
        smoke_result = None
        if sampler is not None:
            t0 = time.perf_counter()
            smoke_result = _smoke(src, _named_classes(rules, results), fields=read.fields,
                                  tokenizer=tokenizer,
                                  sampler=sampler, out_dir=out_dir, limit=limit,
                                  records=read.records, progress=progress, fetch=read.fetch)
            timings["smoke"] = round(time.perf_counter() - t0, 4)
        verdict, reasons = decide(results, records=read.records, smoke=smoke_result)
        report = _report(src, rules, read, verdict=verdict, reasons=reasons, results=results,
                         notes=notes, added=added, timings=timings, smoke=smoke_result,
                         strict=strict, limit=limit, executor=executor)
        if wrapped := (wrapped_records(report, src.files[0] if len(src.files) == 1 else None)
                       or nothing_checked(report, read.seen)):
            # nothing inside was checked: fail closed
            report.verdict, report.reasons = "fail", [wrapped, *report.reasons]
        _write(report, sink, out_dir=out_dir, findings_dir=findings_dir, formats=formats,
               md_max_chars=md_max_chars, started=started)
        return report
    finally:
        sink.abort()


def _rule_notes(rules: RuleSet, rule_list: list[Rule]) -> list[str]:
    """Notes on the rules the gate added or left out before the read (``gate_rules``)."""
    notes = []
    if rule_list and rule_list[0] is IMPLICIT_MALFORMED:
        notes.append("added rule 'malformed' (severity error): unreadable lines never pass")
    if any(r.check == "vocab" for r in rule_list) and not any(
            r.check == "vocab" for r in rules.rules):
        notes.append(f"added rule {rule_list[-1].id!r} (severity error): the model is "
                     "known, so its embedding is checked against the tokenizer and corpus")
    if off := [repr(r.id) for r in rules.rules if not r.enabled]:
        notes.append(f"rule(s) {', '.join(off)} not run (enabled: false, --only, --skip)")
    return notes


def _read_notes(rule_list: list[Rule], running: list[Running], added: list[Rule],
                fields: Fields) -> list[str]:
    """Notes on the rules the fields found by the read left out or called for."""
    kept = {r.rule.id for r in running}
    notes = []
    if dropped := [repr(r.id) for r in rule_list if r.id not in kept]:
        notes.append(f"rule(s) {', '.join(dropped)} not run: the data has no text field")
    notes += [f"added rule {r.id!r} ({r.check}, severity {r.severity}): the data has "
              f"{role_of(r, fields)}" for r in added]
    return notes


def _rule_results(read: Read, sink: FindingsSink, timings: dict[str, float], *,
                  strict: bool) -> list[RuleResult]:
    """Finish every check (the findings it keeps for the end, its stats), then judge each
    rule on its findings."""
    running = read.running
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
    total = read.records + read.malformed
    results = []
    for r in running:
        error = r.error or could_not_run(r.check, read.seen, read.records)
        results.append(rule_result(r.rule, sink.tally(r.rule.id), total=total, error=error,
                                   stats=r.stats, strict=strict,
                                   notes=r.check.notes() if error is None else []))
    return results


def _named_classes(rules: RuleSet, results: list[RuleResult]) -> RuleSet:
    """``rules`` for the smoke stage: where the label rule took class names from the data
    (no ``model.labels``), those names as the declared labels, so the built-in model maps
    them to class indices in sorted order instead of skipping."""
    for r in results:
        if r.check == "label_range" and r.stats.get("class_names") and r.stats["classes"]:
            model = rules.model.model_copy(update={"labels": sorted(r.stats["classes"])})
            return rules.model_copy(update={"model": model})
    return rules


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


def _report(src: Source, rules: RuleSet, read: Read, *, verdict: str, reasons: list[str],
            results: list[RuleResult], notes: list[str], added: list[Rule],
            timings: dict[str, float], smoke: SmokeResult | None, strict: bool,
            limit: int | None, executor: str) -> Report:
    """The report of the run: the source read, the rules and their results, the verdict,
    and where it ran."""
    delimiter, delimiter_from = describe_dialects(src.dialects)
    timings["read"] = round(timings["read"], 4)
    records, malformed, fields = read.records, read.malformed, read.fields
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
            total=records + malformed,
            limit=limit,
            fingerprint=src.fingerprint(),
            skipped=[Skipped(path=name, reason=why) for name, why in src.skipped],
            delimiter=delimiter,
            delimiter_from=delimiter_from,
            warnings=(list(src.warnings) + _stdin_notes(src, records, malformed)
                      + one_object_note(src.format, src.files, records,
                                        stdin=is_stdin(src.path))
                      + _layout_notes(src, records, malformed)),
        ),
        rules_file=RulesInfo(
            path=rules.path,
            preset=rules.preset,
            sha256=rules.sha256,
            fields=fields.model_dump(exclude_none=True),
            inferred={k: v for k, v in read.inferred.items() if k != RECORDS_IN},
            records_in=read.inferred.get(RECORDS_IN),
            notes=notes,
            not_checked=not_checked(rules, fields, added),
            suggested_preset=(preset := suggest_preset(fields) if read.inferred else None),
            suggested_options=suggested_options(preset, fields) if preset else [],
        ),
        rules=results,
        timings=timings,
        environment=environment(),
        smoke=smoke,
    )
    report.environment["executor"] = executor
    if executor == "local":
        report.environment["workers"] = read.cluster.get("workers", 1)
    if executor == "ray":
        report.environment["ray"] = read.cluster
    if smoke is not None:
        report.environment.update(seed=smoke.seed, cuda=smoke.cuda, cudnn=smoke.cudnn,
                                  gpu=smoke.gpu)
        base = rules_base(rules)
        spec = smoke.model or ""
        if base is not None and ".py:" in spec and not Path(spec.split(":")[0]).exists():
            spec = str(base / spec)  # a module named beside the rules file
        report.environment.update(model_facts(
            spec if not spec.startswith("built-in:") else None,
            (smoke.checkpoint or {}).get("path")))
    return report


def _stdin_notes(src: Source, records: int, malformed: int) -> list[str]:
    """A note for CSV or a JSON array piped into ``-`` (read as JSON Lines: nearly every
    line malformed)."""
    if not (is_stdin(src.path) and src.files):
        return []
    note = stdin_note(src.files[0], records=records, malformed=malformed)
    return [note] if note else []


def _layout_notes(src: Source, records: int, malformed: int) -> list[str]:
    """A note for a ``.jsonl`` file not laid out one object per line (``jsonl_layout``)."""
    if is_stdin(src.path):
        return []
    note = layout_note(src.files, src.format, records=records, malformed=malformed)
    return [note] if note else []


def _write(report: Report, sink: FindingsSink, *, out_dir: Path | None,
           findings_dir: Path | None, formats: tuple[str, ...], md_max_chars: int | None,
           started: float) -> None:
    """Close the findings file and write the report files into ``out_dir``; the report's
    last timings (``report``, ``total``) are stamped on the way."""
    t0 = time.perf_counter()
    if out_dir is not None:

        def stamp() -> None:
            report.timings["report"] = round(time.perf_counter() - t0, 4)

        report.outputs = sink.close()
        stamp()
        # total: the run up to the report files, which show it (so report.json renders
        # them again identically); report: findings.parquet and the files rendered.
        report.timings["total"] = round(time.perf_counter() - started, 4)
        write_report(report, out_dir, formats, md_max_chars=md_max_chars, before_json=stamp)
    else:
        if findings_dir is not None:
            report._findings_file = Path(sink.close()["findings"])
        report.timings["total"] = round(time.perf_counter() - started, 4)
