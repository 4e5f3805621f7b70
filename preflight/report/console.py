"""The console summary (rich): what was read, a table of rules, the verdict."""

from __future__ import annotations

import shlex
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from preflight.report.diff import ReportDiff
from preflight.report.model import Report, RuleResult, SmokeResult


class PipeConsole(Console):
    """A console whose closed output raises ``BrokenPipeError`` (rich's own handling exits
    with 1, which would read as a failed gate), and which never reads user text (paths,
    ids, hub names such as org/name:config:split) as emoji codes: `:fire:` stays `:fire:`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(emoji=False, **kwargs)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


_STATUS_STYLE = {"pass": "green", "fail": "red", "error": "bold red"}
_SMOKE_STYLE = {"pass": "green", "data_fault": "red", "code_fault": "red", "skipped": "yellow"}
_MAX_EXAMPLES = 3
_MAX_SKIPPED = 10


# What a suggested preset needs besides the fields: without it its rule is an error.
_PRESET_NEEDS = {"classification": "add --num-classes N (or --set model.labels=[...] for class "
                                   "names): the preset checks labels against the model's classes"}

def render_console(report: Report, console: Console, *, examples: int = _MAX_EXAMPLES) -> None:
    """Print the summary of ``report`` to ``console``."""
    src = report.source
    limited = f" (first {src.limit})" if src.limit is not None else ""
    console.print(
        f"[bold]{escape(src.path)}[/] · {src.format}{escape(src.dialect())} · {src.records:,} "
        f"records{limited} · {src.malformed:,} malformed"
    )
    for warning in src.warnings:
        console.print(f"  warning: {warning}", style="yellow", markup=False, highlight=False)
    for s in src.skipped[:_MAX_SKIPPED]:
        console.print(f"  skipped {s.path}: {s.reason}", style="yellow", markup=False,
                      highlight=False)
    if len(src.skipped) > _MAX_SKIPPED:
        console.print(f"  … and {len(src.skipped) - _MAX_SKIPPED:,} more skipped (see "
                      "report.json)", style="yellow", highlight=False)
    for role, why in report.rules_file.inferred.items():
        console.print(f"  inferred {role}: {why}", style="dim", markup=False)
    for note in report.rules_file.notes:
        console.print(f"  note: {note}", style="dim", markup=False)
    for what in report.rules_file.not_checked:
        console.print(f"  not checked: {what}", style="yellow", markup=False,
                      highlight=False)
    if preset := report.rules_file.suggested_preset:
        options = report.rules_file.suggested_options
        said = (f"--preset {preset} (fits the inferred fields)" if options == [] else
                f"--preset {preset} {' '.join(options)} (fits the inferred fields; the "
                "preset's own field names differ)" if options else
                f"the {preset} preset, in a rules file naming your fields (its own field "
                f"names differ): preflight init DATA writes one")
        if preset in _PRESET_NEEDS:
            said += f"; {_PRESET_NEEDS[preset]}"
        console.print(f"  suggested: {said}", style="dim", markup=False, highlight=False)
    table = Table(show_edge=False, header_style="bold", padding=(0, 1))
    for col, justify in (("status", "left"), ("rule", "left"), ("check", "left"),
                         ("severity", "left"), ("violations", "right"), ("share", "right"),
                         ("allowed", "right")):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in report.rules:
        style = _STATUS_STYLE[r.status] if r.blocking or r.status == "pass" else "yellow"
        table.add_row(
            f"[{style}]{r.status.upper()}[/]",
            Text(r.id),
            r.check,
            r.severity,
            f"{r.violations:,}",
            share(r.fraction, r.threshold.get("max_fraction")),
            allowed(r),
        )
    console.print(table)
    for r in report.rules:
        for note in r.notes:
            console.print(f"[bold]{escape(r.id)}[/]: {escape(note)}", style="yellow",
                          highlight=False)
        if r.status == "error":
            console.print(f"[bold]{escape(r.id)}[/] could not run: {escape(r.message or '')}",
                          highlight=False)
        if r.status != "pass" and r.codes:
            codes = ", ".join(f"{c}={n:,}" for c, n in r.codes.items())
            console.print(f"[bold]{escape(r.id)}[/]: {codes}", highlight=False)
        if r.status != "pass" and r.examples and examples:
            for ex in r.examples[:examples]:
                where = f"{ex.file}:" if ex.file else ""
                ident = f" id={ex.id}" if ex.id else ""
                snip = f"  «{ex.snippet}»" if ex.snippet else ""
                at = f"row {where}{ex.row}" if ex.row is not None else "corpus"
                console.print(f"  {at}{ident} {ex.code}: {ex.detail}{snip}",
                              markup=False, highlight=False)
            shown = len(r.examples[:examples])
            if r.findings > shown:
                console.print(f"  … {r.findings - shown:,} more (see report)",
                              style="dim", highlight=False)
    if report.smoke is not None:
        render_smoke(report.smoke, console)
    if report.passed:
        console.print("[bold green]PASS[/] the gate passed")
    else:
        # One reason on the FAIL line; several, one per line (a joined line wraps mid-phrase).
        reasons = report.reasons if len(report.reasons) > 1 else []
        console.print("[bold red]FAIL[/] " + escape(
            f"{len(reasons)} reasons:" if reasons else "; ".join(report.reasons)),
            highlight=False)
        for reason in reasons:
            console.print(f"  {reason}", markup=False, highlight=False)
    for name, path in report.outputs.items():
        console.print(f"  {name}: {path}", style="dim", markup=False)


def share(fraction: float, limit: float | None = None) -> str:
    """A fraction as a percentage for people ("<0.01%" for tiny non-zero shares), with as
    many more digits as it takes to tell it apart from ``limit`` (the rule's
    ``max_fraction``, shown as "≤1.00%"): 3/299 is "1.003%", never "1.00%" on a FAIL row."""
    if 0 < fraction < 0.0001 and not (limit is not None and limit < 0.0001):
        return "<0.01%"
    digits = 2
    if limit is not None and fraction != limit:
        while digits < 6 and f"{fraction:.{digits}%}" == f"{limit:.2%}":
            digits += 1
    return f"{fraction:.{digits}%}"


def allowed(r: RuleResult) -> str:
    """A rule's thresholds as "≤N & ≤P%"."""
    parts = []
    if r.threshold.get("max_count") is not None:
        parts.append(f"≤{r.threshold['max_count']:,}")
    if r.threshold.get("max_fraction") is not None:
        parts.append(f"≤{r.threshold['max_fraction']:.2%}")
    return " & ".join(parts)


