"""A smoke stage stopped by ``smoke.time_limit`` reports what it completed: the losses of
the steps the stopped run finished (marked ``cut_short``) and the earlier runs in full, in
report.json, the finding and the HTML curves.

The runs that hang run in a child process with a timeout (``test_time_limit``'s helpers)."""

from __future__ import annotations

from pathlib import Path

from tests.smoke.conftest import (
    flat,
    invoke,
    read_report,
    regression_records,
    regression_rules,
    write_jsonl,
    write_rules,
)
from tests.smoke.test_time_limit import LIMIT, _cli, _model

STEPS = 10  # one batch per step (40 rows, no batch_size): one forward per step


def _check(tmp_path: Path, after: int) -> dict:
    """``preflight check`` with a forward that never returns from call ``after + 1`` on;
    the report's smoke section (report.json and report.html written)."""
    model = _model(tmp_path, forward="spin()", after=after)
    write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    write_rules(
        tmp_path / "rules.yaml",
        regression_rules(model=f"{model}:build", time_limit=LIMIT, steps=STEPS),
    )
    proc = _cli(
        tmp_path, "check", "data.jsonl", "--rules", "rules.yaml", "--out", "out", "--no-progress"
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    smoke = read_report(tmp_path / "out")["smoke"]
    assert smoke["verdict"] == "code_fault"
    return smoke


def test_a_real_run_stopped_at_step_3_keeps_its_losses_and_the_controls(
    tmp_path: Path,
) -> None:
    smoke = _check(tmp_path, after=STEPS + 3)  # the control's 10 forwards, then real 0..2
    assert "in forward at step 3 of the real run" in smoke["reason"]
    control, real = smoke["control"], smoke["real"]
    assert not control["cut_short"] and control["failure"] is None
    assert control["steps"] == STEPS and len(control["loss"]) == STEPS
    assert all(isinstance(x, float) for x in control["loss"])
    assert real["cut_short"] and real["steps"] == 3 and real["first_bad_step"] == 3
    assert len(real["loss"]) == 3 and all(isinstance(x, float) for x in real["loss"])
    assert len(real["grad_norm"]) == 3
    assert "smoke.time_limit" in real["failure"] and real["learned"] is None
    assert smoke["repeat"] is None  # never started
    found = next(f for f in smoke["findings"] if f["code"] == "time_limit")
    detail = flat(found["detail"])
    assert f"the control run ran {STEPS} steps, loss" in detail
    assert "the real run was stopped after 3 steps, loss" in detail
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "real (cut short)" in html and "real: stopped at step 3" in html


def test_a_control_run_stopped_at_step_3_keeps_steps_0_to_2(tmp_path: Path) -> None:
    smoke = _check(tmp_path, after=3)
    control = smoke["control"]
    assert control["cut_short"] and control["steps"] == 3 and len(control["loss"]) == 3
    assert smoke["real"] is None
    found = next(f for f in smoke["findings"] if f["code"] == "time_limit")
    assert "the control run was stopped after 3 steps" in flat(found["detail"])


def test_a_run_whose_forward_raises_at_step_3_keeps_steps_0_to_2(tmp_path: Path) -> None:
    # An exception in the user's code threw the run's completed losses away and said the
    # failure was at step 0.
    model = _model(tmp_path, forward="raise RuntimeError('boom')", after=STEPS + 3)
    write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    write_rules(tmp_path / "rules.yaml",
                regression_rules(model=f"{model}:build", time_limit=600, steps=STEPS))
    result = invoke("check", tmp_path / "data.jsonl", "--rules", tmp_path / "rules.yaml",
                    "--out", tmp_path / "out", "--no-progress")
    assert result.exit_code == 1, result.output
    real = read_report(tmp_path / "out")["smoke"]["real"]
    assert real["failure"] == "RuntimeError: boom"
    assert real["first_bad_step"] == 3 and real["steps"] == 3
    assert len(real["loss"]) == 3 and all(isinstance(x, float) for x in real["loss"])
    assert not real["cut_short"]
