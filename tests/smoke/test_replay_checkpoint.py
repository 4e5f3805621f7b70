"""The replay file a data fault leaves behind (it reruns the minimal batch, and loads with
weights_only=True), and checkpoints the smoke test starts from (safetensors or a torch
state dict, scanned for NaN/Inf; a pickle is refused)."""

from __future__ import annotations

import math
import runpy
from pathlib import Path
from typing import Any

import pytest
import torch

import preflight.smoke
from preflight import run_preflight
from preflight.errors import ConfigError
from preflight.smoke.models import build_builtin
from tests.smoke.conftest import (
    SQRT_OF_FEATURE,
    finding,
    flat,
    gate,
    invoke,
    read_report,
    regression_records,
    regression_rules,
    smoke_of,
    write_jsonl,
    write_model,
    write_rules,
)

ANOMALY_WARNING = "ignore:Error detected in"  # torch's detect_anomaly UserWarning

# A fixed architecture, so a checkpoint saved from it fits what build() returns.
FIXED = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 8)
        self.act = nn.Tanh()
        self.head = nn.Linear(8, 1)

    def forward(self, inputs):
        return self.head(self.act(self.lin(inputs["features"]))).squeeze(-1)


def build():
    return Net(), F.mse_loss, None
"""




class Opaque:
    """Not a tensor: torch.save pickles it by reference, weights_only refuses it."""

    def __init__(self) -> None:
        self.weights = [1.0, 2.0]


def _faulty_gate(tmp_path: Path, row: int = 17) -> tuple[Path, Any]:
    records = regression_records(60)
    records[row]["target"] = 1e30
    out = tmp_path / "out"
    report = gate(tmp_path, records, regression_rules(), out="out")
    return out / "smoke-replay.pt", report


# --- replay ------------------------------------------------------------------------------------


def test_data_fault_writes_a_replay_file_that_loads_weights_only(tmp_path: Path) -> None:
    path, report = _faulty_gate(tmp_path)
    smoke = smoke_of(report)
    assert smoke.verdict == "data_fault"
    assert path.is_file() and smoke.replay == str(path)
    data = torch.load(path, map_location="cpu", weights_only=True)
    assert data["format"] == "preflight-smoke-replay" and data["version"] == 1
    assert data["task"] == "regression" and data["model"] == "built-in:regression"
    assert data["rows"] == [17] and data["ids"] == ["r17"]
    assert smoke.real is not None and data["failure"] == smoke.real.failure
    assert data["targets"].tolist() == [pytest.approx(1e30, rel=1e-6)]  # the minimal batch
    assert tuple(data["inputs"]["features"].shape) == (1, 4)
    assert data["config"]["seed"] == 0 and data["config"]["steps"] == 30
    assert all(isinstance(v, torch.Tensor) for v in data["initial"].values())


def test_replay_reproduces_the_data_fault(tmp_path: Path) -> None:
    path, report = _faulty_gate(tmp_path)
    result = preflight.smoke.replay(path)
    assert result.verdict == "data_fault" and result.failed
    assert result.minimal_rows == [17] and result.minimal_ids == ["r17"]
    assert result.minimal_rows == smoke_of(report).minimal_rows
    assert result.reason.startswith("reproduced: loss is inf at step 0")
    assert result.replay == str(path) and result.samples == 1
    assert result.model == "built-in:regression" and result.task == "regression"


def test_replay_from_the_command_line_exits_1(tmp_path: Path) -> None:
    path, _ = _faulty_gate(tmp_path)
    result = invoke("smoke", "--replay", path)
    assert result.exit_code == 1, result.output
    text = flat(result.output)
    assert "smoke test DATA FAULT · 1 rows · built-in:regression on cpu (fp32), seed 0" in text
    assert "reproduced: loss is inf at step 0" in text
    assert "minimal rows: 17 (ids r17)" in text
    assert "Traceback" not in result.output


def test_replay_json_output(tmp_path: Path) -> None:
    path, _ = _faulty_gate(tmp_path)
    result = invoke("smoke", "--replay", path, "--json", "--quiet")
    assert result.exit_code == 1, result.output
    assert '"verdict": "data_fault"' in result.output
    assert '"minimal_rows": [\n    17\n  ]' in result.output


def test_no_replay_file_without_an_out_dir(tmp_path: Path) -> None:
    records = regression_records(60)
    records[17]["target"] = 1e30
    path = write_jsonl(tmp_path / "data.jsonl", records)
    report = run_preflight(path, rules=regression_rules(), smoke=True)
    smoke = smoke_of(report)
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [17]
    assert smoke.replay is None


def test_a_passing_run_leaves_no_stale_replay(tmp_path: Path) -> None:
    path, _ = _faulty_gate(tmp_path)
    assert path.is_file()
    smoke = smoke_of(gate(tmp_path, regression_records(60), regression_rules(), out="out"))
    assert smoke.verdict == "pass" and smoke.replay is None
    assert not path.exists()


@pytest.mark.filterwarnings(ANOMALY_WARNING)
def test_replay_of_a_user_model_reproduces_and_a_fixed_model_does_not(tmp_path: Path) -> None:
    records = regression_records(60)
    records[29]["features"][0] = 0.0
    model = write_model(tmp_path / "model.py", SQRT_OF_FEATURE.format(eps=""))
    smoke = smoke_of(gate(tmp_path, records, regression_rules(model=f"{model}:build")))
    assert smoke.verdict == "data_fault" and smoke.minimal_rows == [29]
    assert smoke.replay is not None
    data = torch.load(smoke.replay, map_location="cpu", weights_only=True)
    assert data["model"] == f"{model.resolve()}:build"

    again = preflight.smoke.replay(smoke.replay, model=f"{model}:build")
    assert again.verdict == "data_fault" and again.minimal_rows == [29]
    assert again.first_bad_param == "gain"
    assert again.anomaly is not None and "Backward" in again.anomaly

    write_model(model, SQRT_OF_FEATURE.format(eps=" + 1e-6"))  # the fix: no sqrt(0)
    fixed = preflight.smoke.replay(smoke.replay, model=f"{model}:build")
    assert fixed.verdict == "pass" and not fixed.failed
    assert fixed.reason == (f"did not reproduce (recorded: {data['failure']}) "
                            "(rerun in train mode)")  # a smoke test trains every module
    result = invoke("smoke", "--replay", smoke.replay, "--model", f"{model}:build")
    assert result.exit_code == 0, result.output


# Importing this module leaves a mark: a replay must not import it unasked.
MARKING = 'import pathlib\npathlib.Path({mark!r}).write_text("imported")\n'


def _user_replay(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A replay file of a user model (the sqrt(0) fault at row 29), the model file, and
    the path its import marks."""
    records = regression_records(60)
    records[29]["features"][0] = 0.0
    model = write_model(tmp_path / "model.py", SQRT_OF_FEATURE.format(eps=""))
    smoke = smoke_of(gate(tmp_path, records, regression_rules(model=f"{model}:build")))
    assert smoke.replay is not None
    mark = tmp_path / "imported.txt"
    model.write_text(model.read_text() + MARKING.format(mark=str(mark)))
    return Path(smoke.replay), model, mark


