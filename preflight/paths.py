"""Paths named in a rules file: tried as given, then beside the rules file."""

from __future__ import annotations

from pathlib import Path

from preflight.errors import ConfigError


def find_beside(name: str, base: Path | None, *, what: str, hint: str = "") -> Path:
    """A path named in a rules file (or on the command line): as given, else relative to
    ``base`` (the rules file's folder). A ``ConfigError`` lists what was tried."""
    tried = [Path(name).expanduser()]
    if base is not None and not tried[0].is_absolute():
        tried.append(base / name)
    found = next((p for p in tried if p.exists()), None)
    if found is None:
        shown = dict.fromkeys(map(str, tried))  # the rules file's folder may be the cwd
        raise ConfigError(f"{what} not found: tried {', '.join(shown)}{hint}")
    return found
