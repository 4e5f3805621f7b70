"""preflight: gate a training corpus before it reaches a GPU.

>>> from preflight import run_preflight
>>> report = run_preflight("data.jsonl", rules="rules.yaml", out="preflight-report")
>>> report.raise_for_status()
"""

from __future__ import annotations

import importlib
import shutil
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preflight.choices import DEFAULT_FORMATS, EXECUTORS, FORMATS
from preflight.errors import (
    ConfigError,
    InputError,
    OutputError,
    PreflightError,
    PreflightFailed,
    WorkerError,
)

if TYPE_CHECKING:
    from preflight.config import RuleSet, load_rules
    from preflight.fix import FixOptions
    from preflight.pipeline import Progress
    from preflight.report.model import Report

__all__ = [
    "ConfigError",
    "FixOptions",
    "InputError",
    "OutputError",
    "PreflightError",
    "PreflightFailed",
    "Report",
    "RuleSet",
    "WorkerError",
    "load_rules",
    "run_preflight",
]


# Public names loaded on first use, so that ``import preflight`` (and ``preflight --help``)
# loads no polars, pydantic model or numba: the module that exports each.
_LAZY = {"FixOptions": "preflight.fix", "Report": "preflight.report.model",
         "RuleSet": "preflight.config", "load_rules": "preflight.config"}


def __getattr__(name: str) -> Any:
    """The public names of ``_LAZY`` on first use, and ``preflight.watch`` (in-flight checks
    of a training run, which imports torch)."""
    if name == "watch":
        return importlib.import_module("preflight.watch")
    if name not in _LAZY:
        raise AttributeError(f"module 'preflight' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def run_preflight(
    source: Any,
    rules: str | Path | dict[str, Any] | RuleSet | None = None,
    out: str | Path | None = None,
    *,
    preset: str | None = None,
    limit: int | None = None,
    strict: bool = False,
    show_text: bool = False,
    progress: Progress | None = None,
    fix: FixOptions | None = None,
    smoke: bool | None = None,
    formats: Iterable[str] = DEFAULT_FORMATS,
    md_max_chars: int | None = None,
    executor: str = "local",
    address: str | None = None,
    delimiter: str | None = None,
    workers: int | None = None,
) -> Report:
    """Run the gate over ``source``: a path (file or folder), ``-`` (JSON Lines on standard
    input), a hub dataset name in the local ``datasets`` cache (``org/name``), a
    ``datasets.Dataset``, a polars or pandas DataFrame, a pyarrow Table, or a list of dicts.
    Rows are numbered as DESIGN says: the line (JSON Lines), the data record after the
    header (CSV), else the 0-based position.

    ``rules`` is a rules file, a dict of the same shape, a loaded ``RuleSet``, or None for
    the ``default`` preset (or ``preset``). With ``out``, ``report.json`` and
    ``findings.parquet`` are written there. Returns the ``Report``; call
    ``report.raise_for_status()`` to turn a failed gate into ``PreflightFailed``.

    With ``fix`` (a ``FixOptions``), a cleaned copy and a quarantine are written as well
    (see ``preflight.fix``); the report is the gate's on the input, with ``report.fix``
    holding the manifest. ``limit`` then cleans the first ``limit`` records only, and a
    dry run's examples are redacted unless ``show_text``.

    ``formats``: which report files ``out`` receives, from ``json``, ``html``, ``junit``
    and ``md``, as a list or one comma-separated string like ``--format``'s (default json
    and html; ``findings.parquet`` is always written);
    ``md_max_chars`` caps ``report.md`` (default 60,000 characters).

    ``smoke``: run the smoke test after the checks (``report.smoke``; a data or code fault
    fails the gate). None follows the rules file's ``smoke.enabled`` (on by default); fix
    never trains.

    ``delimiter``: a CSV input's delimiter (default: tab for ``.tsv``, else sniffed from
    the first lines among ``,`` ``;`` tab ``|``). ``report.findings()`` returns every
    finding as a polars DataFrame (with no ``out``, from a temporary file kept while the
    report lives).

    ``executor``: ``local`` (default: this process, every core) or ``ray`` (Ray Data, extra
    ``[ray]``; ``address`` is the cluster's, e.g. ``ray://head:10001``, default
    ``RAY_ADDRESS`` or a Ray started on this machine). Both give the same findings.
    ``workers``: the local executor's processes (default None: one per usable core for an
    input of 250 MB or more on 4 cores or more, else this process alone with its reader
    threads; more than the usable cores run one per core, with a note); every number gives
    the findings, report and smoke sample of ``workers=1``.
    """
    from preflight import arguments as args
    from preflight.config import RuleSet, load_rules
    from preflight.source.csv_dialect import check_delimiter
    from preflight.source.stdin import is_stdin, spooled_stdin

    if isinstance(source, str) and not source.strip():  # '' would read the working directory
        raise ConfigError("source is empty (an unset variable?); give a path")
    args.check_path_like("out", out)
    for name, flag in (("strict", strict), ("show_text", show_text)):
        args.check_flag(name, flag)
    args.check_flag("smoke", smoke, none=True)
    limit = args.check_limit(limit)
    formats = args.check_formats(formats)
    md_max_chars = args.check_md_max_chars(md_max_chars)
    progress = args.check_callable("progress", progress)
    if fix is not None:
        from preflight.fix import FixOptions

        if not isinstance(fix, FixOptions):
            raise ConfigError(f"fix must be a FixOptions (preflight.FixOptions(out=..., "
                              f"quarantine=...)) or None, got {type(fix).__name__}")
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}; choose from {', '.join(EXECUTORS)}")
    if address is not None and executor != "ray":
        raise ConfigError("address names a Ray cluster; add executor='ray' (--executor ray)")
    workers = check_workers(workers, executor)
    if isinstance(rules, RuleSet) and preset is not None:  # the preset was ignored
        raise ConfigError("give either rules or preset, not both")
    ruleset = rules if isinstance(rules, RuleSet) else load_rules(rules, preset=preset)
    delimiter = check_delimiter(delimiter)
    if is_stdin(source):
        if delimiter is not None:  # refused before anything is read from the pipe
            raise ConfigError("standard input (-) is read as JSON Lines; --delimiter applies "
                              "to CSV files")
        with spooled_stdin(command="fix" if fix is not None else "check") as spooled:
            report = _run_source(spooled, ruleset, out, stdin=True, limit=limit, strict=strict,
                                 show_text=show_text, progress=progress, fix=fix, smoke=smoke,
                                 formats=formats, md_max_chars=md_max_chars, executor=executor,
                                 address=address, delimiter=delimiter, workers=workers)
        report.source.path = "-"
        return report
    return _run_source(source, ruleset, out, stdin=False, limit=limit, strict=strict,
                       show_text=show_text, progress=progress, fix=fix, smoke=smoke,
                       formats=formats, md_max_chars=md_max_chars, executor=executor,
                       address=address, delimiter=delimiter, workers=workers)


