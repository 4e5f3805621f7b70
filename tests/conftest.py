"""Guards for the whole suite."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop when the working directory holds rules that `preflight check` would discover
    (a `preflight.yaml` left by `preflight init`): tests that give no --rules would use it."""
    from preflight.discover import RULES_FILE

    if (Path.cwd() / RULES_FILE).exists():
        pytest.exit(f"{Path.cwd() / RULES_FILE} would be used by every test that gives no "
                    "--rules (config discovery); move it away and run the tests again",
                    returncode=4)
