"""The smoke test tells a data fault from a code fault: clean data of every built-in task
passes, a planted bad row is a data fault named by row and id, a learning rate that breaks
any data is a code fault; `preflight check` and `preflight smoke` carry the verdict."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from preflight import run_preflight
from tests.smoke.conftest import (
    codes,
    finding,
    flat,
    gate,
    invoke,
    read_report,
    regression_records,
    regression_rules,
    sentence,
    smoke_of,
    write_jsonl,
    write_rules,
)

SCHEMA = [{"id": "schema", "check": "schema"}]


def lm_case(n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rng = random.Random(1)
    records = [{"id": f"t{i}", "text": f"{sentence(rng)} {sentence(rng)}"} for i in range(n)]
    return records, {"task": "lm", "fields": {"text": "text", "id": "id"}, "rules": SCHEMA}


def chat_case(n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rng = random.Random(2)
    records = [{"id": f"c{i}", "messages": [{"role": "user", "content": sentence(rng)},
                                            {"role": "assistant", "content": sentence(rng)}]}
               for i in range(n)]
    return records, {"task": "chat", "fields": {"messages": "messages", "id": "id"},
                     "rules": [{"id": "chat", "check": "chat_format"}]}


def text_classification_case(n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rng = random.Random(3)
    records = [{"id": f"k{i}", "text": sentence(rng), "label": i % 3} for i in range(n)]
    return records, {"task": "classification", "model": {"num_classes": 3},
                     "fields": {"text": "text", "label": "label", "id": "id"},
                     "rules": [{"id": "labels", "check": "label_range"}]}


def feature_classification_case(n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rng = random.Random(4)
    records = []
    for i in range(n):
        x = [round(rng.gauss(0, 1), 4) for _ in range(4)]
        x[i % 3] += 3.0  # the class is the feature that stands out
        records.append({"id": f"f{i}", "features": x, "label": i % 3})
    return records, {"task": "classification", "model": {"num_classes": 3},
                     "fields": {"features": "features", "label": "label", "id": "id"},
                     "rules": [{"id": "labels", "check": "label_range"}]}


def regression_case(n: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return regression_records(n), regression_rules()


CLEAN_CASES = {
    "lm": lm_case,
    "chat": chat_case,
    "classification-text": text_classification_case,
    "classification-features": feature_classification_case,
    "regression": regression_case,
}


# --- clean data passes --------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CLEAN_CASES))
def test_clean_data_passes_for_every_builtin_task(tmp_path: Path, case: str) -> None:
    records, rules = CLEAN_CASES[case](40)
    report = gate(tmp_path, records, rules)
    smoke = smoke_of(report)
    task = case.split("-")[0]
    assert smoke.verdict == "pass", smoke.reason
    assert report.passed and report.reasons == []
    assert smoke.task == task and smoke.model == f"built-in:{task}"
    assert smoke.samples == 40 and smoke.sample_rows == list(range(40))
    assert smoke.steps == 30
    assert smoke.control is not None and smoke.real is not None and smoke.repeat is not None
    for run in (smoke.control, smoke.real, smoke.repeat):
        assert run.failure is None and run.first_bad_step is None
        assert run.learned is True
        assert run.steps == 30 and len(run.loss) == 30 and len(run.grad_norm) == 30
        assert all(x is not None for x in run.loss)
    assert smoke.real.loss == smoke.repeat.loss  # same seed, same curve
    assert smoke.minimal_rows == [] and smoke.minimal_ids == []
    assert smoke.first_bad_module is None and smoke.first_bad_param is None
    assert smoke.findings == [] and smoke.replay is None
    assert (smoke.device, smoke.precision, smoke.seed) == ("cpu", "fp32", 0)
    assert not (tmp_path / "out" / "smoke-replay.pt").exists()


def test_same_seed_same_result_across_runs(tmp_path: Path) -> None:
    records, rules = regression_case(40)
    first = smoke_of(gate(tmp_path, records, rules, out="a"))
    second = smoke_of(gate(tmp_path, records, rules, out="b"))
    assert first.real is not None and second.real is not None
    assert first.real.loss == second.real.loss
    assert first.control == second.control


def test_smoke_enabled_false_skips_the_smoke_test(tmp_path: Path) -> None:
    records, rules = regression_case(40)
    path = write_jsonl(tmp_path / "data.jsonl", records)
    report = run_preflight(path, rules={**rules, "smoke": {"enabled": False}},
                           out=tmp_path / "out")
    assert report.smoke is None and report.passed


# --- a bad row is a data fault, named --------------------------------------------------------


def test_huge_regression_target_is_a_data_fault_in_its_row(tmp_path: Path) -> None:
    records = regression_records(60)
    records[17]["target"] = 1e30  # finite, but its square overflows float32
    report = gate(tmp_path, records, regression_rules())
    smoke = smoke_of(report)
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [17] and smoke.minimal_ids == ["r17"]
    assert smoke.control is not None and smoke.control.failure is None
    assert smoke.control.learned is True
    assert smoke.real is not None and smoke.real.failure is not None
    assert smoke.real.failure.startswith("loss is inf at step 0")
    assert smoke.real.first_bad_step == 0
    assert smoke.reason.startswith("training fails on the sample but not on the control batch")
    assert finding(smoke, "row_loss_nonfinite").rows == [17]
    assert not report.passed
    assert report.rule("schema").status == "pass"  # only the smoke test fails the gate
    assert len(report.reasons) == 1
    assert report.reasons[0].startswith("smoke test: data_fault: ")
    assert report.reasons[0].endswith("(rows 17)")


@pytest.mark.parametrize(("value", "failure"), [
    (1e30, "loss is inf at step 2"),
    (float("nan"), "targets holds nan"),
    (float("-inf"), "targets holds -inf"),
    (None, "targets holds nan"),
])
def test_bad_target_in_a_later_batch_is_named(tmp_path: Path, value: Any, failure: str) -> None:
    records = regression_records(60)
    records[40]["target"] = value  # batch 2 of 16-row batches: rows 32..47
    smoke = smoke_of(gate(tmp_path, records, regression_rules(batch_size=16)))
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [40] and smoke.minimal_ids == ["r40"]
    assert smoke.real is not None and smoke.real.first_bad_step == 2
    assert smoke.real.failure is not None and smoke.real.failure.startswith(failure)


def test_two_bad_rows_the_minimal_set_is_one(tmp_path: Path) -> None:
    records = regression_records(60)
    records[12]["target"] = 1e30
    records[44]["target"] = -1e30
    smoke = smoke_of(gate(tmp_path, records, regression_rules()))
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [12] and smoke.minimal_ids == ["r12"]  # one row still fails
    assert finding(smoke, "row_loss_nonfinite").rows == [12, 44]  # both fail on their own


def test_integer_ids_are_reported_as_strings(tmp_path: Path) -> None:
    records = regression_records(60)
    for i, r in enumerate(records):
        r["id"] = 1000 + i
    records[17]["target"] = 1e30
    smoke = smoke_of(gate(tmp_path, records, regression_rules()))
    assert smoke.minimal_rows == [17] and smoke.minimal_ids == ["1017"]


def test_rows_are_numbered_per_shard_with_the_file_named(tmp_path: Path) -> None:
    records = regression_records(60)
    records[35]["target"] = 1e30
    write_jsonl(tmp_path / "shards" / "part-0.jsonl", records[:30])
    write_jsonl(tmp_path / "shards" / "part-1.jsonl", records[30:])
    report = run_preflight(tmp_path / "shards", rules=regression_rules(), out=tmp_path / "out",
                           smoke=True)
    smoke = smoke_of(report)
    assert smoke.verdict == "data_fault" and smoke.samples == 60
    assert smoke.minimal_rows == [5] and smoke.minimal_ids == ["r35"]
    assert smoke.minimal_files == ["part-1.jsonl"]


def test_a_malformed_line_keeps_the_row_numbers(tmp_path: Path) -> None:
    records = regression_records(60)
    records[17]["target"] = 1e30
    path = write_jsonl(tmp_path / "data.jsonl", records)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[3] = "{not json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = run_preflight(path, rules=regression_rules(), out=tmp_path / "out", smoke=True)
    smoke = smoke_of(report)
    assert smoke.samples == 59 and 3 not in smoke.sample_rows
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [17]
    assert report.rule("malformed").status == "fail"


def test_csv_feature_columns_and_an_empty_cell(tmp_path: Path) -> None:
    records = regression_records(60)
    lines = ["id,a,b,c,d,target"] + [
        ",".join(map(str, [r["id"], *r["features"], r["target"]])) for r in records]
    cells = lines[1 + 17].split(",")
    cells[2] = ""  # row 17, column b
    lines[1 + 17] = ",".join(cells)
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rules = {**regression_rules(), "fields": {"features": ["a", "b", "c", "d"],
                                              "target": "target", "id": "id"}}
    smoke = smoke_of(run_preflight(path, rules=rules, out=tmp_path / "out", smoke=True))
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [17] and smoke.minimal_ids == ["r17"]
    assert smoke.real is not None and smoke.real.failure == "inputs.features holds nan"


@pytest.mark.parametrize(("records", "fields", "reason"), [
    (regression_records(1), None, "too few readable records to train on (1)"),
    (regression_records(20), {"id": "id", "numeric": "target"},
     "no field to train on: declare fields.text, messages, label or target (or task:) in the "
     "rules file"),
])
def test_nothing_to_train_is_skipped_and_does_not_fail_the_gate(
        tmp_path: Path, records: list[dict[str, Any]], fields: dict[str, str] | None,
        reason: str) -> None:
    rules = regression_rules()
    if fields is not None:
        rules = {"fields": fields, "rules": SCHEMA}
    report = gate(tmp_path, records, rules)
    smoke = smoke_of(report)
    assert smoke.verdict == "skipped" and smoke.reason == reason
    assert not smoke.failed and report.passed


def _unsampled_row(tmp_path: Path, records: list[dict[str, Any]], samples: int) -> int:
    """A row a clean run of ``records`` does not sample (the sample depends on row keys and
    the seed, not on the content, so planting a fault there keeps it unsampled)."""
    smoke = smoke_of(gate(tmp_path, records, regression_rules(samples=samples),
                          name="clean.jsonl", out="clean"))
    assert smoke.verdict == "pass" and smoke.samples == samples
    return next(i for i in range(len(records) - 1, -1, -1) if i not in smoke.sample_rows)


def test_a_flagged_row_is_sampled_even_when_the_file_is_larger(tmp_path: Path) -> None:
    records = regression_records(120)
    row = _unsampled_row(tmp_path, records, samples=40)
    records[row]["target"] = 1e30

    unflagged = gate(tmp_path, records, regression_rules(samples=40), out="unflagged")
    assert row not in smoke_of(unflagged).sample_rows
    assert smoke_of(unflagged).verdict == "pass"  # a random sample misses the row

    rules = regression_rules(samples=40, rules=[{"id": "numbers", "check": "numeric",
                                                 "max": 1e6}])
    report = gate(tmp_path, records, rules, out="flagged")
    smoke = smoke_of(report)
    assert report.rule("numbers").status == "fail" and report.rule("numbers").violations == 1
    assert smoke.samples == 40
    assert smoke.flagged_in_sample == [row] and row in smoke.sample_rows
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [row] and smoke.minimal_ids == [f"r{row}"]
    assert any(r.startswith("smoke test: data_fault") for r in report.reasons)
    assert any(r.startswith("rule 'numbers'") for r in report.reasons)


def test_flagged_rows_that_train_fine_are_reported_as_info(tmp_path: Path) -> None:
    records = regression_records(60)
    records[5]["target"] = 50.0  # outside the declared max, harmless to train on
    rules = regression_rules(rules=[{"id": "numbers", "check": "numeric", "max": 10,
                                     "severity": "warn"}])
    report = gate(tmp_path, records, rules)
    smoke = smoke_of(report)
    assert smoke.verdict == "pass" and report.passed
    assert smoke.flagged_in_sample == [5]
    info = finding(smoke, "flagged_rows_trained")
    assert info.severity == "info" and info.rows == [5]


def test_limit_samples_only_the_rows_read(tmp_path: Path) -> None:
    records = regression_records(80)
    records[70]["target"] = 1e30
    path = write_jsonl(tmp_path / "data.jsonl", records)
    report = run_preflight(path, rules=regression_rules(), out=tmp_path / "out", smoke=True,
                           limit=50)
    smoke = smoke_of(report)
    assert smoke.verdict == "pass" and smoke.sample_rows == list(range(50))


def _classification(label: Any, *, num_classes: int | None = 3) -> tuple[
        list[dict[str, Any]], dict[str, Any]]:
    records, rules = text_classification_case(60)
    records[11]["label"] = label
    if num_classes is None:
        rules = {k: v for k, v in rules.items() if k != "model"}
    return records, {**rules, "rules": SCHEMA}


@pytest.mark.parametrize(("label", "code", "detail"), [
    (7, "label_out_of_range", "class 7 outside [0, 3)"),
    ("seven", "label_not_a_class", "label 'seven' is not a class id"),
    (True, "label_not_a_class", "label True is not a class id"),
    (None, "label_not_a_class", "label None is not a class id"),
])
def test_bad_class_label_is_caught_by_the_cpu_range_check(
        tmp_path: Path, label: Any, code: str, detail: str) -> None:
    records, rules = _classification(label)
    report = gate(tmp_path, records, rules)
    smoke = smoke_of(report)
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [11] and smoke.minimal_ids == ["k11"]
    bad = finding(smoke, code)
    assert bad.rows == [11] and bad.severity == "error" and bad.detail == detail
    assert codes(smoke) == [code]
    assert smoke.reason == f"1 sampled row(s) cannot be trained on; row 11: {detail} ({code})"
    # Caught before training on the sample: only the control batch ran; the bad row's batch
    # is still saved for replay (the loss guard stops it there too).
    assert smoke.control is not None and smoke.control.learned is True
    assert smoke.real is None and smoke.replay is not None
    assert not report.passed


def test_declared_label_set_names_an_undeclared_label(tmp_path: Path) -> None:
    records, rules = text_classification_case(60)
    for r in records:
        r["label"] = ("neg", "neu", "pos")[r["label"]]
    records[8]["label"] = "Pos"
    rules = {**rules, "model": {"labels": ["neg", "neu", "pos"]}, "rules": SCHEMA}
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [8]
    assert finding(smoke, "label_not_a_class").detail == "label 'Pos' is not a declared class"


def test_negative_label_is_one_finding(tmp_path: Path) -> None:
    records, rules = _classification(-2)
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [11]
    assert codes(smoke) == ["label_out_of_range"]


@pytest.mark.parametrize("num_classes", [3, None])
def test_label_minus_one_is_caught_by_the_cpu_range_check(
        tmp_path: Path, num_classes: int | None) -> None:
    records, rules = _classification(-1, num_classes=num_classes)
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [11]
    assert codes(smoke) == ["label_out_of_range"]


def test_label_minus_one_still_fails_the_gate(tmp_path: Path) -> None:
    records, rules = _classification(-1)
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "data_fault"
    assert smoke.minimal_rows == [11] and smoke.minimal_ids == ["k11"]
    # Caught by the CPU range check, before the sample trains.
    assert smoke.real is None and codes(smoke) == ["label_out_of_range"]


def _token_records(n: int) -> list[dict[str, Any]]:
    rng = random.Random(5)
    out = []
    for i in range(n):
        ids = [rng.randrange(1, 200) for _ in range(20)]
        out.append({"id": f"q{i}", "input_ids": ids, "token_labels": list(ids)})
    return out


TOKEN_RULES = {"task": "lm", "model": {"vocab_size": 256}, "rules": SCHEMA,
               "fields": {"input_ids": "input_ids", "token_labels": "token_labels", "id": "id"}}


def test_token_ids_and_labels_train_clean(tmp_path: Path) -> None:
    smoke = smoke_of(gate(tmp_path, _token_records(50), TOKEN_RULES))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.real is not None and smoke.real.learned is True


@pytest.mark.parametrize(("field", "value", "code"), [
    ("token_labels", [-100] * 20, "all_labels_ignored"),
    ("input_ids", [5] * 19 + [300], "token_id_out_of_range"),
    ("token_labels", [5] * 19 + [256], "token_label_out_of_range"),
])
def test_bad_token_row_is_a_data_fault(tmp_path: Path, field: str, value: list[int],
                                       code: str) -> None:
    records = _token_records(50)
    records[23][field] = value
    smoke = smoke_of(gate(tmp_path, records, TOKEN_RULES))
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [23] and smoke.minimal_ids == ["q23"]
    assert code in codes(smoke)
    assert all(f.rows == [23] for f in smoke.findings)
    assert smoke.reason.endswith(f"({code})")


def test_empty_and_one_character_documents_are_no_fault(tmp_path: Path) -> None:
    """No next token means nothing to learn from that row, not a broken step: the built-in
    loss averages over the batch's tokens, as most trainers do."""
    records, rules = lm_case(50)
    records[23]["text"], records[24]["text"] = "", "a"
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "pass", smoke.reason
    assert {23, 24} <= set(smoke.sample_rows)


