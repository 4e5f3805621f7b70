"""``preflight init DATA`` writes a commented rules file that validates and runs;
``preflight rules show NAME`` prints a preset."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

from preflight.config import load_rules, preset_path
from tests.test_cli import flat, invoke, write_jsonl

CHAT = [
    {"id": "c0", "messages": [{"role": "user", "content": "hi"},
                              {"role": "assistant", "content": "hello"}]},
    # planted: the conversation starts with the assistant
    {"id": "c1", "messages": [{"role": "assistant", "content": "I start"},
                              {"role": "user", "content": "odd"}]},
    {"id": "c2", "messages": "not a list"},  # planted: a column of mixed types
]
LABELS = [{"text": f"sentence number {i}", "label": i % 3} for i in range(6)] + [
    {"text": "a string label", "label": "2"},  # planted: wrong type
]
TEXT = [{"doc": "plain text here, long enough"}, {"doc": "with a hidden\u200bspace"}]
REGRESSION = [{"features": [1.0, 2.0], "target": 0.5}, {"features": [1.0, None], "target": 1.5}]


def _init(tmp_path: Path, records: list[dict], monkeypatch: pytest.MonkeyPatch,
          *extra: str) -> tuple[str, str]:
    data = write_jsonl(tmp_path / "data.jsonl", records)
    monkeypatch.chdir(tmp_path)
    result = invoke("init", data, *extra)
    assert result.exit_code == 0, result.output
    return (tmp_path / "preflight.yaml").read_text(encoding="utf-8"), result.output


def _check(tmp_path: Path) -> dict:
    """Run check with the discovered preflight.yaml; the report."""
    result = invoke("check", tmp_path / "data.jsonl", "--no-smoke", "--out", tmp_path / "r")
    assert "rules: preflight.yaml (found in the working directory" in flat(result.output)
    assert result.exit_code in (0, 1), result.output
    return json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))


def _codes(report: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for rule in report["rules"]:
        out.update(rule["codes"])
    return out


def test_init_chat_suggests_sft_chat_and_the_file_runs(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    text, output = _init(tmp_path, CHAT, monkeypatch)
    assert "wrote preflight.yaml: fields messages='messages', id='id'; rules of the sft-chat " \
           "preset" in flat(output)
    assert "# Suggested preset: sft-chat" in text
    assert "  messages: messages  # 'messages' (lists of turns, by name)" in text
    assert "  context_window: 4096  # the sft-chat preset's; set your model's" in text
    assert "  # tokenizer: path/to/tokenizer.json" in text  # a model fact to fill in
    rules = load_rules(tmp_path / "preflight.yaml")
    assert rules.task == "chat"
    assert [r.check for r in rules.rules] == [r.check for r in load_rules(preset="sft-chat").rules]
    chat = next(r for r in _check(tmp_path)["rules"] if r["check"] == "chat_format")
    assert chat["codes"] == {"not_a_list": 1, "not_alternating": 1}  # c2, and c1's first turn


def test_init_classification_fills_in_the_classes(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    text, _ = _init(tmp_path, LABELS, monkeypatch)
    assert "# Suggested preset: classification" in text
    assert "  num_classes: 3  # CHECK: largest label in the first 7 records + 1; set your " \
           "model's" in text
    report = _check(tmp_path)
    labels = next(r for r in report["rules"] if r["check"] == "label_range")
    assert labels["status"] == "fail" and labels["codes"] == {"label_wrong_type": 1}


def test_init_text_and_regression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text, _ = _init(tmp_path, TEXT, monkeypatch)
    assert "  text: doc  # 'doc' (the string field with the longest values)" in text
    assert "# Suggested preset: pretrain-text" in text
    assert _codes(_check(tmp_path))["zero_width_space"] == 1
    (tmp_path / "preflight.yaml").unlink()
    text, _ = _init(tmp_path, REGRESSION, monkeypatch)
    assert "# Suggested preset: regression" in text
    assert "\nmodel:  # uncomment what you know\n" in text
    assert _codes(_check(tmp_path))["null"] == 1


def test_init_field_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = [{"a": "short", "b": "the longer text column"}]
    text, _ = _init(tmp_path, records, monkeypatch, "--text-field", "a")
    assert "  text: a  # as given" in text
    load_rules(tmp_path / "preflight.yaml")


def test_init_refuses_to_overwrite_unless_forced(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", TEXT)
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "mine.yaml"
    mine.write_text("# my own rules\n", encoding="utf-8")
    result = invoke("init", data, "--out", mine)
    assert result.exit_code == 2
    assert (f"error: {mine} exists; preflight init does not overwrite it (--force does, or "
            "--out another file)") in flat(result.output)
    assert mine.read_text(encoding="utf-8") == "# my own rules\n"
    result = invoke("init", data, "--out", mine, "--force")
    assert result.exit_code == 0, result.output
    assert f"preflight check {data} --rules {mine}" in flat(result.output)
    load_rules(mine)


def test_init_unreadable_data_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("init", tmp_path / "missing.jsonl")
    assert result.exit_code == 3
    assert not (tmp_path / "preflight.yaml").exists()


@pytest.mark.parametrize("name", ["sft-chat", "default"])
def test_rules_show_prints_the_preset(name: str) -> None:
    result = invoke("rules", "show", name)
    assert result.exit_code == 0
    assert result.output == preset_path(name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["nope", "../rules/default"])
def test_rules_show_unknown_preset_is_exit_2(name: str) -> None:
    result = invoke("rules", "show", name)
    assert result.exit_code == 2
    assert f"error: unknown preset {name!r}: choose one of classification, default" \
        in flat(result.output)


def test_init_named_labels_become_the_label_set(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    records = [{"text": f"review {i}", "label": name}
               for i, name in enumerate(["pos", "neg", "pos"])] + [{"text": "x", "label": 7}]
    text, _ = _init(tmp_path, records, monkeypatch)
    assert "  labels: [neg, pos]  # CHECK: the label names in the first 4 records; set your " \
           "model's" in text
    labels = next(r for r in _check(tmp_path)["rules"] if r["check"] == "label_range")
    assert labels["status"] == "fail" and labels["violations"] == 1  # the planted 7


@pytest.mark.parametrize("records", [TEXT, REGRESSION, LABELS, [{"x": 1}]])
def test_init_file_stays_valid_with_any_fact_uncommented(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: list[dict]) -> None:
    # The file says "uncomment what you know": each commented line under `model:` (and
    # `fields:` when none was found), uncommented alone as it stands, must still load.
    text, _ = _init(tmp_path, records, monkeypatch)
    lines = text.splitlines()
    facts = [i for i, line in enumerate(lines) if line.startswith("  # ")]
    assert len(facts) >= 3, text
    load_rules(tmp_path / "preflight.yaml")  # as written
    for i in facts:
        changed = [*lines[:i], "  " + lines[i][4:], *lines[i + 1:]]
        path = tmp_path / f"uncommented{i}.yaml"
        path.write_text("\n".join(changed) + "\n", encoding="utf-8")
        key = lines[i][4:].split(":")[0]
        ruleset = load_rules(path)
        assert key in ruleset.model.model_dump(exclude_none=True), lines[i]


def test_the_readme_init_example_runs_from_the_repo_root_and_leaves_sample_data_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Quick start's init example, run as written from a copy of the repo root: its
    rules file lands outside sample_data/, where discovery would apply it to every sample."""
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = readme.split("Write a rules file from what preflight infers", 1)[1]
    block = block.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]
    assert [c[:2] for c in commands] == [["preflight", "init"], ["preflight", "check"]]
    shutil.copytree(root / "sample_data", tmp_path / "sample_data")
    monkeypatch.chdir(tmp_path)
    init = invoke(*commands[0][1:])
    assert init.exit_code == 0, init.output
    # the check as written, without the smoke test's training run
    check = invoke(*commands[1][1:], "--no-smoke", "--out", "r")
    assert check.exit_code == 1, check.output  # the sample has planted faults
    assert "found in the working directory" not in flat(check.output)
    report = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    assert report["rules_file"]["path"] == commands[0][commands[0].index("--out") + 1]
    assert not (tmp_path / "sample_data" / "preflight.yaml").exists()
    assert not (tmp_path / "preflight.yaml").exists()


