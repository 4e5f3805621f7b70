"""The Python API's arguments, checked before any work starts.

The CLI's options are typed by click, so a wrong value there is a usage error; a caller of
``run_preflight`` (a DAG step, a notebook) passed them unchecked, and a wrong type surfaced
as a ``TypeError`` from deep inside (``limit="5"``, ``out=5``), or worse, ran with another
meaning: ``formats="md"`` was read as the formats ``m`` and ``d``, ``smoke="no"`` (a true
string) ran the smoke test, ``limit=True`` checked one record. Each mistake is now a
``ConfigError`` (exit 2) naming the argument, what it expects and what came.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from preflight.choices import FORMATS
from preflight.errors import ConfigError

# report.md's shortest cut that still holds the verdict and the rules table (the CLI's
# --md-max-chars minimum).
MIN_MD_CHARS = 200


def _got(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_path_like(name: str, value: Any, *, allow: tuple[type, ...] = ()) -> None:
    """A path argument: a ``str`` or ``os.PathLike`` (or one of ``allow``), never ``''``."""
    if value is None or isinstance(value, allow):
        return
    if not isinstance(value, str | os.PathLike):
        raise ConfigError(f"{name} must be a path (str or pathlib.Path), got {_got(value)}")
    if isinstance(value, str) and not value.strip():
        raise ConfigError(f"{name} is empty (an unset variable?); give a path")


def check_flag(name: str, value: Any, *, none: bool = False) -> None:
    """A boolean option: ``True`` or ``False`` (or None where ``none``), not a truthy string."""
    if isinstance(value, bool) or (none and value is None):
        return
    allowed = "True, False or None" if none else "True or False"
    raise ConfigError(f"{name} must be {allowed}, got {_got(value)}")


def check_limit(limit: Any) -> int | None:
    """``limit``: None or a whole number of records, at least 1 (a bool is not one)."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(
            f"limit must be a whole number of records, at least 1, or None, got {_got(limit)}"
        )
    return limit


def check_formats(formats: Any) -> tuple[str, ...]:
    """Report formats from a list (``["json", "md"]``) or one comma-separated string
    (``"json,md"``, as ``--format`` takes them); an unknown one is named."""
    if isinstance(formats, str):
        names = [f.strip() for f in formats.split(",") if f.strip()]
    elif isinstance(formats, Iterable) and not isinstance(formats, bytes | dict):
        names = list(formats)
    else:
        raise ConfigError(
            f"formats must be a list of report formats such as "
            f"['json', 'html'], got {_got(formats)}"
        )
    unknown = [
        repr(f) if not isinstance(f, str) else f
        for f in names
        if not isinstance(f, str) or f not in FORMATS
    ]
    if unknown:
        raise ConfigError(
            f"unknown report format(s) {', '.join(unknown)}; choose from {', '.join(FORMATS)}"
        )
    return tuple(names)


def check_md_max_chars(value: Any) -> int | None:
    """``md_max_chars``: None (the default cut) or a whole number, at least ``MIN_MD_CHARS``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_MD_CHARS:
        raise ConfigError(
            f"md_max_chars must be a whole number of characters, at least "
            f"{MIN_MD_CHARS}, or None, got {_got(value)}"
        )
    return value


def check_callable(name: str, value: Any) -> Callable[..., Any] | None:
    """An optional callback (``progress``): None or something callable."""
    if value is not None and not callable(value):
        raise ConfigError(f"{name} must be a callable or None, got {_got(value)}")
    return value
