"""The default rule set (no rules file, no preset) is built from what inference found, through
the real CLI: chat data gets ``chat_format``, integer labels ``label_range`` with classes
from the data, numeric columns ``numeric``; what needs model facts is named as not checked.
Also the presets' field demands, estimated token lengths, and choosing rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner, Result

from preflight.cli import main
from preflight.config import load_rules
from preflight.report.console import share
from tests.tokenizers import write_jsonl

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
PRESETS = [("pretrain", "pretrain-text", []), ("sft_chat", "sft-chat", []),
           ("classification", "classification", ["--num-classes", "4"]),
           ("regression", "regression", [])]
NEEDS_NUM_CLASSES = ("labels the model has no class for: needs --num-classes (for class names: "
                     "--set model.labels=[...])")
NEEDS_CONTEXT = "token lengths: needs --context-window (and --tokenizer for exact counts)"
NEEDS_DTYPE = "values that overflow the training dtype: needs --set values.dtype=fp16 (or bf16)"


def check(*args: Any) -> Result:
    return CliRunner().invoke(main, ["check", "--no-smoke", "--no-progress",
                                     *[str(a) for a in args]])


def report_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def found(out: Path) -> set[tuple[int, str, str]]:
    frame = pl.read_parquet(out / "findings.parquet").filter(pl.col("row").is_not_null())
    return {tuple(r) for r in frame.select("row", "check", "code").iter_rows()}


# ---------------------------------------------------------------- the done-when test


@pytest.mark.parametrize(("sample", "preset", "args"), PRESETS, ids=[p[1] for p in PRESETS])
def test_sample_corpora_without_rules_catch_what_their_presets_catch(
        tmp_path: Path, sample: str, preset: str, args: list[str]) -> None:
    faults = json.loads((SAMPLES / f"{sample}.faults.json").read_text())
    data = SAMPLES / f"{sample}.jsonl"
    with_preset = tmp_path / "preset"
    assert check(data, "--preset", preset, "--out", with_preset, "-q", *args).exit_code == 1
    by_preset = found(with_preset)

    out = tmp_path / "defaults"
    result = check(data, "--out", out)
    assert result.exit_code == 1, result.output
    defaults = found(out)
    report = report_of(out)
    assert report["rules_file"]["preset"] == "default"
    assert report["rules_file"]["suggested_preset"] == preset
    assert f"suggested: --preset {preset}" in result.output
    assert all(r["status"] != "error" for r in report["rules"]), report["rules"]
    planted = {(f["row"], f["check"], f["code"]): f for f in faults if f["check"] != "none"}
    dupes = {(r, c) for r, c in pl.read_parquet(out / "findings.parquet").filter(
        pl.col("code") == "exact_duplicate_of").select("row", "cluster").iter_rows()}
    for key, fault in planted.items():
        row, check_name, code = key
        if key not in by_preset and (row, check_name, f"{code}_estimated") not in by_preset:
            continue  # not a fault this preset catches either
        if key in defaults:
            continue
        if check_name == "near_duplicate":  # the default has no MinHash pass: these copies
            assert (row, fault["cluster"]) in dupes  # are exact ones, caught as such
            continue
        # only what needs facts about the model may be missed, and it is named
        needs = fault.get("needs")
        assert needs, f"the defaults missed {key}"
        line = {"model.num_classes": NEEDS_NUM_CLASSES, "model.context_window": NEEDS_CONTEXT,
                "dtype": NEEDS_DTYPE}[next(iter(needs))]
        assert line in report["rules_file"]["not_checked"]
        assert f"not checked: {line}" in " ".join(result.output.split())
    # and nothing on a row the corpus does not list as a fault (its negatives stay clean)
    assert {r for r, _, _ in defaults} <= {f["row"] for f in planted.values()}


def test_inferred_classes_still_catch_a_negative_label_and_warn(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = check(SAMPLES / "classification.jsonl", "--out", out)
    assert (24, "label_range", "label_out_of_range") in found(out)  # -1 needs no model fact
    assert (12, "label_range", "label_out_of_range") not in found(out)  # 4 does
    labels = next(r for r in report_of(out)["rules"] if r["id"] == "labels")
    assert labels["notes"] == ["classes inferred as 0..4 from the data; set --num-classes to "
                               "check against the model"]
    assert ("labels: classes inferred as 0..4 from the data; set --num-classes to check "
            "against the model") in " ".join(result.output.split())


# ---------------------------------------------------------------- item 1 on small inputs


def test_default_rules_check_chat_format(tmp_path: Path) -> None:
    records = [
        {"messages": [{"role": "assistant", "content": "I start."},
                      {"role": "user", "content": "Odd."}]},
        {"messages": [{"role": "user", "content": "One."}, {"role": "user", "content": "Two."},
                      {"role": "assistant", "content": "Both."}]},
        {"messages": [{"role": "user", "content": "Hi."},
                      {"role": "assistant", "content": "Hello."},
                      {"role": "system", "content": "Late."}]},
        {"messages": [{"role": "user", "content": "Fine."},
                      {"role": "assistant", "content": "Good."}]},
    ]
    out = tmp_path / "out"
    result = check(write_jsonl(tmp_path / "chat.jsonl", records), "--out", out)
    assert result.exit_code == 1, result.output
    codes = {(row, code) for row, _, code in found(out)}
    assert {(1, "not_alternating"), (2, "system_not_first")} <= codes
    assert any(row == 0 for row, _ in codes)  # the conversation led by the assistant
    assert not any(row == 3 for row, _ in codes)
    assert "added rule 'chat-format' (chat_format, severity error)" in result.output
    assert "suggested: --preset sft-chat" in result.output


def test_default_rules_check_labels_of_a_csv_with_classes_from_the_data(tmp_path: Path) -> None:
    rows = ["text,label", "alpha beta,0", "gamma delta,1", "epsilon zeta,2", "eta theta,3",
            "iota kappa,7", "lambda mu,NaN", "nu xi,", "omicron pi,-1", "rho sigma,2"]
    data = tmp_path / "four.csv"
    data.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    result = check(data, "--out", out)
    assert result.exit_code == 1, result.output
    frame = pl.read_parquet(out / "findings.parquet").filter(pl.col("check") == "label_range")
    got = {r: (c, d) for r, c, d in frame.select("row", "code", "detail").iter_rows()}
    assert set(got) == {4, 5, 6, 7}
    # 7 occurs once, past the classes 0..2 holding 2+ labels, with 4..6 empty: a stray
    assert got[4] == ("label_stray", "label: 7 occurs once, past the classes 0..2 that hold the "
                      "labels (most classes between never occur): a stray label? set "
                      "--num-classes")
    assert got[5] == ("label_wrong_type",
                      "label: expected a non-negative integer class id, got NaN (not a number)")
    assert got[6][0] == "label_null"
    assert got[7][0] == "label_out_of_range"
    assert got[7][1].endswith(" is negative; class ids start at 0")
    text = " ".join(result.output.split())
    assert ("labels: classes inferred as 0..7 from the data; 4, 5, 6 never occur — a stray "
            "label? set --num-classes to check against the model") in text
    assert f"not checked: {NEEDS_NUM_CLASSES}" in text
    # given the model's classes, 7 fails too
    strict = check(data, "--out", tmp_path / "four", "--num-classes", "4")
    assert (4, "label_range", "label_out_of_range") in found(tmp_path / "four")
    assert strict.exit_code == 1


def test_default_rules_check_numeric_columns(tmp_path: Path) -> None:
    records = [{"text": f"record number {i}", "score": i / 10} for i in range(20)]
    records[3]["score"] = float("nan")
    records[5]["score"] = "3.5"
    out = tmp_path / "out"
    result = check(write_jsonl(tmp_path / "n.jsonl", records), "--out", out)
    assert result.exit_code == 1, result.output
    assert {(3, "numeric", "nan"), (5, "numeric", "numeric_string")} <= found(out)
    assert report_of(out)["rules_file"]["fields"]["numeric"] == "score"
    # and a rule inference adds can be set before it exists
    dtype = check(SAMPLES / "regression.jsonl", "--out", tmp_path / "fp16",
                  "--set", "values.dtype=fp16")
    assert {(90, "numeric", "dtype_overflow"), (100, "numeric", "dtype_overflow")} <= found(
        tmp_path / "fp16")
    assert dtype.exit_code == 1


def test_a_field_few_records_carry_is_not_a_numeric_column(tmp_path: Path) -> None:
    records = [{"text": f"plain record {i}"} for i in range(20)]
    records[4]["score"] = float("nan")
    out = tmp_path / "out"
    result = check(write_jsonl(tmp_path / "s.jsonl", records), "--out", out)
    assert result.exit_code == 0, result.output
    assert "numeric" not in report_of(out)["rules_file"]["fields"]
    # Its NaN passes the gate unseen: the console and the report say the field is not
    # checked, and how to check it.
    note = ("none; not checked: numbers in only some records: 'score' (5% of records); "
            "name it in fields.numeric to check it")
    assert report_of(out)["rules_file"]["inferred"]["numeric"] == note
    assert f"inferred numeric: {note}" in " ".join(result.stdout.split())


# ---------------------------------------------------------------- item 2: presets


@pytest.mark.parametrize("preset", ["pretrain-text", "sft-chat", "classification", "regression"])
def test_presets_do_not_demand_an_id(preset: str) -> None:
    rules = load_rules(preset=preset)
    assert rules.fields.id == "id"
    schema = [r for r in rules.rules if r.check == "schema"]
    assert all("id" not in (r.params.get("required") or []) for r in schema)


def test_pretrain_text_without_ids_passes_and_types_its_text(tmp_path: Path) -> None:
    clean = [{"text": f"Plain sentence number {i} about nothing much."} for i in range(5)]
    result = check(write_jsonl(tmp_path / "clean.jsonl", clean), "--preset", "pretrain-text",
                   "--out", tmp_path / "a")
    assert result.exit_code == 0, result.output
    bad = [*clean, {"text": 12345}]
    result = check(write_jsonl(tmp_path / "bad.jsonl", bad), "--preset", "pretrain-text",
                   "--out", tmp_path / "b")
    assert result.exit_code == 1
    assert (5, "schema", "wrong_type") in found(tmp_path / "b")


# ---------------------------------------------------------------- item 3: estimates


def test_estimated_token_lengths_say_so_everywhere_and_still_fail(tmp_path: Path) -> None:
    records = [{"text": "word " * 200}, {"text": "short"}]
    out = tmp_path / "out"
    result = check(write_jsonl(tmp_path / "t.jsonl", records), "--out", out,
                   "--context-window", "20", "--format", "json,html,md")
    assert result.exit_code == 1, result.output
    line = "estimated from bytes; give --tokenizer for exact counts"
    rule = next(r for r in report_of(out)["rules"] if r["id"] == "token-length")
    assert rule["status"] == "fail" and rule["codes"] == {"too_long_estimated": 1}
    assert rule["notes"] == [line]
    assert f"token-length: {line}" in result.output
    assert line in (out / "report.md").read_text()
    assert "too_long_estimated" in (out / "report.md").read_text()
    assert line in (out / "report.html").read_text()


# ---------------------------------------------------------------- item 7: choosing rules


def test_only_and_skip_choose_rules(tmp_path: Path) -> None:
    data = SAMPLES / "classification.jsonl"
    result = check(data, "--out", tmp_path / "only", "--only", "labels,schema")
    ids = [r["id"] for r in report_of(tmp_path / "only")["rules"]]
    assert ids == ["malformed", "schema", "labels"], result.output  # malformed always runs
    result = check(data, "--out", tmp_path / "skip", "--skip", "labels", "--skip", "empty")
    ids = [r["id"] for r in report_of(tmp_path / "skip")["rules"]]
    assert "labels" not in ids and "empty" not in ids and "schema" in ids
    assert "not run (enabled: false, --only, --skip)" in result.output


def test_unknown_rule_ids_are_exit_2_with_the_known_ones(tmp_path: Path) -> None:
    result = check(SAMPLES / "classification.jsonl", "--out", tmp_path / "o", "--only", "nope")
    assert result.exit_code == 2
    assert ("--only: unknown rule id(s) 'nope'; the rules here are: malformed, schema, empty, "
            "hidden-chars, encoding, exact-dupes, chat-format, labels, values") in result.output


@pytest.mark.parametrize(("option", "value"), [("--only", ""), ("--skip", ""),
                                               ("--only", " , "), ("--skip", ",")])
def test_only_or_skip_with_no_ids_is_exit_2_not_every_rule(tmp_path: Path, option: str,
                                                            value: str) -> None:
    result = check(SAMPLES / "classification.jsonl", "--out", tmp_path / "o", option, value)
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()) == f"error: {option}: no rule ids given"
    assert not (tmp_path / "o").exists()


MALFORMED = [{"text": "fine"}, "{\"text\": \"broken", {"text": "also fine"}]


def _mixed(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in MALFORMED)
                    + "\n", encoding="utf-8")
    return path


def test_skip_malformed_is_refused_saying_why(tmp_path: Path) -> None:
    result = check(_mixed(tmp_path), "--out", tmp_path / "o", "--skip", "malformed")
    assert result.exit_code == 2, result.output
    assert ("--skip: rule 'malformed' cannot be skipped: unreadable lines are always "
            "reported, never silently dropped (--set malformed.severity=warn lets them pass "
            "the gate, still reported)") in " ".join(result.output.split())


def test_only_keeps_malformed_running(tmp_path: Path) -> None:
    result = check(_mixed(tmp_path), "--out", tmp_path / "o", "--only", "empty")
    assert result.exit_code == 1, result.output
    rules = {r["id"]: r for r in report_of(tmp_path / "o")["rules"]}
    assert list(rules) == ["malformed", "empty"]
    assert rules["malformed"]["codes"] == {"invalid_json": 1}


def test_only_naming_a_disabled_rule_says_only_does_not_enable_it(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nfields: {text: text}\nrules:\n"
                     "  - {id: empty, check: empty}\n"
                     "  - {id: dupes, check: exact_duplicate, enabled: false}\n")
    result = check(_mixed(tmp_path), "--rules", rules, "--out", tmp_path / "o",
                   "--only", "dupes")
    assert result.exit_code == 2, result.output
    assert ("--only/--skip leave no rule to run ('dupes': enabled: false in the rules; --only "
            "does not turn a rule on: --set dupes.enabled=true does); the rules that can run "
            "here are: empty, malformed") in " ".join(result.output.split())


def test_enabled_false_on_malformed_is_refused(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nfields: {text: text}\nrules:\n"
                     "  - {id: empty, check: empty}\n"
                     "  - {id: bad-lines, check: malformed, enabled: false}\n")
    result = check(_mixed(tmp_path), "--rules", rules, "--out", tmp_path / "o")
    assert result.exit_code == 2, result.output
    assert ("rules[1].enabled: the malformed rule cannot be disabled: unreadable lines are "
            "always reported, never silently dropped") in " ".join(result.output.split())


def test_enabled_false_in_a_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("version: 1\nfields: {text: text}\nrules:\n"
                     "  - {id: hidden, check: invisible_unicode}\n"
                     "  - {id: empty, check: empty, enabled: false}\n")
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": ""}, {"text": "fine"}])
    result = check(data, "--rules", rules, "--out", tmp_path / "o")
    assert result.exit_code == 0, result.output  # the empty text is not judged
    assert [r["id"] for r in report_of(tmp_path / "o")["rules"]] == ["malformed", "hidden"]
    rules.write_text(rules.read_text().replace("enabled: false", "enabled: 'no'"))
    assert check(data, "--rules", rules, "--out", tmp_path / "p").exit_code == 2


# ---------------------------------------------------------------- item 11: small things


def test_share_shows_the_digits_that_tell_it_from_the_limit() -> None:
    assert share(3 / 299, 0.01) == "1.003%"
    assert share(0.01, 0.01) == "1.00%"
    assert share(0.5, 0.01) == "50.00%"
    assert share(0.00001) == "<0.01%"


def test_a_fail_row_at_the_limit_shows_more_digits(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = check(SAMPLES / "pretrain.jsonl", "--out", out, "--strict")
    dupes = next(r for r in report_of(out)["rules"] if r["id"] == "exact-dupes")
    assert dupes["status"] == "fail" and dupes["violations"] == 3
    row = next(line for line in result.output.splitlines() if "exact-dupes" in line
               and "exact_duplicate" in line)
    assert "1.003%" in row and "≤1.00%" in row
    # examples stop at 3, and say how many more there are
    assert "… 8 more (see report)" in result.output  # hidden-chars: 11 findings


def test_rules_list_keeps_long_parameter_names_whole() -> None:
    result = CliRunner().invoke(main, ["rules", "list"], terminal_width=80)
    assert result.exit_code == 0
    assert "require_last_assistant " in result.output
    assert "require_last_assist…" not in result.output


def test_set_help_names_a_rule_a_preset_has() -> None:
    result = CliRunner().invoke(main, ["check", "--help"], terminal_width=200)
    assert "--set exact-dupes.max_fraction=0.01" in " ".join(result.output.split())
    assert any(r.id == "exact-dupes" for r in load_rules(preset="default").rules)


def test_the_label_error_names_num_classes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    check(SAMPLES / "classification.jsonl", "--preset", "classification", "--out", out)
    labels = next(r for r in report_of(out)["rules"] if r["id"] == "labels")
    assert labels["message"] == ("fields.label is 'label' but the classes are not declared; "
                                 "pass --num-classes N, or set model.num_classes or "
                                 "model.labels in the rules file")


# ---------------------------------------------------------------- item 10: mixed shards


def test_shards_of_different_shapes_are_one_corpus_finding(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    for k in range(2):
        write_jsonl(folder / f"a-text-{k}.jsonl",
                    [{"text": f"plain text {i} of shard {k}"} for i in range(30)])
    write_jsonl(folder / "b-chat.jsonl",
                [{"messages": [{"role": "user", "content": f"hi {i}"},
                               {"role": "assistant", "content": f"hello {i}"}]}
                 for i in range(40)])
    out = tmp_path / "out"
    result = check(folder, "--out", out)
    assert result.exit_code == 1, result.output
    frame = pl.read_parquet(out / "findings.parquet")
    assert frame.get_column("code").to_list() == ["mixed_shards"]  # not 40 "missing text"
    detail = frame.get_column("detail")[0]
    assert "text ('text') in 2 shard(s): a-text-0.jsonl, a-text-1.jsonl" in detail
    assert "chat ('messages') in 1 shard(s): b-chat.jsonl" in detail
    # shards of one shape are not a finding
    (folder / "b-chat.jsonl").unlink()
    assert check(folder, "--out", tmp_path / "same").exit_code == 0


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_text_field_most_records_lack_is_still_inferred_and_their_absence_fails(
        tmp_path: Path, suffix: str) -> None:
    # Two of three records have no text: the field is still the text (by name), and the
    # records without it are findings, not a corpus whose text nobody checks.
    records = [{"id": "r0", "text": "A river\u200b runs by.", "score": 1.5},
               {"id": "r1", "text": None, "score": 2.5},
               {"id": "r2", "score": 3.5}]
    data = tmp_path / f"data{suffix}"
    if suffix == ".csv":
        data.write_text("id,text,score\nr0,A river\u200b runs by.,1.5\nr1,,2.5\nr2,,3.5\n",
                        encoding="utf-8")
    else:
        write_jsonl(data, records)
    out = tmp_path / "out"
    result = check(data, "--out", out)
    assert result.exit_code == 1, result.output
    report = report_of(out)
    assert report["rules_file"]["fields"]["text"] == "text"
    codes = {(row, code) for row, _, code in found(out)}
    assert (0, "zero_width_space") in codes
    assert {row for row, code in codes if code in ("missing_field", "null_value", "empty_text",
                                                    "wrong_type")} >= {1, 2}


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_text_field_every_record_leaves_null_is_still_the_text_and_fails(
        tmp_path: Path, suffix: str) -> None:
    # No record holds a value in ``text``: it is still the text field (by name), and each
    # record is an `empty` finding, never a gate that passes with "the data has no text".
    frame = pl.DataFrame({"id": ["r0", "r1", "r2"], "text": pl.Series([None] * 3,
                                                                      dtype=pl.String)})
    data = tmp_path / f"data{suffix}"
    if suffix == ".parquet":
        frame.write_parquet(data)
    else:
        write_jsonl(data, frame.to_dicts())
    out = tmp_path / "out"
    result = check(data, "--out", out)
    assert result.exit_code == 1, result.output
    assert report_of(out)["rules_file"]["fields"]["text"] == "text"
    assert {(row, code) for row, _, code in found(out)} >= {
        (0, "missing_field"), (1, "missing_field"), (2, "missing_field")}


@pytest.mark.parametrize(("records", "said", "options"), [
    ([{"instruction": f"do {i}", "output": f"a longer answer number {i}"} for i in range(8)],
     "suggested: --preset pretrain-text --text-field output (fits the inferred fields; the "
     "preset's own field names differ)", ["--text-field", "output"]),
    ([{"sentence": f"s {i}", "labels": i % 2, "uid": f"u{i}"} for i in range(8)],
     "suggested: --preset classification --text-field sentence --id-field uid --label-field "
     "labels", ["--text-field", "sentence", "--label-field", "labels", "--id-field", "uid"]),
    ([{"text": f"plain {i}", "id": i} for i in range(8)],
     "suggested: --preset pretrain-text (fits the inferred fields)", []),
    ([{"y": i / 2, "x": [float(i), 1.0]} for i in range(8)],
     "suggested: the regression preset, in a rules file naming your fields (its own field "
     "names differ): preflight init DATA writes one", None),
    # Token ids beside a class label: the preset names no input_ids, so followed without
    # --set it did not read them (a negative id the default failed on passed).
    ([{"text": f"t {i}", "label": i % 2, "input_ids": [i, -5 if i == 3 else 1]}
      for i in range(8)],
     "suggested: --preset classification --set fields.input_ids=input_ids",
     ["--set", "fields.input_ids=input_ids"]),
    # Numbers beside the text: no rule of pretrain-text reads them, so no --preset fits.
    ([{"text": f"t {i}", "score": float(i)} for i in range(8)],
     "suggested: the pretrain-text preset, in a rules file naming your fields", None),
], ids=["alpaca", "renamed-classification", "same-names", "regression-y", "token-ids",
        "numbers-beside-text"])
def test_the_suggestion_names_the_columns_the_preset_must_read(
        tmp_path: Path, records: list[dict], said: str, options: list[str] | None) -> None:
    # Followed bare, --preset pretrain-text on {"instruction", "output"} found no `text`
    # column: every rule ERROR.
    data = write_jsonl(tmp_path / "d.jsonl", records)
    result = check(data, "--out", tmp_path / "o")
    assert said in " ".join(result.output.split())
    # followed bare, the classification preset's label rule is an error: the line says so
    assert ("add --num-classes N" in " ".join(result.output.split())) == (
        "classification" in said)
    report = report_of(tmp_path / "o")
    suggested = report["rules_file"]["suggested_options"]
    assert (sorted(suggested) if suggested is not None else None) == (
        sorted(options) if options is not None else None)
    if options:  # followed, the preset reads the data: no rule in error
        preset = report["rules_file"]["suggested_preset"]
        classes = ["--num-classes", "2"] if preset == "classification" else []
        again = check(data, "--preset", preset, *options, *classes, "--out", tmp_path / "p")
        assert all(r["status"] != "error" for r in report_of(tmp_path / "p")["rules"]), \
            again.output
        assert again.exit_code == result.exit_code, again.output  # it checks what it did
