"""stats.jsonl, fault.json rendered as the smoke section's HTML, and the lazy import."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console
from torch.utils.data import DataLoader

import preflight
from preflight.cli import main
from preflight.report.console import render_smoke
from preflight.report.model import SmokeResult
from tests.watch import tiny


def test_stats_are_written_every_log_every_steps(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    with preflight.watch(model, opt, out=tmp_path, log_every=3) as w:
        tiny.train(w, model, opt, tiny.batches(tiny.make_rows(80)))
    lines = [json.loads(x) for x in (tmp_path / "stats.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 3, 6, 9]
    first = lines[0]
    assert first["lr"] == 1e-2 and first["scale"] is None and first["loss"] > 0
    assert set(first["grad_max"]) == {"body.0", "head"} and first["grad_norm"] > 0


def test_fault_json_renders_as_the_smoke_html_section_with_curves(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    ds = preflight.watch.with_ids(tiny.make_rows(nan_row=37))
    loader = DataLoader(ds, batch_size=8, collate_fn=ds.collate(tiny.collate))
    with pytest.raises(preflight.watch.TrainingFault), preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path) as w:
        tiny.train(w, model, opt, loader)
    html = tmp_path / "fault.html"
    result = CliRunner().invoke(main, ["report", "render", str(tmp_path / "fault.json"),
                                       "--html", str(html)])
    assert result.exit_code == 0, result.output
    text = html.read_text()
    assert 'data-verdict="data_fault"' in text and "body.0" in text
    assert "<svg" in text and "training: non-finite at step 4" in text
    # the in-flight section only: no gate banner, rules table or record counts
    assert "<title>preflight watch: fault at step 4</title>" in text
    assert "<h1>preflight watch: fault at step 4</h1>" in text
    assert "the gate failed" not in text and 'id="rules"' not in text
    assert "records" not in text and "Distributions" not in text
    assert "rows 32, 33, 34, 35, 36, 37, 38, 39 (ids r32" in text
    assert "gradient norm" in text and "loss" in text


def test_fault_curves_are_numbered_by_the_runs_own_steps(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    ds = preflight.watch.with_ids(tiny.make_rows(nan_row=57))
    loader = DataLoader(ds, batch_size=8, collate_fn=ds.collate(tiny.collate))
    with pytest.raises(preflight.watch.TrainingFault), preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path, history=3) as w:
        tiny.train(w, model, opt, loader)
    html = tmp_path / "fault.html"
    result = CliRunner().invoke(main, ["report", "render", str(tmp_path / "fault.json"),
                                       "--html", str(html)])
    assert result.exit_code == 0, result.output
    assert "training: non-finite at step 7" in html.read_text()  # not the 3rd of 3 kept


def test_the_replay_command_shown_carries_the_recorded_model_spec(tmp_path: Path) -> None:
    model, opt = tiny.fresh()
    spec = f"{Path(tiny.__file__).resolve()}:build"
    ds = preflight.watch.with_ids(tiny.make_rows(nan_row=37))
    loader = DataLoader(ds, batch_size=8, collate_fn=ds.collate(tiny.collate))
    with pytest.raises(preflight.watch.TrainingFault), preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=tmp_path, model_spec=spec) as w:
        tiny.train(w, model, opt, loader)
    html = tmp_path / "fault.html"
    result = CliRunner().invoke(main, ["report", "render", str(tmp_path / "fault.json"),
                                       "--html", str(html)])
    assert result.exit_code == 0, result.output
    command = f"preflight smoke --replay {tmp_path / 'replay.pt'} --model {spec}"
    assert command in html.read_text()
    console = Console(file=io.StringIO(), width=400)
    render_smoke(SmokeResult.model_validate_json((tmp_path / "fault.json").read_text()),
                 console)
    assert f"replay: {command}" in console.file.getvalue()


def test_import_preflight_does_not_import_torch_and_watch_loads_on_use() -> None:
    code = ("import sys, preflight; assert 'torch' not in sys.modules; "
            "w = preflight.watch; assert callable(w) and 'torch' in sys.modules; "
            "assert w.TrainingFault.exit_code == 1 and callable(w.with_ids)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


@pytest.mark.parametrize("content", ['{"verdict": "data_fault"}', '{"verdict": "maybe", "r'])
def test_a_corrupt_fault_json_is_a_clear_render_error(tmp_path: Path, content: str) -> None:
    fault = tmp_path / "fault.json"
    fault.write_text(content)
    result = CliRunner().invoke(main, ["report", "render", str(fault), "--html",
                                       str(tmp_path / "f.html")])
    assert result.exit_code == 2, result.output
    assert "not a preflight report.json or watch fault.json" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "f.html").exists()
