"""The user's own model (`--model file.py:build`, `smoke: {model: ...}`): its contract is
checked with clear exit-2 messages, its faults are code faults, its debugging aids
(determinism, activation ranges, gradient norms, detect_anomaly) name what went wrong."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.smoke.conftest import (
    LINEAR_NET,
    SQRT_OF_FEATURE,
    codes,
    finding,
    flat,
    gate,
    invoke,
    read_report,
    regression_records,
    regression_rules,
    run_cli,
    smoke_of,
    write_jsonl,
    write_model,
    write_rules,
)

# A linear regressor over the built-in collate's {"features": (rows, 4)}.
LINEAR = LINEAR_NET + """

def build():
    return Net(), F.mse_loss, None
"""

# log() of a value that is always negative: NaN on any data, in the `log` submodule.
LOG_OF_NEGATIVE = """
class Log(nn.Module):
    def forward(self, x):
        return torch.log(x - x.abs() - 1.0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.log = Log()

    def forward(self, inputs):
        return self.log(self.lin(inputs["features"])).squeeze(-1)


def build():
    return Net(), F.mse_loss, None
"""




def _user_gate(tmp_path: Path, body: str, records: list[dict] | None = None, **smoke: object):
    model = write_model(tmp_path / "model.py", body)
    rules = regression_rules(model=f"{model}:build", **smoke)
    return gate(tmp_path, records if records is not None else regression_records(60), rules)


# --- a user model trains, with the built-in collate or its own --------------------------------


def test_user_model_with_the_builtin_collate_passes(tmp_path: Path) -> None:
    report = _user_gate(tmp_path, LINEAR)
    smoke = smoke_of(report)
    assert smoke.verdict == "pass", smoke.reason
    assert report.passed
    assert smoke.model == f"{tmp_path / 'model.py'}:build"  # the spec as given
    assert smoke.control is not None and smoke.control.learned is True
    assert smoke.real is not None and smoke.real.learned is True
    assert smoke.repeat is not None and smoke.real.loss == smoke.repeat.loss
    assert codes(smoke) == []


def test_user_model_on_text_with_the_builtin_collate(tmp_path: Path) -> None:
    model = write_model(tmp_path / "model.py", """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(256, 16)  # byte ids: no tokenizer declared
                self.head = nn.Linear(16, 2)

            def forward(self, inputs):
                mask = inputs["mask"].unsqueeze(-1).float()
                pooled = (self.embed(inputs["ids"]) * mask).sum(1) / mask.sum(1).clamp(min=1)
                return self.head(pooled)


        def build():
            return Net(), F.cross_entropy, None
    """)
    records = [{"id": f"s{i}", "text": ("good fine great " if i % 2 else "bad awful poor ") * 3,
                "label": i % 2} for i in range(40)]
    rules = {"task": "classification", "model": {"num_classes": 2},
             "fields": {"text": "text", "label": "label", "id": "id"},
             "smoke": {"model": f"{model}:build"},
             "rules": [{"id": "schema", "check": "schema"}]}
    smoke = smoke_of(gate(tmp_path, records, rules))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.real is not None and smoke.real.learned is True


USER_COLLATE = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x):
        return self.lin(x).squeeze(-1)


def collate(rows):
    x = torch.tensor([r["features"] for r in rows], dtype=torch.float32)
    y = torch.tensor([float(r["target"]) for r in rows], dtype=torch.float32)
    return x, y


def build():
    return Net(), F.mse_loss, collate
"""


def test_user_model_with_its_own_collate_passes(tmp_path: Path) -> None:
    smoke = smoke_of(_user_gate(tmp_path, USER_COLLATE))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.real is not None and smoke.real.learned is True


def test_user_collate_still_localises_a_bad_row(tmp_path: Path) -> None:
    records = regression_records(60)
    records[33]["target"] = 1e30
    smoke = smoke_of(_user_gate(tmp_path, USER_COLLATE, records))
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [33] and smoke.minimal_ids == ["r33"]


def test_model_named_by_module_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = "pkg_for_smoke_tests"
    write_model(tmp_path / package / "__init__.py", "")
    write_model(tmp_path / package / "linear_model.py", LINEAR)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = f"{package}.linear_model:build"
    try:
        smoke = smoke_of(gate(tmp_path, regression_records(60), regression_rules(model=spec)))
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == package]:
            del sys.modules[name]
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.model == spec


def test_model_in_the_rules_file_is_found_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "config"
    write_model(folder / "my_model.py", LINEAR)
    rules = write_rules(folder / "rules.yaml", regression_rules(model="my_model.py:build"))
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(60))
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    smoke = read_report(tmp_path / "out")["smoke"]
    assert smoke["verdict"] == "pass"
    assert smoke["model"] == "my_model.py:build"  # as the rules file says


# --- a user model that breaks on any data is a code fault -------------------------------------


