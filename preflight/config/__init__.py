"""Rules files: YAML loaded into pydantic models, with errors that name the file and key path.

A rules file has this shape::

    version: 1
    fields: {text: text, id: id}
    model: {context_window: 4096}
    rules:
      - {id: hidden-chars, check: invisible_unicode, severity: error, fix: strip}

Each rule takes the common keys below plus the parameters of its check (validated against
that check's ``Params`` model from the registry), so a typo anywhere is a ``ConfigError``.

The package, in the order a rules file goes through it:

- ``load``: read a file (or a preset, or a mapping) without hanging, to a ``RuleSet``;
- ``bounded_yaml``: parse its YAML safely, with alias expansion bounded;
- ``validate``: validate the mapping, rule by rule, collecting every mistake;
- ``models``: the pydantic models (``RuleSet``, ``Rule``, the sections);
- ``messages``: how each mistake is worded (the key path, did-you-mean, allowed keys);
- ``overrides``: command-line overrides applied to a loaded ``RuleSet``.

Callers import from ``preflight.config``.
"""

from __future__ import annotations

from preflight.config.bounded_yaml import MAX_YAML_VALUES, yaml_load, yaml_problem
from preflight.config.load import (
    DEFAULT_PRESET,
    MAX_RULES_BYTES,
    PIPE_WAIT_S,
    load_rules,
    preset_names,
    preset_path,
    presets_dir,
)
from preflight.config.models import (
    RULE_KEYS,
    Beta,
    Fields,
    FixAction,
    ModelFacts,
    Rule,
    RuleSet,
    Severity,
    SmokeConfig,
    Task,
)
from preflight.config.overrides import with_overrides
from preflight.config.validate import rebuild, rules_from_mapping, to_dict

__all__ = [
    "DEFAULT_PRESET",
    "MAX_RULES_BYTES",
    "MAX_YAML_VALUES",
    "PIPE_WAIT_S",
    "RULE_KEYS",
    "Beta",
    "Fields",
    "FixAction",
    "ModelFacts",
    "Rule",
    "RuleSet",
    "Severity",
    "SmokeConfig",
    "Task",
    "load_rules",
    "preset_names",
    "preset_path",
    "presets_dir",
    "rebuild",
    "rules_from_mapping",
    "to_dict",
    "with_overrides",
    "yaml_load",
    "yaml_problem",
]