def test_init_prints_its_next_command_on_one_line_however_long_the_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / ("a-long-folder-name-" * 8)
    folder.mkdir()
    out = folder / "rules.yaml"
    data = write_jsonl(folder / "data.jsonl", TEXT)
    monkeypatch.chdir(folder)
    result = invoke("init", data, "--out", out)
    assert result.exit_code == 0, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("next:")]
    assert line.endswith(f"preflight check {folder / 'data.jsonl'} --rules {out}")


def test_init_leaves_blank_variant_and_typo_names_out_of_the_label_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # init declared labels: ['', book_flight, cancel, weather, wether]: the typo and the
    # blank label became the model's classes, and check with the file passed them.
    monkeypatch.chdir(tmp_path)
    rows = [{"text": f"please do thing {i}", "intent": ["book_flight", "cancel", "weather"][i % 3]}
            for i in range(90)]
    rows[4]["intent"], rows[7]["intent"], rows[9]["intent"] = "wether", "", "Cancel"
    write_jsonl(tmp_path / "d.jsonl", rows)
    assert invoke("init", "d.jsonl", "--out", "r.yaml").exit_code == 0
    rules = load_rules(tmp_path / "r.yaml")
    assert rules.model.labels == ["book_flight", "cancel", "weather"]
    text = (tmp_path / "r.yaml").read_text()
    assert "left out: '', 'Cancel' (label_variant), 'wether' (label_stray)" in text
    result = invoke("check", "d.jsonl", "--rules", "r.yaml", "--no-smoke", "--out", "o")
    assert result.exit_code == 1, result.output
    found = json.loads((tmp_path / "o" / "report.json").read_text())
    labels = next(r for r in found["rules"] if r["id"] == "labels")
    assert labels["violations"] == 3


