"""Thin wrappers that make preflight a step in data-prep pipelines. Each imports its
framework lazily (only when used) and maps the gate's verdict to that framework's own idea
of failure; a missing framework is a ``ConfigError`` saying which extra to install."""

from __future__ import annotations

import importlib
from typing import Any

from preflight.errors import ConfigError


def require(module: str, extra: str) -> Any:
    """Import ``module`` or say how to install it: ``pip install 'dataset-preflight[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(f"{module} is not installed: pip install -c constraints.txt "
                          f"'dataset-preflight[{extra}]'") from e
