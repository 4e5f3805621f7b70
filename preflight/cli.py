"""The command line: a thin layer over the Python API, and the only module that prints or
exits. ``PreflightError`` subclasses map to their exit codes: 0 pass, 1 gate failed,
2 usage or configuration error, 3 input unreadable or output unwritable. A reader that
closes stdout early (``preflight check DATA | head -1``) never changes the exit code."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from functools import wraps
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

import click

# Only what building the commands needs loads here (click and preflight's own light modules):
# `preflight --help` stays fast. Each command imports the library when it runs.
from preflight.choices import EXECUTORS, FILE_NAMES, MD_MAX_CHARS
from preflight.errors import ConfigError, PreflightError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from preflight.config import RuleSet

def _console(**kwargs: Any) -> Console:
    """A rich console (rich loads on first use) whose closed output raises
    ``BrokenPipeError``."""
    from preflight.report.console import PipeConsole

    return PipeConsole(**kwargs)


@functools.cache
def _err() -> Console:
    """The console on standard error (progress, notes and errors)."""
    return _console(stderr=True, soft_wrap=True)


def _plug_closed_streams() -> None:
    """Point a standard stream closed at start (``>&-``) at the null device. Python leaves
    ``sys.stdout`` None then (a write or flush fails), and the next file preflight opened
    would get descriptor 1: what a library or a child process writes to "stdout" would land
    in a report."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
            free = False
        except OSError:
            free = True
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if free and null != fd:
            os.dup2(null, fd)
            os.close(null)
            null = fd
        setattr(sys, name, open(null, "r" if fd == 0 else "w", encoding="utf-8",  # noqa: SIM115
                                errors="replace", closefd=null != fd))


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so nothing more (not even the flush at exit) fails."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


@contextlib.contextmanager
def _stdout_may_close() -> Iterator[None]:
    """Output that a reader may stop reading (``| head``): a broken pipe ends the output
    quietly; the caller exits with the code it decided."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        _err().quiet = True  # the summary may have gone to stderr, as closed


# Failures of the disk or the file system, which the user fixes where the files live (exit 3);
# another OSError (a file gone missing mid-run, say) is preflight's own bug.
_IO_FAILURES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                          errno.EIO, errno.EFBIG, errno.ENAMETOOLONG, errno.ELOOP})
# An error message longer than this is cut (a value quoted from a hostile input must not
# flood the terminal); --debug shows it whole.
MAX_ERROR_CHARS = 10_000


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Map preflight's errors to exit codes; no traceback unless --debug."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from rich.markup import escape

        debug = kwargs.get("debug", False)
        try:
            return fn(*args, **kwargs)
        except PreflightError as e:
            if debug:
                traceback.print_exc()
            _err().print(f"[bold red]error:[/] {escape(_capped(str(e), debug))}", highlight=False)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            _err().print("interrupted")
            sys.exit(130)
        except click.ClickException:  # a usage mistake: click prints it, exit 2
            raise
        except BrokenPipeError:  # stdout closed where no command expected it
            _silence_stdout()
            sys.exit(141)  # what the shell reports for SIGPIPE
        except Exception as e:
            if debug:
                raise
            if isinstance(e, OSError) and e.errno in _IO_FAILURES:
                # an I/O failure no reader or writer named for the user: still exit 3
                where = f"{e.filename}: " if e.filename else ""
                _err().print(f"[bold red]error:[/] {escape(where)}{escape(e.strerror or str(e))}",
                             highlight=False)
                sys.exit(3)
            # a bug in preflight, not a user mistake
            _err().print(f"[bold red]internal error:[/] {type(e).__name__}: "
                         f"{escape(_capped(str(e), debug))}\n"
                         "This is a bug in preflight; rerun with --debug for the traceback.",
                         highlight=False)
            sys.exit(2)

    return wrapper


def _no_stdin_outputs(**outputs: tuple[Path | None, str]) -> None:
    """Refuse ``-`` as an output (option name -> (path, "file" or "folder")): it would
    write a file or folder literally named ``-``; ``-`` is standard input, for DATA only."""
    from preflight.source.stdin import STDIN

    for option, (path, kind) in outputs.items():
        if path is not None and str(path) == STDIN:
            raise ConfigError(f"{STDIN} means standard input for DATA; name a {kind} for "
                              f"--{option.replace('_', '-')}")


def _capped(message: str, debug: bool) -> str:
    if debug or len(message) <= MAX_ERROR_CHARS:
        return message
    return (f"{message[:MAX_ERROR_CHARS]}\n… ({len(message) - MAX_ERROR_CHARS:,} more "
            "characters; --debug shows them)")


# DATA as given: whether it exists and can be read is the reader's to say (exit 3), not
# click's (whose readable=True check would make an unreadable input a usage error, exit 2).
_INPUT = click.Path(path_type=Path, readable=False)

_delimiter = click.option(
    "--delimiter", metavar="CHAR",
    help="CSV delimiter (',' ';' '|' or tab; default: tab for .tsv, else sniffed).")

_md_max_chars = click.option(
    "--md-max-chars", type=click.IntRange(min=200), default=MD_MAX_CHARS,
    show_default=True, help="Cut report.md to this many characters.")


def _report_files(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--format and --md-max-chars: which report files a run writes, and how long report.md
    may be."""
    fn = _md_max_chars(fn)
    return click.option(
        "--format", "formats", default="json,html", show_default=True,
        help="Report files to write into --out: json, html, junit, md (comma-separated).")(fn)


