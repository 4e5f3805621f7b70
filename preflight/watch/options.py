"""The watch options a framework adapter takes as ``**options`` (``WatchConfig``'s fields)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from preflight.errors import ConfigError
from preflight.watch.core import WatchConfig


def config(out: str | Path, options: dict[str, Any]) -> WatchConfig:
    """``WatchConfig(out=out, **options)``; an unknown option is a ``ConfigError`` naming
    the known ones."""
    try:
        return WatchConfig(out=Path(out), **options)
    except TypeError as e:
        known = ", ".join(f for f in WatchConfig.__dataclass_fields__ if f != "out")
        raise ConfigError(f"PreflightCallback: {e}; the watch options are {known}") from e
