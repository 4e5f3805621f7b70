"""The Lightning adapter against the real lightning: a planted NaN row stops the run at its
step, named and replayable; a clean run is left alone."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest

L = pytest.importorskip("lightning")

import torch  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import preflight  # noqa: E402
from preflight import ConfigError  # noqa: E402
from preflight.cli import main  # noqa: E402
from preflight.report.model import SmokeResult  # noqa: E402
from preflight.watch.lightning import PreflightCallback  # noqa: E402
from tests.watch import tiny  # noqa: E402

TINY = str(Path(tiny.__file__).resolve())


class Lit(L.LightningModule):
    """tiny.Net as a LightningModule (same parameter names: tiny.py:build replays it)."""

    def __init__(self) -> None:
        super().__init__()
        net = tiny.Net()
        self.body, self.head = net.body, net.head

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> dict[str, Any]:
        loss = tiny.step_fn(lambda x: self.head(self.body(x)).squeeze(-1), batch)
        self.log("loss", loss)
        return {"loss": loss}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def fit(rows: list[dict[str, Any]], callback: PreflightCallback) -> tuple[Any, Lit]:
    torch.manual_seed(0)
    data = preflight.watch.with_ids(rows)
    loader = DataLoader(data, batch_size=8, collate_fn=data.collate(tiny.collate))
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[callback])
    module = Lit()
    trainer.fit(module, loader)
    return trainer, module


def test_nan_row_at_step_k_stops_there_names_module_param_and_row(tmp_path: Path) -> None:
    out = tmp_path / "watch"
    cb = PreflightCallback(out=out, model_spec=f"{TINY}:build")
    with pytest.raises(preflight.watch.TrainingFault) as caught:
        fit(tiny.make_rows(nan_row=37), cb)
    fault = caught.value.fault
    assert fault.step == 4 and fault.verdict == "data_fault"  # rows 32..39: global_step 4
    assert fault.first_bad_module == "body.0"
    assert fault.first_bad_param is not None and fault.first_bad_param.startswith(("body", "head"))
    assert fault.minimal_rows == [37] and fault.minimal_ids == ["r37"]
    assert fault.batch_ids == [f"r{i}" for i in range(32, 40)]
    saved = SmokeResult.model_validate_json((out / "fault.json").read_text())
    assert saved.step == 4 and saved.minimal_ids == ["r37"]

    result = CliRunner().invoke(main, ["smoke", "--replay", str(out / "replay.pt"),
                                       "--model", f"{TINY}:build", "--json"])
    assert result.exit_code == 1, result.output
    replayed = json.loads(result.stdout[result.stdout.index("{"):])
    assert replayed["verdict"] == "data_fault"
    assert replayed["first_bad_module"] == "body.0" and replayed["minimal_ids"] == ["r37"]


def test_a_clean_run_finishes_undisturbed(tmp_path: Path) -> None:
    out = tmp_path / "watch"
    cb = PreflightCallback(out=out, log_every=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        trainer, _ = fit(tiny.make_rows(), cb)
    assert trainer.global_step == 8 and trainer.state.finished
    assert not (out / "fault.json").exists() and cb.fault is None
    lines = [json.loads(x) for x in (out / "stats.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 2, 4, 6]
    assert all(math.isfinite(x["loss"]) and x["grad_norm"] > 0 for x in lines)


def test_skip_leaves_the_weights_finite_and_training_goes_on(tmp_path: Path) -> None:
    rows = tiny.make_rows(nan_row=37)
    rows[50]["x"][0] = math.nan
    cb = PreflightCallback(out=tmp_path / "watch", on_fault="skip")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer, module = fit(rows, cb)
    assert trainer.state.finished
    assert all(torch.isfinite(p).all() for p in module.parameters())
    assert sum("the step is skipped" in str(x.message) for x in seen) == 2
    fault = SmokeResult.model_validate_json((tmp_path / "watch" / "fault.json").read_text())
    assert fault.step == 4 and fault.minimal_ids == ["r37"]


def test_warn_keeps_the_step(tmp_path: Path) -> None:
    cb = PreflightCallback(out=tmp_path / "watch", on_fault="warn")
    with pytest.warns(RuntimeWarning, match="kept"):
        _, module = fit(tiny.make_rows(nan_row=37), cb)
    assert cb.fault is not None and cb.fault.step == 4
    assert not all(torch.isfinite(p).all() for p in module.parameters())  # it was kept


def test_unknown_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="on_fault"):
        PreflightCallback(out=tmp_path, on_faults="skip")


class GradFault(Lit):
    """A gradient turns NaN after backward at global step 5 (the loss stays finite)."""

    def on_after_backward(self) -> None:
        if self.trainer.global_step == 5:
            self.body[0].weight.grad[0, 0] = math.nan


def test_a_gradient_fault_is_caught_after_lightning_s_closure(tmp_path: Path) -> None:
    torch.manual_seed(0)
    data = preflight.watch.with_ids(tiny.make_rows())
    cb = PreflightCallback(out=tmp_path / "watch")
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb], gradient_clip_val=1.0)
    module = GradFault()
    with pytest.raises(preflight.watch.TrainingFault) as caught:
        trainer.fit(module, DataLoader(data, batch_size=8, collate_fn=data.collate(tiny.collate)))
    fault = caught.value.fault
    assert fault.step == 5 and "gradient norm is nan" in fault.reason
    assert all(torch.isfinite(p).all() for p in module.parameters())
