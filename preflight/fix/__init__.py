"""``preflight fix``: a cleaned corpus and a quarantine, with nothing lost.

The gate runs first; each finding then meets its rule's ``fix`` action (or the check's
default, the first of its ``fixes``). Per record, the actions apply in one fixed order:

    repair -> normalize -> strip -> truncate -> drop -> keep_first -> quarantine

``repair`` turns confirmed mojibake back into the characters it stood for (and NFC-normalises);
damage it cannot undo without guessing (U+FFFD, lone surrogates) sends the record to the
quarantine. ``normalize`` applies NFC, ``strip`` deletes the flagged invisible characters (the
allow-listed joiners stay), ``truncate`` cuts a too-long text on the tokenizer's token
boundary and appends ``--marker``. ``drop``, ``keep_first`` (for the non-first members of a
duplicate cluster) and ``quarantine`` move the record to the quarantine, next to its row, id
and reasons, untouched. ``none`` leaves it be.

Invariants: every input unit (record, malformed line, bad element or row, kept as written)
ends in exactly one of the two outputs, in input order; untouched records are copied as they
were (bytes for JSON Lines and CSV, values and schema for Parquet/Arrow: ``units`` reads them
natively, ``writers`` keeps them) and a changed one differs only in the text value changed;
the input is never modified; outputs are written under temporary names in their folders and
put in place together only when every one is complete, through a commit record that the next
run finishes when this one is killed meanwhile (``fix_commit``); the quarantine file is always
written. After
writing, the gate runs again on the clean output with the rules that have a fix action and
read text, and records it still flags (a repair or a truncation can make two records equal)
go to the quarantine in another round, so running ``fix`` on its own output changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from preflight.arguments import check_flag
from preflight.checks.base import Context
from preflight.config import Fields, Rule, RuleSet
from preflight.errors import ConfigError, InputError, OutputError, PreflightFailed
from preflight.fix import manifest as manifests
from preflight.fix.claims import claimed
from preflight.fix.mend import Mender
from preflight.fix.output import dry_round, merge_quarantine, part, write_round
from preflight.fix.plan import ORDER, Plan, default_fix, plan
from preflight.fix.targets import check_paths, manifest_path, output_format, read_files
from preflight.fix.units import Input, open_input
from preflight.fix.writers import OUTPUT_FORMATS
from preflight.fix_commit import commit, recover
from preflight.report.model import Report
from preflight.resolve import rules_for, rules_tokenizer
from preflight.tempfiles import pid_of, sweep, sweep_temp_dirs, temp_dir, write_error
from preflight.wrapped import nothing_checked, wrapped_records

__all__ = ["ORDER", "FixOptions", "plan", "run_fix"]
MAX_ROUNDS = 3
_BLIND_TO_TEXT = frozenset({"label_range", "numeric", "malformed", "schema"})
_UNCHECKED = ("mixed_shards", "unjudged_labels", "unjudged_numbers")  # the gate's blind spots


@dataclass
class FixOptions:
    """Where ``fix`` writes and how."""

    out: Path
    quarantine: Path
    manifest: Path | None = None
    format: str | None = None  # jsonl, csv, parquet or arrow; default: see output_format
    marker: str = ""
    dry_run: bool = False

    def __post_init__(self) -> None:
        """Paths given as strings (the Python API) become Paths, as the CLI's do; an empty
        one or one ending in a slash (a folder: ``Path("out/")`` is ``out``) is refused, as
        is a missing ``out`` or ``quarantine`` or one that is no path (exit 2, not a
        ``TypeError`` from inside the run)."""
        check_flag("FixOptions.dry_run", self.dry_run)  # dry_run="no" ran a dry run
        if not isinstance(self.marker, str):
            raise ConfigError(f"FixOptions.marker must be a string ('' for none), got "
                              f"{self.marker!r:.60} ({type(self.marker).__name__})")
        if self.format is not None and self.format not in OUTPUT_FORMATS:
            raise ConfigError(f"FixOptions.format must be one of {', '.join(OUTPUT_FORMATS)} "
                              f"or None, got {self.format!r:.60}")
        for name in ("out", "quarantine", "manifest"):
            value = getattr(self, name)
            if value is None and name != "manifest":
                raise ConfigError(f"FixOptions.{name} is None; give a file path")
            if value is not None and not isinstance(value, str | os.PathLike):
                raise ConfigError(f"FixOptions.{name} must be a path (str or pathlib.Path), "
                                  f"got {value!r:.60} ({type(value).__name__})")
            if isinstance(value, str):
                if not value.strip():
                    raise ConfigError(f"FixOptions.{name} is empty; give a file path")
                if value.endswith(("/", os.sep)):
                    raise ConfigError(f"FixOptions.{name} {value!r} ends with a slash (a "
                                      "folder); it is one file: name it")
                setattr(self, name, Path(value))
            elif value is not None and not isinstance(value, Path):
                setattr(self, name, Path(value))  # os.PathLike


def run_fix(
    source: Any, rules: RuleSet, options: FixOptions, *, run_gate: Any,
    limit: int | None = None, show_text: bool = False, delimiter: str | None = None,
) -> tuple[Report, dict[str, Any]]:
    """Clean ``source`` into ``options.out`` and ``options.quarantine``; return the gate's
    report on the input and the manifest (or, with ``dry_run``, what would change, its
    examples redacted unless ``show_text``). With ``limit``, only the first ``limit``
    records (and the malformed lines among them) are read, checked and written.

    ``run_gate(source, rules, out)`` runs the gate and returns its Report; the API passes
    ``pipeline.run`` with its display options (``show_text``, progress). ``delimiter``
    forces a CSV input's delimiter; a CSV output keeps the input's."""
    src_path = Path(source)
    found = open_input(src_path, delimiter=delimiter)
    found.limit = limit
    out_format = output_format(options, found.format)
    check_paths(src_path, options, read_files(rules))
    # The verification rounds rerun the rules a fix could give a new finding: those with a
    # fix action that read text (a fix changes only text; labels, numbers and the records'
    # shape stay as they were, and a CSV read back from JSON Lines output would be all text).
    fixable = [r for r in rules.rules if r.enabled and (r.fix or default_fix(r.check)) != "none"
               and r.check not in _BLIND_TO_TEXT]

    notes: list[str] = []  # what this run found a killed one left, and did about it
    for folder in {p.parent for p in (options.out, options.quarantine, manifest_path(options))}:
        dead = {pid_of(p.name) for p in sweep(folder) if "-claim" in p.name}  # killed runs'
        notes += [f"{folder}: the claims of fix run {pid}, which was killed or crashed, "
                  "were removed; this run goes on" for pid in sorted(dead, key=str)]
    sweep_temp_dirs()
    with _workspace(options, notes) as work:
        report = run_gate(src_path, rules, work / "report")
        _refuse_errored_rules(report)
        if wrapped := wrapped_records(report, found.files[0][1] if len(found.files) == 1 else None):
            # a clean copy of the wrapper cleans nothing
            raise InputError(wrapped)
        ctx = Context(
            fields=_fields(report, rules), model=rules.model, tokenizer=rules_tokenizer(rules)
        )
        findings = pl.read_parquet(work / "report" / "findings.parquet")
        _refuse_unchecked_shards(findings)
        # The plan maps each finding's rule to its action: a rule that did not run (the
        # character checks on data with no string besides the text) has no findings.
        the_plan = plan(
            findings,
            rules_for(rules, ctx.fields, strings=True),
            can_truncate=ctx.tokenizer is not None,
            chat=bool(ctx.messages),
        )
        if options.dry_run:  # round one written nowhere: the real run's refusals and counts
            mender = Mender(rules, ctx, options.marker)
            return report, manifests.dry_run(
                found, the_plan, mender, report, show_text=show_text,
                counts=dry_round(found, out_format, the_plan, mender),
                verified=bool(fixable) and the_plan.risky,
            )
        # Outputs are written under temporary names beside their final ones and renamed only
        # when complete; whatever happens, no temporary file is left behind.
        clean = part(options.out, 0, out_format)
        quarantined = part(options.quarantine, 0)
        written = [clean, quarantined]
        try:
            report, manifest = _fix_rounds(
                found,
                out_format,
                rules,
                options,
                report,
                ctx,
                the_plan,
                fixable,
                clean,
                quarantined,
                written,
                run_gate,
                work,
            )
        except OSError as e:
            raise _write_failure(e, options) from e
        else:
            if notes:
                manifest["notes"] = notes
        finally:
            for path in written:
                # never hides why the run failed (on a read-only file system, unlinking even
                # a file that is not there fails)
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
        return report, manifest


@contextlib.contextmanager
def _workspace(options: FixOptions, notes: list[str]) -> Iterator[Path]:
    """A work folder under ``TMPDIR`` for the gate's reports, removed at the end; unless
    this is a dry run, the outputs claimed first: two runs writing them at once would mix
    their files (``claims``), and a commit a killed run left half done finished
    (``commit.recover``); ``notes`` says what was found."""
    finals = (options.out, options.quarantine, manifest_path(options))
    with contextlib.nullcontext() if options.dry_run else claimed(finals, notes):
        if not options.dry_run:
            recover(list(finals), notes)
        work = temp_dir("fix")
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _write_failure(e: OSError, options: FixOptions) -> OutputError:
    """What could not be written, where and why; nothing was put in place."""
    if e.filename:
        name = Path(str(e.filename))
        final = next((p for p in (options.out, options.quarantine, manifest_path(options))
                      if name.name.startswith(f".{p.name}.")), name)
        where = str(final)
    else:  # a write() names no file: say where the outputs and the spill go
        folders = sorted({str(p.parent) for p in (options.out, options.quarantine)})
        where = f"the outputs in {', '.join(folders)} (or TMPDIR {tempfile.gettempdir()})"
    error = write_error(Path(where), e)
    return OutputError(f"{error}; nothing was put in place")


def _refuse_errored_rules(report: Report) -> None:
    """A rule that could not run leaves its faults unknown: fix must not pretend to clean.
    An input with no readable record, or whose records no rule read (``{}``, booleans only,
    with no rules file), has nothing to clean: that is the gate's failure, exit 1."""
    if report.source.records == 0 or nothing_checked(report, set()):
        raise PreflightFailed(report)
    errored = [r for r in report.rules if r.status == "error"]
    if errored:
        reasons = "; ".join(f"{r.id}: {r.message or 'could not run'}" for r in errored)
        raise ConfigError(f"fix refuses to run: {len(errored)} rule(s) could not run "
                          f"({reasons}). Fix the rules file (or the data) and run again; "
                          "nothing was written.")


