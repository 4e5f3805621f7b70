"""``python -m preflight`` runs the CLI."""

from preflight.cli import main

main()
