"""``smoke.time_limit``: a model whose code never returns ends the smoke stage with a reason
that names the phase and the step (a code fault: exit 1, the report written) instead of
hanging the gate, in the main thread and in a worker thread; the caller's SIGALRM handler
and timer are theirs again afterwards; Ctrl-C still interrupts.

Every run that could hang runs in a child process with a timeout, so a regression fails
instead of hanging the suite. The children pay torch's first-optimizer import (about a
second, ``torch._dynamo``) before the gate starts, so that a limit of a few seconds is spent
in the model's code and not there."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from preflight.config import load_rules
from preflight.errors import ConfigError
from preflight.smoke import deadline
from tests.children import CHILD_TIMEOUT, run_python, run_script
from tests.smoke.conftest import (
    SQRT_OF_FEATURE,
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

LIMIT = 2  # seconds: the limit of the runs that hang
WARM = "import torch; torch.optim.AdamW(torch.nn.Linear(1, 1).parameters())\n"

MODEL = """
import time


def spin():
    while True:
        pass


class Net(nn.Module):
    calls = 0

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, inputs):
        Net.calls += 1
        if Net.calls > {after}:
            {forward}
        return self.lin(inputs["features"]).squeeze(-1)


def build():
    {build}
    return Net(), F.mse_loss, None
"""


def _model(
    tmp_path: Path, *, forward: str = "pass", build: str = "pass", after: int = 3, top: str = ""
) -> Path:
    body = MODEL.format(forward=forward, build=build, after=after)
    return write_model(tmp_path / "model.py", top + body)


def _files(
    tmp_path: Path,
    model: Path,
    *,
    limit: float = LIMIT,
    records: list[dict[str, Any]] | None = None,
) -> None:
    write_jsonl(tmp_path / "data.jsonl", records or regression_records(40))
    write_rules(tmp_path / "rules.yaml", regression_rules(model=f"{model}:build", time_limit=limit))


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``preflight ARGS`` in a child process (torch's optimizer import paid first)."""
    code = WARM + "from preflight.entry import run\nrun()\n"
    return run_python(tmp_path, "-c", code, *args, what=f"preflight {' '.join(args)}")


def _child(tmp_path: Path, body: str) -> dict[str, Any]:
    """Run ``body`` (Python, after the warm-up) in a child process; the JSON object it
    prints last."""
    head = WARM + "import json, signal, sys, threading\nfrom preflight import run_preflight\n"
    return run_script(tmp_path, head + body)


# One gate run in the child: the smoke section's verdict, reason and findings.
GATE = """
def gate(out):
    report = run_preflight("data.jsonl", rules="rules.yaml", out=out, smoke=True,
                           formats=["json"])
    smoke = report.smoke
    return {"verdict": smoke.verdict, "reason": smoke.reason,
            "codes": [f.code for f in smoke.findings],
            "steps": [f.step for f in smoke.findings if f.code == "time_limit"]}
"""


