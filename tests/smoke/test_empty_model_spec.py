"""An empty model spec, checkpoint or TrainingArguments path (``--model "$MODEL"`` with the
variable unset) is exit 2: it was read as "none", the built-in model was smoke-tested in
place of the user's, and its PASS was taken for theirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.smoke.conftest import (
    flat,
    invoke,
    regression_records,
    regression_rules,
    write_jsonl,
    write_rules,
)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "data.jsonl", regression_records(20))


@pytest.mark.parametrize("command", ["check", "smoke"])
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_model_option_is_exit_2(
    tmp_path: Path, data: Path, command: str, value: str
) -> None:
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke(command, data, "--rules", rules, "--out", tmp_path / "out", "--model", value)
    assert result.exit_code == 2, result.output
    assert "'--model': is empty (an unset variable?); name a model" in flat(result.output)
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.parametrize("key", ["model", "checkpoint", "training_args"])
def test_an_empty_path_in_the_rules_file_is_exit_2(tmp_path: Path, data: Path, key: str) -> None:
    rules = write_rules(tmp_path / "rules.yaml", regression_rules(**{key: ""}))
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert f"smoke.{key}" in result.output
    assert "is empty (an unset variable?)" in flat(result.output)


@pytest.mark.parametrize("key", ["model", "checkpoint", "training_args"])
def test_an_empty_set_value_is_exit_2_and_null_still_means_none(
    tmp_path: Path, data: Path, key: str
) -> None:
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke(
        "smoke", data, "--rules", rules, "--out", tmp_path / "out", "--set", f"smoke.{key}="
    )
    assert result.exit_code == 2, result.output
    assert f"--set 'smoke.{key}=': is empty (an unset variable?)" in flat(result.output)
    assert f"smoke.{key}=null for none" in flat(result.output)
    result = invoke(
        "smoke",
        data,
        "--rules",
        rules,
        "--out",
        tmp_path / "out",
        "--set",
        f"smoke.{key}=null",
        "--set",
        "smoke.steps=4",
    )
    assert result.exit_code == 0, result.output
