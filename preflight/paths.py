"""Paths named in a rules file (tried as given, then beside the rules file), and where the
shipped presets are. Light to import: the command line asks before it loads the rules."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from preflight.errors import ConfigError


def presets_dir() -> Path:
    """Where the shipped presets live: inside the wheel, or ``rules/`` in a source checkout."""
    packaged = Path(str(resources.files("preflight"))) / "rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[1] / "rules"


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