def test_chat_without_an_assistant_turn_is_a_data_fault(tmp_path: Path) -> None:
    records, rules = chat_case(50)
    records[9]["messages"] = records[9]["messages"][:1]
    smoke = smoke_of(gate(tmp_path, records, {**rules, "rules": SCHEMA}))
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [9] and smoke.minimal_ids == ["c9"]
    assert finding(smoke, "all_labels_ignored").rows == [9]


def test_targets_unrelated_to_the_inputs_do_not_learn(tmp_path: Path) -> None:
    rng = random.Random(6)
    records = [{"id": f"u{i}", "features": [0.5, 0.5, 0.5, 0.5], "target": rng.gauss(0, 1)}
               for i in range(60)]
    smoke = smoke_of(gate(tmp_path, records, regression_rules()))
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.reason.startswith("the loss does not fall on the sample")
    assert smoke.control is not None and smoke.control.learned is True
    assert smoke.real is not None and smoke.real.learned is False
    assert smoke.minimal_rows == []


# --- a fault on any data is the code's --------------------------------------------------------


def test_diverging_learning_rate_is_a_code_fault(tmp_path: Path) -> None:
    report = gate(tmp_path, regression_records(60), regression_rules(lr=1e6, clip=None))
    smoke = smoke_of(report)
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.reason.startswith("training fails on the control batch (in spec by "
                                   "construction): ")
    assert smoke.control is not None and smoke.control.failure is not None
    assert smoke.control.first_bad_step is not None
    assert smoke.minimal_rows == [] and smoke.replay is None
    assert not report.passed
    assert report.reasons[0].startswith("smoke test: code_fault: ")


