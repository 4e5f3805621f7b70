"""The control batch takes the features' modal shape in every row: a real row holding null
(or a number among vectors) got one number, padded with NaN beside the others' vectors,
so the in-spec batch failed and a data fault was reported as a code fault."""

from __future__ import annotations

import math
import random

import pytest
import torch

from preflight.config import Fields, ModelFacts
from preflight.smoke.control import control_rows
from preflight.smoke.encode import Collate, Encoder


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
