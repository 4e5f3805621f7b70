"""Finding the rules when none are named: ``preflight.yaml`` in the working directory, else
``[tool.preflight]`` in its ``pyproject.toml`` (as ruff and pytest find theirs), else the
inferred defaults.

A discovered file came with the folder, not from the person running the command: cloning a
repository and running ``preflight check`` must never import its code. So a discovered file
that names code to run (``smoke.model`` other than a ``transformers`` folder, or a ``.py``
anywhere) is refused unless the code was chosen on the command line (``--rules FILE`` names
the file on purpose; ``--model`` replaces the file's model).
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from preflight.config import RuleSet, load_rules, rules_from_mapping, to_dict
from preflight.errors import ConfigError

RULES_FILE = "preflight.yaml"
# Its other spelling: found the same way (both in one folder is ambiguous: exit 2).
RULES_FILE_YML = "preflight.yml"
PYPROJECT = "pyproject.toml"
# A value that names a Python file (`x.py`, `x.py:build`).
_PY_FILE = re.compile(r"\.py(?::[\w.]+)?$")


@dataclass(frozen=True)
class Discovered:
    """Rules found in a folder, and where: its ``preflight.yaml`` or ``pyproject.toml``."""

    rules: RuleSet
    where: str


def discover_rules(folder: Path) -> Discovered | None:
    """The rules ``folder`` holds: its ``preflight.yaml`` (or ``preflight.yml``), else the
    ``[tool.preflight]`` table of its ``pyproject.toml``; None when it has neither."""
    found = [name for name in (RULES_FILE, RULES_FILE_YML) if (folder / name).exists()
             or (folder / name).is_symlink()]
    if len(found) > 1:
        raise ConfigError(f"{folder} holds both {RULES_FILE} and {RULES_FILE_YML}: remove one, "
                          "or name the rules with --rules FILE")
    if found:
        path = folder / found[0]
        if not path.is_file():  # a folder or a broken link: never the defaults in silence
            what = "a broken link" if not path.exists() else "not a file"
            raise ConfigError(f"{path} is {what}, so its rules cannot be read; fix it, or "
                              "name the rules with --rules FILE or --preset NAME")
        return Discovered(load_rules(path), found[0])
    pyproject = folder / PYPROJECT
    if not pyproject.is_file():
        return None
    try:
        raw = pyproject.read_bytes()
    except OSError as e:
        raise ConfigError(f"{pyproject}: cannot read it for [tool.preflight]: {e.strerror}; "
                          "fix it, or name the rules with --rules FILE") from e
    rules = toml_rules(pyproject, raw)
    return None if rules is None else Discovered(rules, f"{PYPROJECT} [tool.preflight]")


def toml_rules(path: Path, raw: bytes) -> RuleSet | None:
    """The rules in the ``[tool.preflight]`` table of ``raw``, the TOML file ``path`` (a
    ``pyproject.toml``, found or named with ``--rules``); None when it has no such table."""
    try:
        table = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read it for [tool.preflight]: {e}; fix it, or "
                          "name the rules with --rules FILE") from e
    except RecursionError as e:  # tomllib nests arrays by recursion: `[[[[...` deep
        raise ConfigError(f"{path}: cannot read it for [tool.preflight]: arrays or tables "
                          "nest too deep for a TOML reader; fix it, or name the rules with "
                          "--rules FILE") from e
    tool = table.get("tool")
    section = tool.get("preflight") if isinstance(tool, dict) else None
    if section is None:
        return None
    where = f"{path.name} [tool.preflight]"
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: expected a table (the shape of a rules file)")
    digest = hashlib.sha256(json.dumps(section, sort_keys=True, default=str).encode()).hexdigest()
    return rules_from_mapping(section, where=where, path=str(path), sha256=digest)


def refuse_code(found: Discovered, *, model_given: bool) -> None:
    """Refuse a discovered rule set that names code to run (exit 2), unless ``--model`` was
    given: only code the person at the keyboard chose may run."""
    named = code_named(found.rules)
    if not named or model_given:
        return
    use = f"--rules {RULES_FILE if found.where == RULES_FILE else PYPROJECT} to use it as it is"
    raise ConfigError(
        f"{found.where} was found in the working directory and names code to run "
        f"({'; '.join(named)}); preflight never runs code from a file it found by itself. "
        f"Give {use}, or --model SPEC to choose the model")


def code_named(rules: RuleSet) -> list[str]:
    """Each setting of ``rules`` that names code to run: ``smoke.model`` other than a
    ``transformers`` folder (``hf:``/``hf-config:``), and any value naming a ``.py`` file."""
    named = []
    model = rules.smoke.model
    if model and not model.startswith(("hf:", "hf-config:")):
        named.append(f"smoke.model = {model!r}")
    for where, value in _strings(to_dict(rules), ""):
        if _PY_FILE.search(value) and where != "smoke.model":
            named.append(f"{where} = {value!r}")
    return named


def _strings(value: Any, where: str) -> list[tuple[str, str]]:
    """Every string in a parsed rules file, with its key path."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list | tuple):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return []
    out = []
    for key, item in items:
        sub = f"{where}{key}" if str(key).startswith("[") else (
            f"{where}.{key}" if where else str(key))
        out.extend(_strings(item, sub))
    return out