def test_learning_rate_too_small_to_learn_is_a_code_fault(tmp_path: Path) -> None:
    smoke = smoke_of(gate(tmp_path, regression_records(60), regression_rules(lr=1e-9)))
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.reason.startswith("the loss does not fall even on the control batch")
    assert smoke.control is not None and smoke.control.learned is False
    assert smoke.control.failure is None


def test_diverging_learning_rate_from_the_command_line(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(60))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    out = tmp_path / "out"
    result = invoke("smoke", data, "--rules", rules, "--out", out,
                    "--set", "smoke.lr=1e6", "--set", "smoke.clip=null")
    assert result.exit_code == 1, result.output
    assert "smoke test CODE FAULT" in result.output
    smoke = read_report(out)["smoke"]
    assert smoke["verdict"] == "code_fault"
    assert smoke["reason"].startswith("training fails on the control batch")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_device_without_cuda_is_a_usage_error(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out",
                    "--set", "smoke.device=cuda")
    assert result.exit_code == 2, result.output
    assert "smoke.device is cuda but torch sees no CUDA device" in flat(result.output)


def test_unknown_smoke_setting_is_a_usage_error(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out",
                    "--set", "smoke.stpes=50")
    assert result.exit_code == 2
    text = flat(result.output)
    assert "smoke.stpes: unknown key for this section — did you mean 'steps'?" in text
    assert "Traceback" not in result.output


