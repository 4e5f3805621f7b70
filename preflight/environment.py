"""What the run happened on: versions, platform and the working directory's git commit."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from typing import Any


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """The git commit of the current directory, or None outside a repository."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def environment() -> dict[str, Any]:
    """The environment block of the report (torch's version is read without importing it)."""
    return {
        "preflight": _version("dataset-preflight"),
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
        "polars": _version("polars"),
        "pyarrow": _version("pyarrow"),
        "torch": _version("torch"),
        "cuda": None,
        "gpu": None,
        "git_commit": git_commit(),
        "seed": None,
    }
