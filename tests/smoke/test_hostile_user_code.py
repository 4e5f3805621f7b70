"""User code that misbehaves in ways a model's code should not, and what preflight still
promises: a message instead of an internal error, outputs where the command line put them,
stdout kept for the report, and a command that ends."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from preflight.smoke.training_args import TrainingArgs, real_length
from tests.smoke.conftest import (
    LINEAR_NET,
    flat,
    gate,
    invoke,
    regression_records,
    regression_rules,
    run_cli,
    smoke_of,
    write_jsonl,
    write_model,
    write_rules,
)

REAL_EXIT = os._exit  # as the interpreter made it, before any smoke stage ran

LINEAR = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, inputs):
        {forward}
        return self.lin(inputs["features"]).squeeze(-1)


def build():
    {build}
    return Net(), F.mse_loss, None
"""

BROKEN_STR = """
class Odd(Exception):
    def __str__(self):
        raise ValueError("a __str__ that raises")
"""


def _model(tmp_path: Path, *, forward: str = "pass", build: str = "pass",
           header: str = "") -> Path:
    return write_model(tmp_path / "model.py",
                       header + LINEAR.format(forward=forward, build=build))


def _gate(tmp_path: Path, model: Path):
    rules = regression_rules(model=f"{model}:build")
    return smoke_of(gate(tmp_path, regression_records(40), rules))


def test_an_exception_whose_str_raises_is_a_code_fault(tmp_path: Path) -> None:
    smoke = _gate(tmp_path, _model(tmp_path, header=BROKEN_STR, forward="raise Odd()"))
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.control is not None and smoke.control.failure == "Odd: Odd"


def test_an_exception_whose_str_raises_in_build_is_exit_2(tmp_path: Path) -> None:
    model = _model(tmp_path, header=BROKEN_STR, build="raise Odd()")
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out",
                    "--model", f"{model}:build")
    assert result.exit_code == 2, result.output
    assert "build() raised Odd" in flat(result.output)
    assert "internal error" not in result.output


def test_a_huge_exception_message_is_cut(tmp_path: Path) -> None:
    smoke = _gate(tmp_path, _model(tmp_path, forward="raise RuntimeError('y' * 200_000)"))
    assert smoke.verdict == "code_fault"
    assert smoke.control is not None and smoke.control.failure is not None
    assert len(smoke.control.failure) < 1_100  # cut at 1,000 characters


