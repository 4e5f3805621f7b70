"""Loading rules: from a file (read without hanging on a pipe or a device, at most
``MAX_RULES_BYTES``), a mapping or a shipped preset, to a validated ``RuleSet``."""

from __future__ import annotations

import hashlib
import os
import select
import stat
from pathlib import Path
from typing import Any

import yaml

from preflight.config.bounded_yaml import yaml_load, yaml_problem
from preflight.config.messages import _kind
from preflight.config.models import RuleSet
from preflight.config.validate import _validate
from preflight.errors import ConfigError
from preflight.paths import presets_dir

DEFAULT_PRESET = "default"
# A rules file is a few KB holding a few hundred values.
MAX_RULES_BYTES = 10 * 2**20
# A rules file may come through a pipe (`--rules <(envsubst < r.yaml)`), but a FIFO with no
# writer would block forever: give up when nothing arrives for this long.
PIPE_WAIT_S = 5.0


def preset_names() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in presets_dir().glob("*.yaml"))


def load_rules(
    source: str | Path | dict[str, Any] | None = None, *, preset: str | None = None
) -> RuleSet:
    """Load and validate a rules file, a dict of the same shape, or a shipped preset.

    A ``.toml`` file (``pyproject.toml``) gives the rules in its ``[tool.preflight]`` table,
    read as discovery reads it.

    With neither ``source`` nor ``preset``, the ``default`` preset is used.
    """
    if source is not None and preset is not None:
        raise ConfigError("give either a rules file or --preset, not both")
    if not isinstance(source, str | os.PathLike | dict | None):
        raise ConfigError(f"rules must be a path to a rules file, a dict of the same shape, a "
                          f"RuleSet or None, got {type(source).__name__}")
    if isinstance(source, str) and not source.strip():  # Path('') is the working directory
        raise ConfigError("rules is empty (an unset variable?); give a rules file, or None "
                          "for the default rules")
    if isinstance(source, dict):
        return _validate(source, where="<dict>", sha256=None, preset=None)
    if source is None:
        name = preset or DEFAULT_PRESET
        return _load_file(preset_path(name), preset=name)
    path = Path(source)
    if path.suffix.lower() == ".toml":  # a pyproject.toml: its [tool.preflight] table
        from preflight.discover import toml_rules  # discover reads rules through this module

        rules = toml_rules(path, _read_rules(path))
        if rules is None:
            raise ConfigError(f"{path} has no [tool.preflight] table; put the rules there "
                              "(the keys of a rules file), or give a YAML rules file")
        return rules
    return _load_file(path, preset=None)


def preset_path(name: str) -> Path:
    """The file of the shipped preset ``name`` (``preflight rules show NAME`` prints it)."""
    path = presets_dir() / f"{name}.yaml"
    if name not in preset_names() or not path.is_file():
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(preset_names())}")
    return path


def _load_file(path: Path, *, preset: str | None) -> RuleSet:
    raw = _read_rules(path)
    if len(raw) > MAX_RULES_BYTES:
        raise ConfigError(f"{path}: a rules file is at most {MAX_RULES_BYTES // 2**20} MiB; "
                          "this one is larger (is it the right file?)")
    try:
        data = yaml_load(raw, words=True)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML{yaml_problem(e, raw)}") from e
    if data is None:
        raise ConfigError(f"{path}: the rules file is empty; it needs at least `rules:`")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {_kind(data)}")
    return _validate(data, where=str(path), sha256=hashlib.sha256(raw).hexdigest(), preset=preset,
                     path=str(path))


def _read_rules(path: Path) -> bytes:
    """The rules file's bytes, at most ``MAX_RULES_BYTES + 1`` of them. A device, socket or
    folder is refused before it is opened; a pipe is read without blocking for ever."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError as e:
        raise ConfigError(f"rules file not found: {path}") from e
    except OSError as e:
        raise ConfigError(f"cannot read rules file {path}: {e.strerror}") from e
    if stat.S_ISDIR(mode):
        raise ConfigError(f"rules file {path} is a folder; give a YAML file")
    if stat.S_ISFIFO(mode):
        return _read_pipe(path)
    if not stat.S_ISREG(mode):
        raise ConfigError(f"rules file {path} is not a regular file (a device or socket); "
                          "give a YAML file")
    try:
        with path.open("rb") as f:
            return f.read(MAX_RULES_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read rules file {path}: {e.strerror}") from e


def _read_pipe(path: Path) -> bytes:
    """Read a FIFO (or ``<(cmd)``) to its end, failing when nothing comes for
    ``PIPE_WAIT_S`` seconds (no writer, or one that stalls) instead of hanging."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # does not wait for a writer
    except OSError as e:
        raise ConfigError(f"cannot read rules file {path}: {e.strerror}") from e
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= MAX_RULES_BYTES:
            ready, _, _ = select.select([fd], [], [], PIPE_WAIT_S)
            if not ready:
                got = f"after {size:,} bytes" if size else "before any byte came"
                raise ConfigError(
                    f"rules file {path} is a named pipe and nothing was written to it for "
                    f"{PIPE_WAIT_S:g} s ({got}); start its writer first, or give a YAML file")
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise ConfigError(f"cannot read rules file {path}: {e.strerror}") from e
    finally:
        os.close(fd)
    return b"".join(chunks)
