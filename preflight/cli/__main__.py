"""``python -m preflight.cli`` runs the command group (``python -m preflight`` is the usual way)."""

from preflight.cli.group import main

main()