def test_init_on_a_very_wide_file_lists_a_few_other_fields(tmp_path: Path) -> None:
    # 3,000 string columns: the comment beside `text:` (and the console's inferred line)
    # named every one of them, a 27 KB line; now the first few and how many more.
    data = tmp_path / "wide.jsonl"
    data.write_text(json.dumps({f"f{i}": "x" * i for i in range(3000)}) + "\n")
    rules = tmp_path / "rules.yaml"
    result = invoke("init", data, "--out", rules)
    assert result.exit_code == 0, result.output
    text_line = next(line for line in rules.read_text().splitlines() if "text:" in line)
    assert "and 2,987 more" in text_line and len(text_line) < 400
    check = invoke("check", data, "--rules", rules, "--no-smoke", "--out", tmp_path / "out")
    assert check.exit_code in (0, 1), check.output  # init's rules are accepted
    inferred = invoke("check", data, "--no-smoke", "--out", tmp_path / "out")
    assert "and 2,987 more" in inferred.output and len(inferred.output) < 4000


@pytest.mark.parametrize("same", ["path", "hard link"])
def test_init_never_overwrites_its_data(tmp_path: Path, same: str) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"text": "hello there"}) + "\n")
    out = data
    if same == "hard link":
        out = tmp_path / "link.jsonl"
        os.link(data, out)
    before = data.read_bytes()
    result = invoke("init", data, "--out", out, "--force")
    assert result.exit_code == 2, result.output
    assert "is the data" in result.output
    assert data.read_bytes() == before


def test_init_out_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"text": "hello there"}) + "\n")
    result = invoke("init", data, "--out", tmp_path, "--force")
    assert result.exit_code == 2, result.output
    assert "is a folder" in result.output


