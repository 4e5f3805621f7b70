"""The smoke stage on class names taken from the data (no rules file, no model.labels):
the built-in classifier maps the names to class indices in sorted order and trains; a
record whose label is not a name is the data fault."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from preflight import run_preflight
from tests.smoke.conftest import codes, sentence, smoke_of, write_jsonl


@pytest.mark.parametrize("planted", [None, 1])
def test_class_names_train_and_a_non_name_is_the_fault(tmp_path: Path, planted: int | None) -> None:
    rng = random.Random(11)
    records = [{"text": sentence(rng), "label": ("neg", "pos", "mixed")[i % 3]} for i in range(45)]
    if planted is not None:
        records[13]["label"] = planted
    report = run_preflight(
        write_jsonl(tmp_path / "names.jsonl", records), None, tmp_path / "out", smoke=True
    )
    assert "class names" in report.rules_file.inferred["label"]
    smoke = smoke_of(report)
    assert smoke.model == "built-in:classification"
    if planted is None:
        assert smoke.verdict == "pass", smoke.reason
    else:
        assert smoke.verdict == "data_fault" and smoke.minimal_rows == [13], smoke.reason
        assert codes(smoke) == ["label_not_a_class"]