@pytest.mark.parametrize("where", ["build", "forward"])
def test_a_changed_working_directory_is_restored(tmp_path: Path, where: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    model = _model(tmp_path, **{where: f"os.chdir({str(elsewhere)!r})"})
    write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    write_rules(tmp_path / "rules.yaml", regression_rules())
    monkeypatch.chdir(tmp_path)
    result = invoke("smoke", "data.jsonl", "--rules", "rules.yaml", "--out", "out",
                    "--no-progress", "--model", f"{model}:build")
    assert result.exit_code == 0, result.output
    assert Path.cwd() == tmp_path
    assert (tmp_path / "out" / "report.json").exists()
    assert not (elsewhere / "out").exists()


def test_prints_from_user_code_keep_stdout_for_the_report(tmp_path: Path) -> None:
    model = _model(tmp_path, forward="print('hello from forward')",
                   build="print('hello from build')")
    write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    write_rules(tmp_path / "rules.yaml", regression_rules())
    proc = run_cli("check", "data.jsonl", "--rules", "rules.yaml", "--out", "out", "--json",
                   "--no-progress", "--model", f"{model}:build", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["smoke"]["verdict"] == "pass"
    assert "hello from forward" in proc.stderr and "hello from build" in proc.stderr


def test_a_thread_left_running_does_not_hold_the_command(tmp_path: Path) -> None:
    header = "import threading\n"
    model = _model(tmp_path, header=header,
                   build="threading.Thread(target=threading.Event().wait, name='stuck').start()")
    write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    write_rules(tmp_path / "rules.yaml", regression_rules())
    proc = run_cli("check", "data.jsonl", "--rules", "rules.yaml", "--out", "out",
                   "--no-progress", "--model", f"{model}:build", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    smoke = json.loads((tmp_path / "out" / "report.json").read_text())["smoke"]
    found = [f for f in smoke["findings"] if f["code"] == "user_threads_running"]
    assert len(found) == 1 and "stuck" in found[0]["detail"]


def test_a_warning_from_user_code_is_not_repeated_every_step(tmp_path: Path) -> None:
    """A forward that warns at every step: the warning shows once per run, not once per
    step."""
    model = _model(tmp_path, header="import warnings\n",
                   forward="warnings.warn('features look odd', UserWarning)")
    write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    write_rules(tmp_path / "rules.yaml", regression_rules())
    proc = run_cli("smoke", "data.jsonl", "--rules", "rules.yaml", "--out", "out",
                   "--no-progress", "--model", f"{model}:build", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = proc.stderr.count("features look odd")
    steps = json.loads((tmp_path / "out" / "report.json").read_text())["smoke"]["steps"]
    assert steps >= 30  # each of the runs (control, real, replays) takes this many
    assert 1 <= shown <= 10, proc.stderr[:2000]


@pytest.mark.parametrize(("forward", "shapes"), [
    # outputs (rows, 1) against targets (rows,): every output against every target
    ('return self.lin(inputs["features"])', "outputs (40, 1) with targets (40,): torch "
                                            "broadcast them to (40, 40)"),
    # three outputs, whatever the batch: (3, 1) against (40,)
    ('return self.lin(inputs["features"][:3])', "outputs (3, 1) with targets (40,): torch "
                                                "broadcast them to (3, 40)"),
])
def test_a_loss_comparing_every_output_with_every_target_is_exit_2(
    tmp_path: Path, forward: str, shapes: str
) -> None:
    # torch only warned, the loss fell (towards the targets' mean) and the smoke test passed.
    model = _model(tmp_path, forward=forward)
    write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    write_rules(tmp_path / "rules.yaml", regression_rules(batch_size=40))
    proc = run_cli("check", "data.jsonl", "--rules", "rules.yaml", "--out", "out",
                   "--no-progress", "--model", f"{model}:build", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    said = flat(proc.stderr)
    assert f"your loss compared {shapes}, every output against every target" in said, said
    assert "Traceback" not in proc.stderr


def test_a_loss_that_reshapes_the_outputs_itself_passes(tmp_path: Path) -> None:
    # Outputs (rows, 1), a loss that squeezes them first: torch never warns, nothing to say.
    model = write_model(tmp_path / "model.py", LINEAR.format(forward="pass", build="pass")
                        .replace(".squeeze(-1)\n", "\n")
                        .replace("return Net(), F.mse_loss, None",
                                 "return Net(), lambda o, y: F.mse_loss(o.squeeze(-1), y), None"))
    write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    write_rules(tmp_path / "rules.yaml", regression_rules())
    proc = run_cli("check", "data.jsonl", "--rules", "rules.yaml", "--out", "out",
                   "--no-progress", "--model", f"{model}:build", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["smoke"]["verdict"] == "pass"


def test_an_endless_real_run_from_the_training_args_is_not_a_crash(tmp_path: Path) -> None:
    args = TrainingArgs(path="args.json", epochs=1e308, batch_size=1)
    assert real_length(args, 1000, 1) == 2**63 - 1
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"num_train_epochs": 1e308, "warmup_steps": 10,
                                "learning_rate": 0.01}))
    rules = regression_rules(training_args=str(path))
    smoke = smoke_of(gate(tmp_path, regression_records(40), rules))
    assert smoke.verdict == "pass", smoke.reason


def test_all_empty_texts_are_skipped_not_passed(tmp_path: Path) -> None:
    rules = {"task": "lm", "fields": {"text": "text", "id": "id"},
             "rules": [{"id": "schema", "check": "schema"}]}
    records = [{"id": f"t{i}", "text": "" if i % 2 else "a"} for i in range(30)]
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "skipped", smoke.reason
    assert "no next token" in smoke.reason
    records[0]["text"] = "ab"  # one row with a next token: it trains
    smoke = smoke_of(gate(tmp_path, records, rules, out="out2"))
    assert smoke.verdict != "skipped"


@pytest.mark.parametrize("where", ["import", "forward"])
def test_os_exit_in_user_code_is_exit_2_not_a_silent_pass(tmp_path: Path, where: str) -> None:
    # os._exit(0) ended the command with status 0, no report and no word: a pass to CI.
    header = "import os\n" + ("os._exit(0)\n" if where == "import" else "")
    model = _model(tmp_path, header=header, forward="os._exit(0)" if where == "forward" else "pass")
    write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    write_rules(tmp_path / "rules.yaml", regression_rules())
    proc = run_cli("check", "data.jsonl", "--rules", "rules.yaml", "--out", "out",
                   "--no-progress", "--model", f"{model}:build", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"--model '{model}:build': your code called os._exit(0)" in flat(proc.stderr)
    assert "Traceback" not in proc.stderr


def test_os_exit_is_the_real_one_again_after_the_stage_and_in_forked_children(
        tmp_path: Path) -> None:
    fork = ("import multiprocessing as mp\n"
            "    p = mp.get_context('fork').Process(target=abs, args=(-1,))\n"
            "    p.start(); p.join()\n"
            "    assert p.exitcode == 0, p.exitcode")
    smoke = _gate(tmp_path, _model(tmp_path, build=fork))
    assert smoke.verdict == "pass", smoke.reason
    assert os._exit is REAL_EXIT


DROPPING_COLLATE = LINEAR_NET + """


def collate(rows):
    rows = rows[:-1] or rows  # a filter with a bug: the last row of each batch is lost
    x = torch.tensor([r["features"] for r in rows], dtype=torch.float32)
    y = torch.tensor([r["target"] for r in rows], dtype=torch.float32)
    return {"features": x}, y


def build():
    return Net(), F.mse_loss, collate
"""


def test_a_collate_that_drops_rows_is_a_code_fault(tmp_path: Path) -> None:
    # It passed: the rows it dropped were never trained on, and nothing said so.
    model = write_model(tmp_path / "model.py", DROPPING_COLLATE)
    smoke = smoke_of(gate(tmp_path, regression_records(40),
                          regression_rules(model=f"{model}:build")))
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.control is not None and smoke.control.failure is not None
    assert smoke.control.failure.startswith("CollateDroppedRows: collate returned")
    assert "row(s) for the" in smoke.reason


def test_collated_shapes_that_keep_every_row_pass() -> None:
    import torch

    from preflight.config import SmokeConfig
    from preflight.smoke.runs import CollateDroppedRows, Runs

    def runs(made: object) -> Runs:
        return Runs(None, lambda rows: made, SmokeConfig(), None, total=1)  # type: ignore[arg-type]

    rows = [{"x": k} for k in range(3)]
    ok = [({"ids": torch.zeros(3, 5), "pos": torch.arange(5)[None]}, torch.zeros(3)),
          ([torch.zeros(3, 2), torch.zeros(3, 2)], [0.0, 1.0]),  # a list of input tensors
          (torch.zeros(3, 4), torch.zeros(3 * 4))]  # flattened per-token targets
    for made in ok:
        assert len(runs(made).batch(rows)) == 2
    with pytest.raises(CollateDroppedRows, match="collate returned 2 row"):
        runs((torch.zeros(2, 4), torch.zeros(2))).batch(rows)


def test_a_keyboard_interrupt_raised_by_user_code_is_not_ctrl_c(tmp_path: Path) -> None:
    # It was "interrupted" (exit 130), as if the user had pressed Ctrl-C.
    model = _model(tmp_path, forward='raise KeyboardInterrupt("stop here")')
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(40))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out",
                    "--model", f"{model}:build")
    assert result.exit_code == 2, result.output
    said = flat(result.output)
    line = model.read_text().splitlines().index(
        '        raise KeyboardInterrupt("stop here")') + 1
    assert f"your code raised KeyboardInterrupt at {model}:{line} (in forward) (stop here)" \
        in said
    assert "no SIGINT came" in said and "interrupted" not in said


def test_a_real_sigint_while_user_code_runs_is_still_ctrl_c(tmp_path: Path) -> None:
    model = _model(tmp_path, header="import signal\n",
                   forward="os.kill(os.getpid(), signal.SIGINT)")
    with pytest.raises(KeyboardInterrupt):
        _gate(tmp_path, model)
