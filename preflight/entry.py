"""The ``preflight`` command's entry point (and ``python -m preflight``'s). Ctrl-C while the
command line itself loads, before any of its handlers exist, is exit 130 and one line, as
Ctrl-C is later: never a traceback, never click's exit 1 (a failed gate to a CI job)."""

from __future__ import annotations

import sys


def run() -> None:
    """Load the command line and run it."""
    try:
        from preflight.cli import run as run_cli
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    run_cli()