@pytest.mark.filterwarnings(ANOMALY_WARNING)
def test_replay_of_a_user_model_runs_no_code_without_model(tmp_path: Path) -> None:
    replay, model, mark = _user_replay(tmp_path)
    result = invoke("smoke", "--replay", replay)
    assert result.exit_code == 2, result.output
    text = flat(result.output)
    assert f"written with your model '{model.resolve()}:build'" in text
    assert f"pass --model {model.resolve()}:build to confirm" in text
    assert "Traceback" not in result.output
    assert not mark.exists()
    with pytest.raises(ConfigError, match="pass --model"):
        preflight.smoke.replay(replay)
    assert not mark.exists()


@pytest.mark.filterwarnings(ANOMALY_WARNING)
def test_replay_with_model_runs_the_model_given(tmp_path: Path) -> None:
    replay, model, mark = _user_replay(tmp_path)
    result = invoke("smoke", "--replay", replay, "--model", f"{model}:build", "--json",
                    "--quiet")
    assert result.exit_code == 1, result.output  # the fault reproduces
    assert mark.exists()
    assert "replay_model_differs" not in result.output

    fixed = write_model(tmp_path / "fixed.py", SQRT_OF_FEATURE.format(eps=" + 1e-6"))
    result = invoke("smoke", "--replay", replay, "--model", f"{fixed}:build")
    assert result.exit_code == 0, result.output  # the fixed model passes
    text = flat(result.output)
    assert "replay_model_differs" in text
    assert (f"written with '{model.resolve()}:build'; this rerun uses "
            f"'{fixed.resolve()}:build'") in text