def _workers(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--workers: the local executor's processes."""
    return click.option(
        "--workers", type=click.IntRange(min=1), metavar="N",
        help="Processes that scan the data (default: one per usable core for an input of "
             "250 MB or more on 4 cores or more, else this process alone; more than the "
             "usable cores run one per core). Any number gives the same findings.")(fn)


def _executor(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--executor, --address and --workers: where the checks run."""
    fn = _workers(fn)
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


def _field_options(fn: Callable[..., Any]) -> Callable[..., Any]:
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


class _Main(click.Group):
    """The command group: a closed standard stream is plugged before any command runs, and
    a reader gone where no command expected it ends the run quietly (exit 141, as SIGPIPE
    would), never with a traceback; Ctrl-C before a command handles it itself (its options
    parsed, ``_guarded``'s imports) is exit 130 too, not click's "Aborted!" and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        _plug_closed_streams()
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _silence_stdout()
            _err().quiet = True
            sys.exit(141)
        except KeyboardInterrupt:
            _err().print("interrupted")
            sys.exit(130)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dataset-preflight", prog_name="preflight")
def main() -> None:
    """Gate a training corpus before it reaches a GPU."""


@main.command()
@click.argument("data", type=_INPUT)
@click.option("--rules", "rules_file", type=click.Path(path_type=Path), help="Rules file (YAML).")
@click.option("--preset", help="A shipped rule set instead of a file (see `preflight rules list`).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("preflight-report"),
              show_default=True, help="Folder for report.json and findings.parquet.")
@click.option("--limit", type=click.IntRange(min=1), help="Check only the first N records.")
@click.option("--strict", is_flag=True, help="Fail the gate on failed warn rules too.")
@click.option("--show-text", is_flag=True, help="Put raw text in examples (redacted by default).")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--json", "as_json", is_flag=True, help="Write report.json to stdout as well.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--context-window", type=click.IntRange(min=1),
              help="Model context length in tokens (adds a token_length rule if none).")
@click.option("--tokenizer", help="tokenizer.json, a tokenizer folder, a Hugging Face name in "
              "the local cache (org/name), or tiktoken:NAME.")
@click.option("--num-classes", type=click.IntRange(min=1),
              help="Number of classes (adds a label_range rule if none).")
@click.option("--eval", "eval_path", type=click.Path(path_type=Path),
              help="Eval file: flag train records found in it (adds an overlap rule if none).")
@click.option("--set", "sets", multiple=True, metavar="RULE_ID.PARAM=VALUE",
              help="Set a rule parameter, e.g. --set exact-dupes.max_fraction=0.01, a smoke "
                   "setting, e.g. --set smoke.steps=50, or a field, e.g. --set "
                   "fields.text=body (repeatable).")
@_field_options
@_delimiter
@click.option("--only", multiple=True, metavar="ID[,ID]",
              help="Run only these rules (ids as in the report; repeatable).")
@click.option("--skip", multiple=True, metavar="ID[,ID]",
              help="Do not run these rules (as `enabled: false` in a rules file).")
@_report_files
@_executor
@click.option("--no-smoke", is_flag=True, help="Skip the smoke test (no torch import).")
@click.option("--model", "model_spec", metavar="SPEC",
              help="Smoke-test your model: hf:DIR / hf-config:DIR (a transformers folder), "
                   "package.module:build or file.py:build.")
@click.option("--checkpoint", type=click.Path(path_type=Path),
              help="Weights the smoke test starts from (.safetensors or a state dict).")
@click.option("--training-args", "training_args", type=click.Path(path_type=Path),
              help="A transformers TrainingArguments JSON/YAML file: the smoke runs use its "
                   "optimizer, lr, schedule, warm-up, clipping, accumulation and precision "
                   "(smoke: keys in the rules win).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_guarded
def check(data: Path, rules_file: Path | None, preset: str | None, out: Path,
          limit: int | None, strict: bool, show_text: bool, quiet: bool, as_json: bool,
          no_progress: bool, context_window: int | None, tokenizer: str | None,
          num_classes: int | None, eval_path: Path | None, sets: tuple[str, ...],
          delimiter: str | None, only: tuple[str, ...], skip: tuple[str, ...],
          formats: str, md_max_chars: int, executor: str, address: str | None,
          workers: int | None, no_smoke: bool, model_spec: str | None, checkpoint: Path | None,
          training_args: Path | None, fields: dict[str, str | None], debug: bool) -> None:
    """Check DATA (a file, a folder of shards, a datasets folder, a hub dataset name in the
    local cache, or - for JSON Lines on stdin) against the rules, then run the smoke test
    (a short training run on a sample) unless --no-smoke."""
    from preflight.executor.launch import warm_for

    # Before the imports below: the two run side by side.
    warm_for(data, workers, executor, rules=(rules_file, preset, eval_path))
    from preflight.hf_folder import is_hf_spec
    from preflight.report.writer import parse_formats
    from preflight.select import parse_ids, select_rules

    _no_stdin_outputs(out=(out, "folder"))
    # An hf: folder also tells the gate its tokenizer and embedding size (the vocab check).
    if no_smoke and (checkpoint or training_args
                     or (model_spec and not is_hf_spec(model_spec))):
        raise click.UsageError("--checkpoint, --training-args and a --model other than hf:DIR "
                               "are for the smoke test; drop --no-smoke or them")
    rules = _rules(rules_file, preset, context_window=context_window, tokenizer=tokenizer,
                   num_classes=num_classes, eval_path=eval_path, sets=sets,
                   model_spec=model_spec, checkpoint=checkpoint, training_args=training_args,
                   fields=fields, quiet=quiet)
    rules = select_rules(rules, only=parse_ids(only, "--only"),
                         skip=parse_ids(skip, "--skip"))
    _gate(data, rules, out, smoke=False if no_smoke else None, limit=limit, strict=strict,
          show_text=show_text, quiet=quiet, as_json=as_json, no_progress=no_progress,
          formats=parse_formats(formats), md_max_chars=md_max_chars, executor=executor,
          address=address, delimiter=delimiter, workers=workers)


@main.command()
@click.argument("data", type=_INPUT, required=False)
@click.option("--rules", "rules_file", type=click.Path(path_type=Path), help="Rules file (YAML).")
@click.option("--preset", help="A shipped rule set instead of a file.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("preflight-report"),
              show_default=True, help="Folder for report.json and the replay file.")
@click.option("--model", "model_spec", metavar="SPEC",
              help="Your model: hf:DIR / hf-config:DIR (a transformers folder), "
                   "package.module:build or file.py:build (default: built-in). "
                   "With --replay: the model to rerun it with (a replay of your model runs "
                   "only with it).")
@click.option("--checkpoint", type=click.Path(path_type=Path),
              help="Weights to start from (.safetensors or a torch state dict).")
@click.option("--training-args", "training_args", type=click.Path(path_type=Path),
              help="A transformers TrainingArguments JSON/YAML file: the smoke runs use its "
                   "optimizer, lr, schedule, warm-up, clipping, accumulation and precision "
                   "(smoke: keys in the rules win).")
@click.option("--replay", "replay_path", type=click.Path(path_type=Path),
              help="Rerun a replay file written by an earlier smoke test (no DATA needed; "
                   "a replay of your own model needs --model SPEC to run its code).")
@click.option("--limit", type=click.IntRange(min=1), help="Read only the first N records.")
@click.option("--tokenizer", help="tokenizer.json, a tokenizer folder, a Hugging Face name in "
              "the local cache (org/name), or tiktoken:NAME.")
@click.option("--num-classes", type=click.IntRange(min=1), help="Number of classes.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="e.g. --set smoke.steps=50 --set smoke.lr=0.001 (repeatable).")
@_field_options
@_report_files
@_workers
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--json", "as_json", is_flag=True, help="Write report.json to stdout as well.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_guarded
def smoke(data: Path | None, rules_file: Path | None, preset: str | None, out: Path,
          model_spec: str | None, checkpoint: Path | None, training_args: Path | None,
          replay_path: Path | None,
          limit: int | None, tokenizer: str | None, num_classes: int | None,
          sets: tuple[str, ...], formats: str, md_max_chars: int, workers: int | None,
          quiet: bool, as_json: bool, no_progress: bool, fields: dict[str, str | None],
          debug: bool) -> None:
    """Smoke-test DATA: run the rules' checks (to know the flagged rows), then train a tiny
    model (or yours) on a sample and tell a data fault from a code fault."""
    from preflight.report.console import render_smoke
    from preflight.report.writer import parse_formats

    if replay_path is not None:
        given = [name for name, value in (("DATA", data), ("--rules", rules_file),
                                          ("--preset", preset), ("--checkpoint", checkpoint),
                                          ("--training-args", training_args),
                                          ("--set", sets), ("--limit", limit),
                                          ("--tokenizer", tokenizer),
                                          ("--num-classes", num_classes),
                                          ("--workers", workers),
                                          ("a --*-field option", any(fields.values())))
                 if value]
        if given:
            raise click.UsageError(f"--replay reruns the saved batch, weights and settings "
                                   f"(with --model: on that model); {', '.join(given)} "
                                   "cannot apply")
        from preflight.smoke import replay

        result = replay(replay_path, model=model_spec)
        with _stdout_may_close():
            if as_json:
                click.echo(result.model_dump_json(indent=2))
            if not quiet:
                render_smoke(result, _err() if as_json else _stdout())
        sys.exit(1 if result.failed else 0)
    if data is None:
        raise click.UsageError("give DATA, or --replay FILE")
    from preflight.executor.launch import warm_for

    warm_for(data, workers, "local", rules=(rules_file, preset, None))
    _no_stdin_outputs(out=(out, "folder"))
    rules = _rules(rules_file, preset, tokenizer=tokenizer, num_classes=num_classes, sets=sets,
                   model_spec=model_spec, checkpoint=checkpoint, training_args=training_args,
                   fields=fields, quiet=quiet)
    _gate(data, rules, out, smoke=True, limit=limit, strict=False, show_text=False,
          quiet=quiet, as_json=as_json, no_progress=no_progress,
          formats=parse_formats(formats), md_max_chars=md_max_chars, workers=workers)


def _rules(rules_file: Path | None, preset: str | None, *, context_window: int | None = None,
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
            _err().print(f"rules: {escape(found.where)} (found in the working directory; "
                         "--rules FILE or --preset NAME to choose others)", style="dim",
                         highlight=False)
    rules = found.rules if found is not None else load_rules(rules_file, preset=preset)
    smoke_set = {"model": model_spec, "checkpoint": str(checkpoint) if checkpoint else None,
                 "training_args": str(training_args) if training_args else None}
    fields = {role: column for role, column in (fields or {}).items() if column}
    if context_window or tokenizer or num_classes or eval_path or sets or fields or any(
        smoke_set.values()
    ):
        rules = with_overrides(rules, context_window=context_window, tokenizer=tokenizer,
                               num_classes=num_classes,
                               eval_path=str(eval_path) if eval_path else None,
                               sets=list(sets), smoke=smoke_set, fields=fields)
    return rules


def _gate(data: Path, rules: RuleSet, out: Path, *, smoke: bool | None, limit: int | None,
          strict: bool, show_text: bool, quiet: bool, as_json: bool, no_progress: bool,
          formats: tuple[str, ...], md_max_chars: int, executor: str = "local",
          address: str | None = None, delimiter: str | None = None,
          workers: int | None = None) -> None:
    from preflight import run_preflight
    from preflight.report.console import render_console

    show_bar = not (quiet or no_progress) and _err().is_terminal
    with _progress(show_bar) as update:
        report = run_preflight(data, rules, out, limit=limit, strict=strict,
                               show_text=show_text, progress=update, smoke=smoke,
                               formats=formats, md_max_chars=md_max_chars, executor=executor,
                               address=address, delimiter=delimiter, workers=workers)
    with _stdout_may_close():  # `| head` must not turn a verdict into another exit code
        if as_json:
            click.echo(report.model_dump_json(indent=2))
        if not quiet:
            render_console(report, _err() if as_json else _stdout())
    sys.exit(0 if report.passed else 1)


def _stdout() -> Console:
    """A console for the summary; 120 columns when stdout is not a terminal (logs, pipes)."""
    console = _console()
    return console if console.is_terminal else _console(width=120)


class _progress:
    """A rich progress bar fed by the pipeline's ``(done, total, unit)`` callback."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._bar: Progress | None = None
        self._task: Any = None
        self._unit = ""

    def __enter__(self) -> Callable[[int, int, str], None] | None:
        if not self._enabled:
            return None
        return self.update

    def update(self, done: int, total: int, unit: str) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        if self._bar is not None and unit != self._unit:  # a new stage: a new bar
            self._bar.stop()
            self._bar = None
        if self._bar is None:
            self._unit = unit
            label = "smoke test" if unit == "runs" else "reading"
            columns: list[Any] = [TextColumn(label), BarColumn()]
            if unit == "bytes":
                columns += [DownloadColumn(), TransferSpeedColumn()]
            else:
                columns += [MofNCompleteColumn()]
            self._bar = Progress(*columns, TimeRemainingColumn(), console=_err(),
                                 transient=True)
            self._bar.start()
            self._task = self._bar.add_task("read", total=total or None)
        self._bar.update(self._task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


@main.command()
@click.argument("data", type=_INPUT)
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="The cleaned corpus; its suffix picks the format (.jsonl, .csv, .parquet, "
                   ".arrow) unless --format says.")
@click.option("--quarantine", type=click.Path(path_type=Path), required=True,
              help="Records set aside, with their row, id and reasons (JSON Lines).")
@click.option("--rules", "rules_file", type=click.Path(path_type=Path), help="Rules file (YAML).")
@click.option("--preset", help="A shipped rule set instead of a file.")
@click.option("--manifest", type=click.Path(path_type=Path),
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
@click.option("--eval", "eval_path", type=click.Path(path_type=Path),
              help="Eval file: set aside train records found in it (adds an overlap rule if "
                   "none).")
@click.option("--limit", type=click.IntRange(min=1),
              help="Fix only the first N records (the outputs hold only them).")
@click.option("--set", "sets", multiple=True, metavar="RULE_ID.PARAM=VALUE",
              help="Set a rule parameter or a field, e.g. --set fields.text=body (repeatable).")
@_field_options
@_delimiter
@click.option("--show-text", is_flag=True,
              help="Show raw text in the --dry-run examples (redacted by default).")
@_workers
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_guarded
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

    _no_stdin_outputs(out=(out, "file"), quarantine=(quarantine, "file"),
                      manifest=(manifest, "file"))
    rules = _rules(rules_file, preset, context_window=context_window, tokenizer=tokenizer,
                   num_classes=num_classes, eval_path=eval_path, sets=sets, fields=fields,
                   quiet=quiet)
    options = FixOptions(out=out, quarantine=quarantine, manifest=manifest, format=out_format,
                         marker=marker, dry_run=dry_run)
    with _progress(not (quiet or no_progress) and _err().is_terminal) as update:
        report = run_preflight(data, rules, fix=options, limit=limit, show_text=show_text,
                               delimiter=delimiter, progress=update, workers=workers)
    if quiet:
        return
    with _stdout_may_close():  # the files are written: a reader gone changes nothing
        _print_fix(_stdout(), report.fix or {}, dry_run=dry_run, show_text=show_text)


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


@main.group()
def report() -> None:
    """Re-render an existing report.json."""


@report.command("render")
@click.argument("report_json", type=click.Path(path_type=Path))
@click.option("--html", "html_path", type=click.Path(path_type=Path), help="Write report.html.")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path),
              help="Write JUnit XML.")
@click.option("--md", "md_path", type=click.Path(path_type=Path), help="Write Markdown.")
@_md_max_chars
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_guarded
def report_render(report_json: Path, html_path: Path | None, junit_path: Path | None,
                  md_path: Path | None, md_max_chars: int, debug: bool) -> None:
    """Render REPORT_JSON as HTML, JUnit XML and/or Markdown (with no option: all three,
    beside it)."""
    from preflight.report.model import load_report
    from preflight.report.writer import render, write_text

    _no_stdin_outputs(html=(html_path, "file"), junit=(junit_path, "file"),
                      md=(md_path, "file"))
    loaded = load_report(report_json)
    targets = {"html": html_path, "junit": junit_path, "md": md_path}
    if not any(targets.values()):
        targets = {fmt: report_json.with_name(FILE_NAMES[fmt]) for fmt in targets}
    console = _stdout()
    for fmt, path in targets.items():
        if path is not None:
            write_text(path, render(loaded, fmt, md_max_chars=md_max_chars))
            with _stdout_may_close():
                console.print(f"{fmt}: {path}", style="dim", markup=False, highlight=False)


@main.command()
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Write the comparison as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_guarded
def diff(old: Path, new: Path, as_json: bool, debug: bool) -> None:
    """Compare two report.json files: exit 0 when no rule got worse, 1 when one did."""
    from preflight.report.console import render_diff
    from preflight.report.diff import diff_reports
    from preflight.report.model import load_report

    result = diff_reports(load_report(old), load_report(new))
    with _stdout_may_close():
        if as_json:
            click.echo(result.model_dump_json(indent=2))
        else:
            render_diff(result, _stdout())
    sys.exit(1 if result.worse else 0)


@main.group()
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
    with _stdout_may_close():  # `rules list | head` is a fine way to read it
        _print_checks(checks, smoke, as_json=as_json)


def _print_checks(checks: list[dict[str, Any]], smoke: list[dict[str, Any]], *,
                  as_json: bool) -> None:
    from preflight.config import RULE_KEYS, preset_names

    if as_json:
        click.echo(json.dumps({"rule_keys": list(RULE_KEYS), "checks": checks,
                               "smoke": smoke, "presets": preset_names()}, indent=2))
        return
    console = _console()
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
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_guarded
def rules_validate(file: Path, debug: bool) -> None:
    """Validate a rules file: exit 0 when valid, 2 with every mistake listed when not."""
    from preflight.config import load_rules
    from preflight.pipeline import rules_tokenizer

    ruleset = load_rules(file)
    rules_tokenizer(ruleset)
    with _stdout_may_close():
        _print_valid(file, ruleset)


@rules.command("show")
@click.argument("name")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_guarded
def rules_show(name: str, debug: bool) -> None:
    """Print the shipped preset NAME, comments included (a start for your own rules file)."""
    from preflight.config import preset_path

    text = preset_path(name).read_text(encoding="utf-8")
    with _stdout_may_close():
        click.echo(text, nl=not text.endswith("\n"))


@main.command()
@click.argument("data", type=_INPUT)
@click.option("--out", type=click.Path(path_type=Path), default=Path("preflight.yaml"),
              show_default=True, help="The rules file to write.")
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
@_field_options
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@_guarded
def init(data: Path, out: Path, force: bool, fields: dict[str, str | None],
         debug: bool) -> None:
    """Write a commented rules file for DATA from what inference finds in it: the fields,
    the suggested preset's rules, and the model facts to fill in."""
    from preflight.config import load_rules
    from preflight.report.writer import write_text
    from preflight.scaffold import scaffold
    from preflight.source.stdin import STDIN

    _no_stdin_outputs(out=(out, "file"))
    if str(data) == STDIN:
        raise ConfigError("preflight init needs a file: - (standard input) is for check, "
                          "smoke and fix; save the data to a file and pass its path")
    if (out.exists() or out.is_symlink()) and not force:
        raise ConfigError(f"{out} exists; preflight init does not overwrite it (--force "
                          "does, or --out another file)")
    found = scaffold(data, given={k: v for k, v in fields.items() if v})
    write_text(out, found.render(str(data)))
    load_rules(out)  # what init writes must validate; a failure here is preflight's bug
    declared = found.fields.model_dump(exclude_none=True)
    with _stdout_may_close():
        console = _stdout()
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

    console = _console(soft_wrap=True)  # a long path stays on its line, for scripts
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


if __name__ == "__main__":
    main()


def run() -> None:
    """The ``preflight`` command (and ``python -m preflight``): ``main``, then out of the
    process without tearing the interpreter down, once the exit handlers have run (temporary
    folders, the fork server) and the streams are flushed: freeing a large corpus's arrays
    object by object took 0.4 s of a 7 s gate. With another thread still running, or an exit
    status that is not a number, the normal exit."""
    import atexit
    import threading

    from preflight.threads import close_pools

    try:
        main()
    except SystemExit as e:
        code = e.code
    else:  # pragma: no cover - click's standalone mode always exits
        code = 0
    if code is None:
        code = 0
    close_pools()  # their idle threads would count as threads at work
    if not isinstance(code, int) or threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader gone: the status stays the run's
            if stream is not None:
                stream.flush()
    os._exit(code)
