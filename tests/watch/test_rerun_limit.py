"""``rerun_time_limit``: a ``step_fn`` that never returns when the watch re-runs a failing
batch is stopped; the fault is still recorded (``fault.json``) and handled as ``on_fault``
says (stop raises ``TrainingFault``, skip and warn let training go on), in the main thread
(a SIGALRM timer, the caller's handler put back) and in a worker thread (a watchdog).

The training loop computes its own loss, so only the re-runs hang. Each run is in a child
process with a timeout: a regression fails instead of hanging the suite."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from preflight.errors import ConfigError
from preflight.watch import WatchConfig
from preflight.watch.options import RERUN_FLOOR, RERUN_STEPS
from tests.children import run_script

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 2  # seconds: rerun_time_limit of the runs that hang

CHILD = """
import json, signal, sys, threading
sys.path.insert(0, {root!r})
import torch
from torch.utils.data import DataLoader
import preflight
from tests.watch import tiny


def spin():
    while True:
        pass


def loss_of(model, batch):  # the loop's own loss: NaN where a row's y is 5 (no input says why)
    scale = float("nan") if bool((batch["y"] == 5.0).any()) else 1.0
    return tiny.step_fn(model, batch) * scale


def rerun(model, batch):  # the watch's re-runs only
    if {hang}:
        spin()
    return loss_of(model, batch)


rows = tiny.make_rows(64, nan_row={nan_row})
if {nan_row} is None:
    rows[12]["y"] = 5.0
data = preflight.watch.with_ids(rows)
loader = DataLoader(data, batch_size=8, collate_fn=data.collate(tiny.collate))
box = {{}}


def work():
    model, opt = tiny.fresh()
    w = preflight.watch(model, opt, step_fn=rerun, out="watch", on_fault={on_fault!r},
                        rerun_time_limit={limit})
    try:
        with w:
            box["went"] = tiny.train(w, model, opt, loader, loss_of=loss_of)
    except preflight.watch.TrainingFault as e:
        box["raised"] = e.fault.verdict
    except BaseException as e:
        box["error"] = repr(e)


def mine(signum, frame):
    raise SystemExit("the caller's handler was called")


signal.signal(signal.SIGALRM, mine)
if {thread}:
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(90)
    box["alive"] = worker.is_alive()
else:
    work()
box["handler_kept"] = signal.getsignal(signal.SIGALRM) is mine
box["timer"] = signal.getitimer(signal.ITIMER_REAL)[0]
box["left"] = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
with open("watch/fault.json", encoding="utf-8") as f:
    box["fault"] = json.load(f)
print(json.dumps(box))
sys.stdout.flush()
import os; os._exit(0)  # a thread still spinning must not hold the child
"""


def _child(
    tmp_path: Path,
    *,
    on_fault: str,
    hang: str = "True",
    nan_row: int | None = 12,
    thread: bool = False,
) -> dict[str, Any]:
    """Train ``tiny`` under the watch in a child process; what the child saw."""
    source = CHILD.format(
        root=str(ROOT),
        hang=hang,
        nan_row=nan_row,
        on_fault=on_fault,
        limit=LIMIT,
        thread=thread,
    )
    box = run_script(tmp_path, source)
    assert "error" not in box, box["error"]
    assert box["handler_kept"] and box["timer"] == 0.0  # the caller's SIGALRM, untouched
    assert "preflight-smoke-deadline" not in box["left"]  # no watchdog left behind
    return box


def _finding(fault: dict[str, Any]) -> str:
    found = [f for f in fault["findings"] if f["code"] == "rerun_time_limit"]
    assert len(found) == 1, fault["findings"]
    assert found[0]["severity"] == "warn"
    return found[0]["detail"]


def test_a_rerun_that_never_returns_is_stopped_and_the_fault_raised(tmp_path: Path) -> None:
    box = _child(tmp_path, on_fault="stop")
    assert box["raised"] == "data_fault" and "went" not in box  # stop: TrainingFault, as ever
    fault = box["fault"]
    assert fault["step"] == 1
    why = f"the step_fn re-run did not finish in {LIMIT} s (forward in the failing batch's re-run)"
    assert why in fault["reason"]
    # not re-run: the step's own tensors still name the NaN row, as when step_fn raises
    assert fault["verdict"] == "data_fault" and fault["minimal_ids"] == ["r12"]
    detail = _finding(fault)
    assert "look for a hang in your step_fn" in detail and "rerun_time_limit" in detail


def test_with_on_fault_warn_training_goes_on_in_a_worker_thread(tmp_path: Path) -> None:
    box = _child(tmp_path, on_fault="warn", nan_row=None, thread=True)
    assert not box["alive"], "the watched loop in a worker thread did not end"
    assert box["went"] == [True] * 8  # every batch trained: warn keeps the step
    fault = box["fault"]
    # no input says why, and the re-run was stopped: not attributed
    assert fault["verdict"] == "skipped" and fault["step"] == 1
    assert f"not attributed: the step_fn re-run did not finish in {LIMIT} s" in fault["reason"]
    _finding(fault)


def test_a_stop_while_narrowing_keeps_the_data_fault(tmp_path: Path) -> None:
    """The failing batch fails again and the control does not (a data fault); the one-row
    re-runs that narrow it never return: the verdict stands, the rows are not narrowed,
    and with on_fault="skip" the failing step is skipped and training goes on."""
    box = _child(tmp_path, on_fault="skip", nan_row=None, hang='batch["x"].shape[0] == 1')
    assert box["went"] == [True, False, *[True] * 6]
    fault = box["fault"]
    assert fault["verdict"] == "data_fault", fault["reason"]
    assert "a control batch of rows that already trained does not" in fault["reason"]
    assert "the rows were not narrowed" in fault["reason"]
    assert "(forward in the per-row losses)" in fault["reason"]
    assert fault["minimal_rows"] == []
    _finding(fault)


@pytest.mark.parametrize("value", [0, 0.5, -3, True, "60", math.nan, math.inf, 10**7])
def test_absurd_rerun_time_limits_are_refused(tmp_path: Path, value: Any) -> None:
    with pytest.raises(ConfigError, match="rerun_time_limit"):
        WatchConfig(out=tmp_path, rerun_time_limit=value)


def test_the_automatic_limit_scales_with_the_step_time(tmp_path: Path) -> None:
    auto = WatchConfig(out=tmp_path)
    assert auto.rerun_limit([]) == RERUN_FLOOR  # a fault at the first step: the floor
    assert auto.rerun_limit([0.0, 0.1, 0.2]) == RERUN_FLOOR  # fast steps: the floor
    assert auto.rerun_limit([0.0, 10.0, 20.0]) == RERUN_STEPS * 10.0  # slow steps: 100 of them
    assert WatchConfig(out=tmp_path, rerun_time_limit=5).rerun_limit([0.0, 100.0]) == 5.0
