"""Guards for the whole suite."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
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


@pytest.fixture
def schema_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts how often a polars ``DataFrame.schema`` is built (polars builds a new one on
    every access, a pass over every column): ``schema_builds[0]`` after the code under test.
    Wide inputs must build it a few times, not once per column."""
    import polars as pl

    built = [0]
    real = pl.DataFrame.schema

    def counted(self: pl.DataFrame) -> pl.Schema:
        built[0] += 1
        return real.fget(self)  # type: ignore[attr-defined]

    monkeypatch.setattr(pl.DataFrame, "schema", property(counted))
    return built


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, a disk that fills, unmounted afterwards (skipped where mounting is
    not permitted)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=True)