def test_log_of_non_positive_is_a_code_fault(tmp_path: Path) -> None:
    report = _user_gate(tmp_path, LOG_OF_NEGATIVE)
    smoke = smoke_of(report)
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.first_bad_module == "log"
    assert smoke.reason == ("training fails on the control batch (in spec by construction): "
                            "loss is nan at step 0 (first non-finite output: log)")
    assert smoke.control is not None and smoke.control.first_bad_step == 0
    assert smoke.minimal_rows == [] and smoke.replay is None
    assert not report.passed


def test_log_of_non_positive_from_the_command_line(tmp_path: Path) -> None:
    model = write_model(tmp_path / "model.py", LOG_OF_NEGATIVE)
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(60))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    out = tmp_path / "out"
    result = invoke("check", data, "--rules", rules, "--out", out, "--model", f"{model}:build")
    assert result.exit_code == 1, result.output
    text = flat(result.output)
    assert "smoke test CODE FAULT" in text
    assert "first non-finite module: log" in text
    smoke = read_report(out)["smoke"]
    assert smoke["verdict"] == "code_fault" and smoke["first_bad_module"] == "log"


def test_nan_output_is_not_called_an_fp16_overflow(tmp_path: Path) -> None:
    smoke = smoke_of(_user_gate(tmp_path, LOG_OF_NEGATIVE))
    assert smoke.verdict == "code_fault"
    assert "fp16_overflow_risk" not in codes(smoke)


def test_forward_that_raises_is_a_code_fault(tmp_path: Path) -> None:
    smoke = smoke_of(_user_gate(tmp_path, LINEAR.replace("nn.Linear(4, 1)", "nn.Linear(5, 1)")))
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.control is not None and smoke.control.failure is not None
    assert smoke.control.failure.startswith("RuntimeError: mat1 and mat2 shapes cannot be "
                                            "multiplied")


# --- the user-model contract: exit 2 with a clear message, no traceback -----------------------

CONTRACT_CASES = {
    "missing-file": ("", "missing.py:build", "--model: file not found: tried missing.py"),
    "missing-module": ("", "no_such_module_for_smoke_tests:build",
                       "cannot import 'no_such_module_for_smoke_tests'"),
    "missing-function": (LINEAR, "{model}:make", "has no function 'make'"),
    "no-function-named": (LINEAR, "{model}", "write package.module:build or file.py:build"),
    "import-fails": ("1 / 0\n", "{model}:build", "failed: ZeroDivisionError: division by zero"),
    "not-a-tuple": ("def build():\n    return {'model': None}\n", "{model}:build",
                    "build() returned dict; build() must take no arguments and return "
                    "(model, loss_fn, collate)"),
    "two-tuple": (LINEAR.replace("return Net(), F.mse_loss, None", "return Net(), F.mse_loss"),
                  "{model}:build", "build() returned tuple; build() must take"),
    "not-a-module": ("def build():\n    return (lambda x: x), F.mse_loss, None\n",
                     "{model}:build", "the model is a function, not a torch.nn.Module"),
    "loss-not-callable": (LINEAR.replace("return Net(), F.mse_loss, None",
                                         "return Net(), 'mse', None"),
                          "{model}:build", "loss_fn is not callable"),
    "collate-not-callable": (LINEAR.replace("return Net(), F.mse_loss, None",
                                            "return Net(), F.mse_loss, 3"),
                             "{model}:build", "collate is not callable"),
    "build-async": ("async def build():\n    pass\n", "{model}:build",
                    "build() is async (it returned a coroutine); make it a plain function"),
    "build-raises": ("def build():\n    raise RuntimeError('no GPU here')\n", "{model}:build",
                     "build() raised RuntimeError: no GPU here"),
    "build-takes-arguments": ("def build(config):\n    pass\n", "{model}:build",
                              "build() raised TypeError"),
    "loss-not-scalar": (LINEAR.replace(
        "return Net(), F.mse_loss, None",
        "return Net(), lambda out, y: F.mse_loss(out, y, reduction='none'), None"),
        "{model}:build", "your loss_fn must return a scalar tensor, got (60,)"),
    "loss-not-a-tensor": (LINEAR.replace(
        "return Net(), F.mse_loss, None",
        "return Net(), lambda out, y: float(F.mse_loss(out, y).detach()), None"),
        "{model}:build", "your loss_fn must return a scalar tensor, got float"),
}


@pytest.mark.parametrize("case", sorted(CONTRACT_CASES))
def test_user_model_contract_errors_exit_2(tmp_path: Path, case: str) -> None:
    body, spec, message = CONTRACT_CASES[case]
    model = write_model(tmp_path / "model.py", body)
    data = write_jsonl(tmp_path / "data.jsonl", regression_records(60))
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("smoke", data, "--rules", rules, "--out", tmp_path / "out",
                    "--model", spec.format(model=model))
    assert result.exit_code == 2, result.output
    assert message in flat(result.output)
    assert flat(result.output).startswith("error: ")
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert "never awaited" not in result.output
    assert not (tmp_path / "out" / "report.json").exists()


