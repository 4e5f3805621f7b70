"""More hostile use of the watch: odd tensors in a batch, outputs that cannot be written, a
failing checkpoint callable, a gate report that does not fit, several threads. The user's
training never gets the watch's own traceback, and the record says what really happened."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import DataLoader

import preflight
from preflight.errors import ConfigError
from tests.watch import tiny


def _batches(extra=None):
    """Three good batches, then one with a NaN in its row 3 (each a dict, plus ``extra``)."""
    out = [*tiny.batches(tiny.make_rows(24)), tiny.collate(tiny.make_rows(8, nan_row=3))]
    return [{**b, **(extra or {})} for b in out]


def _fault(tmp_path: Path, batches, **options):
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path / "watch", **options) as w:
        tiny.train(w, model, opt, batches)
    return caught.value.fault


def test_a_meta_tensor_in_the_batch_is_not_the_watchs_crash(tmp_path: Path) -> None:
    # A tensor with no values (device "meta") rides along, unused by the loss: reading it
    # raised inside the investigation, out of the user's w.step.
    fault = _fault(tmp_path, _batches({"spare": torch.empty(8, 3, device="meta")}))
    assert fault.verdict == "data_fault" and fault.batch_positions == [3]
    assert (tmp_path / "watch" / "fault.json").is_file()


def test_a_complex_nan_input_names_its_row(tmp_path: Path) -> None:
    def step_fn(model, batch):  # the complex column reaches the loss
        return tiny.step_fn(model, batch) + batch["c"].real.sum()

    good = [{**b, "c": torch.zeros(8, dtype=torch.complex64)} for b in _batches()[:3]]
    bad = {**good[0], "c": torch.zeros(8, dtype=torch.complex64)}
    bad["c"][5] = complex(float("nan"), 0.0)
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, out=tmp_path / "watch") as w:  # no step_fn: the inputs say it
        tiny.train(w, model, opt, [*good, bad], loss_of=step_fn)
    assert caught.value.fault.verdict == "data_fault"
    assert caught.value.fault.batch_positions == [5]


def test_a_loss_on_the_meta_device_turns_the_watch_off_with_a_warning(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with preflight.watch(model, opt, out=tmp_path / "watch") as w, pytest.warns(
            RuntimeWarning, match="stopped watching.*meta device"):
        assert w.step(torch.empty((), device="meta"), None)
        assert w.step(torch.empty((), device="meta"), None)  # quietly, from then on


def test_a_replay_that_cannot_be_saved_keeps_the_verdict(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.save raises RuntimeError (not OSError) where it cannot write (a full disk, a
    # read-only folder): the verdict was then lost and blamed on the step_fn.
    def save(*args, **kwargs):
        raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")

    monkeypatch.setattr(torch, "save", save)
    fault = _fault(tmp_path, _batches())
    assert fault.verdict == "data_fault" and fault.batch_positions == [3]
    assert "step_fn" not in fault.reason
    [note] = [f for f in fault.findings if f.code == "replay_not_written"]
    assert "file write failed" in note.detail and fault.replay is None


def test_a_checkpoint_callable_that_raises_is_named_not_the_step_fn(tmp_path: Path) -> None:
    def checkpoint():
        raise OSError("the checkpoint store is unreachable")

    fault = _fault(tmp_path, _batches(), snapshot="none", checkpoint=checkpoint)
    assert fault.verdict == "data_fault" and fault.batch_positions == [3]
    assert "step_fn" not in fault.reason
    [note] = [f for f in fault.findings if f.code == "watch_checkpoint_missing"]
    assert "checkpoint callable raised OSError: the checkpoint store" in note.detail


def _gate(tmp_path: Path) -> Path:
    """A gate run over 16 rows with ids, which flags row 7 (id r7, a zero-width space)."""
    rows = [{"id": f"r{i}", "text": f"row number {i} of the corpus"} for i in range(16)]
    rows[7]["text"] = "row\u200bseven"
    data = tmp_path / "gate.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    preflight.run_preflight(data, out=tmp_path / "gate", smoke=False)
    return tmp_path / "gate" / "report.json"


def test_an_id_the_gate_did_not_flag_does_not_borrow_another_rows_findings(
        tmp_path: Path) -> None:
    gate = _gate(tmp_path)
    rows = tiny.make_rows(16, nan_row=7)  # r7 the gate flagged; r7 here is another record
    rows[7]["id"] = "r20"  # the training set's position 7 holds an id the gate never flagged
    ds = preflight.watch.with_ids(rows)
    loader = DataLoader(ds, batch_size=8, collate_fn=ds.collate(tiny.collate))
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path / "watch", gate_report=gate) as w:
        tiny.train(w, model, opt, loader)
    fault = caught.value.fault
    assert fault.minimal_ids == ["r20"]
    [link] = fault.gate
    assert not link.flagged and link.rules == [] and "not flagged" in link.detail


def test_a_gate_report_of_another_schema_or_findings_of_another_shape_are_refused(
        tmp_path: Path) -> None:
    gate = _gate(tmp_path)
    model, opt = tiny.fresh()
    newer = tmp_path / "newer"
    shutil.copytree(gate.parent, newer)
    data = json.loads((newer / "report.json").read_text())
    data["schema_version"] = "2.0"
    (newer / "report.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"report schema 2\.0; this preflight reads"):
        preflight.watch(model, opt, out=tmp_path / "w", gate_report=newer / "report.json")
    pq.write_table(pa.table({"a": [1]}), gate.parent / "findings.parquet")
    with pytest.raises(ConfigError, match=r"findings\.parquet has no column row, id, rule"):
        preflight.watch(model, opt, out=tmp_path / "w", gate_report=gate)


@pytest.mark.filterwarnings("ignore:preflight.watch:RuntimeWarning")
def test_faults_from_several_threads_are_investigated_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from preflight.watch import fault as fault_module

    real, inside, entered = fault_module.investigate, threading.Event(), []

    def investigate(*args, **kwargs):
        entered.append(threading.current_thread().name)
        inside.set()
        done.wait(1.0)  # give another thread's fault time to come in meanwhile
        return real(*args, **kwargs)

    done = threading.Event()
    monkeypatch.setattr(fault_module, "investigate", investigate)
    model, opt = tiny.fresh()
    nan = torch.tensor(float("nan"))
    with preflight.watch(model, opt, out=tmp_path / "watch", on_fault="warn") as w:
        def second() -> None:
            inside.wait(5.0)
            w.step(nan, None)
            done.set()

        other = threading.Thread(target=second, name="other")
        other.start()
        with pytest.warns(RuntimeWarning):
            w.step(nan, None)
        done.set()
        other.join(10.0)
    assert len(entered) == 1 and w.core.faults == 2
