"""Write the report's files atomically (a temporary name, then a rename): ``report.json``
and, as asked, ``report.html``, ``report.junit.xml`` and ``report.md``. A failed write
(disk full, read-only folder) leaves no temporary file and is an ``OutputError``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path

from preflight.choices import (
    DEFAULT_FORMATS,
    FILE_NAMES,
    FORMATS,
    MD_MAX_CHARS,
    OUT_NAMES,
)
from preflight.errors import ConfigError
from preflight.report.model import Report, utf8_safe
from preflight.tempfiles import atomic_write, write_error

OUTPUT_KEYS = {"json": "report", "html": "html", "junit": "junit", "md": "markdown"}


def parse_formats(text: str) -> tuple[str, ...]:
    """``"json,html"`` -> ``("json", "html")``; a ``ConfigError`` for an unknown name."""
    names = tuple(dict.fromkeys(p.strip().lower() for p in text.split(",") if p.strip()))
    unknown = [n for n in names if n not in FORMATS]
    if unknown or not names:
        raise ConfigError(f"--format {text!r}: choose from {', '.join(FORMATS)} "
                          "(comma-separated, e.g. json,html,junit)")
    return names


def render(report: Report, fmt: str, *, md_max_chars: int | None = None) -> str:
    """The text of one format (renderers import their libraries only when used)."""
    if fmt == "json":
        return report.model_dump_json(indent=2) + "\n"
    if fmt == "html":
        from preflight.report.html import render_html

        return render_html(report)
    if fmt == "junit":
        from preflight.report.junit import render_junit

        return render_junit(report)
    if fmt == "md":
        from preflight.report.markdown import render_markdown

        return render_markdown(report, max_chars=md_max_chars or MD_MAX_CHARS)
    raise ConfigError(f"unknown report format {fmt!r}; choose from {', '.join(FORMATS)}")


def write_report(report: Report, out_dir: Path, formats: Iterable[str] = DEFAULT_FORMATS, *,
                 md_max_chars: int | None = None,
                 before_json: Callable[[], None] | None = None) -> dict[str, Path]:
    """Write the report into ``out_dir`` in each format; return the paths by format.
    ``report.json`` comes last, after ``before_json()`` (which brings the report's timings
    up to date: they then count rendering and writing the other files)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(out_dir, e) from e
    formats = list(formats)
    paths = {fmt: out_dir / FILE_NAMES[fmt] for fmt in formats}
    for fmt, path in paths.items():
        report.outputs[OUTPUT_KEYS[fmt]] = str(path)
    for fmt, path in paths.items():  # every file lists every output
        if fmt != "json":
            write_text(path, render(report, fmt, md_max_chars=md_max_chars))
    if before_json is not None:
        before_json()
    if "json" in paths:
        write_text(paths["json"], render(report, "json"))
    return paths


def clear_stale(out_dir: Path, *, keep: Path | None = None) -> None:
    """Remove the files an earlier run left in ``out_dir`` under the names a run writes
    (``findings.parquet`` and the report in every format): a run killed or stopped before
    it writes its own must not leave the last run's verdict there to be read as its own,
    and a report in a format this run does not write (``report.junit.xml`` of a run with
    ``--format junit``) must not stay beside this run's to be read by a CI step as today's.
    A file that cannot be removed stays (the write that follows says why). The smoke
    test's replay file goes too: beside a ``--no-smoke`` run's passing report it told of a
    data fault in data this run may not even have read (a smoke stage removes it as it
    starts). ``keep`` (a resolved path, the input) is never removed, whatever its name."""
    for name in OUT_NAMES:
        path = out_dir / name
        if keep is not None and path.resolve() == keep:
            continue
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder (a file name
    that is not UTF-8 shows its bytes escaped, as in report.json)."""
    with atomic_write(path) as tmp:
        tmp.write_text(utf8_safe(text), encoding="utf-8")
