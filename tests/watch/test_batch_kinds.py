"""Batch types a loop may hand the watch, re-run and sliced as the loop built them."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F

import preflight
from preflight.watch.rows import take
from tests.watch import tiny

Pair = namedtuple("Pair", "x y")


def _step_fn(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    return F.mse_loss(model(batch.x), batch.y)


def test_a_namedtuple_batch_is_re_run_and_narrowed_to_its_row(tmp_path: Path) -> None:
    """Moving it to the device rebuilt it from one iterable (TypeError: missing 'y'): the
    re-run failed and the fault was judged from the inputs alone."""
    loader = [Pair(b["x"], b["y"]) for b in
              [*tiny.batches(tiny.make_rows(24)), tiny.collate(tiny.make_rows(8, nan_row=3))]]
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=_step_fn, out=tmp_path / "watch") as w:
        tiny.train(w, model, opt, loader, loss_of=_step_fn)
    fault = caught.value.fault
    assert fault.verdict == "data_fault", fault.reason
    assert "fails again from the pre-step weights" in fault.reason
    assert fault.batch_positions == [3]
    assert "watch_investigation_failed" not in [f.code for f in fault.findings]


def test_take_keeps_a_namedtuple() -> None:
    batch = Pair(torch.arange(4.0), torch.arange(4.0) * 2)
    part = take(batch, [1, 3])
    assert isinstance(part, Pair) and part.y.tolist() == [2.0, 6.0]


def _seq_step_fn(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    """A sequence-first batch ([time, rows, features]): the model sees one time step."""
    return F.mse_loss(model(batch["x"]), batch["y"])


@pytest.mark.parametrize("with_step_fn", [True, False])
def test_a_sequence_first_batch_never_blames_a_time_step_as_a_row(tmp_path: Path,
                                                                  with_step_fn: bool) -> None:
    """Sliced along dimension 0, time step 2 was taken for row 2 and its id (r26) blamed
    for row r29's NaN; the narrowing then failed with an IndexError."""
    rows = [{"id": f"r{i}"} for i in range(32)]
    data = preflight.watch.with_ids(rows)

    def collate(items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        x = torch.ones(20, len(items), tiny.WIDTH)
        for j, r in enumerate(items):
            if r["id"] == "r29":
                x[2, j, 1] = float("nan")
        return {"x": x, "y": torch.zeros(20, len(items))}

    loader = torch.utils.data.DataLoader(data, batch_size=8,
                                         collate_fn=data.collate(collate))
    model, opt = tiny.fresh()
    step_fn = _seq_step_fn if with_step_fn else None
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=step_fn, out=tmp_path / "watch") as w:
        tiny.train(w, model, opt, loader, loss_of=_seq_step_fn)
    fault = caught.value.fault
    assert fault.batch_ids == [f"r{i}" for i in range(24, 32)]
    assert fault.minimal_ids == []  # not r26: the rows are not the first dimension
    assert "watch_investigation_failed" not in [f.code for f in fault.findings]


def test_an_empty_batch_is_named_in_the_reason(tmp_path: Path) -> None:
    """A batch of 0 rows (its mean loss is NaN) was a data_fault naming no row, and nothing
    said the batch was empty."""
    loader = [*tiny.batches(tiny.make_rows(24)),
              {"x": torch.zeros(0, tiny.WIDTH), "y": torch.zeros(0)}]
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path / "watch") as w:
        tiny.train(w, model, opt, loader)
    fault = caught.value.fault
    assert fault.verdict == "data_fault"
    assert "the batch is empty (0 rows" in fault.reason


def test_a_namedtuple_batch_s_replay_gives_the_step_fn_a_namedtuple(tmp_path: Path) -> None:
    """replay.pt stored the namedtuple as a list: ``batch.x`` raised in the rerun."""


    from preflight.smoke.replay_file import batch, load

    spec = f"{Path(tiny.__file__).resolve()}:build_pair"
    loader = [tiny.Pair(b["x"], b["y"]) for b in
              [*tiny.batches(tiny.make_rows(24)), tiny.collate(tiny.make_rows(8, nan_row=3))]]
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault), preflight.watch(
            model, opt, step_fn=tiny.pair_step_fn, out=tmp_path / "watch",
            model_spec=spec) as w:
        tiny.train(w, model, opt, loader, loss_of=tiny.pair_step_fn)
    inputs, _ = batch(load(tmp_path / "watch" / "replay.pt"))
    assert type(inputs).__name__ == "Pair" and inputs._fields == ("x", "y")
    assert inputs.x.shape == (1, tiny.WIDTH)
    _replays_as_a_data_fault(tmp_path / "watch" / "replay.pt", spec)


def test_the_user_s_own_namedtuple_class_comes_back_when_it_is_imported() -> None:
    from preflight.smoke.replay_file import _plain, _rebuilt

    stored = _plain((Pair(torch.ones(2), torch.zeros(2)), [torch.ones(1)]))
    back = _rebuilt(stored)
    assert type(back) is tuple and type(back[0]) is Pair and back[0].y.tolist() == [0.0, 0.0]
    assert type(back[1]) is list


