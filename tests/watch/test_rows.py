"""with_ids: ids and row numbers ride on the batch through a DataLoader (worker processes
too), slices keep them, and the gate's findings are linked to a failing batch's rows."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

import preflight
from preflight.errors import ConfigError
from preflight.watch.rows import IdDict, batch_rows, take
from tests.watch import tiny


def test_ids_survive_dataloader_worker_processes() -> None:
    rows = tiny.make_rows(40)
    ds = preflight.watch.with_ids(rows)
    loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=ds.collate(tiny.collate))
    got = [batch_rows(b) for b in loader]
    assert [r for r, _ in got] == [list(range(i, i + 8)) for i in range(0, 40, 8)]
    assert got[2][1] == [f"r{i}" for i in range(16, 24)]
    first = next(iter(loader))
    assert isinstance(first, dict) and set(first) == {"x", "y"}  # the user's batch as before
    assert tuple(first["x"].shape) == (8, tiny.WIDTH)


def test_the_users_collate_sees_plain_rows_and_tuples_carry_ids_too() -> None:
    seen = []

    def collate(rows):
        seen.append(rows)
        return tiny.collate(rows)["x"], tiny.collate(rows)["y"]

    ds = preflight.watch.with_ids(tiny.make_rows(6), id_field="id")
    batch = ds.collate(collate)([ds[4], ds[1]])
    assert seen[0] == [tiny.make_rows(6)[4], tiny.make_rows(6)[1]]
    assert isinstance(batch, tuple) and batch_rows(batch) == ([4, 1], ["r4", "r1"])
    again = pickle.loads(pickle.dumps(batch))
    assert batch_rows(again) == ([4, 1], ["r4", "r1"]) and torch.equal(again[0], batch[0])


def test_take_slices_tensors_and_per_row_lists_and_keeps_ids() -> None:
    batch = IdDict({"x": torch.arange(12).reshape(4, 3), "text": ["a", "b", "c", "d"],
                    "scale": torch.tensor(2.0)})
    batch.rows, batch.ids = [10, 11, 12, 13], ["a", "b", "c", "d"]
    part = take(batch, [1, 3])
    assert part["x"].tolist() == [[3, 4, 5], [9, 10, 11]] and part["text"] == ["b", "d"]
    assert float(part["scale"]) == 2.0 and batch_rows(part) == ([11, 13], ["b", "d"])


def test_a_collate_returning_a_bare_tensor_is_a_clear_error() -> None:
    ds = preflight.watch.with_ids(tiny.make_rows(4))
    with pytest.raises(ConfigError, match="dict, tuple or list batch"):
        ds.collate(lambda rows: tiny.collate(rows)["x"])([ds[0], ds[1]])


def test_rows_flagged_by_the_gate_are_linked_in_the_fault(tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "features": [float(i % 5), 1.0], "target": float(i % 3)}
            for i in range(40)]
    rows[21]["features"][1] = math.nan
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    rules = {"version": 1, "task": "regression",
             "fields": {"features": "features", "target": "target", "id": "id"},
             "rules": [{"id": "values", "check": "numeric", "severity": "error",
                        "max_fraction": 0.1}],
             "smoke": {"enabled": False}}
    report = preflight.run_preflight(data, rules=rules, out=tmp_path / "gate", smoke=False)
    assert report.passed  # the NaN row was allowed by max_fraction

    def collate(batch):
        return {"x": torch.tensor([r["features"] for r in batch]),
                "y": torch.tensor([r["target"] for r in batch])}

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ds = preflight.watch.with_ids(rows)
    loader = DataLoader(ds, batch_size=8, collate_fn=ds.collate(collate))

    def step_fn(m, b):
        return torch.nn.functional.mse_loss(m(b["x"]).squeeze(-1), b["y"])

    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=step_fn, out=tmp_path / "watch",
            gate_report=tmp_path / "gate" / "report.json") as w:
        tiny.train(w, model, opt, loader, loss_of=step_fn)
    fault = caught.value.fault
    assert fault.minimal_ids == ["r21"] and fault.step == 2
    [link] = fault.gate
    assert link.flagged and link.row == 21 and link.rules == ["values"]
    assert link.allowed == ["values"] and "nan" in " ".join(link.codes)
    assert "row 21 was flagged by `values`" in link.detail and "max_fraction" in link.detail


def test_a_datasets_dataset_carries_its_ids() -> None:
    datasets = pytest.importorskip("datasets")
    ds = preflight.watch.with_ids(datasets.Dataset.from_list(tiny.make_rows(10)))
    loader = DataLoader(ds, batch_size=4, collate_fn=ds.collate(tiny.collate))
    assert [batch_rows(b)[1] for b in loader][1] == ["r4", "r5", "r6", "r7"]