def test_replay_of_the_builtin_model_with_a_model_that_does_not_fit(tmp_path: Path) -> None:
    path, _ = _faulty_gate(tmp_path)
    assert invoke("smoke", "--replay", path, "--model", "built-in:regression").exit_code == 1
    narrow = FIXED.replace("nn.Linear(4, 8)", "nn.Linear(4, 3)")
    other = write_model(tmp_path / "other.py", narrow.replace("nn.Linear(8, 1)", "nn.Linear(3, 1)"))
    result = invoke("smoke", "--replay", path, "--model", f"{other}:build")
    assert result.exit_code == 2, result.output
    assert "does not fit the weights saved in" in flat(result.output)
    assert "built-in:regression" in flat(result.output)


def _torch_file(path: Path, obj: Any) -> Path:
    torch.save(obj, path)
    return path


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p / "missing.pt", "replay file not found"),
    (lambda p: _folder(p / "run"), "replay file {path} is a folder: give the smoke-replay.pt"),
    (lambda p: _write_text(p / "notes.txt", "not a replay"), "is not a preflight replay file"),
    (lambda p: _torch_file(p / "other.pt", {"a": torch.zeros(2)}),
     "is not a preflight replay file (written by `preflight smoke`)"),
    (lambda p: _torch_file(p / "future.pt", {"format": "preflight-smoke-replay", "version": 99}),
     "replay format version 99 is not supported"),
    (lambda p: _torch_file(p / "pickle.pt", Opaque()), "is not a preflight replay file"),
])
def test_a_file_that_is_not_a_replay_exits_2(tmp_path: Path, make: Any, message: str) -> None:
    path = make(tmp_path)
    result = invoke("smoke", "--replay", path)
    assert result.exit_code == 2, result.output
    assert message.format(path=path) in flat(result.output)
    assert "Traceback" not in result.output
    # torch's weights-only message advised weights_only=False (running the file's code)
    # and filing a PyTorch issue; the error keeps only the line that says what failed
    assert "weights_only` set to `False`" not in result.output
    assert "file an issue" not in result.output


def _folder(path: Path) -> Path:
    path.mkdir()
    (path / "model.safetensors").write_bytes(b"")
    return path


def _write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- checkpoints --------------------------------------------------------------------------------


def _fixed_state(model: Path) -> dict[str, torch.Tensor]:
    """The state dict of the architecture ``model``'s build() returns."""
    net, _, _ = runpy.run_path(str(model))["build"]()
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _save(state: dict[str, torch.Tensor], path: Path) -> Path:
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(state, str(path))
    else:
        torch.save(state, path)
    return path


def _checkpoint_gate(tmp_path: Path, checkpoint: Path, *, model: Path | None = None,
                     records: list[dict[str, Any]] | None = None) -> Any:
    smoke: dict[str, Any] = {"checkpoint": str(checkpoint)}
    if model is not None:
        smoke["model"] = f"{model}:build"
    rules = regression_rules(**smoke)
    return gate(tmp_path, records or regression_records(60), rules)


FORMATS = [".safetensors", ".pt"]