def check_workers(workers: int | None, executor: str) -> int | None:
    """The local executor's processes: ``workers``, or the cores this process may use; a
    ``ConfigError`` (exit 2) for a number below 1, or with the Ray executor."""
    if workers is None:  # decided by the input and cores (``pool.default_workers``)
        return None
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be a whole number of processes, at least 1, got "
                          f"{workers!r} (1 runs in this process)")
    if executor != "local":
        raise ConfigError("workers sizes the local executor's pool; Ray runs one worker per "
                          "CPU of its cluster: drop --workers or --executor ray")
    return workers


def _run_source(source: Any, ruleset: RuleSet, out: str | Path | None, *, stdin: bool,
                limit: int | None, strict: bool, show_text: bool, progress: Progress | None,
                fix: FixOptions | None, smoke: bool | None, formats: Iterable[str],
                md_max_chars: int | None, executor: str, address: str | None,
                delimiter: str | None, workers: int | None) -> Report:
    from preflight.fix import run_fix
    from preflight.pipeline import clear_unread, run
    from preflight.source import open_source
    from preflight.tempfiles import temp_dir

    if fix is not None:
        if executor != "local":
            raise ConfigError("fix writes the cleaned copy in one ordered pass on this "
                              "machine; it runs with the local executor only")
        if not isinstance(source, str | Path):
            raise ConfigError(f"fix writes a cleaned copy of a file; a {type(source).__name__} "
                              "is not one: write it to Parquet or JSON Lines and fix that")
        report, manifest = run_fix(
            source, ruleset, fix, limit=limit, show_text=show_text, delimiter=delimiter,
            run_gate=lambda src, rules, gate_out: run(
                open_source(src, delimiter=delimiter), rules, out=gate_out, limit=limit,
                show_text=show_text, progress=progress, workers=workers),
        )
        report.fix = manifest
        return report
    formats = tuple(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ConfigError(f"unknown report format(s) {', '.join(unknown)}; "
                          f"choose from {', '.join(FORMATS)}")
    try:
        src = open_source(source, delimiter=delimiter)
    except InputError:
        if out is not None and str(out).strip() and isinstance(source, str | Path):
            clear_unread(Path(out), source)  # no earlier verdict left to read as this one
        raise
    if delimiter is not None and src.format != "csv":
        raise ConfigError(f"--delimiter applies to CSV input; {src.path} is {src.format}")
    if stdin:
        src.path = "-"
    # with no out, findings.parquet goes to a temporary folder kept while the report lives
    folder = temp_dir("findings") if out is None else None
    try:
        report = run(src, ruleset, out=out, limit=limit, strict=strict, show_text=show_text,
                     progress=progress,
                     smoke=ruleset.smoke.enabled if smoke is None else smoke,
                     formats=formats, md_max_chars=md_max_chars, executor=executor,
                     address=address, findings_dir=folder, workers=workers)
    except BaseException:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if folder is not None:
        weakref.finalize(report, shutil.rmtree, folder, True)
    return report