# --- user code that exits is an error, never the gate's exit ---------------------------------

# The same linear model, with `sys.exit(0)` planted in one place.
EXITS = {
    "import": LINEAR + "\nimport sys\nsys.exit(0)\n",
    "build": LINEAR.replace("def build():\n", "def build():\n    import sys\n    sys.exit(0)\n"),
    "forward": LINEAR.replace("    def forward(self, inputs):\n",
                              "    def forward(self, inputs):\n        import sys\n"
                              "        sys.exit(0)\n"),
    "loss": LINEAR.replace("return Net(), F.mse_loss, None",
                           "return Net(), lambda out, y: __import__('sys').exit(0), None"),
    "collate": LINEAR.replace("return Net(), F.mse_loss, None",
                              "return Net(), F.mse_loss, lambda rows: __import__('sys').exit(0)"),
    "raise-system-exit": LINEAR.replace("def build():\n",
                                        "def build():\n    raise SystemExit('bye')\n"),
}


def _failing_data(tmp_path: Path) -> Path:
    records = regression_records(60)
    del records[3]["target"]  # the schema rule fails: the gate would exit 1
    return write_jsonl(tmp_path / "data.jsonl", records)


@pytest.mark.parametrize("where", sorted(EXITS))
def test_user_code_that_exits_is_exit_2(tmp_path: Path, where: str) -> None:
    model = write_model(tmp_path / "model.py", EXITS[where])
    rules = write_rules(tmp_path / "rules.yaml", regression_rules())
    result = invoke("check", _failing_data(tmp_path), "--rules", rules, "--out",
                    tmp_path / "out", "--no-progress", "--model", f"{model}:build")
    assert result.exit_code == 2, result.output
    text = flat(result.output)
    assert text.startswith(f"error: --model '{model}:build': your code raised SystemExit(")
    assert "never exit" in text and "Traceback" not in result.output


