"""run_preflight's and load_rules' arguments: a wrong type or value is a ConfigError (exit 2)
naming the argument, never a TypeError from deep inside nor a run with another meaning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from preflight import ConfigError, load_rules, run_preflight


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": f"record {i}"}) + "\n" for i in range(3)))
    return path


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"rules": 5}, "rules must be"),
        ({"rules": [{"id": "a", "check": "empty"}]}, "rules must be"),
        ({"rules": ""}, "rules is empty"),
        ({"out": 5}, "out must be a path"),
        ({"out": "  "}, "out is empty"),
        ({"limit": "5"}, "limit must be"),
        ({"limit": 2.5}, "limit must be"),
        ({"limit": True}, "limit must be"),  # was read as limit=1
        ({"limit": 0}, "limit must be"),
        ({"formats": None}, "formats must be"),
        ({"formats": ["json", 5]}, "unknown report format(s) 5"),
        ({"md_max_chars": -1}, "md_max_chars must be"),
        ({"md_max_chars": "x"}, "md_max_chars must be"),
        ({"smoke": "no"}, "smoke must be"),  # a true string: it ran the smoke test
        ({"strict": "yes"}, "strict must be"),
        ({"show_text": 1}, "show_text must be"),
        ({"fix": "clean.jsonl"}, "fix must be a FixOptions"),
        ({"progress": 5}, "progress must be a callable"),
    ],
)
def test_wrong_argument_is_a_config_error_naming_it(
    data: Path, tmp_path: Path, kwargs: dict, named: str
) -> None:
    kwargs.setdefault("smoke", False)
    kwargs.setdefault("out", tmp_path / "out")
    with pytest.raises(ConfigError, match=re.escape(named)):
        run_preflight(data, **kwargs)
    assert not (tmp_path / "out").exists()  # refused before any work


def test_empty_source_is_refused_not_read_as_the_working_directory(data: Path) -> None:
    with pytest.raises(ConfigError, match="source is empty"):
        run_preflight("", smoke=False)


def test_formats_as_one_string_reads_like_the_cli(data: Path, tmp_path: Path) -> None:
    # "md" was iterated as the formats 'm' and 'd'
    run_preflight(data, out=tmp_path / "a", smoke=False, formats="md")
    assert (tmp_path / "a" / "report.md").is_file()
    run_preflight(data, out=tmp_path / "b", smoke=False, formats="json, junit")
    assert {p.name for p in (tmp_path / "b").iterdir()} == {
        "report.json",
        "report.junit.xml",
        "findings.parquet",
    }


@pytest.mark.parametrize("rules", [5, [1], b"rules.yaml", ""])
def test_load_rules_wrong_type(rules: object) -> None:
    with pytest.raises(ConfigError, match="rules"):
        load_rules(rules)  # type: ignore[arg-type]


def test_report_rule_unknown_id_names_the_rules(data: Path) -> None:
    report = run_preflight(data, smoke=False, rules={"rules": [{"id": "e", "check": "empty"}]})
    with pytest.raises(KeyError, match=r"its rules: (malformed, e|e, malformed)"):
        report.rule("hidden-chars")


@pytest.mark.parametrize("path", [None, 5, ""])
def test_replay_wrong_path_is_a_config_error(path: object) -> None:
    from preflight.smoke import replay

    with pytest.raises(ConfigError, match="path"):
        replay(path)  # type: ignore[arg-type]


def test_a_loaded_ruleset_and_a_preset_is_refused(data: Path) -> None:
    # the preset was silently ignored
    with pytest.raises(ConfigError, match="not both"):
        run_preflight(data, rules=load_rules(preset="default"), preset="pretrain-text",
                      smoke=False)
