"""The commands about rules files: ``rules list`` (every check, its parameters and the
presets), ``rules validate``, ``rules show`` (a preset's text) and ``init`` (a rules file
written from what inference finds in DATA)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

import click

from preflight.cli.console import new_console, out_console
from preflight.cli.exits import guarded, stdout_may_close
from preflight.cli.options import INPUT, PATH, field_options, file_path, no_stdin_outputs
from preflight.errors import ConfigError

if TYPE_CHECKING:
    from rich.table import Table

    from preflight.config import RuleSet


@click.group()
def rules() -> None:
    """List checks and presets, validate rules files."""


@rules.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def rules_list(as_json: bool) -> None:
    """Show every check with its parameters and defaults, and the shipped presets."""
    from preflight.checks import registry
    from preflight.config import SmokeConfig

    checks = [_describe(c) for c in registry.all_checks()]
    smoke = _params(SmokeConfig)
    with stdout_may_close():  # `rules list | head` is a fine way to read it
        _print_checks(checks, smoke, as_json=as_json)


def _print_checks(checks: list[dict[str, Any]], smoke: list[dict[str, Any]], *,
                  as_json: bool) -> None:
    from preflight.config import RULE_KEYS, preset_names

    if as_json:
        click.echo(json.dumps({"rule_keys": list(RULE_KEYS), "checks": checks,
                               "smoke": smoke, "presets": preset_names()}, indent=2))
        return
    console = new_console()
    console.print("Every rule takes: id, check, severity (error|warn|info, default error), "
                  "max_count (default 0 unless max_fraction is set), max_fraction, fix, "
                  "enabled (default true).\n")
    for c in checks:
        console.print(f"[bold]{c['check']}[/] — {c['description']}")
        console.print(f"  fix: {', '.join(c['fixes'])}", style="dim")
        if c["params"]:
            console.print(_params_table(c["params"]))
        console.print()
    console.print("[bold]smoke:[/] — the smoke test's section of a rules file "
                  "(or --set smoke.KEY=VALUE)")
    console.print(_params_table(smoke))
    console.print()
    console.print(f"presets: {', '.join(preset_names())} (use --preset NAME; "
                  "`preflight rules show NAME` prints one)")


@rules.command("validate")
@click.argument("file", type=PATH)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def rules_validate(file: Path, debug: bool) -> None:
    """Validate a rules file: exit 0 when valid, 2 with every mistake listed when not."""
    from preflight.config import load_rules
    from preflight.resolve import rules_tokenizer

    ruleset = load_rules(file)
    rules_tokenizer(ruleset)
    with stdout_may_close():
        _print_valid(file, ruleset)


@rules.command("show")
@click.argument("name")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def rules_show(name: str, debug: bool) -> None:
    """Print the shipped preset NAME, comments included (a start for your own rules file)."""
    from preflight.config import preset_path

    text = preset_path(name).read_text(encoding="utf-8")
    with stdout_may_close():
        click.echo(text, nl=not text.endswith("\n"))


@click.command()
@click.argument("data", type=INPUT)
@click.option("--out", type=file_path("preflight.yaml"), default=Path("preflight.yaml"),
              show_default=True, help="The rules file to write.")
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
@field_options
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def init(data: Path, out: Path, force: bool, fields: dict[str, str | None],
         debug: bool) -> None:
    """Write a commented rules file for DATA from what inference finds in it: the fields,
    the suggested preset's rules, and the model facts to fill in."""
    from preflight.config import load_rules
    from preflight.report.writer import write_text
    from preflight.scaffold import scaffold
    from preflight.source.stdin import STDIN

    no_stdin_outputs(out=(out, "file"))
    if str(data) == STDIN:
        raise ConfigError("preflight init needs a file: - (standard input) is for check, "
                          "smoke and fix; save the data to a file and pass its path")
    if out.is_dir():  # was exit 3 after the read: "cannot write ...: Is a directory"
        raise ConfigError(f"--out {out} is a folder; name the rules file, e.g. "
                          f"--out {out / 'preflight.yaml'}")
    if out.resolve() == data.resolve() or (
            out.exists() and data.exists() and os.path.samefile(out, data)):
        # with --force, the data was replaced by its own rules file
        raise ConfigError(f"--out {out} is the data; init never modifies what it reads: "
                          "name the rules file, e.g. --out preflight.yaml")
    if (out.exists() or out.is_symlink()) and not force:
        raise ConfigError(f"{out} exists; preflight init does not overwrite it (--force "
                          "does, or --out another file)")
    found = scaffold(data, given={k: v for k, v in fields.items() if v})
    write_text(out, found.render(str(data)))
    load_rules(out)  # what init writes must validate; a failure here is preflight's bug
    declared = found.fields.model_dump(exclude_none=True)
    with stdout_may_close():
        console = out_console()
        console.print(f"wrote {out}: fields "
                      f"{', '.join(f'{k}={v!r}' for k, v in declared.items()) or 'none found'}; "
                      f"rules of the {found.preset} preset", markup=False, highlight=False,
                      soft_wrap=True)
        where = "" if out == Path("preflight.yaml") else f" --rules {out}"
        console.print(f"next: fill in the model facts in {out}, then: preflight check "
                      f"{data}{where}", style="dim", markup=False, highlight=False,
                      soft_wrap=True)  # a command to copy: one line, however long its paths


def _print_valid(file: Path, ruleset: RuleSet) -> None:
    from rich.markup import escape

    console = new_console(soft_wrap=True)  # a long path stays on its line, for scripts
    console.print(f"[green]valid[/]: {escape(str(file))} ({len(ruleset.rules)} rules)")
    # A transformers folder (hf:, hf-config:) is data: loading it runs none of its code.
    model = ruleset.smoke.model
    if model and not model.startswith(("hf:", "hf-config:")):  # validating never runs it
        console.print(f"[yellow]note[/]: this rules file names code to run: smoke.model = "
                      f"{escape(ruleset.smoke.model)} (the smoke test of `preflight check` and "
                      "`preflight smoke` imports it and runs it)", highlight=False)


def _describe(cls: Any) -> dict[str, Any]:
    return {"check": cls.name, "description": cls.description, "fixes": list(cls.fixes),
            "params": _params(cls.Params)}


def _params(model: Any) -> list[dict[str, Any]]:
    """Each field of a pydantic model: name, type, default and description."""
    return [{"name": name, "type": _type_name(f.annotation),
             "default": f.get_default(call_default_factory=True),
             "description": f.description or ""}
            for name, f in model.model_fields.items()]


def _params_table(params: list[dict[str, Any]]) -> Table:
    # Names are never cut (`require_last_assistant`); the other columns wrap instead.
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_edge=False, box=None, padding=(0, 2))
    widest = max((len(p["name"]) for p in params), default=5)
    table.add_column("param", no_wrap=True, min_width=widest)
    for col in ("type", "default", "description"):
        table.add_column(col, style="dim" if col == "type" else None, overflow="fold")
    for p in params:
        table.add_row(p["name"], escape(p["type"]), escape(json.dumps(p["default"])),
                      escape(p["description"]))
    return table


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(map(str, get_args(annotation)))
    if origin is Annotated:  # StrictInt and the like: the type under the constraint
        return _type_name(get_args(annotation)[0])
    if origin in (Union, UnionType):
        return " | ".join(_type_name(a) for a in get_args(annotation))
    if annotation is type(None):
        return "None"
    text = getattr(annotation, "__name__", None) or str(annotation)
    return text.replace("typing.", "")