def test_user_code_that_exits_stops_the_real_process_with_2(tmp_path: Path) -> None:
    model = write_model(tmp_path / "model.py", EXITS["forward"])
    rules = write_rules(tmp_path / "rules.yaml", regression_rules(model="model.py:build"))
    proc = run_cli("check", _failing_data(tmp_path), "--rules", rules, "--out", "out",
                   "--no-progress", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "your code raised SystemExit(0)" in flat(proc.stderr)
    assert model.exists()


# --- debugging aids -------------------------------------------------------------------------


def test_nondeterministic_model_is_reported(tmp_path: Path) -> None:
    noisy = LINEAR.replace(
        'return self.lin(inputs["features"]).squeeze(-1)',
        'noise = int.from_bytes(os.urandom(4), "little") / 2**32  # unseeded\n'
        '        return self.lin(inputs["features"]).squeeze(-1) + 0.01 * noise')
    report = _user_gate(tmp_path, noisy)
    smoke = smoke_of(report)
    assert smoke.verdict == "pass", smoke.reason  # a warning, not a fault
    assert report.passed
    found = finding(smoke, "nondeterministic_loss")
    assert found.severity == "warn" and found.step == 0
    assert "two runs with seed 0 differ from step 0" in found.detail


def test_huge_activations_warn_of_fp16_overflow(tmp_path: Path) -> None:
    huge = """
        class Scale(nn.Module):
            def __init__(self, k):
                super().__init__()
                self.k = k

            def forward(self, x):
                return x * self.k


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 1)
                self.up = Scale(1e6)
                self.down = Scale(1e-6)

            def forward(self, inputs):
                return self.down(self.up(self.lin(inputs["features"]))).squeeze(-1)


        def build():
            return Net(), F.mse_loss, None
    """
    smoke = smoke_of(_user_gate(tmp_path, huge))
    assert smoke.verdict == "pass", smoke.reason
    found = finding(smoke, "fp16_overflow_risk")
    assert found.severity == "warn"
    assert "in up" in found.detail and "use bf16" in found.detail
    ranges = {a["module"]: a for a in smoke.activations}
    assert ranges["up"]["abs_max"] >= 65504
    assert ranges["lin"]["abs_max"] < 65504 and ranges["down"]["abs_max"] < 65504
    assert smoke.activations[0]["module"] == "up"  # ranked by abs-max


def test_tiny_activations_warn_of_fp16_underflow(tmp_path: Path) -> None:
    tiny = LINEAR.replace(
        'return self.lin(inputs["features"]).squeeze(-1)',
        'return self.up(self.down(self.lin(inputs["features"]))).squeeze(-1)').replace(
        "self.lin = nn.Linear(4, 1)",
        "self.lin = nn.Linear(4, 1)\n        self.down = Scale(1e-9)\n"
        "        self.up = Scale(1e9)")
    tiny = ("class Scale(nn.Module):\n    def __init__(self, k):\n        super().__init__()\n"
            "        self.k = k\n\n    def forward(self, x):\n        return x * self.k\n" + tiny)
    smoke = smoke_of(_user_gate(tmp_path, tiny))
    assert smoke.verdict == "pass", smoke.reason
    found = finding(smoke, "fp16_underflow_risk")
    assert found.severity == "info" and "in down" in found.detail


def test_high_gradient_norm_is_reported_with_its_step(tmp_path: Path) -> None:
    smoke = smoke_of(gate(tmp_path, regression_records(60), regression_rules(grad_norm_warn=1e-6)))
    assert smoke.verdict == "pass", smoke.reason
    found = finding(smoke, "grad_norm_high")
    assert found.step == 0 and found.severity == "warn"
    assert "above smoke.grad_norm_warn (1e-06); 30 step(s) in all" in found.detail


def test_default_gradient_warning_is_quiet_on_clean_data(tmp_path: Path) -> None:
    smoke = smoke_of(gate(tmp_path, regression_records(60), regression_rules()))
    assert "grad_norm_high" not in codes(smoke)


@pytest.mark.filterwarnings("ignore:Error detected in")  # detect_anomaly's own warning
def test_backward_nan_on_a_zero_feature_is_a_data_fault_with_anomaly(tmp_path: Path) -> None:
    records = regression_records(60)
    records[29]["features"][0] = 0.0
    report = _user_gate(tmp_path, SQRT_OF_FEATURE.format(eps=""), records)
    smoke = smoke_of(report)
    assert smoke.verdict == "data_fault", smoke.reason
    assert smoke.minimal_rows == [29] and smoke.minimal_ids == ["r29"]
    assert smoke.first_bad_param == "gain"
    assert smoke.first_bad_module is None  # the forward pass stays finite
    assert smoke.reason == ("training fails on the sample but not on the control batch: "
                            "gradient norm is nan at step 0")
    assert smoke.anomaly is not None and "Backward" in smoke.anomaly
    assert smoke.anomaly.startswith("Function 'MulBackward0' returned nan values")
    assert smoke.replay == str(tmp_path / "out" / "smoke-replay.pt")


def test_same_model_passes_without_the_zero(tmp_path: Path) -> None:
    smoke = smoke_of(_user_gate(tmp_path, SQRT_OF_FEATURE.format(eps="")))
    assert smoke.verdict == "pass", smoke.reason


def test_anomaly_replay_prints_no_traceback(tmp_path: Path) -> None:
    records = regression_records(60)
    records[29]["features"][0] = 0.0
    model = write_model(tmp_path / "model.py", SQRT_OF_FEATURE.format(eps=""))
    data = write_jsonl(tmp_path / "data.jsonl", records)
    rules = write_rules(tmp_path / "rules.yaml", regression_rules(model=f"{model}:build"))
    done = run_cli("smoke", data, "--rules", rules, "--out", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "detect_anomaly: Function 'MulBackward0'" in flat(done.stdout)
    assert "Traceback" not in done.stdout + done.stderr


# --- naming a code fault ------------------------------------------------------------------------


def test_a_nan_made_in_the_loss_function_names_loss_fn(tmp_path: Path) -> None:
    body = LINEAR.replace("return Net(), F.mse_loss, None",
                          "return Net(), lambda out, y: F.mse_loss(out, y) * float('nan'), None")
    smoke = smoke_of(_user_gate(tmp_path, body))
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.first_bad_module == "loss_fn"
    assert "loss_fn" in smoke.reason


def test_a_code_fault_in_backward_is_named_by_detect_anomaly_on_the_control(
        tmp_path: Path) -> None:
    # sqrt(0) is finite forward; its gradient is infinite and the chain rule makes NaN of it:
    # only backward breaks, and detect_anomaly names the op.
    body = LINEAR.replace(
        "return Net(), F.mse_loss, None",
        "return Net(), lambda out, y: F.mse_loss(out, y) + torch.sqrt(out - out).sum(), None")
    smoke = smoke_of(_user_gate(tmp_path, body))
    assert smoke.verdict == "code_fault", smoke.reason
    assert smoke.anomaly is not None
    assert "Backward" in smoke.anomaly and "returned nan" in smoke.anomaly


def test_a_healthy_model_raises_no_fp16_underflow_risk(tmp_path: Path) -> None:
    smoke = smoke_of(_user_gate(tmp_path, LINEAR))
    assert smoke.verdict == "pass", smoke.reason
    assert smoke.activations  # ranges were recorded, and none is a risk
    assert "fp16_underflow_risk" not in [f.code for f in smoke.findings]
