"""Clean data on unusual scales or settings must not be called a fault, and odd input must
give a finding or a clear message, never a traceback (cases from the review of the smoke
test)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from preflight.config import Fields, ModelFacts
from preflight.smoke import replay
from preflight.smoke.encode import Encoder
from tests.smoke.conftest import (
    SQRT_OF_FEATURE,
    codes,
    gate,
    invoke,
    regression_records,
    regression_rules,
    sentence,
    smoke_of,
    write_jsonl,
    write_model,
    write_rules,
)
from tests.tokenizers import build_chat_folder


def _scaled(n: int, *, offset: float, spread: float) -> list[dict[str, Any]]:
    records = regression_records(n)
    for r in records:
        r["target"] = offset + spread * r["target"]
    return records


@pytest.mark.parametrize(("offset", "spread"), [(50_000.0, 1.0), (0.0, 10_000.0),
                                                (2000.0, 5.0), (0.0, 1e-4)])
def test_clean_regression_passes_on_any_scale(tmp_path: Path, offset: float,
                                              spread: float) -> None:
    smoke = smoke_of(gate(tmp_path, _scaled(80, offset=offset, spread=spread),
                          regression_rules()))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.control is not None and smoke.control.learned


@pytest.mark.parametrize("batch_size", [1, 4, 16])
def test_minibatches_still_judge_learning_on_the_whole_sample(tmp_path: Path,
                                                              batch_size: int) -> None:
    rng = random.Random(3)
    records = [{"id": f"k{i}", "text": sentence(rng), "label": i % 3} for i in range(60)]
    rules = {"task": "classification", "model": {"num_classes": 3},
             "fields": {"text": "text", "label": "label", "id": "id"},
             "smoke": {"batch_size": batch_size}, "rules": [{"id": "s", "check": "schema"}]}
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "pass", smoke.reason


def test_one_class_in_the_sample_trains(tmp_path: Path) -> None:
    rng = random.Random(5)
    records = [{"id": f"k{i}", "text": sentence(rng), "label": 0} for i in range(40)]
    rules = {"task": "classification", "fields": {"text": "text", "label": "label"},
             "rules": [{"id": "s", "check": "schema"}]}
    assert smoke_of(gate(tmp_path, records, rules)).verdict == "pass"


@pytest.mark.parametrize(("fields", "label", "why"), [
    ({"label": "label"}, 1, "declare fields.features or fields.text"),
    ({"text": "text", "label": "label"}, "pos", "set model.labels"),
])
def test_untrainable_fields_are_skipped_with_advice(tmp_path: Path, fields: dict[str, str],
                                                    label: Any, why: str) -> None:
    rng = random.Random(6)
    records = [{"text": sentence(rng), "label": label} for _ in range(20)]
    rules = {"task": "classification", "fields": fields,
             "rules": [{"id": "s", "check": "schema"}]}
    report = gate(tmp_path, records, rules)
    assert smoke_of(report).verdict == "skipped" and why in smoke_of(report).reason
    assert report.passed  # a skipped smoke test does not fail the gate


def test_a_label_beyond_int64_is_a_range_finding(tmp_path: Path) -> None:
    rng = random.Random(7)
    records = [{"id": f"k{i}", "text": sentence(rng), "label": i % 3} for i in range(30)]
    records[10]["label"] = 10**20
    rules = {"task": "classification", "model": {"num_classes": 3},
             "fields": {"text": "text", "label": "label", "id": "id"},
             "rules": [{"id": "s", "check": "schema"}]}
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [10]
    assert codes(smoke) == ["label_out_of_range"]


def test_a_chat_the_template_rejects_is_a_data_fault(tmp_path: Path) -> None:
    folder = build_chat_folder(tmp_path / "tok")
    rng = random.Random(8)
    records = [{"id": f"c{i}", "messages": [{"role": "user", "content": sentence(rng)},
                                            {"role": "assistant", "content": sentence(rng)}]}
               for i in range(20)]
    records[3]["messages"].append({"role": "tool", "content": "{}"})
    rules = {"task": "chat", "model": {"tokenizer": str(folder)},
             "fields": {"messages": "messages", "id": "id"},
             "rules": [{"id": "s", "check": "schema"}]}
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [3]
    assert codes(smoke) == ["chat_template_error"]


def test_an_integer_past_float_range_is_inf_not_a_crash() -> None:
    enc = Encoder("regression", Fields(features="f", target="y"), ModelFacts(), None,
                  max_length=8)
    (e,) = enc.encode([{"f": [1.0], "y": 10**400}])
    assert e.target == float("inf")


BAD_COLLATE = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, inputs):
        return self.lin(inputs).squeeze(-1)


def collate(rows):
    x = torch.tensor([r["features"] for r in rows])
    return x, torch.tensor([r["target"] for r in rows]), "extra"


def build():
    return Net(), F.mse_loss, collate
"""


