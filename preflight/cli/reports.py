"""The commands on an existing report.json: ``report render`` (HTML, JUnit XML, Markdown) and
``diff`` (did a rule get worse between two runs)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from preflight.choices import FILE_NAMES
from preflight.cli.console import out_console
from preflight.cli.exits import guarded, stdout_may_close
from preflight.cli.options import PATH, md_max_chars_option, no_stdin_outputs


@click.group()
def report() -> None:
    """Re-render an existing report.json."""


@report.command("render")
@click.argument("report_json", type=PATH)
@click.option("--html", "html_path", type=PATH, help="Write report.html.")
@click.option("--junit", "junit_path", type=PATH,
              help="Write JUnit XML.")
@click.option("--md", "md_path", type=PATH, help="Write Markdown.")
@md_max_chars_option
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def report_render(report_json: Path, html_path: Path | None, junit_path: Path | None,
                  md_path: Path | None, md_max_chars: int, debug: bool) -> None:
    """Render REPORT_JSON as HTML, JUnit XML and/or Markdown (with no option: all three,
    beside it)."""
    from preflight.report.model import load_report
    from preflight.report.writer import render, write_text

    no_stdin_outputs(html=(html_path, "file"), junit=(junit_path, "file"),
                     md=(md_path, "file"))
    targets = {"html": html_path, "junit": junit_path, "md": md_path}
    if not any(targets.values()):
        targets = {fmt: report_json.with_name(FILE_NAMES[fmt]) for fmt in targets}
    _check_targets(report_json, targets)
    loaded = load_report(report_json)
    console = out_console()
    for fmt, path in targets.items():
        if path is not None:
            write_text(path, render(loaded, fmt, md_max_chars=md_max_chars))
            with stdout_may_close():
                console.print(f"{fmt}: {path}", style="dim", markup=False, highlight=False)


def _check_targets(report_json: Path, targets: dict[str, Path | None]) -> None:
    """Exit 2 before writing when an output would replace the report being rendered (it was
    overwritten by its own Markdown), another format's output (the second write silently
    replaced the first), or a folder."""
    from preflight.errors import ConfigError

    source = report_json.resolve()
    seen: dict[Path, str] = {}
    for fmt, path in targets.items():
        if path is None:
            continue
        resolved = path.resolve()
        if resolved == source:
            raise ConfigError(f"--{fmt} {path} is the report being rendered; write the "
                              f"{fmt} elsewhere (with no option, beside it as "
                              f"{FILE_NAMES[fmt]})")
        if resolved in seen:
            raise ConfigError(f"--{seen[resolved]} and --{fmt} are the same file ({path}); "
                              "give each format its own path")
        if path.is_dir():
            raise ConfigError(f"--{fmt} {path} is a folder; name a file, e.g. "
                              f"{path / FILE_NAMES[fmt]}")
        seen[resolved] = fmt


@click.command()
@click.argument("old", type=PATH)
@click.argument("new", type=PATH)
@click.option("--json", "as_json", is_flag=True, help="Write the comparison as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def diff(old: Path, new: Path, as_json: bool, debug: bool) -> None:
    """Compare two report.json files: exit 0 when no rule got worse, 1 when one did."""
    from preflight.report.console import render_diff
    from preflight.report.diff import diff_reports
    from preflight.report.model import load_report

    result = diff_reports(load_report(old), load_report(new))
    with stdout_may_close():
        if as_json:
            click.echo(result.model_dump_json(indent=2))
        else:
            render_diff(result, out_console())
    sys.exit(1 if result.worse else 0)