# --- the command line ----------------------------------------------------------------------

SMOKE_KEYS = {"verdict", "reason", "minimal_rows", "minimal_ids", "first_bad_module",
              "first_bad_param", "control", "real", "repeat", "steps", "device", "precision",
              "seed", "timings", "replay", "findings", "anomaly", "samples", "model", "task"}


def test_check_runs_the_smoke_test_by_default(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("check", data, "--rules", rules, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "smoke test PASS" in result.output
    report = read_report(tmp_path / "out")
    assert report["verdict"] == "pass"
    assert isinstance(report["smoke"], dict) and report["smoke"]["verdict"] == "pass"
    assert report["environment"]["seed"] == 0


def test_check_no_smoke_writes_a_null_smoke_section(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("check", data, "--rules", rules, "--out", tmp_path / "out", "--no-smoke")
    assert result.exit_code == 0, result.output
    assert "smoke test" not in result.output
    raw = (tmp_path / "out" / "report.json").read_text(encoding="utf-8")
    assert json.loads(raw)["smoke"] is None and '"smoke": null' in raw


def test_check_no_smoke_does_not_import_torch(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from preflight.cli import main\n"
        f"r = CliRunner().invoke(main, ['check', {str(data)!r}, '--rules', {str(rules)!r}, "
        f"'--out', {str(tmp_path / 'out')!r}, '--no-smoke'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_smoke_command_writes_the_smoke_section_and_fails_on_a_fault(tmp_path: Path) -> None:
    records = regression_records(60)
    records[17]["target"] = 1e30
    data = write_jsonl(tmp_path / "data.jsonl", records)
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    out = tmp_path / "out"
    result = invoke("smoke", data, "--rules", rules, "--out", out)
    assert result.exit_code == 1, result.output
    text = flat(result.output)
    assert "smoke test DATA FAULT · 60 rows · built-in:regression on cpu (fp32), seed 0" in text
    assert ("training fails on the sample but not on the control batch: loss is inf at step 0"
            in text)
    assert "minimal rows: 17 (ids r17)" in text
    assert "Traceback" not in result.output

    report = read_report(out)
    assert report["verdict"] == "fail"
    smoke = report["smoke"]
    assert set(smoke) >= SMOKE_KEYS
    assert smoke["verdict"] == "data_fault"
    assert smoke["minimal_rows"] == [17] and smoke["minimal_ids"] == ["r17"]
    assert smoke["steps"] == 30 and smoke["seed"] == 0
    assert (smoke["device"], smoke["precision"]) == ("cpu", "fp32")
    assert len(smoke["control"]["loss"]) == 30 and smoke["control"]["learned"] is True
    assert smoke["real"]["first_bad_step"] == 0 and smoke["real"]["loss"] == [None]
    assert smoke["repeat"]["failure"] == smoke["real"]["failure"]
    assert {"sample", "encode", "control", "real", "localise", "total"} <= set(smoke["timings"])
    assert smoke["replay"] == str(out / "smoke-replay.pt")


def test_smoke_command_passes_clean_data(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out", "--json")
    assert result.exit_code == 0, result.output
    assert '"verdict": "pass"' in result.output
    assert read_report(tmp_path / "out")["smoke"]["verdict"] == "pass"


def test_smoke_command_needs_data_or_replay() -> None:
    result = invoke("smoke")
    assert result.exit_code == 2
    assert "give DATA, or --replay FILE" in result.output


# --- the control is judged first: a code fault is never hidden by a data fault -------------


@pytest.mark.parametrize("lr", [1e4, 1e-9])  # the control diverges, or cannot learn
def test_a_broken_control_is_a_code_fault_and_the_bad_labels_are_still_listed(
        tmp_path: Path, lr: float) -> None:
    records, rules = _classification(7)
    records[23]["label"] = 9
    rules = {**rules, "smoke": {"lr": lr}}
    report = gate(tmp_path, records, rules)
    smoke = smoke_of(report)
    assert smoke.verdict == "code_fault", smoke.reason
    assert "control batch" in smoke.reason
    bad = finding(smoke, "label_out_of_range")
    assert bad.rows == [11, 23] and bad.severity == "error"
    assert smoke.minimal_rows == [11]
    assert not report.passed


@pytest.mark.parametrize("lr", [1e4, 1e-9])
def test_a_broken_control_is_a_code_fault_when_the_sample_fails_too(
        tmp_path: Path, lr: float) -> None:
    # A target the encoder accepts but training cannot survive: the real run fails, and the
    # control (broken by the learning rate) fails or does not learn: code fault, rows listed.
    records = regression_records(60)
    records[17]["target"] = 1e30
    report = gate(tmp_path, records, regression_rules(lr=lr, clip=None))
    smoke = smoke_of(report)
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.control is not None
    if lr > 1:  # the control diverges: the sample's failure says nothing about its rows
        assert smoke.control.failure is not None and smoke.minimal_rows == []
    else:  # the control cannot learn but runs: the sample's failing row is still narrowed
        assert smoke.control.failure is None and not smoke.control.learned
        assert smoke.minimal_rows == [17]


def test_attribute_judges_the_control_before_the_sample() -> None:
    from preflight.report.model import SmokeRun
    from preflight.smoke.verdict import Blocked, attribute

    healthy = SmokeRun(loss=[2.0, 1.0, 0.5], learned=True)
    stuck = SmokeRun(loss=[2.0, 2.0, 2.0], learned=False)
    broken = SmokeRun(loss=[2.0], failure="loss is nan at step 1", learned=False)
    failing_sample = SmokeRun(loss=[2.0], failure="loss is inf at step 3", learned=False)
    blocked = Blocked(row=4, code="label_out_of_range", detail="class 7 outside [0, 3)",
                      count=1)
    for control in (stuck, broken):
        assert attribute(control, failing_sample, None)[0] == "code_fault"
        assert attribute(control, None, blocked)[0] == "code_fault"
        assert attribute(control, healthy, None)[0] == "code_fault"
    assert attribute(healthy, failing_sample, None)[0] == "data_fault"
    assert attribute(healthy, None, blocked)[0] == "data_fault"
    assert attribute(healthy, healthy, None)[0] == "pass"


def test_a_barely_learning_control_does_not_make_a_stuck_sample_a_data_fault() -> None:
    from preflight.report.model import SmokeRun
    from preflight.smoke.verdict import attribute

    stuck = SmokeRun(loss=[1.387, 1.387, 1.386, 1.386], learned=False, min_drop=0.003)
    barely = SmokeRun(loss=[1.40, 1.39, 1.396, 1.396], learned=True, min_drop=0.003)
    clearly = SmokeRun(loss=[1.40, 1.0, 0.8, 0.7, 0.6], learned=True, min_drop=0.003)
    verdict, reason = attribute(barely, stuck, None)
    assert verdict == "pass" and "learning_inconclusive" in reason
    assert attribute(clearly, stuck, None)[0] == "data_fault"


@pytest.mark.parametrize("lr", [5e-5, 1e-5])
def test_a_fine_tuning_rate_on_clean_classification_is_no_fault(tmp_path: Path,
                                                                 lr: float) -> None:
    records, rules = text_classification_case(60)
    report = gate(tmp_path, records, {**rules, "smoke": {"lr": lr}})
    smoke = smoke_of(report)
    assert smoke.verdict == "pass", smoke.reason
    assert report.passed


def test_a_rate_too_small_to_judge_learning_says_so(tmp_path: Path) -> None:
    records, rules = text_classification_case(60)
    smoke = smoke_of(gate(tmp_path, records, {**rules, "smoke": {"lr": 1e-6}}))
    assert smoke.verdict == "pass", smoke.reason
    assert "learning_inconclusive" in codes(smoke)
    assert smoke.control is not None and smoke.control.learned is False


def test_a_diverging_rate_from_training_args_with_bad_labels_is_a_code_fault(
        tmp_path: Path) -> None:
    """The issue's case: lr 1e4 in the real run's TrainingArguments plus a few out-of-range
    labels: the verdict is the code's, and the label rows are still listed."""
    records, rules = _classification(7)
    records[40]["label"] = 5
    data = write_jsonl(tmp_path / "data.jsonl", records)
    rules_file = write_rules(tmp_path / "rules.yaml", rules)
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"learning_rate": 1e4, "max_grad_norm": 0,
                                "lr_scheduler_type": "constant", "output_dir": "x"}))
    out = tmp_path / "out"
    result = invoke("check", data, "--rules", rules_file, "--training-args", args,
                    "--out", out)
    assert result.exit_code == 1, result.output
    smoke = read_report(out)["smoke"]
    assert smoke["verdict"] == "code_fault", smoke["reason"]
    assert "control batch" in smoke["reason"]
    labels = [f for f in smoke["findings"] if f["code"] == "label_out_of_range"]
    assert labels and labels[0]["rows"] == [11, 40]


def test_at_a_fine_tuning_rate_a_data_fault_needs_a_control_that_clearly_learned() -> None:
    from preflight.report.model import SmokeRun
    from preflight.smoke.verdict import attribute

    # lr 5e-5, linear (the TrainingArguments defaults): the control fell 0.43%, twice the
    # 0.2% asked of it, the sample 0.11%: noise, yet it was called a data fault.
    control = SmokeRun(loss=[1.3871, 1.3867, 1.3863, 1.3811, 1.3811, 1.3811], learned=True,
                       min_drop=0.002, lr_mean=2.5e-5)
    sample = SmokeRun(loss=[1.3846, 1.3845, 1.3844, 1.3831, 1.3831, 1.383], learned=False,
                      min_drop=0.002, lr_mean=2.5e-5)
    verdict, reason = attribute(control, sample, None)
    assert verdict == "pass" and "learning_inconclusive" in reason
    learned = control.model_copy(update={"loss": [1.40, 1.3, 1.2, 1.1, 1.1, 1.1]})
    assert attribute(learned, sample, None)[0] == "data_fault"


@pytest.mark.parametrize("seed", [2, 3, 42])
def test_the_training_args_defaults_on_clean_classification_are_no_fault(
        tmp_path: Path, seed: int) -> None:
    records, rules = text_classification_case(60)
    smoke = {"lr": 5e-5, "scheduler": "linear", "seed": seed}
    smoke_result = smoke_of(gate(tmp_path, records, {**rules, "smoke": smoke}))
    assert smoke_result.verdict == "pass", smoke_result.reason
