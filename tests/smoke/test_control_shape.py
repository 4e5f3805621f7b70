"""The control batch takes the features' modal shape in every row: a real row holding null
(or a number among vectors) got one number, padded with NaN beside the others' vectors,
so the in-spec batch failed and a data fault was reported as a code fault. The built-in
model and collate take that length too: a vector of another length is its row's
``wrong_length``, and vectors of no common length are skipped."""

from __future__ import annotations

import math
import random

import pytest
import torch

from preflight.config import Fields, ModelFacts
from preflight.smoke.control import control_rows
from preflight.smoke.encode import Collate, Encoder
from tests.smoke.conftest import finding, gate, regression_rules, smoke_of


@pytest.mark.parametrize("odd", [None, 5.0], ids=["null", "a-number"])
def test_control_features_keep_the_vectors_shape(odd: float | None) -> None:
    rng = random.Random(0)
    real = [{"features": [rng.gauss(0, 1) for _ in range(4)], "target": float(i)}
            for i in range(20)]
    real[3]["features"] = odd
    fields = Fields(features="features", target="target")
    enc = Encoder("regression", fields, ModelFacts(), None, max_length=32)
    rows = control_rows("regression", fields, ModelFacts(), real, seed=0,
                        vocab_size=enc.vocab_size, classes=enc.classes, max_length=32)
    assert all(isinstance(r["features"], list) and len(r["features"]) == 4 for r in rows)
    inputs, targets = Collate(enc)(rows)
    assert torch.isfinite(inputs["features"]).all()
    assert all(math.isfinite(t) for t in targets.tolist())


def _ragged(lengths: list[int]) -> list[dict]:
    rng = random.Random(1)
    return [{"id": f"r{i}", "features": [rng.gauss(0, 1) for _ in range(n)], "target": float(i)}
            for i, n in enumerate(lengths)]


@pytest.mark.parametrize("odd", [4, 2, 0], ids=["longer", "shorter", "empty"])
def test_a_vector_of_another_length_is_a_data_fault_naming_it(tmp_path, odd: int) -> None:
    # 45 rows of 3 values, 5 of `odd`: the model was sized by the longest (4) and the
    # control batch by the modal length (3), so the in-spec batch failed: a code fault.
    records = _ragged([odd if i % 10 == 0 else 3 for i in range(50)])
    smoke = smoke_of(gate(tmp_path, records, regression_rules()))
    assert smoke.verdict == "data_fault", smoke.reason
    assert f"features: {odd} values, not 3" in smoke.reason
    assert finding(smoke, "wrong_length").rows == [0, 10, 20, 30, 40]
    assert smoke.control.failure is None


@pytest.mark.parametrize(("lengths", "reason"), [
    ([1 + i % 2 for i in range(50)], "features holds vectors of 2 lengths"),
    ([0] * 50, "nothing to learn regression from: features is empty"),
], ids=["ragged", "all-empty"])
def test_features_the_builtin_model_cannot_take_are_skipped_not_a_code_fault(
        tmp_path, lengths: list[int], reason: str) -> None:
    smoke = smoke_of(gate(tmp_path, _ragged(lengths), regression_rules()))
    assert smoke.verdict == "skipped", smoke.reason
    assert reason in smoke.reason
