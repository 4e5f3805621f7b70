"""Field overrides without a rules file: ``--text-field`` and the like, ``--set fields.X``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflight.config import load_rules, with_overrides
from preflight.errors import ConfigError
from tests.test_cli import flat, invoke, write_jsonl

# The text is in `payload`, which inference does not pick by name; `summary` is a longer
# string column that inference would take instead.
RECORDS = [
    {"id": "r0", "summary": "a long summary that is longer than every payload " * 3,
     "payload": "clean text", "label": 0},
    {"id": "r1", "summary": "another long summary, longer than the payloads " * 3,
     "payload": "hidden\u200bspace", "label": 1},
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "data.jsonl", RECORDS)


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def _hidden(report: dict) -> dict:
    return next(r for r in report["rules"] if r["id"] == "hidden-chars")


def test_inference_alone_reads_the_payload_as_another_string_field(data: Path,
                                                                   tmp_path: Path) -> None:
    # Without the override the longer `summary` column is the text; the hidden character
    # in `payload` was missed then, and is found now that the character checks read every
    # string field (the override still makes `payload` the text of the text checks).
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    report = _report(tmp_path / "r")
    assert report["rules_file"]["fields"]["text"] == "summary"
    assert _hidden(report)["violations"] == 1, result.output
    assert "payload:" in _hidden(report)["examples"][0]["detail"]


@pytest.mark.parametrize("option", [["--text-field", "payload"], ["--set", "fields.text=payload"]])
def test_text_field_override_checks_that_column(data: Path, tmp_path: Path,
                                                option: list[str]) -> None:
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r", *option)
    assert result.exit_code == 1, result.output
    report = _report(tmp_path / "r")
    assert report["rules_file"]["fields"]["text"] == "payload"
    assert _hidden(report)["violations"] == 1
    # The other fields are still inferred (and said so), not dropped.
    assert report["rules_file"]["fields"]["id"] == "id"
    assert "id" in report["rules_file"]["inferred"]
    assert "text" not in report["rules_file"]["inferred"]


def test_id_field_override_names_the_examples(tmp_path: Path) -> None:
    records = [{"key2": f"k{i}", "text": t} for i, t in enumerate(["ok", "bad\u200b"])]
    data = write_jsonl(tmp_path / "d.jsonl", records)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r", "--id-field", "key2")
    assert result.exit_code == 1, result.output
    examples = _hidden(_report(tmp_path / "r"))["examples"]
    assert [e["id"] for e in examples] == ["k1"]


def test_messages_and_label_field_overrides(tmp_path: Path) -> None:
    records = [{"dialog": [{"role": "user", "content": "hi"},
                           {"role": "assistant", "content": "he\u200bllo"}], "y": 1}]
    data = write_jsonl(tmp_path / "d.jsonl", records)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r",
                    "--messages-field", "dialog", "--label-field", "y")
    assert result.exit_code == 1, result.output
    report = _report(tmp_path / "r")
    assert report["rules_file"]["fields"] == {"messages": "dialog", "label": "y"}
    assert _hidden(report)["codes"] == {"zero_width_space": 1}


@pytest.mark.parametrize(("option", "named"), [
    (["--text-field", "bdy"], "--text-field"),
    (["--id-field", "nope"], "--id-field"),
    (["--set", "fields.label=lbl"], "--set fields.label"),
])
def test_unknown_column_is_exit_2_listing_the_columns(data: Path, tmp_path: Path,
                                                      option: list[str], named: str) -> None:
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r", *option)
    assert result.exit_code == 2, result.output
    column = option[-1].split("=")[-1]
    assert (f"error: {named}: no column {column!r} in the data; columns found: "
            "id, summary, payload, label") in flat(result.output)


def test_set_fields_on_a_rules_file_that_declares_fields() -> None:
    over = with_overrides(load_rules(preset="pretrain-text"), sets=["fields.text=payload"])
    assert over.fields.text == "payload" and over.fields.id == "id"
    assert over.given_fields == {}  # the file declared its fields: nothing is inferred


def test_set_unknown_field_role_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"fields\.txt: unknown key .* did you mean 'text'"):
        with_overrides(load_rules(), sets=["fields.txt=body"])


def test_set_model_fact() -> None:
    over = with_overrides(load_rules(), sets=["model.context_window=128"])
    assert over.model.context_window == 128


def test_set_fields_list_form_keeps_inferring_the_other_roles(tmp_path: Path) -> None:
    # An assistant-first conversation: only chat_format (added from the inferred
    # `messages`) catches it, so the list form must not stop inference.
    records = [{"id": i, "title": f"title {i}",
                "messages": [{"role": "user", "content": f"hi {i}"},
                             {"role": "assistant", "content": f"hello {i}"}]} for i in range(3)]
    records[1]["messages"].reverse()
    data = write_jsonl(tmp_path / "d.jsonl", records)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r",
                    "--set", "fields.text=[title]")
    assert result.exit_code == 1, result.output
    report = _report(tmp_path / "r")
    assert report["rules_file"]["fields"]["messages"] == "messages"
    rule = next(r for r in report["rules"] if r["id"] == "chat-format")
    assert rule["codes"] == {"not_alternating": 1}


def test_set_fields_list_form_names_a_missing_column(data: Path, tmp_path: Path) -> None:
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r",
                    "--set", "fields.text=[payload, a]")
    assert result.exit_code == 2, result.output
    assert ("error: --set fields.text: no column 'a' in the data; columns found: "
            "id, summary, payload, label") in flat(result.output)


@pytest.mark.parametrize("value", ["", "null", "[]"])
def test_set_fields_naming_no_column_is_exit_2(data: Path, tmp_path: Path, value: str) -> None:
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r",
                    "--set", f"fields.text={value}")
    assert result.exit_code == 2, result.output
    assert (f"error: --set 'fields.text={value}': name a column (fields.text=COLUMN or "
            "fields.text=[A, B]); leave fields.text out to infer it") in flat(result.output)


def test_set_fields_conflicting_with_a_field_option_is_exit_2(data: Path, tmp_path: Path) -> None:
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r",
                    "--set", "fields.text=summary", "--text-field", "payload")
    assert result.exit_code == 2, result.output
    assert ("error: --set 'fields.text=summary' conflicts with --text-field 'payload'; "
            "give the column once") in flat(result.output)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--text-field", "error: --text-field: name a column; leave the option out to infer "
                         "the text field"),
        ("--id-field", "error: --id-field: name a column"),
        ("--tokenizer", "error: --tokenizer: name a tokenizer"),
    ],
)
def test_an_empty_option_value_is_exit_2_not_ignored(data: Path, tmp_path: Path, option: str,
                                                     message: str) -> None:
    # `--text-field ""` (an unset shell variable) was dropped and the field inferred;
    # `--tokenizer ""` fell back to the estimate: each without a word.
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r", option, "")
    assert result.exit_code == 2, result.output
    assert message in flat(result.output)


NESTED = [{"id": i, "data": {"text": f"document {i}" + ("\u200b" if i == 1 else ""),
                             "lang": "en"}} for i in range(4)]


def test_a_text_nested_in_an_object_is_inferred(tmp_path: Path) -> None:
    # It was "none: 'data.text' is nested in an object ... flatten it first": no text check
    # read it. Now it is the text (tests/test_nested_text.py has the checks and fix).
    data = write_jsonl(tmp_path / "nested.jsonl", NESTED)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    report = _report(tmp_path / "r")
    assert report["rules_file"]["fields"]["text"] == "data.text"
    assert report["rules_file"]["inferred"]["text"] == "'data.text' (nested in 'data')"
    assert "inferred text: 'data.text' (nested in 'data')" in flat(result.output)
    assert _hidden(report)["violations"] == 1


def test_two_objects_each_holding_a_text_are_named_not_guessed(tmp_path: Path) -> None:
    rows = [{"id": i, "a": {"text": f"one {i}"}, "b": {"body": f"two {i}"}} for i in range(3)]
    data = write_jsonl(tmp_path / "two.jsonl", rows)
    invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    report = _report(tmp_path / "r")
    assert "text" not in report["rules_file"]["fields"]
    assert report["rules_file"]["inferred"]["text"] == (
        "none: 'a.text', 'b.body' are each nested in an object; name the text with "
        "--text-field a.text (or a list in fields.text)")


def test_a_dotted_label_field_says_only_a_text_field_is_read_in_an_object(
        tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "nested.jsonl", NESTED)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r",
                    "--label-field", "data.lang")
    assert result.exit_code == 2, result.output
    assert ("no column 'data.lang' in the data; columns found: id, data ('data' is an "
            "object: only a text field may name a field inside one; flatten it first"
            ) in flat(result.output)


@pytest.mark.parametrize("records", [
    [{"id": 1, "text": "top level", "data": {"text": "nested"}}],  # the top-level one wins
    [{"id": 1, "data": {"lang": "en", "score": 1}}],  # no text-named string inside
])
def test_no_nested_hint_where_it_does_not_apply(tmp_path: Path, records: list) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", records)
    invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    why = _report(tmp_path / "r")["rules_file"]["inferred"].get("text", "")
    assert "nested" not in why
