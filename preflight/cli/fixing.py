"""``preflight fix``: a cleaned copy of DATA and a quarantine, each rule's fix action applied,
and the summary of what changed (or, with --dry-run, would)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from preflight.cli.console import ProgressBar, err_console, out_console
from preflight.cli.exits import guarded, stdout_may_close
from preflight.cli.options import (
    INPUT,
    PATH,
    delimiter_option,
    field_options,
    file_path,
    no_stdin_outputs,
    rule_set,
    workers_option,
)

if TYPE_CHECKING:
    from rich.console import Console


@click.command()
@click.argument("data", type=INPUT)
@click.option("--out", type=file_path("clean.jsonl"), required=True,
              help="The cleaned corpus; its suffix picks the format (.jsonl, .csv, .parquet, "
                   ".arrow) unless --format says.")
@click.option("--quarantine", type=file_path("rejected.jsonl"), required=True,
              help="Records set aside, with their row, id and reasons (JSON Lines).")
@click.option("--rules", "rules_file", type=PATH, help="Rules file (YAML).")
@click.option("--preset", help="A shipped rule set instead of a file.")
@click.option("--manifest", type=file_path("fix-manifest.json"),
              help="Where to write the manifest [default: fix-manifest.json beside --out].")
@click.option("--format", "out_format", type=click.Choice(["jsonl", "csv", "parquet", "arrow"]),
              help="Output format [default: --out's suffix, else Parquet for Parquet, Arrow "
                   "for Arrow, JSON Lines for the rest].")
@click.option("--marker", default="", help="Appended to truncated texts, e.g. ' [...]'.")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--context-window", type=click.IntRange(min=1), help="Model context length.")
@click.option("--tokenizer", help="tokenizer.json, a tokenizer folder, a Hugging Face name in "
              "the local cache (org/name), or tiktoken:NAME.")
@click.option("--num-classes", type=click.IntRange(min=1), help="Number of classes.")
@click.option("--eval", "eval_path", type=PATH,
              help="Eval file: set aside train records found in it (adds an overlap rule if "
                   "none).")
@click.option("--limit", type=click.IntRange(min=1),
              help="Fix only the first N records (the outputs hold only them).")
@click.option("--set", "sets", multiple=True, metavar="RULE_ID.PARAM=VALUE",
              help="Set a rule parameter or a field, e.g. --set fields.text=body (repeatable).")
@field_options
@delimiter_option
@click.option("--show-text", is_flag=True,
              help="Show raw text in the --dry-run examples (redacted by default).")
@workers_option
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def fix(data: Path, out: Path, quarantine: Path, rules_file: Path | None, preset: str | None,
        manifest: Path | None, out_format: str | None, marker: str, dry_run: bool,
        context_window: int | None, tokenizer: str | None, num_classes: int | None,
        eval_path: Path | None, limit: int | None, sets: tuple[str, ...],
        delimiter: str | None, show_text: bool, workers: int | None, quiet: bool,
        no_progress: bool, fields: dict[str, str | None], debug: bool) -> None:
    """Write a cleaned copy of DATA and a quarantine, applying each rule's fix action."""
    from preflight.executor.launch import warm_for

    # Before the imports below: the two run side by side.
    warm_for(data, workers, "local", rules=(rules_file, preset, eval_path))
    from preflight import FixOptions, run_preflight

    no_stdin_outputs(out=(out, "file"), quarantine=(quarantine, "file"),
                     manifest=(manifest, "file"))
    rules = rule_set(rules_file, preset, context_window=context_window, tokenizer=tokenizer,
                     num_classes=num_classes, eval_path=eval_path, sets=sets, fields=fields,
                     quiet=quiet)
    options = FixOptions(out=out, quarantine=quarantine, manifest=manifest, format=out_format,
                         marker=marker, dry_run=dry_run)
    with ProgressBar(not (quiet or no_progress) and err_console().is_terminal) as update:
        report = run_preflight(data, rules, fix=options, limit=limit, show_text=show_text,
                               delimiter=delimiter, progress=update, workers=workers)
    for note in (report.fix or {}).get("notes", []):  # what a killed run left, and was done
        err_console().print(f"note: {note}", style="yellow", markup=False, highlight=False)
    if quiet:
        return
    with stdout_may_close():  # the files are written: a reader gone changes nothing
        _print_fix(out_console(), report.fix or {}, dry_run=dry_run, show_text=show_text)


def _print_fix(console: Console, result: dict[str, Any], *, dry_run: bool,
               show_text: bool) -> None:
    limit = result["input"].get("limit")
    if limit is not None:
        console.print(f"--limit {limit:,}: only the first {limit:,} records were read",
                      style="yellow", highlight=False)
    if dry_run:
        console.print(f"[bold]dry run[/]: {result['would_change']:,} records would change, "
                      f"{result['would_quarantine']:,} would be quarantined")
        _print_actions(console, result)
        if result.get("not_checked"):
            console.print(f"  {result['not_checked']}", style="dim", markup=False,
                          highlight=False)
        if result["examples"] and not show_text:
            console.print("  (text redacted: --show-text shows it)", style="dim")
        for ex in result["examples"]:
            console.print(f"  row {ex['row']} {ex['field']}:", markup=False, highlight=False)
            console.print(f"    before: {ex['before']}", markup=False, highlight=False)
            console.print(f"    after:  {ex['after']}", markup=False, highlight=False)
        return
    console.print(
        f"{result['input']['records']:,} records → [green]{result['clean']['records']:,} clean[/]"
        f" ({result['clean']['changed']:,} changed), "
        f"[yellow]{result['quarantine']['records']:,} quarantined[/]", highlight=False)
    _print_actions(console, result)
    for name in ("clean", "quarantine"):
        console.print(f"  {name}: {result[name]['path']}", style="dim", markup=False)
    console.print(f"  manifest: {result['manifest_path']}", style="dim", markup=False)


def _print_actions(console: Console, result: dict[str, Any]) -> None:
    for rule, actions in result["findings_per_rule_and_action"].items():
        listed = ", ".join(f"{a} {n:,}" for a, n in actions.items())
        console.print(f"  {rule}: {listed}", markup=False, highlight=False)
    for key in result.get("renamed_keys", []):
        console.print(f"  key renamed: {key['key']} → {key['to']!r} ({key['records']:,} "
                      "records)", markup=False, highlight=False)
    for field in result.get("renamed_fields", []):
        said = f"→ {field['to']!r}" if "to" in field else f"kept: {field['kept']}"
        console.print(f"  field renamed in the schema: {field['field']} {said}",
                      markup=False, highlight=False)
