"""The Hugging Face Trainer adapter against the real transformers: a planted NaN row stops
the run at its step, named and replayable; a clean run is left alone."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import torch  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import SequentialSampler  # noqa: E402

import preflight  # noqa: E402
from preflight import ConfigError  # noqa: E402
from preflight.cli import main  # noqa: E402
from preflight.report.model import SmokeResult  # noqa: E402
from preflight.watch.hf import PreflightCallback  # noqa: E402
from tests.watch import tiny  # noqa: E402

TINY = str(Path(tiny.__file__).resolve())


class Net(tiny.Net):
    """tiny.Net as a Trainer model: the loss comes back from forward (same parameter
    names, so tiny.py:build replays it)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> dict[str, Any]:
        out = super().forward(x)
        return {"loss": F.mse_loss(out, y), "logits": out}


class InOrder(transformers.Trainer):
    """Batches in dataset order, so the planted row's step is known."""

    def _get_train_sampler(self, *args: Any, **kwargs: Any) -> SequentialSampler:
        return SequentialSampler(self.train_dataset)


def collator(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    assert all(set(r) == {"x", "y"} for r in rows)  # the columns the model takes
    return tiny.collate(rows)


def trainer(tmp_path: Path, rows: list[dict[str, Any]], callback: PreflightCallback, *,
            ids: bool = True, **args: Any) -> transformers.Trainer:
    torch.manual_seed(0)
    data = preflight.watch.with_ids(rows) if ids else rows
    settings = dict(output_dir=str(tmp_path / "run"), per_device_train_batch_size=8,
                    num_train_epochs=1, learning_rate=1e-2, report_to=[], use_cpu=True,
                    save_strategy="no", logging_steps=1, remove_unused_columns=False,
                    disable_tqdm=True)
    settings.update(args)
    return InOrder(model=Net(), args=transformers.TrainingArguments(**settings),
                   train_dataset=data, data_collator=callback.collate(collator),
                   callbacks=[callback])


def test_nan_row_at_step_k_stops_there_names_module_param_and_row(tmp_path: Path) -> None:
    out = tmp_path / "watch"
    cb = PreflightCallback(out=out, model_spec=f"{TINY}:build")
    t = trainer(tmp_path, tiny.make_rows(nan_row=37), cb)
    with pytest.raises(preflight.watch.TrainingFault) as caught:
        t.train()
    fault = caught.value.fault
    assert t.state.global_step == 4  # four steps trained; the fifth (rows 32..39) stopped
    assert fault.step == 4 and fault.verdict == "data_fault"
    assert fault.first_bad_module == "body.0"
    assert fault.first_bad_param is not None and fault.first_bad_param.startswith(("body", "head"))
    assert fault.minimal_rows == [37] and fault.minimal_ids == ["r37"]
    assert fault.batch_ids == [f"r{i}" for i in range(32, 40)]
    assert all(torch.isfinite(p).all() for p in t.model.parameters())
    saved = SmokeResult.model_validate_json((out / "fault.json").read_text())
    assert saved.step == 4 and saved.minimal_ids == ["r37"] and saved.rank is None
    assert t.compute_loss.__func__ is transformers.Trainer.compute_loss  # restored

    result = CliRunner().invoke(main, ["smoke", "--replay", str(out / "replay.pt"),
                                       "--model", f"{TINY}:build", "--json"])
    assert result.exit_code == 1, result.output
    replayed = json.loads(result.stdout[result.stdout.index("{"):])
    assert replayed["verdict"] == "data_fault"
    assert replayed["first_bad_module"] == "body.0" and replayed["minimal_ids"] == ["r37"]


def test_a_clean_run_finishes_undisturbed(tmp_path: Path) -> None:
    out = tmp_path / "watch"
    cb = PreflightCallback(out=out, log_every=2)
    t = trainer(tmp_path, tiny.make_rows(), cb)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        t.train()
    assert t.state.global_step == 8
    assert not (out / "fault.json").exists() and cb.fault is None
    lines = [json.loads(x) for x in (out / "stats.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 2, 4, 6]
    assert all(math.isfinite(x["loss"]) and x["grad_norm"] > 0 for x in lines)
    logged = [x["loss"] for x in t.state.log_history if "loss" in x]
    assert len(logged) == 8 and all(math.isfinite(x) for x in logged)


def test_skip_leaves_the_weights_finite_and_training_goes_on(tmp_path: Path) -> None:
    rows = tiny.make_rows(nan_row=37)
    rows[50]["x"][0] = math.nan
    cb = PreflightCallback(out=tmp_path / "watch", on_fault="skip")
    t = trainer(tmp_path, rows, cb)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t.train()
    assert t.state.global_step == 8
    assert all(torch.isfinite(p).all() for p in t.model.parameters())
    assert sum("the step is skipped" in str(x.message) for x in seen) == 2
    fault = SmokeResult.model_validate_json((tmp_path / "watch" / "fault.json").read_text())
    assert fault.step == 4 and fault.minimal_ids == ["r37"]  # the first fault is kept


def test_warn_keeps_the_step(tmp_path: Path) -> None:
    cb = PreflightCallback(out=tmp_path / "watch", on_fault="warn")
    t = trainer(tmp_path, tiny.make_rows(nan_row=37), cb)
    with pytest.warns(RuntimeWarning, match="kept"):
        t.train()
    assert t.state.global_step == 8 and cb.fault is not None and cb.fault.step == 4
    assert not all(torch.isfinite(p).all() for p in t.model.parameters())  # it was kept


def test_the_trainer_s_column_removal_would_drop_the_ids(tmp_path: Path) -> None:
    cb = PreflightCallback(out=tmp_path / "watch")
    t = trainer(tmp_path, tiny.make_rows(16), cb, remove_unused_columns=True)
    with pytest.raises(ConfigError, match="remove_unused_columns=False"):
        t.train()


def test_unknown_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="grad_norm_alarm"):
        PreflightCallback(out=tmp_path, grad_norm_alarms=3)