def test_a_forward_that_never_returns_is_stopped_and_named(tmp_path: Path) -> None:
    _files(tmp_path, _model(tmp_path, forward="spin()"))
    proc = _cli(
        tmp_path, "check", "data.jsonl", "--rules", "rules.yaml", "--out", "out", "--no-progress"
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    smoke = read_report(tmp_path / "out")["smoke"]
    assert smoke["verdict"] == "code_fault"
    reason = smoke["reason"]
    assert (
        f"ran past smoke.time_limit ({LIMIT} s) in forward at step 3 of the control run" in reason
    )
    assert "look for a hang in the model's forward" in reason
    assert "--set smoke.time_limit=" in reason
    found = [f for f in smoke["findings"] if f["code"] == "time_limit"]
    assert len(found) == 1 and found[0]["step"] == 3 and found[0]["severity"] == "error"
    assert smoke["control"]["first_bad_step"] == 3
    assert "smoke.time_limit" in smoke["control"]["failure"]
    assert "forward at step 3 of the control run" in flat(proc.stdout)


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ("build", "in building the model and was stopped"),
        ("loss", "in the loss at step 0 of the control run"),
        ("backward", "in backward at step 0 of the control run"),
        ("swallowed", "in forward at step 3 of the control run"),
    ],
)
def test_each_phase_is_named(tmp_path: Path, where: str, named: str) -> None:
    if where == "build":  # a build() that sleeps for good
        model = _model(tmp_path, build="time.sleep(10**6)")
    elif where == "swallowed":  # a forward that swallows the stop and carries on
        model = _model(
            tmp_path,
            forward="try:\n                spin()\n            except BaseException:\n"
            "                pass",
        )
    elif where == "loss":  # a loss that never returns
        model = write_model(
            tmp_path / "model.py",
            MODEL.format(forward="pass", build="return Net(), lambda o, t: spin(), None", after=0),
        )
    else:  # a gradient hook that never returns
        model = _model(
            tmp_path,
            after=0,
            forward=(
                "out = self.lin(inputs['features']).squeeze(-1)\n"
                "            out.register_hook(lambda g: spin())\n"
                "            return out"
            ),
        )
    _files(tmp_path, model)
    proc = _cli(
        tmp_path,
        "smoke",
        "data.jsonl",
        "--rules",
        "rules.yaml",
        "--out",
        "out",
        "--no-progress",
        "-q",
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    smoke = read_report(tmp_path / "out")["smoke"]
    assert smoke["verdict"] == "code_fault"
    assert named in smoke["reason"]


def test_an_import_that_never_returns_is_exit_2_before_the_read(tmp_path: Path) -> None:
    _files(tmp_path, _model(tmp_path, top="import time\ntime.sleep(10**6)\n"))
    proc = _cli(
        tmp_path, "check", "data.jsonl", "--rules", "rules.yaml", "--out", "out", "--no-progress"
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    message = flat(proc.stderr)
    assert f"ran past smoke.time_limit ({LIMIT} s) while importing your model module" in message
    assert "before the gate read any data" in message
    assert "Traceback" not in proc.stderr


def test_a_slow_model_under_the_limit_passes_and_leaves_no_timer(tmp_path: Path) -> None:
    def mine(signum: int, frame: object) -> None:
        raise AssertionError("the caller's handler must not be called")

    model = _model(tmp_path, forward="time.sleep(0.01)", after=0)
    rules = regression_rules(model=f"{model}:build", time_limit=60)
    before = signal.signal(signal.SIGALRM, mine)
    try:
        smoke = smoke_of(gate(tmp_path, regression_records(40), rules))
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, before)
    assert smoke.verdict == "pass", smoke.reason
    assert "time_limit" not in [f.code for f in smoke.findings]


def test_a_hang_in_a_worker_thread_ends_too(tmp_path: Path) -> None:
    """An orchestrator calls run_preflight from a worker thread: no signal there; a
    watchdog stops the loop."""
    _files(tmp_path, _model(tmp_path, forward="spin()"))
    result = _child(
        tmp_path,
        GATE
        + """
box = {}
def work():
    try:
        box["smoke"] = gate("out")
    except BaseException as e:
        box["error"] = repr(e)
worker = threading.Thread(target=work, daemon=True)
worker.start()
worker.join(60)
left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
print(json.dumps({"alive": worker.is_alive(), "left": left, **box}))
sys.stdout.flush()
import os; os._exit(0)  # a thread still spinning must not hold the child
""",
    )
    assert not result["alive"], "run_preflight in a worker thread did not end"
    assert "error" not in result, result["error"]
    smoke = result["smoke"]
    assert smoke["verdict"] == "code_fault"
    assert "in forward at step 3 of the control run" in smoke["reason"]
    assert "preflight-smoke-deadline" not in result["left"]  # the watchdog is gone too


def test_the_callers_alarm_handler_and_timer_are_theirs_after_a_timeout(tmp_path: Path) -> None:
    """With no timer of the caller's, the stage arms SIGALRM and puts the caller's handler
    back; with one armed, it leaves theirs alone (a watchdog stops the stage instead)."""
    _files(tmp_path, _model(tmp_path, forward="spin()"))
    result = _child(
        tmp_path,
        GATE
        + """
def mine(signum, frame):
    raise SystemExit("the caller's handler was called")
signal.signal(signal.SIGALRM, mine)
first = gate("out1")
first["handler_kept"] = signal.getsignal(signal.SIGALRM) is mine
first["timer"] = signal.getitimer(signal.ITIMER_REAL)[0]
signal.setitimer(signal.ITIMER_REAL, 1000)
second = gate("out2")
second["handler_kept"] = signal.getsignal(signal.SIGALRM) is mine
second["timer"] = signal.getitimer(signal.ITIMER_REAL)[0]
signal.setitimer(signal.ITIMER_REAL, 0)
left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
print(json.dumps({"first": first, "second": second, "left": left}))
""",
    )
    first, second = result["first"], result["second"]
    for run in (first, second):
        assert run["verdict"] == "code_fault"
        assert "in forward at step" in run["reason"]
        assert run["codes"] == ["time_limit"]
        assert run["handler_kept"]
    assert first["timer"] == 0.0  # nothing left armed
    assert 900 < second["timer"] <= 1000  # the caller's own timer still runs
    assert "preflight-smoke-deadline" not in result["left"]


def test_a_timeout_while_localising_keeps_the_data_fault(tmp_path: Path) -> None:
    """The real run fails on a NaN feature (a data fault); the one-row runs that localise
    it never return: the verdict stays data_fault, and a finding says what was cut."""
    records = regression_records(40)
    records[7]["features"][0] = float("nan")
    model = _model(
        tmp_path, after=0, forward=("if inputs['features'].shape[0] == 1:\n                spin()")
    )
    _files(tmp_path, model, records=records)
    smoke = _child(tmp_path, GATE + 'print(json.dumps(gate("out")))\n')
    assert smoke["verdict"] == "data_fault", smoke["reason"]
    assert smoke["codes"][-1] == "time_limit"


def test_a_replay_rerun_with_a_model_that_hangs_is_stopped(tmp_path: Path) -> None:
    records = regression_records(60)
    records[29]["features"][0] = 0.0  # sqrt(0): a NaN gradient in the model, a replay
    faulty = SQRT_OF_FEATURE.format(eps="")
    _files(tmp_path, write_model(tmp_path / "model.py", faulty), records=records)
    proc = _cli(
        tmp_path,
        "smoke",
        "data.jsonl",
        "--rules",
        "rules.yaml",
        "--out",
        "out",
        "--no-progress",
        "-q",
    )
    assert proc.returncode == 1 and (tmp_path / "out" / "smoke-replay.pt").is_file()
    # the same weights, and a forward that never returns
    hang = write_model(
        tmp_path / "hang.py",
        faulty.replace('x = inputs["features"]', "while True:\n            pass"),
    )
    proc = _cli(
        tmp_path,
        "smoke",
        "--replay",
        "out/smoke-replay.pt",
        "--model",
        f"{hang}:build",
        "--json",
        "-q",
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    smoke = json.loads(proc.stdout)
    assert smoke["verdict"] == "code_fault"
    assert f"smoke.time_limit ({LIMIT} s) in forward at step 0 of the replay run" in smoke["reason"]


def test_ctrl_c_still_interrupts(tmp_path: Path) -> None:
    marker = tmp_path / "in_forward"
    model = _model(
        tmp_path,
        after=0,
        forward=(f"open({str(marker)!r}, 'w').close()\n            time.sleep(10**6)"),
    )
    _files(tmp_path, model, limit=600)
    code = WARM + "from preflight.entry import run\nrun()\n"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "check",
            "data.jsonl",
            "--rules",
            "rules.yaml",
            "--out",
            "out",
            "--no-progress",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        waited = 0.0
        while not marker.exists() and proc.poll() is None and waited < CHILD_TIMEOUT:
            time.sleep(0.1)
            waited += 0.1
        assert marker.exists(), "the smoke stage never reached forward"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=CHILD_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err and "time_limit" not in err


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "greater than or equal to 1"),
        ("-5", "greater than or equal to 1"),
        ("0.5", "greater than or equal to 1"),
        (".inf", "finite"),
        (".nan", "finite"),
        ("'600'", "number"),
        ("true", "number"),
        ("null", "number"),
        ("1000000000", "less than or equal to 604800"),
    ],
)
def test_absurd_time_limits_are_refused(tmp_path: Path, value: str, expected: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(f"smoke: {{time_limit: {value}}}\nrules:\n  - {{id: s, check: schema}}\n")
    with pytest.raises(ConfigError) as caught:
        load_rules(path)
    message = flat(str(caught.value))
    assert "smoke.time_limit" in message and expected in message


def test_the_limit_is_set_in_the_rules_or_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("smoke: {time_limit: 600}\nrules:\n  - {id: s, check: schema}\n")
    assert load_rules(path).smoke.time_limit == 600.0
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(10))
    result = invoke(
        "check",
        data,
        "--rules",
        path,
        "--no-smoke",
        "--out",
        tmp_path / "out",
        "--set",
        "smoke.time_limit=0",
    )
    assert result.exit_code == 2, result.output
    assert "smoke.time_limit" in flat(result.output)