def test_a_renamed_namedtuple_whose_class_is_not_imported_comes_back() -> None:
    """``namedtuple(..., rename=True)`` has fields like ``_1``: rebuilding a namedtuple of
    those fields raised ValueError (a traceback from ``smoke --replay``)."""
    from preflight.smoke.replay_file import _plain, _rebuilt

    kind = namedtuple("Renamed", ["x", "def"], rename=True, module="not_imported_here")
    back = _rebuilt(_plain(kind(torch.ones(2), torch.zeros(2))))
    assert back._fields == ("x", "_1") and back._1.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("kind", [tiny.XY, tiny.FrozenXY, tiny.Features],
                         ids=["dataclass", "frozen", "dict-field"])
def test_a_dataclass_batch_is_narrowed_and_replayed_as_itself(tmp_path: Path,
                                                              kind: type) -> None:
    """The replay file kept the dataclass itself, which ``weights_only`` refuses to load:
    ``smoke --replay`` said it was not a replay file; and the re-run could not slice it
    ("holds no tensor"), so its rows were not narrowed."""


    from preflight.smoke.replay_file import batch, load

    spec = f"{Path(tiny.__file__).resolve()}:build_attr"
    loader = [tiny.as_kind(kind, b) for b in
              [*tiny.batches(tiny.make_rows(24)), tiny.collate(tiny.make_rows(8, nan_row=3))]]
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.attr_step_fn, out=tmp_path / "watch",
            model_spec=spec) as w:
        tiny.train(w, model, opt, loader, loss_of=tiny.attr_step_fn)
    fault = caught.value.fault
    assert fault.verdict == "data_fault" and fault.batch_positions == [3], fault.reason
    assert "rows_not_narrowed" not in [f.code for f in fault.findings]
    inputs, _ = batch(load(tmp_path / "watch" / "replay.pt"))
    assert type(inputs) is kind  # its module is imported: the user's own class
    x = inputs.features["x"] if kind is tiny.Features else inputs.x
    assert x.shape == (1, tiny.WIDTH) and bool(x.isnan().any())
    _replays_as_a_data_fault(tmp_path / "watch" / "replay.pt", spec)


@pytest.mark.parametrize("module", ["not_imported_here", "__main__"])
def test_a_dataclass_whose_class_is_not_imported_comes_back_as_a_stand_in(
        module: str) -> None:
    """Its class cannot be rebuilt (defined in the training script, or in a module no one
    imported): a dataclass of that name and fields, frozen if it was, and a note why."""
    import dataclasses

    from preflight.smoke.replay_file import _plain, _rebuilt

    kind = dataclasses.make_dataclass("Batch", ["x", "y"], frozen=True)
    kind.__module__ = module
    notes: list[str] = []
    back = _rebuilt(_plain(kind(torch.ones(2), {"m": torch.zeros(2)})), (), notes)
    assert dataclasses.is_dataclass(back) and type(back).__name__ == "Batch"
    assert back.x.tolist() == [1.0, 1.0] and back.y["m"].tolist() == [0.0, 0.0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.x = None
    assert len(notes) == 1 and f"{module}.Batch is not imported" in notes[0]
    assert ("defined in the training script" in notes[0]) is (module == "__main__")


def test_a_dataclass_class_is_found_in_the_module_the_model_spec_loaded() -> None:
    """A ``file.py:build`` spec imports its file under another module name: the class
    recorded as ``tests.watch.tiny.XY`` is the one that module holds."""
    import sys
    import types

    from preflight.smoke.replay_file import _plain, _rebuilt

    home = types.ModuleType("preflight_user_model_test_home")
    home.XY = tiny.XY
    sys.modules[home.__name__] = home
    try:
        stored = _plain(tiny.XY(torch.ones(1), torch.zeros(1)))
        stored["__preflight_dataclass__"] = ["gone_module", "XY"]
        notes: list[str] = []
        back = _rebuilt(stored, (home.__name__,), notes)
    finally:
        del sys.modules[home.__name__]
    assert type(back) is tiny.XY and notes == []


def _replays_as_a_data_fault(replay: Path, spec: str) -> None:
    """``smoke --replay`` of a saved batch with the user's model reproduces the fault, and
    the user's step_fn ran on it (the first module to go non-finite is named)."""
    import json

    from click.testing import CliRunner

    from preflight.cli import main

    result = CliRunner().invoke(main, ["smoke", "--replay", str(replay), "--model", spec,
                                       "--json"])
    assert result.exit_code == 1, result.output
    replayed = json.loads(result.stdout[result.stdout.index("{"):])
    assert replayed["verdict"] == "data_fault" and replayed["reason"].startswith("reproduced")
    assert replayed["first_bad_module"] == "body.0"