def _refuse_unchecked_shards(findings: pl.DataFrame) -> None:
    """Shards of another shape than the first (``mixed_shards``) were not scanned, and labels
    or numbers only later shards hold were not judged (``unjudged_labels``,
    ``unjudged_numbers``): copied to the clean output, their faults would pass as cleaned."""
    unchecked = findings.filter(pl.col("code").is_in(_UNCHECKED)).get_column("detail")
    if len(unchecked):
        raise ConfigError(f"fix refuses to run: {'; '.join(unchecked)}; nothing was written "
                          "(those records would reach the clean copy unchecked)")


def _fix_rounds(
    found: Input,
    out_format: str,
    rules: RuleSet,
    options: FixOptions,
    report: Report,
    ctx: Context,
    the_plan: Plan,
    fixable: list[Rule],
    clean: Path,
    quarantined: Path,
    written: list[Path],
    run_gate: Any,
    work: Path,
) -> tuple[Report, dict[str, Any]]:
    """Write round one, then verify and re-fix until no fix-action rule has a finding."""
    counts = write_round(
        found,
        out_format,
        the_plan,
        Mender(rules, ctx, options.marker),
        clean,
        quarantined,
        origin=None,
    )
    rounds = 1
    origin = counts.pop("origin")
    # Stripping, normalising and dropping cannot create a finding (the duplicate checks
    # fold case, NFC and invisible characters away); a repair or a truncation can.
    last_plan = the_plan
    later: dict[tuple[str | None, int], list[dict[str, Any]]] = {}
    while rounds < MAX_ROUNDS and fixable and last_plan.risky:
        again = run_gate(clean, _only(rules, fixable, ctx.fields), work / f"verify{rounds}")
        if all(r.findings == 0 for r in again.rules):
            break
        extra = pl.read_parquet(work / f"verify{rounds}" / "findings.parquet")
        next_plan = plan(
            extra, fixable, can_truncate=ctx.tokenizer is not None, chat=bool(ctx.messages)
        )
        next_clean = part(options.out, rounds, out_format)
        written.append(next_clean)
        more = write_round(
            open_input(clean, out_format, delimiter=found.forced),
            out_format,
            next_plan,
            Mender(rules, ctx, options.marker),
            next_clean,
            quarantined,
            origin=origin,
            later=later,
        )
        origin = more.pop("origin")
        counts["changed"] |= more["changed"]
        counts["quarantined"] += more["quarantined"]
        counts["clean"] = more["clean"]
        the_plan.counts.update(next_plan.counts)
        clean.unlink()
        clean, rounds, last_plan = next_clean, rounds + 1, next_plan
    counts["changed"] = len(counts["changed"] - later.keys())
    if later:
        merge_quarantine(found, quarantined, later, Mender(rules, ctx, ""))
    manifest = manifests.manifest(
        Path(found.path), clean, quarantined, counts, the_plan, report, rounds, options
    )
    manifest["clean"]["path"], manifest["quarantine"]["path"] = (
        str(options.out),
        str(options.quarantine),
    )
    manifest["skipped"] = [s.model_dump() for s in report.source.skipped]
    manifest["fields"] = ctx.fields.model_dump(exclude_none=True)
    # Every output is complete before any is put in place: a manifest that cannot be
    # written leaves the previous outputs as they were.
    target = manifest_path(options)
    written_manifest = part(target, 0)
    written.append(written_manifest)
    try:
        written_manifest.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    except OSError as e:  # a failed write (a full disk) names no file: the message does
        e.filename = e.filename or str(written_manifest)
        raise
    # All three in place, or (killed meanwhile) none until the next run finishes it.
    commit([(clean, options.out), (quarantined, options.quarantine),
            (written_manifest, target)])
    manifest["manifest_path"] = str(target)
    return report, manifest


def _fields(report: Report, rules: RuleSet) -> Fields:
    """The fields the gate used (inferred when the rules declare none)."""
    inferred = rules.fields.is_empty() or rules.given_fields
    return Fields(**report.rules_file.fields) if inferred else rules.fields


def _only(rules: RuleSet, keep: list[Rule], fields: Fields) -> RuleSet:
    """The same rule set (its path too: relative eval and tokenizer paths) with fewer rules
    and the fields the first gate used (inferred ones pinned: the clean output, with records
    set aside, could infer others)."""
    return rules.model_copy(update={"rules": keep, "fields": fields, "given_fields": {}})


# -- writing ----------------------------------------------------------------------------
