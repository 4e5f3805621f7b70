"""GradScaler: a skipped step is the scaler's business, until it keeps skipping; the order
of unscale_ and clipping is checked. torch 2.13's GradScaler("cpu") is a real scaler on
CPU; an overflowing step is planted by scaling one step's loss past float32."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

import preflight
from tests.watch import tiny


def _amp_loop(w, model, opt, scaler, batches, *, overflow=(), clip_first=False) -> None:
    for i, batch in enumerate(batches):
        loss = tiny.step_fn(model, batch)
        if i in overflow:
            loss = loss * 1e38  # finite itself; scaled by 65536 its gradients are inf
        assert w.step(loss, batch)
        scaler.scale(loss).backward()
        if clip_first:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.unscale_(opt)
        if not clip_first:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()


def test_one_overflowing_step_is_not_a_fault_and_the_scale_is_recorded(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    scaler = torch.amp.GradScaler("cpu")
    batches = tiny.batches(tiny.make_rows())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even a warning
        with preflight.watch(model, opt, step_fn=tiny.step_fn, scaler=scaler, out=tmp_path,
                             log_every=1) as w:
            _amp_loop(w, model, opt, scaler, batches, overflow={3})
    assert not (tmp_path / "fault.json").exists()
    lines = [json.loads(x) for x in (tmp_path / "stats.jsonl").read_text().splitlines()]
    scales = [x["scale"] for x in lines]
    assert scales[:3] == [65536.0] * 3 and scales[3] == 32768.0
    assert [x["skipped"] for x in lines] == [False] * 3 + [True] + [False] * 4


def test_a_scaler_that_keeps_skipping_is_a_fault_with_the_scale_curve(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    scaler = torch.amp.GradScaler("cpu")
    batches = tiny.batches(tiny.make_rows(128))
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, scaler=scaler, out=tmp_path,
            skipped_steps_alarm=3) as w:
        _amp_loop(w, model, opt, scaler, batches, overflow={5, 6, 7, 8, 9})
    fault = caught.value.fault
    assert fault.step == 7 and "skipped 3 steps in a row" in fault.reason
    assert fault.real is not None and fault.real.scale[-3:] == [32768.0, 16384.0, 8192.0]
    assert fault.real.skipped_steps == 3


def test_a_collapsed_scale_is_a_fault(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    batches = tiny.batches(tiny.make_rows())
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, scaler=scaler, out=tmp_path, min_scale=1.5) as w:
        for batch in batches:
            loss = tiny.step_fn(model, batch) * 1e38
            w.step(loss, batch)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    assert "loss scale collapsed to 1" in caught.value.fault.reason
    assert caught.value.fault.step == 1


def test_clipping_before_unscale_is_warned_once(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    scaler = torch.amp.GradScaler("cpu")
    with pytest.warns(RuntimeWarning) as seen, preflight.watch(
            model, opt, step_fn=tiny.step_fn, scaler=scaler, out=tmp_path) as w:
        _amp_loop(w, model, opt, scaler, tiny.batches(tiny.make_rows()), clip_first=True)
    order = [x for x in seen if "before scaler.unscale_" in str(x.message)]
    assert len(order) == 1
    assert torch.nn.utils.clip_grad_norm_.__module__ == "torch.nn.utils.clip_grad"  # restored


def test_the_right_order_is_not_warned(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    scaler = torch.amp.GradScaler("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with preflight.watch(model, opt, scaler=scaler, out=tmp_path) as w:
            _amp_loop(w, model, opt, scaler, tiny.batches(tiny.make_rows()))
    assert w.core.findings == []


def test_the_clip_norm_is_reused_as_the_step_gradient_norm(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    norms = []
    with preflight.watch(model, opt, out=tmp_path, log_every=1) as w:
        for batch in tiny.batches(tiny.make_rows(24)):
            loss = tiny.step_fn(model, batch)
            w.step(loss, batch)
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)))
            opt.step()
            opt.zero_grad()
    lines = (tmp_path / "stats.jsonl").read_text().splitlines()
    logged = [json.loads(x)["grad_norm"] for x in lines]
    assert logged == pytest.approx(norms)  # before clipping, as the clip returned it


def test_a_step_the_scaler_skipped_is_not_blamed_for_the_next_one(tmp_path: Path) -> None:
    """Step 3's huge row overflows: the scaler skips it (optimizer.step never runs). Step
    4's gradients are finite element by element (the scaler applies them) but their norm
    overflows, and its batch alone re-runs clean: its micro-batches are step 4's only.
    Step 3's batch, never applied and failing alone, was blamed as step 4's first
    "accumulated" batch."""
    model, opt = tiny.fresh()
    scaler = torch.amp.GradScaler("cpu")
    rows = tiny.make_rows()
    rows[27]["x"] = [1e18, 1e18, 1e18, 1e18]  # loss finite, gradients' norm not
    batches = tiny.batches(rows)
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, scaler=scaler, out=tmp_path) as w:
        for i, batch in enumerate(batches):
            loss = tiny.step_fn(model, batch)
            assert w.step(loss, batch)
            # step 4: gradients near 1e25 (finite scaled by 32768; their squares are not)
            scaler.scale(loss * 1e25 if i == 4 else loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    fault = caught.value.fault
    assert fault.step == 4 and "gradient norm is inf at step 4" in fault.reason
    assert "accumulated" not in fault.reason and "did not reproduce" in fault.reason
    assert scaler.update.__func__ is torch.amp.GradScaler.update  # put back


def test_a_scaler_without_update_is_left_alone(tmp_path: Path) -> None:
    class Scaler:
        def get_scale(self) -> float:
            return 1.0

        def is_enabled(self) -> bool:
            return False

    model, opt = tiny.fresh()
    scaler = Scaler()
    with preflight.watch(model, opt, scaler=scaler, out=tmp_path) as w:
        tiny.train(w, model, opt, tiny.batches(tiny.make_rows(16)))
    assert "update" not in vars(scaler)
