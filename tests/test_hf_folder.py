"""Reading a Hugging Face model folder's facts from its files (no transformers, no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflight.config import load_rules
from preflight.errors import ConfigError
from preflight.hf_folder import folder_of, is_hf_spec, read_facts
from preflight.resolve import with_model_folder


def write(folder: Path, config: object, *files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for name in files:
        (folder / name).write_text("{}", encoding="utf-8")
    return folder


def test_specs() -> None:
    assert is_hf_spec("hf:./m") and is_hf_spec("hf-config:/abs/m")
    assert not is_hf_spec("pkg.mod:build") and not is_hf_spec("model.py:build")
    assert not is_hf_spec(None) and not is_hf_spec("")


def test_folder_of_finds_the_folder_beside_the_rules(tmp_path: Path) -> None:
    write(tmp_path / "m", {"vocab_size": 10})
    assert folder_of("hf:m", base=tmp_path) == tmp_path / "m"
    with pytest.raises(ConfigError, match="model folder not found"):
        folder_of("hf:nowhere", base=tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        folder_of(f"hf:{tmp_path / 'file'}")
    with pytest.raises(ConfigError, match="names no folder"):
        folder_of("hf:")


def test_read_facts(tmp_path: Path) -> None:
    folder = write(tmp_path / "m", {"vocab_size": 2000, "pad_token_id": 1999,
                                    "eos_token_id": [3, 4], "bos_token_id": None},
                   "tokenizer.json", "tokenizer_config.json")
    facts = read_facts(folder)
    assert facts.tokenizer == folder / "tokenizer.json"
    assert facts.vocab_size == 2000
    assert facts.special_ids == {"pad_token_id": 1999, "eos_token_id": [3, 4]}
    assert tuple(facts) == (folder / "tokenizer.json", 2000, facts.special_ids)  # a tuple


def test_nested_text_config_and_a_transformers_only_tokenizer(tmp_path: Path) -> None:
    folder = write(tmp_path / "m", {"text_config": {"vocab_size": 32064, "eos_token_id": 2}},
                   "tokenizer_config.json")
    facts = read_facts(folder)
    assert facts.vocab_size == 32064 and facts.special_ids == {"eos_token_id": 2}
    assert facts.tokenizer == folder  # only transformers loads it
    assert read_facts(write(tmp_path / "bare", {})) == (None, None, {})


@pytest.mark.parametrize("config", [[1, 2], {"vocab_size": "2000"}, {"vocab_size": True},
                                    {"vocab_size": 0}])
def test_bad_configs_are_config_errors(tmp_path: Path, config: object) -> None:
    with pytest.raises(ConfigError):
        read_facts(write(tmp_path / "m", config))
    with pytest.raises(ConfigError, match=r"no config\.json"):
        read_facts(tmp_path)


def test_rules_get_the_folders_facts_where_they_leave_them_unset(tmp_path: Path) -> None:
    write(tmp_path / "m", {"vocab_size": 2000}, "tokenizer.json")
    rules = load_rules({"smoke": {"model": f"hf:{tmp_path / 'm'}"},
                        "rules": [{"id": "e", "check": "empty"}]})
    resolved, notes = with_model_folder(rules)
    assert resolved.model.vocab_size == 2000
    assert resolved.model.tokenizer == str(tmp_path / "m" / "tokenizer.json")
    assert notes and "vocab_size 2,000" in notes[0]
    declared = load_rules({"smoke": {"model": f"hf:{tmp_path / 'm'}"},
                           "model": {"vocab_size": 1500, "tokenizer": "t.json"},
                           "rules": [{"id": "e", "check": "empty"}]})
    assert with_model_folder(declared) == (declared, [])