def replay_command(smoke: SmokeResult) -> str:
    """The command that reruns the smoke section's replay file (with the model spec it
    recorded, when that is the user's model: a built-in one is inside the file)."""
    command = f"preflight smoke --replay {shlex.quote(smoke.replay or '')}"
    if smoke.model and not smoke.model.startswith("built-in:"):
        command += f" --model {shlex.quote(smoke.model)}"
    return command


def render_smoke(smoke: SmokeResult, console: Console) -> None:
    """Print the smoke test's verdict, its one-line reason and what it found."""
    style = _SMOKE_STYLE[smoke.verdict]
    where = f"{smoke.model or 'no model'} on {smoke.device} ({smoke.precision}), seed {smoke.seed}"
    console.print(f"smoke test [{style}]{smoke.verdict.upper().replace('_', ' ')}[/] · "
                  f"{smoke.samples} rows · {where}", highlight=False)
    console.print(f"  {smoke.reason}", markup=False, highlight=False)
    if smoke.minimal_rows:
        ids = f" (ids {', '.join(smoke.minimal_ids[:10])})" if smoke.minimal_ids else ""
        rows = ", ".join(str(r) for r in smoke.minimal_rows[:10])
        console.print(f"  minimal rows: {rows}{ids}", markup=False, highlight=False)
    if smoke.settings is not None and any(v != "default" for v in smoke.settings.source.values()):
        t = smoke.settings
        console.print(f"  settings: {t.optimizer} lr {t.lr:g}, {t.scheduler}, warm-up "
                      f"{t.warmup_steps}, clip {'off' if t.clip is None else f'{t.clip:g}'}, "
                      f"accum {t.grad_accum}" + (f" (from {t.training_args})"
                                                 if t.training_args else ""),
                      markup=False, highlight=False)
        for note in t.notes:  # a misspelt key, an override, a schedule run as another
            console.print(f"  note: {note}", markup=False, highlight=False)
    for label, value in (("first non-finite module", smoke.first_bad_module),
                         ("first non-finite gradient", smoke.first_bad_param),
                         ("detect_anomaly", smoke.anomaly),
                         ("replay", smoke.replay and replay_command(smoke))):
        if value:
            console.print(f"  {label}: {value}", markup=False, highlight=False)
    for f in smoke.findings:
        if f.severity != "info":
            console.print(f"  {f.severity}: {f.code}: {f.detail}", markup=False,
                          highlight=False)


def render_diff(diff: ReportDiff, console: Console) -> None:
    """Print what changed between two gate runs."""
    console.print(f"old: {diff.old} ({diff.old_verdict}) → new: {diff.new} ({diff.new_verdict})",
                  highlight=False, markup=False)
    moved = diff.changed()
    if moved:
        table = Table(show_edge=False, header_style="bold", padding=(0, 1))
        for col in ("change", "rule", "check", "status", "violations", "delta"):
            table.add_column(col, justify="right" if col in ("violations", "delta") else "left")
        styles = {"worse": "red", "better": "green", "new": "yellow", "removed": "dim"}
        for c in moved:
            status = f"{c.old_status or '—'} → {c.new_status or '—'}"
            counts = f"{_n(c.old_violations)} → {_n(c.new_violations)}"
            delta = f"{c.delta:+,}" if c.delta else ""
            table.add_row(f"[{styles.get(c.change, '')}]{c.change}[/]", Text(c.id), c.check, status,
                          counts, delta)
        console.print(table)
    else:
        console.print("no rule changed")
    for warning in diff.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    old_smoke, new_smoke = diff.smoke
    if old_smoke != new_smoke:
        console.print(f"smoke test: {old_smoke or '—'} → {new_smoke or '—'}", highlight=False)
    console.print("[bold red]WORSE[/] a rule got worse" if diff.worse
                  else "[bold green]OK[/] no rule got worse")


def _n(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"
