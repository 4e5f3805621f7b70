"""Rows whose labels are all the ignore index (-100): cross-entropy's mean over no token is
0/0. When every row of a batch is such a row each fails alone, and the narrowing named
the first of them as the one row to blame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import preflight
from tests.watch import tiny


def _step_fn(model: nn.Module, batch: Any) -> torch.Tensor:
    return F.cross_entropy(model(batch["x"]), batch["labels"], ignore_index=-100)


def _batch(labels: list[int]) -> dict[str, torch.Tensor]:
    torch.manual_seed(len(labels))
    return {"x": torch.randn(len(labels), 4), "labels": torch.tensor(labels)}


def _run(tmp_path: Path, bad: list[int]) -> Any:
    torch.manual_seed(0)
    model = nn.Linear(4, 5)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    loader = [_batch([i % 5 for i in range(8)]) for _ in range(3)] + [_batch(bad)]
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=_step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, loader, loss_of=_step_fn)
    return caught.value.fault


def test_a_batch_of_rows_with_no_label_blames_every_row(tmp_path: Path) -> None:
    fault = _run(tmp_path, [-100] * 8)
    assert fault.step == 3 and fault.verdict == "data_fault", fault.reason
    assert fault.batch_positions == list(range(8))
    why = next(f.detail for f in fault.findings if f.code == "rows_not_narrowed")
    assert why.startswith("every row of the batch fail(s) alone")


def test_one_bad_row_is_still_narrowed_to_itself(tmp_path: Path) -> None:
    """The rest of the batch trains: a NaN input in row 5 still names row 5 alone."""
    torch.manual_seed(0)
    model = nn.Linear(4, 5)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    bad = _batch([i % 5 for i in range(8)])
    bad["x"][5, 1] = float("nan")
    loader = [_batch([i % 5 for i in range(8)]) for _ in range(3)] + [bad]
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=_step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, loader, loss_of=_step_fn)
    fault = caught.value.fault
    assert fault.verdict == "data_fault" and fault.batch_positions == [5]
    assert "rows_not_narrowed" not in [f.code for f in fault.findings]
