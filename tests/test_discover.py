"""Config discovery: ``preflight.yaml``, else ``[tool.preflight]`` in ``pyproject.toml``, used
when ``--rules`` is absent; a discovered file never gets code run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflight.discover import Discovered, code_named, discover_rules, refuse_code
from preflight.errors import ConfigError
from tests.test_cli import CLEAN, flat, invoke, run_cli, write_jsonl

# Loosens nothing the default has, but is recognisable: only one rule, with its own id.
RULES_YAML = "version: 1\nrules:\n  - {id: only-hidden, check: invisible_unicode}\n"
PYPROJECT = ('[project]\nname = "x"\n\n[tool.preflight]\nversion = 1\n'
             '[[tool.preflight.rules]]\nid = "from-pyproject"\ncheck = "empty"\n')


def _rule_ids(out: Path) -> list[str]:
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return [r["id"] for r in report["rules"]]


def test_preflight_yaml_in_the_working_directory_is_used(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    (tmp_path / "preflight.yaml").write_text(RULES_YAML, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")  # yaml wins
    monkeypatch.chdir(tmp_path)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert "rules: preflight.yaml (found in the working directory; --rules FILE or --preset " \
           "NAME to choose others)" in flat(result.output)
    assert _rule_ids(tmp_path / "r") == ["malformed", "only-hidden"]


def test_preflight_yml_is_found_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The other spelling was passed over in silence: the defaults ran instead of its rules.
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    (tmp_path / "preflight.yml").write_text(RULES_YAML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert "rules: preflight.yml (found in the working directory" in flat(result.output)
    assert _rule_ids(tmp_path / "r") == ["malformed", "only-hidden"]
    (tmp_path / "preflight.yaml").write_text(RULES_YAML, encoding="utf-8")
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 2, result.output
    assert "holds both preflight.yaml and preflight.yml: remove one" in flat(result.output)


@pytest.mark.parametrize("kind", ["folder", "broken-link"])
def test_a_rules_file_that_cannot_be_read_is_exit_2_not_the_defaults(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    if kind == "folder":
        (tmp_path / "preflight.yaml").mkdir()
    else:
        (tmp_path / "preflight.yaml").symlink_to(tmp_path / "gone.yaml")
    monkeypatch.chdir(tmp_path)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 2, result.output
    said = "a broken link" if kind == "broken-link" else "not a file"
    assert f"preflight.yaml is {said}, so its rules cannot be read" in flat(result.output)
    assert not (tmp_path / "r").exists()


def test_pyproject_tool_preflight_is_used(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert "rules: pyproject.toml [tool.preflight] (found in the working directory" \
        in flat(result.output)
    assert _rule_ids(tmp_path / "r") == ["malformed", "from-pyproject"]


def test_rules_and_preset_options_win_over_discovery(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    (tmp_path / "preflight.yaml").write_text(RULES_YAML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r", "--preset", "default")
    assert result.exit_code == 0, result.output
    assert "found in the working directory" not in result.output
    assert "only-hidden" not in _rule_ids(tmp_path / "r")


def test_nothing_to_discover(tmp_path: Path) -> None:
    assert discover_rules(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    assert discover_rules(tmp_path) is None


def test_broken_pyproject_is_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    (tmp_path / "pyproject.toml").write_text("[tool.preflight\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 2
    assert "pyproject.toml: cannot read it for [tool.preflight]" in flat(result.output)


def test_invalid_tool_preflight_names_where(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.preflight]\nfeilds = {text = 'a'}\n[[tool.preflight.rules]]\ncheck = 'empty'\n",
        encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pyproject.toml \[tool.preflight\]: invalid rules "
                                          r"file:\n  feilds: unknown key .* did you mean 'fields'"):
        discover_rules(tmp_path)


# A module that leaves a marker when it is imported: it must never be.
EVIL = ("from pathlib import Path\n"
        "Path(__file__).with_name('IMPORTED').write_text('yes')\n"
        "def build(*a, **k):\n    raise SystemExit(0)\n")


@pytest.mark.parametrize("config", [
    ("preflight.yaml", "version: 1\nsmoke: {model: evil.py:build}\n"
                       "rules:\n  - {id: e, check: empty}\n"),
    ("pyproject.toml", "[tool.preflight]\nsmoke = {model = 'evil:build'}\n"
                       "[[tool.preflight.rules]]\nid = 'e'\ncheck = 'empty'\n"),
])
def test_discovered_file_naming_code_is_refused(tmp_path: Path,
                                                config: tuple[str, str]) -> None:
    """Cloning a repo and running `preflight check` must never import its code."""
    (tmp_path / "evil.py").write_text(EVIL, encoding="utf-8")
    (tmp_path / config[0]).write_text(config[1], encoding="utf-8")
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    for extra in ([], ["--no-smoke"]):
        proc = run_cli("check", data, "--out", tmp_path / "r", *extra, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        message = flat(proc.stderr)
        assert "was found in the working directory and names code to run (smoke.model = " \
               in message
        assert "preflight never runs code from a file it found by itself" in message
        assert "or --model SPEC to choose the model" in message
    assert not (tmp_path / "IMPORTED").exists()
    assert not (tmp_path / "r").exists()


def test_a_py_file_anywhere_is_code() -> None:
    from preflight.config import load_rules

    rules = load_rules({"version": 1, "smoke": {"training_args": "setup.py"},
                        "rules": [{"id": "e", "check": "empty"}]})
    assert code_named(rules) == ["smoke.training_args = 'setup.py'"]
    found = Discovered(rules, "preflight.yaml")
    with pytest.raises(ConfigError, match=r"Give --rules preflight\.yaml to use it as it is"):
        refuse_code(found, model_given=False)
    refuse_code(found, model_given=True)  # --model chosen on the command line: allowed


def test_transformers_folder_model_is_not_code() -> None:
    from preflight.config import load_rules

    rules = load_rules({"version": 1, "smoke": {"model": "hf-config:./model"},
                        "rules": [{"id": "e", "check": "empty"}]})
    assert code_named(rules) == []


def test_rules_validate_and_rules_read_a_named_pyproject_toml(tmp_path: Path) -> None:
    """`--rules pyproject.toml` and `rules validate pyproject.toml` read its
    [tool.preflight] table as discovery does, not as YAML."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(PYPROJECT, encoding="utf-8")
    result = invoke("rules", "validate", pyproject)
    assert result.exit_code == 0, result.output
    assert flat(result.output) == f"valid: {pyproject} (1 rules)"
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    result = invoke("check", data, "--no-smoke", "--rules", pyproject, "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert _rule_ids(tmp_path / "r") == ["malformed", "from-pyproject"]


def test_a_named_toml_without_tool_preflight_is_exit_2(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n[tool.ruff]\nline-length = 99\n',
                         encoding="utf-8")
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    for args in (["rules", "validate", pyproject],
                 ["check", data, "--no-smoke", "--rules", pyproject, "--out", tmp_path / "r"]):
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert flat(result.output) == (
            f"error: {pyproject} has no [tool.preflight] table; put the rules there (the keys "
            "of a rules file), or give a YAML rules file")
    assert not (tmp_path / "r").exists()


def test_a_named_toml_with_a_mistake_names_the_table(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text("[tool.preflight]\nfeilds = {text = 'a'}\n"
                         "[[tool.preflight.rules]]\ncheck = 'empty'\n", encoding="utf-8")
    result = invoke("rules", "validate", pyproject)
    assert result.exit_code == 2
    assert "pyproject.toml [tool.preflight]: invalid rules file: feilds: unknown key" \
        in flat(result.output)


def test_pyproject_nested_too_deep_is_exit_2(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # 60 KB of `[`: tomllib recursed into a RecursionError ("internal error").
    data = write_jsonl(tmp_path / "d.jsonl", CLEAN)
    (tmp_path / "pyproject.toml").write_text(
        PYPROJECT + "[tool.x]\ny = " + "[" * 30_000 + "]" * 30_000 + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output
    assert "pyproject.toml: cannot read it for [tool.preflight]: arrays or tables nest too " \
           "deep" in flat(result.output)