@pytest.mark.parametrize("suffix", FORMATS)
def test_checkpoint_with_a_nan_tensor_is_a_code_fault(tmp_path: Path, suffix: str) -> None:
    if suffix == ".safetensors":
        pytest.importorskip("safetensors")
    model = write_model(tmp_path / "model.py", FIXED)
    state = _fixed_state(model)
    state["head.weight"][0, 3] = math.nan
    ckpt = _save(state, tmp_path / f"weights{suffix}")
    report = _checkpoint_gate(tmp_path, ckpt, model=model)
    smoke = smoke_of(report)
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.checkpoint is not None
    assert smoke.checkpoint["nonfinite"] == ["head.weight"]
    assert smoke.checkpoint["nonfinite_values"] == {"head.weight": 1}
    assert smoke.checkpoint["tensors"] == 4 and smoke.checkpoint["path"] == str(ckpt)
    assert smoke.reason == f"checkpoint {ckpt} has non-finite tensors: head.weight"
    assert finding(smoke, "checkpoint_nonfinite").severity == "error"
    assert smoke.control is None and smoke.real is None  # nothing trained from it
    assert not report.passed
    assert report.reasons[0].startswith("smoke test: code_fault: checkpoint ")


@pytest.mark.parametrize("suffix", FORMATS)
def test_clean_checkpoint_trains_and_passes(tmp_path: Path, suffix: str) -> None:
    if suffix == ".safetensors":
        pytest.importorskip("safetensors")
    model = write_model(tmp_path / "model.py", FIXED)
    state = _fixed_state(model)
    state["head.weight"].zero_()
    state["head.bias"].zero_()
    ckpt = _save(state, tmp_path / f"weights{suffix}")
    records = regression_records(60)
    smoke = smoke_of(_checkpoint_gate(tmp_path, ckpt, model=model, records=records))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.checkpoint is not None and smoke.checkpoint["nonfinite"] == []
    assert smoke.real is not None and smoke.real.learned is True
    # A zero output layer predicts 0: the first loss is the mean squared target, so the
    # checkpoint, not a fresh initialisation, is what trained.
    expected = sum(r["target"] ** 2 for r in records) / len(records)
    assert smoke.real.loss[0] == pytest.approx(expected, rel=1e-5)


def test_checkpoint_of_the_builtin_model(tmp_path: Path) -> None:
    builtin, _ = build_builtin("regression", {"features": 4, "classes": None})
    state = {k: v.detach().clone() for k, v in builtin.state_dict().items()}
    ckpt = _save(state, tmp_path / "builtin.pt")
    smoke = smoke_of(_checkpoint_gate(tmp_path, ckpt))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.model == "built-in:regression"
    assert smoke.checkpoint is not None and smoke.checkpoint["tensors"] == len(state)

    state["mlp.0.bias"][2] = math.inf
    bad = _save(state, tmp_path / "builtin-inf.pt")
    smoke = smoke_of(_checkpoint_gate(tmp_path, bad))
    assert smoke.verdict == "code_fault"
    assert smoke.checkpoint is not None and smoke.checkpoint["nonfinite"] == ["mlp.0.bias"]


def test_nested_state_dict_and_non_tensor_entries(tmp_path: Path) -> None:
    model = write_model(tmp_path / "model.py", FIXED)
    ckpt = tmp_path / "trainer.pt"
    torch.save({"state_dict": _fixed_state(model), "epoch": 3}, ckpt)
    smoke = smoke_of(_checkpoint_gate(tmp_path, ckpt, model=model))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.checkpoint is not None and smoke.checkpoint["tensors"] == 4


def test_checkpoint_from_the_command_line(tmp_path: Path) -> None:
    model = write_model(tmp_path / "model.py", FIXED)
    state = _fixed_state(model)
    state["lin.bias"][:] = math.nan
    ckpt = _save(state, tmp_path / "weights.pt")
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(60))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    out = tmp_path / "out"
    result = invoke("check", data, "--rules", rules, "--out", out,
                    "--model", f"{model}:build", "--checkpoint", ckpt)
    assert result.exit_code == 1, result.output
    assert "smoke test CODE FAULT" in result.output
    assert "has non-finite tensors: lin.bias" in flat(result.output)
    smoke = read_report(out)["smoke"]
    assert smoke["checkpoint"]["nonfinite"] == ["lin.bias"]
    assert smoke["checkpoint"]["nonfinite_values"] == {"lin.bias": 8}