def test_a_collate_that_breaks_its_contract_is_exit_2(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", regression_records(30))
    model = write_model(tmp_path / "m.py", BAD_COLLATE)
    rules = write_rules(tmp_path / "r.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--model", f"{model}:build",
                    "--out", tmp_path / "out", "--no-progress")
    assert result.exit_code == 2, result.output
    assert "collate must return (inputs, targets), got a 3-item tuple" in result.output
    assert "Traceback" not in result.output


def test_a_collate_that_returns_a_generator_is_exit_2(tmp_path: Path) -> None:
    """A generator is no (inputs, targets) pair, though it would unpack into one."""
    data = write_jsonl(tmp_path / "d.jsonl", regression_records(30))
    model = write_model(tmp_path / "m.py", BAD_COLLATE.replace(
        'return x, torch.tensor([r["target"] for r in rows]), "extra"',
        'return (t for t in (x, torch.tensor([r["target"] for r in rows])))'))
    rules = write_rules(tmp_path / "r.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--model", f"{model}:build",
                    "--out", tmp_path / "out", "--no-progress")
    assert result.exit_code == 2, result.output
    assert "collate must return (inputs, targets), got generator" in result.output
    assert "Traceback" not in result.output and "bug in preflight" not in result.output


MASKED = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, inputs):
        x = inputs["features"]
        return self.lin(x).squeeze(-1) + inputs["bias"].clamp(min=0).squeeze(-1)


def collate(rows):
    x = torch.tensor([r["features"] for r in rows], dtype=torch.float32)
    bias = torch.full((len(rows), 1), float("-inf"))  # -inf by design, like a mask
    y = torch.tensor([r["target"] for r in rows], dtype=torch.float32)
    return UserDict({"features": x, "bias": bias}), y


def build():
    return Net(), F.mse_loss, collate
"""


def test_mapping_batches_and_masks_replay_the_real_fault(tmp_path: Path) -> None:
    """A collate returning a Mapping (like BatchEncoding) with a -inf mask: the mask is
    no fault (the control batch has it too), the NaN target is, and the replay says so."""
    records = regression_records(40)
    records[17]["target"] = float("nan")
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in records) + "\n", "utf-8")
    model = write_model(tmp_path / "m.py", "from collections import UserDict\n" + MASKED)
    rules = regression_rules(model=f"{model}:build")
    from preflight import run_preflight

    report = run_preflight(data, rules=rules, out=tmp_path / "out", smoke=True,
                           formats=["json"])
    smoke = smoke_of(report)
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [17], smoke.reason
    assert "targets holds nan" in smoke.reason
    again = replay(smoke.replay, model=f"{model}:build")
    assert again.verdict == "data_fault" and "targets holds nan" in again.reason


def test_anomaly_names_the_backward_op_even_when_it_fails_later(tmp_path: Path) -> None:
    records = regression_records(40)
    records[5]["features"][0] = 0.0
    model = write_model(tmp_path / "m.py", SQRT_OF_FEATURE.format(eps=""))
    smoke = smoke_of(gate(tmp_path, records, regression_rules(model=f"{model}:build")))
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [5]
    assert smoke.anomaly is not None and "Backward" in smoke.anomaly


@pytest.mark.parametrize("args", [
    ["check", "DATA", "--no-smoke", "--model", "m.py:build"],
    ["smoke", "--replay", "R", "--set", "smoke.steps=3"],
    ["smoke", "DATA", "--replay", "R"],
])
def test_conflicting_options_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", regression_records(5))
    args = [str(data) if a == "DATA" else str(tmp_path / "r.pt") if a == "R" else a
            for a in args]
    result = invoke(*args)
    assert result.exit_code == 2
    assert "Error:" in result.output and "Traceback" not in result.output


def test_torch_threads_are_restored_after_the_stage(tmp_path: Path) -> None:
    before = torch.get_num_threads()
    gate(tmp_path, regression_records(20), regression_rules(steps=4))
    assert torch.get_num_threads() == before


def test_a_bad_model_or_checkpoint_fails_before_the_data_is_read(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", regression_records(10))
    rules = write_rules(tmp_path / "r.yaml", regression_rules())
    for option, value, says in (("--model", "missing.py:build", "file not found"),
                                ("--checkpoint", str(tmp_path / "no.pt"), "checkpoint not found")):
        out = tmp_path / option.strip("-")
        result = invoke("check", data, "--rules", rules, option, value, "--out", out)
        assert result.exit_code == 2 and says in result.output
        assert not (out / "report.json").exists()  # stopped before the gate ran


def test_smoke_threads_follow_idle_cores_and_restore_the_callers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from preflight import cores
    records, rules = regression_records(20), regression_rules()
    torch.set_num_threads(2)
    monkeypatch.setattr(cores, "idle_cores", lambda: 0.4)  # a neighbour keeps the cores busy
    smoke = smoke_of(gate(tmp_path / "busy", records, rules))
    assert smoke.verdict == "pass" and smoke.threads == 1
    assert torch.get_num_threads() == 2  # the caller's setting is back
    monkeypatch.setattr(cores, "idle_cores", lambda: 8.0)
    monkeypatch.setattr(cores, "available_cores", lambda: 8)
    monkeypatch.setattr(cores, "physical_cores", lambda: 8)
    smoke = smoke_of(gate(tmp_path / "idle", records, rules))
    assert smoke.threads == 2  # never more than the caller allowed
    assert torch.get_num_threads() == 2
