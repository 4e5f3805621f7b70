"""``snapshot="none"``: a model too large to copy is never deep-copied; re-runs load the
last checkpoint into it (or use its current weights, said in the record), and the replay
keeps the batch and the checkpoint's path."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import preflight
from preflight.cli import main
from preflight.errors import ConfigError
from tests.watch import tiny
from tests.watch.test_faults import TINY, _loader


def _no_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep-copying the model (what the memory snapshot does) fails the test."""
    real = copy.deepcopy

    def deepcopy(obj, *args, **kwargs):
        assert not isinstance(obj, torch.nn.Module), "the model was deep-copied"
        return real(obj, *args, **kwargs)
    monkeypatch.setattr(copy, "deepcopy", deepcopy)


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options):
    """The watched loop with a NaN row at step 4; the model is never copied meanwhile (the
    replay afterwards is a run of its own, on CPU)."""
    _no_copies(monkeypatch)
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault) as caught, preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path / "watch", snapshot="none",
            model_spec=f"{TINY}:build", **options) as w:
        tiny.train(w, model, opt, _loader(tiny.make_rows(nan_row=37)))
    monkeypatch.undo()
    return caught.value.fault


def _replay(path: Path):
    return CliRunner().invoke(main, ["smoke", "--replay", str(path), "--model",
                                     f"{TINY}:build", "--json"])


def test_from_a_checkpoint_the_replay_keeps_its_path(tmp_path: Path, monkeypatch) -> None:
    ckpt = tmp_path / "ckpt.pt"
    model, _ = tiny.fresh()
    torch.save(model.state_dict(), ckpt)
    fault = _run(tmp_path, monkeypatch, checkpoint=lambda: ckpt)
    assert fault.verdict == "data_fault" and fault.minimal_ids == ["r37"]
    assert fault.first_bad_module == "body.0"
    assert fault.checkpoint == {"path": str(ckpt)}
    saved = torch.load(tmp_path / "watch" / "replay.pt", weights_only=True)
    assert saved["initial"] == {} and saved["checkpoint"] == str(ckpt.resolve())

    done = _replay(tmp_path / "watch" / "replay.pt")
    assert done.exit_code == 1, done.output
    assert json.loads(done.stdout[done.stdout.index("{"):])["verdict"] == "data_fault"
    ckpt.unlink()
    gone = _replay(tmp_path / "watch" / "replay.pt")
    assert gone.exit_code != 0 and "no longer exists" in gone.output
    assert str(ckpt.resolve()) in gone.output


def test_without_a_checkpoint_it_says_the_current_weights_were_used(
        tmp_path: Path, monkeypatch) -> None:
    fault = _run(tmp_path, monkeypatch)
    assert fault.verdict == "data_fault" and fault.minimal_ids == ["r37"]
    codes = {f.code for f in fault.findings}
    assert "attribution_current_weights" in codes
    saved = torch.load(tmp_path / "watch" / "replay.pt", weights_only=True)
    assert saved["initial"] == {} and saved["checkpoint"] is None
    done = _replay(tmp_path / "watch" / "replay.pt")  # at the weights build() gives
    assert done.exit_code == 1, done.output


def test_a_missing_checkpoint_falls_back_to_the_current_weights(tmp_path: Path,
                                                                monkeypatch) -> None:
    fault = _run(tmp_path, monkeypatch, checkpoint=tmp_path / "nowhere.pt")
    assert fault.verdict == "data_fault"
    assert "watch_checkpoint_missing" in {f.code for f in fault.findings}


def test_snapshot_none_does_not_rerun_unless_it_stops(tmp_path: Path, monkeypatch) -> None:
    model, opt = tiny.fresh()
    with pytest.warns(RuntimeWarning, match="loss is nan"), preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path, snapshot="none",
            on_fault="skip") as w:
        tiny.train(w, model, opt, _loader(tiny.make_rows(nan_row=37)))
    assert "not re-run: with snapshot='none'" in w.fault.reason
    assert w.fault.minimal_rows == [37]  # from the batch's own non-finite input


@pytest.mark.parametrize(("key", "value", "match"), [
    ("snapshot", "disk", "snapshot must be 'memory' or 'none'"),
    ("checkpoint", 3, "checkpoint must be a path or a callable"),
])
def test_bad_snapshot_settings_are_config_errors(tmp_path: Path, key, value, match) -> None:
    model, opt = tiny.fresh()
    with pytest.raises(ConfigError, match=match):
        preflight.watch(model, opt, out=tmp_path, **{key: value})
