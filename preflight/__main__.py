"""``python -m preflight`` runs the CLI."""

from preflight.cli import run

run()
