"""Paths named in a rules file (tried as given, then beside the rules file), and where the
shipped presets are. Light to import: the command line asks before it loads the rules."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from preflight.errors import ConfigError


def presets_dir() -> Path:
    """Where the shipped presets live: inside the wheel, or ``rules/`` in a source checkout."""
    packaged = Path(str(resources.files("preflight"))) / "rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[1] / "rules"


def rules_base(rules: Any) -> Path | None:
    """The folder a rule set's relative paths are also looked up in: its rules file's own.
    None for a shipped preset: it names no file, and a relative ``--eval`` or
    ``--tokenizer`` (the working directory's) was looked up among the presets too, so a
    missing one was reported as ``<install>/rules/NAME`` and one named like a preset file
    (``default.yaml``) was read from there."""
    if not rules.path or rules.preset:
        return None
    return Path(rules.path).parent


def find_beside(name: str, base: Path | None, *, what: str, hint: str = "") -> Path:
    """A path named in a rules file (or on the command line): as given (from the working
    directory), else relative to ``base`` (the rules file's folder). A ``ConfigError``
    lists what was tried."""
    given = Path(name).expanduser()
    tried = {given: "" if given.is_absolute() else f" (from the working directory {Path.cwd()})"}
    if base is not None and not given.is_absolute():
        tried.setdefault(base / name, " (beside the rules file)")
    found = next((p for p in tried if p.exists()), None)
    if found is None:
        shown = ", ".join(f"{p}{where}" for p, where in tried.items())
        raise ConfigError(f"{what} not found: tried {shown}{hint}")
    return found