def test_checkpoint_in_the_rules_file_is_found_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "config"
    model = write_model(folder / "model.py", FIXED)
    _save(_fixed_state(model), folder / "weights.pt")
    rules = write_rules(folder / "rules.yaml",
                        regression_rules(model="model.py:build", checkpoint="weights.pt"))
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(60))
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    smoke = read_report(tmp_path / "out")["smoke"]
    assert smoke["verdict"] == "pass" and smoke["checkpoint"]["tensors"] == 4


@pytest.mark.parametrize(("make", "message"), [
    # torch's own message (bold escapes, how to load it without weights_only) was shown
    (lambda p: _torch_file(p / "pickled.pt", Opaque()),
     "cannot load {path} with weights_only=True (only tensors and plain containers load; no "
     "pickled code): it pickles code (tests.smoke.test_replay_checkpoint.Opaque)"),
    (lambda p: _write_text(p / "empty.pt", ""), "{path} with weights_only=True (only tensors "
     "and plain containers load; no pickled code): the file is empty or cut short"),
    (lambda p: _write_text(p / "text.pt", "hello"), "no pickled code): not a file torch.save "
     "wrote"),
    (lambda p: _torch_file(p / "no-tensors.pt", {"step": 3}), "{path}: holds no tensors "
     "(keys: step)"),
    (lambda p: p / "missing.pt", "checkpoint not found: tried {path}"),
    (lambda p: _folder(p / "ckpt"), "checkpoint {path} is a folder: give the weights file"),
    (lambda p: _torch_file(p / "list.pt", [torch.zeros(2)]),
     "{path}: expected a state dict (name -> tensor), got list"),
    (lambda p: _write_text(p / "broken.safetensors", "not safetensors"),
     "cannot read safetensors checkpoint {path}"),
    # only "Error(s) in loading state_dict for Net:" was shown, not which
    (lambda p: _torch_file(p / "other.pt", {"lin.weight": torch.zeros(3, 3)}),
     "checkpoint {path} does not fit the model: Missing key(s) in state_dict: \"lin.bias\""),
])
def test_unusable_checkpoint_exits_2(tmp_path: Path, make: Any, message: str) -> None:
    model = write_model(tmp_path / "model.py", FIXED)
    ckpt = make(tmp_path)
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(60))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out",
                    "--model", f"{model}:build", "--checkpoint", ckpt)
    assert result.exit_code == 2, result.output
    assert message.format(path=ckpt) in flat(result.output)
    assert "Traceback" not in result.output and "internal error" not in result.output


def test_a_training_checkpoint_with_the_weights_one_level_down_loads(tmp_path: Path) -> None:
    # {"model": state_dict, "step": 3} (a training script's save) was refused as not fitting
    model = write_model(tmp_path / "model.py", FIXED)
    ckpt = _torch_file(tmp_path / "ckpt.pt", {"model": _fixed_state(model), "step": 3})
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(60))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out",
                    "--model", f"{model}:build", "--checkpoint", ckpt)
    assert result.exit_code == 0, result.output
    assert read_report(tmp_path / "out")["smoke"]["checkpoint"]["tensors"] == 4


def test_an_interrupted_replay_save_leaves_no_temporary(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from preflight.smoke.replay_file import save

    def interrupted(obj: object, f: object) -> None:
        Path(str(f)).write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    target = tmp_path / "smoke-replay.pt"
    with pytest.raises(KeyboardInterrupt):
        save(target, task="lm", model="built-in:lm", spec={}, config={},
                         batch=({}, torch.zeros(1)), initial={}, rows=[], ids=[], files=[],
                         failure=None, exempt=[])
    assert list(tmp_path.iterdir()) == []
