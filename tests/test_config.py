"""Rules files: every kind of mistake is a ConfigError (exit 2) that names the file, the key
path and what was expected — through ``load_rules``, ``rules validate`` and ``check --rules``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight.cli import main
from preflight.config import RuleSet, load_rules, preset_names
from preflight.errors import ConfigError

RULE = "rules:\n  - {id: a, check: empty}\n"

# (case id, rules file text, substrings the message must contain)
BAD_RULES: list[tuple[str, str, list[str]]] = [
    (
        "typo-in-common-key",
        "rules:\n  - {id: a, check: empty, max_fracton: 0.1}\n",
        ["rules[0]", "max_fracton", "'max_fraction'"],
    ),
    (
        "unknown-check",
        "rules:\n  - {id: a, check: invisble_unicode}\n",
        ["rules[0].check", "invisble_unicode", "'invisible_unicode'"],
    ),
    (
        "wrong-type",
        'rules:\n  - {id: a, check: empty, max_count: "many"}\n',
        ["rules[0].max_count", "integer", "'many'"],
    ),
    (
        "out-of-range",
        "rules:\n  - {id: a, check: empty, max_fraction: 5}\n",
        ["rules[0].max_fraction", "1", "5"],
    ),
    (
        "unknown-check-parameter",
        "rules:\n  - {id: a, check: exact_duplicate, bogus_param: 3}\n",
        ["rules[0].bogus_param", "exact_duplicate", "min_chars"],
    ),
    (
        "wrong-parameter-type",
        "rules:\n  - {id: a, check: exact_duplicate, min_chars: lots}\n",
        ["rules[0].min_chars", "integer", "'lots'"],
    ),
    (
        "bad-allowed-code-point",
        "rules:\n  - {id: a, check: invisible_unicode, allow: [not-a-code-point]}\n",
        ["rules[0].allow", "not-a-code-point", "U+"],
    ),
    (
        "unknown-top-level-key",
        "rulez: []\n" + RULE,
        ["rulez", "'rules'"],
    ),
    (
        "unknown-key-under-fields",
        "fields: {txt: text}\n" + RULE,
        # The allowed keys listed must be those of `fields`, not of the top level.
        ["fields.txt", "messages"],
    ),
    (
        "invalid-yaml",
        "rules:\n  - {id: a, check: empty\n  - foo: [1,\n",
        ["YAML", "line 3"],
    ),
    (
        "empty-file",
        "",
        ["empty"],
    ),
    (
        "rules-not-a-list",
        "rules: {id: a, check: empty}\n",
        ["`rules`", "list"],
    ),
    (
        "missing-rules",
        "fields: {text: text}\n",
        ["`rules`", "missing"],
    ),
    (
        "top-level-not-a-mapping",
        "- {id: a, check: empty}\n",
        ["mapping"],
    ),
    (
        "rule-not-a-mapping",
        "rules:\n  - empty\n",
        ["rules[0]", "mapping"],
    ),
    (
        "duplicate-rule-id",
        "rules:\n  - {id: a, check: empty}\n  - {id: a, check: malformed}\n",
        ["rules[1].id", "duplicate", "'a'"],
    ),
    (
        "duplicate-rule-id-after-an-invalid-rule",
        "rules:\n  - {id: x, check: nope}\n  - {id: a, check: empty}\n"
        "  - {id: a, check: malformed}\n",
        ["rules[0].check", "rules[2].id", "duplicate"],
    ),
    (
        "fix-not-allowed",
        "rules:\n  - {id: a, check: malformed, fix: strip}\n",
        ["rules[0].fix", "strip", "quarantine"],
    ),
    (
        "missing-check",
        "rules:\n  - {id: a, severity: error}\n",
        ["rules[0].check", "missing", "invisible_unicode"],
    ),
    (
        "unknown-severity",
        "rules:\n  - {id: a, check: empty, severity: fatal}\n",
        ["rules[0].severity", "'fatal'", "warn"],
    ),
    (
        "bad-model-fact",
        "model: {context_window: -1}\n" + RULE,
        ["model.context_window", "0"],
    ),
    (
        "unknown-task",
        "task: translation\n" + RULE,
        ["task", "'translation'"],
    ),
]
CASE_IDS = [c[0] for c in BAD_RULES]


def flat(text: str) -> str:
    """The message with line wrapping undone (the console wraps long lines)."""
    return " ".join(text.split())


def squash(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize(("case", "text", "expected"), BAD_RULES, ids=CASE_IDS)
def test_load_rules_raises_config_error(
    tmp_path: Path, case: str, text: str, expected: list[str]
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    message = str(info.value)
    assert str(path) in message  # names the file
    for part in expected:
        assert part in message, (case, part, message)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(("case", "text", "expected"), BAD_RULES, ids=CASE_IDS)
def test_rules_validate_exits_2(tmp_path: Path, case: str, text: str, expected: list[str]) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    assert "rules.yaml" in squash(result.stderr)
    for part in expected:
        assert part in flat(result.stderr), (case, part, result.stderr)


@pytest.mark.parametrize(("case", "text", "expected"), BAD_RULES, ids=CASE_IDS)
def test_check_with_bad_rules_exits_2_before_reading(
    tmp_path: Path, case: str, text: str, expected: list[str]
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"text": "hello there"}) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(data), "--rules", str(path),
                                       "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for part in expected:
        assert part in flat(result.stderr), (case, part, result.stderr)
    assert not out.exists()


def test_every_mistake_is_listed(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "rules:\n"
        "  - {id: a, check: empty, max_fracton: 0.1}\n"
        "  - {id: b, check: nope}\n"
        "  - {id: c, check: empty, max_count: -1}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    message = str(info.value)
    for part in ("rules[0].max_fracton", "rules[1].check", "rules[2].max_count"):
        assert part in message


def test_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "version: 1\ntask: lm\nfields: {text: [title, body], id: doc_id}\n"
        "model: {context_window: 4096}\n"
        "rules:\n"
        "  - {id: hidden, check: invisible_unicode, fix: strip, allow: [U+200E]}\n"
        "  - {id: dupes, check: exact_duplicate, severity: warn, max_fraction: 0.01,"
        " min_chars: 5}\n"
        "  - {check: empty}\n"
    )
    ruleset = load_rules(path)
    assert isinstance(ruleset, RuleSet)
    assert ruleset.path == str(path)
    assert ruleset.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ruleset.fields.text_fields() == ["title", "body"]
    assert ruleset.model.context_window == 4096
    assert [r.id for r in ruleset.rules] == ["hidden", "dupes", "empty"]  # id defaults to check
    hidden, dupes, empty = ruleset.rules
    assert hidden.severity == "error"
    assert hidden.fix == "strip"
    assert hidden.params["allow"] == ["U+200E"]
    assert dupes.params["min_chars"] == 5
    assert dupes.allowed() == (None, 0.01)
    assert empty.allowed() == (0, None)  # fail closed: one violation fails the rule

    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "3 rules" in result.stdout


def test_check_params_get_their_defaults() -> None:
    ruleset = load_rules({"rules": [{"id": "d", "check": "exact_duplicate"}]})
    assert ruleset.rules[0].params["min_chars"] == 1


def test_load_rules_from_a_dict() -> None:
    ruleset = load_rules({"fields": {"text": "content"}, "rules": [{"check": "empty"}]})
    assert ruleset.fields.text == "content"
    assert ruleset.path is None
    assert ruleset.sha256 is None
    with pytest.raises(ConfigError, match=r"rules\[0\]\.check"):
        load_rules({"rules": [{"id": "x", "check": "nope"}]})


def test_default_and_named_presets() -> None:
    default = load_rules()
    assert default.preset == "default"
    assert default.path is not None
    assert default.sha256
    assert load_rules(preset="pretrain-text").preset == "pretrain-text"
    with pytest.raises(ConfigError, match="no-such"):
        load_rules(preset="no-such")


def test_every_shipped_preset_is_valid() -> None:
    names = preset_names()
    assert {"default", "pretrain-text"} <= set(names)
    for name in names:
        assert load_rules(preset=name).rules


def test_rules_file_and_preset_together_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULE)
    with pytest.raises(ConfigError, match="preset"):
        load_rules(path, preset="default")


def test_missing_rules_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_rules(tmp_path / "absent.yaml")