def test_call_within_returns_raises_and_restores_in_process() -> None:
    """What cannot hang, in this process: a value comes back, an exception (Ctrl-C too)
    goes through, and each time the handler and the timer are as they were."""

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("the caller's handler must not be called")

    def boom(error: BaseException) -> None:
        raise error

    before = signal.signal(signal.SIGALRM, mine)
    try:
        assert deadline.call_within(60, lambda: 42) == 42
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        for error in (ValueError("x"), KeyboardInterrupt()):
            with pytest.raises(type(error)):
                deadline.call_within(60, lambda e=error: boom(e))
            assert signal.getsignal(signal.SIGALRM) is mine
            assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        deadline.phase("forward")  # outside a limit: nothing to mark, nothing raised
    finally:
        signal.signal(signal.SIGALRM, before)


def test_the_place_is_worded_for_the_message() -> None:
    assert deadline.Expired(2, 2.0, "forward", 3, "control").where() == (
        "forward at step 3 of the control run"
    )
    assert deadline.Expired(2, 2.0, "build", None, None).where() == "building the model"
    assert deadline.Expired(2, 2.0, "loss", None, "real").where() == "the loss (real run)"


# A forward that, from its fourth call, runs its own `with timeout(5):` helper (its own
# SIGALRM handler and `signal.alarm(5)`, then `alarm(0)` and the old handler put back, as
# such helpers do: preflight's timer is gone) and then hangs.
OWN_ALARM = (
    "def mine(*a):\n"
    "                raise TimeoutError('mine')\n"
    "            old = signal.signal(signal.SIGALRM, mine)\n"
    "            signal.alarm(5)\n"
    "            signal.alarm(0)\n"
    "            signal.signal(signal.SIGALRM, old)\n"
    "            {hang}"
)


