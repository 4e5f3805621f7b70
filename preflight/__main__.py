"""``python -m preflight`` runs the CLI."""

from preflight.entry import run

run()
