"""What more than one command takes: the DATA argument, shared options (report files,
workers, executor, field names, delimiter), the refusal of ``-`` as an output, and the rule
set the rules options and overrides add up to."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from preflight.choices import EXECUTORS, MD_MAX_CHARS
from preflight.cli.console import err_console
from preflight.errors import ConfigError

if TYPE_CHECKING:
    from preflight.config import RuleSet


def no_stdin_outputs(**outputs: tuple[Path | None, str]) -> None:
    """Refuse ``-`` as an output (option name -> (path, "file" or "folder")): it would
    write a file or folder literally named ``-``; ``-`` is standard input, for DATA only."""
    from preflight.source.stdin import STDIN

    for option, (path, kind) in outputs.items():
        if path is not None and str(path) == STDIN:
            raise ConfigError(f"{STDIN} means standard input for DATA; name a {kind} for "
                              f"--{option.replace('_', '-')}")


class _Path(click.Path):
    """A path that is not empty: ``--out ""`` (an unset variable in ``--out "$DIR"``) would
    read as ``.``, the working directory (a report written among the user's files, the
    folder checked as shards)."""

    def __init__(self, *, file: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.file = file  # an output that is one file: an example name for it

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> object:
        if isinstance(value, str) and not value.strip():
            self.fail("is empty (an unset variable?); give a path", param, ctx)
        if self.file and isinstance(value, str) and _names_a_folder(value):
            # Path("out/") and Path("out/.") are "out": a file named like the folder meant
            folder = os.path.normpath(value)
            self.fail(f"{value!r} names a folder; this output is one file: name it, e.g. "
                      f"{folder}/{self.file}", param, ctx)
        return super().convert(value, param, ctx)


class _Spec(click.ParamType):
    """A model spec that is not empty: ``--model "$MODEL"`` with the variable unset read as
    no model, and the built-in one was smoke-tested in its place, its PASS taken for yours."""

    name = "spec"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> object:
        if isinstance(value, str) and not value.strip():
            self.fail("is empty (an unset variable?); name a model: hf:DIR, hf-config:DIR, "
                      "package.module:build or file.py:build", param, ctx)
        return value


# A --model value.
SPEC = _Spec()
def _names_a_folder(value: str) -> bool:
    """``out/``, ``out/.``, ``..``: a path that can only be a folder."""
    last = value.replace(os.sep, "/").rstrip("/").rsplit("/", 1)[-1]
    return value.endswith(("/", os.sep)) or last in (".", "..")


# DATA as given: whether it exists and can be read is the reader's to say (exit 3), not
# click's (whose readable=True check would make an unreadable input a usage error, exit 2).
INPUT = _Path(path_type=Path, readable=False)
# Every other path option.
PATH = _Path(path_type=Path)


def file_path(example: str) -> _Path:
    """An output that is one file (fix's outputs, init's rules file): a path ending in "/"
    is refused, naming ``example`` as a file in that folder."""
    return _Path(path_type=Path, file=example)

delimiter_option = click.option(
    "--delimiter", metavar="CHAR",
    help="CSV delimiter (',' ';' '|' or tab; default: tab for .tsv, else sniffed).")

md_max_chars_option = click.option(
    "--md-max-chars", type=click.IntRange(min=200), default=MD_MAX_CHARS,
    show_default=True, help="Cut report.md to this many characters.")


def report_file_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--format and --md-max-chars: which report files a run writes, and how long report.md
    may be."""
    fn = md_max_chars_option(fn)
    return click.option(
        "--format", "formats", default="json,html", show_default=True,
        help="Report files to write into --out: json, html, junit, md (comma-separated).")(fn)


def workers_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--workers: the local executor's processes."""
    return click.option(
        "--workers", type=click.IntRange(min=1), metavar="N",
        help="Processes that scan the data (default: one per usable core for an input of "
             "250 MB or more on 4 cores or more, else this process alone; more than the "
             "usable cores run one per core). Any number gives the same findings.")(fn)


def executor_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--executor, --address and --workers: where the checks run."""
    fn = workers_option(fn)
    fn = click.option(
        "--address", metavar="ADDR",
        help="Ray cluster to run on (ray://HOST:10001 or HOST:6379); default RAY_ADDRESS, "
             "else a Ray started on this machine. Needs --executor ray.")(fn)
    return click.option(
        "--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
        help="Run the checks here (local) or on Ray Data (ray; pip install "
             "'dataset-preflight[ray]').")(fn)


_FIELD_ROLES = {"text": "the text", "id": "each record's id", "label": "the class label",
                "messages": "a chat ([{role, content}])"}


def field_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--text-field, --id-field, --label-field, --messages-field: name the columns without a
    rules file. The command receives them as one ``fields`` mapping (role -> column)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["fields"] = {role: kwargs.pop(f"{role}_field") for role in _FIELD_ROLES}
        return fn(*args, **kwargs)

    for role, what in reversed(_FIELD_ROLES.items()):
        wrapper = click.option(
            f"--{role}-field", metavar="COLUMN",
            help=f"The column holding {what} (default: inferred; the other fields are "
                 "still inferred).")(wrapper)
    return wrapper


def rule_set(rules_file: Path | None, preset: str | None, *, context_window: int | None = None,
             tokenizer: str | None = None, num_classes: int | None = None,
             eval_path: Path | None = None, sets: tuple[str, ...] = (),
             model_spec: str | None = None, checkpoint: Path | None = None,
             training_args: Path | None = None, fields: dict[str, str | None] | None = None,
             quiet: bool = False) -> RuleSet:
    """The rules file (or preset; with neither, the rules found in the working directory)
    with the command line's overrides applied."""
    from rich.markup import escape

    from preflight.config import load_rules, with_overrides
    from preflight.discover import discover_rules, refuse_code

    found = discover_rules(Path.cwd()) if rules_file is None and preset is None else None
    if found is not None:
        refuse_code(found, model_given=bool(model_spec))
        if not quiet:
            err_console().print(f"rules: {escape(found.where)} (found in the working "
                                "directory; --rules FILE or --preset NAME to choose others)",
                                style="dim", highlight=False)
    rules = found.rules if found is not None else load_rules(rules_file, preset=preset)
    smoke_set = {"model": model_spec, "checkpoint": str(checkpoint) if checkpoint else None,
                 "training_args": str(training_args) if training_args else None}
    # An empty --text-field "" or --tokenizer "" goes on, to be refused, not ignored.
    fields = {role: column for role, column in (fields or {}).items() if column is not None}
    if context_window or tokenizer is not None or num_classes or eval_path or sets or fields or any(
        smoke_set.values()
    ):
        rules = with_overrides(rules, context_window=context_window, tokenizer=tokenizer,
                               num_classes=num_classes,
                               eval_path=str(eval_path) if eval_path else None,
                               sets=list(sets), smoke=smoke_set, fields=fields)
    return rules