@pytest.mark.parametrize(
    "forward",
    [
        OWN_ALARM.format(hang="time.sleep(10**6)"),
        # its own handler left in place (preflight's is gone too), then a loop
        "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n            spin()",
    ],
    ids=["timer-cancelled", "handler-replaced"],
)
def test_user_code_that_cancels_the_timer_is_still_stopped(tmp_path: Path, forward: str) -> None:
    # The timer was the only stop in the main thread: the command hung for good.
    _files(tmp_path, _model(tmp_path, top="import signal\n", forward=forward))
    proc = _cli(tmp_path, "smoke", "data.jsonl", "--rules", "rules.yaml", "--out", "out", "-q")
    assert proc.returncode == 1, proc.stderr[-3000:]
    smoke = read_report(tmp_path / "out")["smoke"]
    assert smoke["verdict"] == "code_fault"
    assert "in forward at step 3 of the control run and was stopped" in smoke["reason"]


def test_an_alarm_of_the_users_before_the_limit_is_not_the_limit(tmp_path: Path) -> None:
    # `signal.alarm(1)` with no handler of its own: at 1 s preflight's handler ran and
    # stopped the stage as past a limit of 60 s.
    model = _model(tmp_path, top="import signal\n", after=0,
                   forward="signal.alarm(1) if Net.calls == 1 else None\n"
                           "            time.sleep(1.5) if Net.calls == 2 else None")
    _files(tmp_path, model, limit=60)
    proc = _cli(tmp_path, "smoke", "data.jsonl", "--rules", "rules.yaml", "--out", "out", "-q")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_report(tmp_path / "out")["smoke"]["verdict"] == "pass"


def test_code_that_swallows_every_stop_ends_the_command_with_a_message(tmp_path: Path) -> None:
    # A bare `except:` in an endless retry loop swallowed the one stop sent: the command
    # hung for good. The stop is sent again, and past hard_grace the command ends.
    loop = ("while True:\n"
            "                try:\n"
            "                    time.sleep(0.2)\n"
            "                except:  # noqa: E722\n"
            "                    pass")
    _files(tmp_path, _model(tmp_path, forward=loop))
    proc = _cli(tmp_path, "check", "data.jsonl", "--rules", "rules.yaml", "--out", "out",
                "--no-progress")
    assert proc.returncode == 1, proc.stderr[-3000:]
    message = flat(proc.stderr)
    assert (f"error: the smoke stage ran past smoke.time_limit ({LIMIT} s) in forward at step 3 "
            "of the control run and did not stop when asked") in message
    assert "bare `except:`" in message and "--set smoke.time_limit=" in message
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "report.json").exists()


def test_a_library_caller_keeps_its_process_and_the_stop_is_sent_again() -> None:
    # No on_stuck registered (run_preflight from a DAG): the stop keeps coming until the
    # code lets one through; here the third.
    seen = []
    ends = time.monotonic() + 30  # a regression fails here instead of hanging the suite

    def swallow_twice() -> None:
        while time.monotonic() < ends:
            try:
                time.sleep(0.05)
            except deadline.TimeUp:
                seen.append(1)
                if len(seen) == 3:
                    raise

    with pytest.raises(deadline.Expired):
        deadline.call_within(1, swallow_twice)
    assert len(seen) == 3
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