def test_messages_about_fields_stay_short_on_a_wide_file(tmp_path: Path) -> None:
    data = tmp_path / "wide.jsonl"
    data.write_text(json.dumps({f"f{i}": "x" * i for i in range(3000)}) + "\n")
    named = invoke("check", data, "--text-field", "nosuch", "--no-smoke", "--out",
                   tmp_path / "a")
    assert named.exit_code == 2 and "and 2,980 more" in named.output, named.output
    rules = tmp_path / "r.yaml"
    rules.write_text("version: 1\nfields: {text: ''}\nrules:\n  - {id: e, check: empty}\n")
    declared = invoke("check", data, "--rules", rules, "--no-smoke", "--out", tmp_path / "b")
    assert declared.exit_code == 1
    assert "field(s) '' not found in the data" in declared.output  # was "field(s)  not"
    assert "and 2,980 more" in declared.output and len(declared.output) < 6000


def test_init_names_per_token_labels_as_token_labels(tmp_path: Path) -> None:
    # `labels` holding a list per record (beside input_ids) was written as the class
    # label (classification preset), whose rules then could not run; check's own
    # inference calls it token_labels.
    data = tmp_path / "tok.jsonl"
    data.write_text("".join(json.dumps({"input_ids": [1, 2, 3], "labels": [1, 2, -100]})
                            + "\n" for _ in range(3)))
    rules = tmp_path / "rules.yaml"
    assert invoke("init", data, "--out", rules).exit_code == 0
    fields = load_rules(rules).fields
    assert fields.token_labels == "labels" and fields.label is None


TEXT_RULES = ["empty", "hidden-chars", "encoding", "exact-dupes"]


@pytest.mark.parametrize(("records", "kept", "dropped"), [
    ([{"input_ids": [1, 2, 3]}, {"input_ids": [4, -5]}], ["malformed", "schema", "labels"],
     TEXT_RULES),
    ([{"tokens": ["a", "b\u200b"]}, {"tokens": ["c"]}],
     ["malformed", "schema", "hidden-chars", "encoding"], ["empty", "exact-dupes"]),
], ids=["token-ids", "strings-only"])
def test_init_writes_the_default_rules_as_check_runs_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: list[dict],
        kept: list[str], dropped: list[str]) -> None:
    # With no text field init wrote the default preset's text rules, which check then
    # could not run (exit 1, "could not run"), while check with no rules file passed; and
    # it left out the rules the fields call for (token ids, numbers), checking less.
    text, _ = _init(tmp_path, records, monkeypatch)
    rules = load_rules(tmp_path / "preflight.yaml")
    assert [r.id for r in rules.rules] == kept
    left_out = [line for line in text.splitlines() if "# left out:" in line]
    assert all("the data has no text field" in line for line in left_out)
    assert [line.split("{id: ")[1].split(",")[0] for line in left_out] == dropped
    report = _check(tmp_path)
    assert not [r for r in report["rules"] if r["status"] == "error"]
    alone = invoke("check", tmp_path / "data.jsonl", "--no-smoke", "--out", tmp_path / "z",
                   "--preset", "default")  # as with no rules file (one is in the folder)
    zero = json.loads((tmp_path / "z" / "report.json").read_text(encoding="utf-8"))
    assert alone.exit_code in (0, 1)
    assert _codes(report) == _codes(zero)  # the same findings as with no rules file


@pytest.mark.parametrize("records", [[{}, {}], [{"a": None}, {"a": None}],
                                     [{"flag": True}, {"flag": False}]],
                         ids=["empty-objects", "nulls", "booleans"])
def test_check_with_nothing_to_read_fails_saying_so(tmp_path: Path,
                                                    records: list[dict]) -> None:
    # Only the format was judged, and the gate passed.
    data = write_jsonl(tmp_path / "data.jsonl", records)
    result = invoke("check", data, "--no-smoke", "--out", tmp_path / "r")
    assert result.exit_code == 1, result.output
    assert "FAIL none of the records' fields was checked" in flat(result.output)
    rules = tmp_path / "format.yaml"  # a rules file that asks for the format only: its call
    rules.write_text("version: 1\nrules:\n  - {id: malformed, check: malformed}\n")
    assert invoke("check", data, "--no-smoke", "--rules", rules, "--out",
                  tmp_path / "r2").exit_code == 0
