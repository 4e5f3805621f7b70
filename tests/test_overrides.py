"""Command-line overrides: ``with_overrides``/``to_dict`` and the ``check`` options
``--context-window``, ``--tokenizer``, ``--num-classes`` and ``--set``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from preflight.checks import registry
from preflight.cli import main
from preflight.config import RuleSet, load_rules, preset_names, to_dict, with_overrides
from preflight.errors import ConfigError
from tests.tokenizers import build_bpe, encode_all, write_jsonl

LONG = "the package provides development files for the library " * 8  # 456 bytes


@pytest.fixture(scope="session")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_bpe(tmp_path_factory.mktemp("tok") / "bpe")


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def _flat(text: str) -> str:
    return " ".join(text.split())


def _report(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def _rule(report: dict[str, Any], rule_id: str) -> dict[str, Any]:
    return next(r for r in report["rules"] if r["id"] == rule_id)


def _ids(ruleset: RuleSet) -> list[str]:
    return [r.id for r in ruleset.rules]


# ---------------------------------------------------------------- to_dict / with_overrides


@pytest.mark.parametrize("preset", preset_names())
def test_to_dict_round_trips(preset: str) -> None:
    ruleset = load_rules(preset=preset)
    again = load_rules(to_dict(ruleset))
    assert again.model_dump() == ruleset.model_dump()
    assert [r.params for r in again.rules] == [r.params for r in ruleset.rules]


def test_to_dict_is_the_rules_file_form() -> None:
    ruleset = load_rules({"fields": {"text": "body"}, "model": {"context_window": 128},
                          "rules": [{"id": "len", "check": "token_length", "reserve": 8}]})
    data = to_dict(ruleset)
    assert data["fields"] == {"text": "body"}
    assert data["model"] == {"context_window": 128}
    rule = data["rules"][0]
    assert rule["id"] == "len" and rule["check"] == "token_length"
    assert rule["reserve"] == 8 and "params" not in rule
    json.dumps(data)  # plain data


def test_no_overrides_changes_nothing() -> None:
    ruleset = load_rules(preset="default")
    same = with_overrides(ruleset)
    assert same.model_dump() == ruleset.model_dump()
    assert (same.path, same.sha256, same.preset) == (ruleset.path, ruleset.sha256, "default")


def test_context_window_adds_a_token_length_rule() -> None:
    ruleset = load_rules(preset="default")
    assert "token-length" not in _ids(ruleset)
    over = with_overrides(ruleset, context_window=64)
    assert over.model.context_window == 64
    assert _ids(over)[-1] == "token-length"
    assert over.rules[-1].check == "token_length" and over.rules[-1].severity == "error"
    assert ruleset.model.context_window is None  # the original is untouched
    assert (over.path, over.sha256, over.preset) == (ruleset.path, ruleset.sha256, "default")


def test_tokenizer_alone_adds_the_rule_too() -> None:
    over = with_overrides(load_rules(preset="default"), tokenizer="tok.json")
    assert over.model.tokenizer == "tok.json"
    assert "token-length" in _ids(over)


def test_existing_token_length_rule_is_reused() -> None:
    ruleset = load_rules(preset="pretrain-text")
    over = with_overrides(ruleset, context_window=8192, tokenizer="tiktoken:x")
    assert _ids(over) == _ids(ruleset)
    assert over.model.context_window == 8192 and over.model.tokenizer == "tiktoken:x"
    custom = load_rules({"rules": [{"id": "len", "check": "token_length"}]})
    assert _ids(with_overrides(custom, context_window=10)) == ["len"]


def test_num_classes_sets_the_fact() -> None:
    over = with_overrides(load_rules(preset="default"), num_classes=3)
    assert over.model.num_classes == 3
    added = "labels" in _ids(over)
    assert added == (registry.get("label_range") is not None)


def test_num_classes_adds_a_labels_rule() -> None:
    if registry.get("label_range") is None:
        pytest.skip("the label_range check is not registered yet")
    over = with_overrides(load_rules(preset="default"), num_classes=3)
    rule = next(r for r in over.rules if r.id == "labels")
    assert rule.check == "label_range"
    existing = load_rules({"rules": [{"id": "lab", "check": "label_range"}]})
    assert _ids(with_overrides(existing, num_classes=3)) == ["lab"]


@pytest.mark.parametrize(
    ("item", "rule_id", "key", "value"),
    [
        ("exact-dupes.max_fraction=0.5", "exact-dupes", "max_fraction", 0.5),
        ("exact-dupes.max_count=3", "exact-dupes", "max_count", 3),
        ("encoding.severity=error", "encoding", "severity", "error"),
        ("hidden-chars.allow=[U+200B, U+200E]", "hidden-chars", "allow", ["U+200B", "U+200E"]),
        ("hidden-chars.allow_emoji_zwj=false", "hidden-chars", "allow_emoji_zwj", False),
        ("exact-dupes.max_fraction=", "exact-dupes", "max_fraction", None),
    ],
)
def test_set_reads_yaml_values(item: str, rule_id: str, key: str, value: Any) -> None:
    over = with_overrides(load_rules(preset="default"), sets=[item])
    rule = next(r for r in over.rules if r.id == rule_id)
    got = getattr(rule, key) if key in type(rule).model_fields else rule.params[key]
    assert got == value


def test_set_applies_after_an_added_rule() -> None:
    over = with_overrides(load_rules(preset="default"), context_window=64,
                          sets=["token-length.reserve=16", "token-length.severity=warn"])
    rule = next(r for r in over.rules if r.id == "token-length")
    assert rule.params["reserve"] == 16 and rule.severity == "warn"


def test_set_on_a_dotted_rule_id() -> None:
    ruleset = load_rules({"rules": [{"id": "v1.dupes", "check": "exact_duplicate"}]})
    over = with_overrides(ruleset, sets=["v1.dupes.max_count=2"])
    assert over.rules[0].max_count == 2


def test_sets_apply_in_order() -> None:
    over = with_overrides(load_rules(preset="default"),
                          sets=["exact-dupes.max_count=1", "exact-dupes.max_count=4"])
    assert next(r for r in over.rules if r.id == "exact-dupes").max_count == 4


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("nodot=1", ["RULE_ID.PARAM=VALUE"]),
        ("exact-dupes.max_fraction", ["RULE_ID.PARAM=VALUE"]),
        (".max_count=1", ["RULE_ID.PARAM=VALUE"]),
        ("exact-dupes.=1", ["RULE_ID.PARAM=VALUE"]),
        ("nope.max_count=1", ["no rule 'nope'", "exact-dupes"]),
        ("exact-dupes.max_fraction=lots", ["max_fraction", "lots"]),
        ("exact-dupes.max_fraction=2", ["max_fraction"]),
        ("exact-dupes.max_fracton=0.5", ["max_fracton", "did you mean 'max_fraction'"]),
        ("hidden-chars.allow=[nope]", ["allow"]),
        ("exact-dupes.severity=fatal", ["severity", "fatal"]),
        ("exact-dupes.max_count=[1", ["not valid YAML"]),
    ],
)
def test_bad_sets_are_config_errors(item: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        with_overrides(load_rules(preset="default"), sets=[item])
    message = str(info.value)
    for word in words:
        assert word in message, message
    # Either the --set item itself, or the validation error, says where the mistake came from.
    assert "--set" in message or "with command-line overrides" in message


@pytest.mark.parametrize("item", ["nope.max_count=" + "x" * 5_000, "y" * 5_000 + "=1",
                                  "z" * 5_000 + ".max_count=1"])
def test_a_pasted_document_in_a_set_is_not_echoed_whole(item: str) -> None:
    with pytest.raises(ConfigError) as info:
        with_overrides(load_rules(preset="default"), sets=[item])
    message = str(info.value)
    assert len(message) < 400, message
    assert "5,0" in message and "characters" in message  # how long the item was


# ---------------------------------------------------------------- the command line


@pytest.fixture
def data(tmp_path: Path) -> Path:
    records = [
        {"id": "1", "text": "A short and tidy sentence about rivers."},
        {"id": "2", "text": LONG},
        {"id": "3", "text": "Another short sentence, about mountains this time."},
        {"id": "4", "text": "Another short sentence, about mountains this time."},
    ]
    return write_jsonl(tmp_path / "data.jsonl", records)


def test_context_window_fails_long_texts(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out,
                     "--context-window", "64")
    assert result.exit_code == 1, result.output
    rule = _rule(_report(out), "token-length")
    assert rule["status"] == "fail" and rule["violations"] == 1
    assert rule["stats"]["estimated"] is True and rule["stats"]["limit"] == 64
    assert rule["examples"][0]["row"] == 1
    assert "token-length" in result.output
    ok = _invoke("check", "--no-smoke", data, "--no-progress", "--out", tmp_path / "ok",
                 "--context-window", "4096")
    assert ok.exit_code == 0, ok.output


def test_tokenizer_option_counts_with_it(data: Path, tmp_path: Path, bpe: Path) -> None:
    out = tmp_path / "out"
    real = encode_all(bpe, [LONG])[0]
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out, "--context-window",
                     str(real - 1), "--tokenizer", bpe)
    assert result.exit_code == 1, result.output
    rule = _rule(_report(out), "token-length")
    assert rule["stats"]["estimated"] is False
    assert Path(rule["stats"]["tokenizer"]) == bpe
    assert rule["codes"] == {"too_long": 1}
    ok = _invoke("check", "--no-smoke", data, "--no-progress", "--out", tmp_path / "ok",
                 "--context-window", str(real), "--tokenizer", bpe)
    assert ok.exit_code == 0, ok.output


def test_tokenizer_without_a_window_is_reported_not_passed(data: Path, tmp_path: Path,
                                                           bpe: Path) -> None:
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out, "--tokenizer", bpe)
    assert result.exit_code == 1, result.output
    rule = _rule(_report(out), "token-length")
    assert rule["status"] == "error" and "context_window" in rule["message"]


def test_set_loosens_a_rule(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "strict"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out, "--strict")
    assert result.exit_code == 1, result.output
    assert _rule(_report(out), "exact-dupes")["status"] == "fail"
    out = tmp_path / "loose"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out, "--strict",
                     "--set", "exact-dupes.max_fraction=0.5")
    assert result.exit_code == 0, result.output
    rule = _rule(_report(out), "exact-dupes")
    assert rule["status"] == "pass"
    assert rule["threshold"]["max_fraction"] == 0.5


def test_set_a_check_parameter(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "zw.jsonl",
                       [{"id": "1", "text": "zero\u200bwidth"}, {"id": "2", "text": "plain"}])
    result = _invoke("check", "--no-smoke", path, "--no-progress", "--out", tmp_path / "a")
    assert result.exit_code == 1, result.output
    result = _invoke("check", "--no-smoke", path, "--no-progress", "--out", tmp_path / "b",
                     "--set", "hidden-chars.allow=[U+200B]")
    assert result.exit_code == 0, result.output
    assert _rule(_report(tmp_path / "b"), "hidden-chars")["status"] == "pass"


def test_set_on_an_added_rule(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out,
                     "--context-window", "200",
                     "--set", "token-length.reserve=100")
    assert result.exit_code == 1, result.output
    assert _rule(_report(out), "token-length")["stats"]["limit"] == 100


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("nodot=1", ["RULE_ID.PARAM=VALUE"]),
        ("x.y", ["RULE_ID.PARAM=VALUE"]),
        ("nope.max_count=1", ["no rule 'nope'"]),
        ("exact-dupes.max_fraction=lots", ["max_fraction", "lots"]),
        ("exact-dupes.max_fracton=0.5", ["did you mean 'max_fraction'"]),
    ],
)
def test_cli_bad_set_is_exit_2(data: Path, tmp_path: Path, item: str, words: list[str]) -> None:
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out, "--set", item)
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "Traceback" not in result.output
    for word in words:
        assert word in _flat(result.output)
    assert not out.exists()


def test_cli_num_classes(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "cls.jsonl",
                       [{"id": str(i), "text": f"sample number {i}", "label": i % 4}
                        for i in range(8)])
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", path, "--no-progress", "--out", out, "--num-classes",
                     "3")
    assert result.exit_code in (0, 1), result.output
    ids = [r["id"] for r in _report(out)["rules"]]
    if registry.get("label_range") is None:
        assert "labels" not in ids
        pytest.skip("the label_range check is not registered yet")
    assert "labels" in ids
    assert result.exit_code == 1  # label 3 is outside [0, 3)


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_cli_bad_context_window_is_exit_2(data: Path, tmp_path: Path, value: str) -> None:
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out,
                     "--context-window", value)
    assert result.exit_code == 2, result.output
    assert not out.exists()


@pytest.mark.parametrize(("sets", "said"), [
    (["model.context_window=-1"],
     "--set 'model.context_window=-1': model.context_window: Input should be greater"),
    (["exact-dupes.max_fraction=2"],
     "--set 'exact-dupes.max_fraction=2': exact-dupes.max_fraction: Input should be"),
    (["hidden-chars.allow=[nope]"], "--set 'hidden-chars.allow=[nope]': hidden-chars.allow[0]"),
])
def test_a_bad_set_value_names_the_set_not_the_packaged_rules(sets: list[str],
                                                              said: str) -> None:
    # It was "<install>/rules/default.yaml with command-line overrides: invalid rules file",
    # as if the user had written the packaged file.
    with pytest.raises(ConfigError) as info:
        with_overrides(load_rules(preset="default"), sets=sets)
    message = str(info.value)
    assert message.startswith(said), message
    assert "default.yaml" not in message and "invalid rules file" not in message


def test_two_bad_sets_are_each_named() -> None:
    with pytest.raises(ConfigError) as info:
        with_overrides(load_rules(preset="default"),
                       sets=["exact-dupes.max_count=-1", "smoke.steps=-1"])
    lines = str(info.value).splitlines()
    assert lines[0] == "invalid command-line settings:"
    assert sorted(line.split(":")[0].strip() for line in lines[1:]) == [
        "--set 'exact-dupes.max_count=-1'", "--set 'smoke.steps=-1'"]


def test_a_set_that_breaks_its_whole_rule_names_the_rule_by_id() -> None:
    # bands without rows is wrong only as a whole rule: the message was "<rules> with
    # command-line overrides: invalid rules file: rules[5]: Value error, ...", a position the
    # user never wrote, and no word of the --set that caused it.
    rules = load_rules({"fields": {"text": "text"}, "rules": [
        {"id": "empty", "check": "empty"},
        {"id": "near", "check": "near_duplicate"}]})
    with pytest.raises(ConfigError) as info:
        with_overrides(rules, sets=["near.threshold=0.5", "near.bands=4"])
    message = str(info.value)
    assert message.startswith(
        "--set 'near.threshold=0.5', 'near.bands=4': rule 'near': give both bands and rows"
    ), message
    assert "rules[1]" not in message and "Value error" not in message
