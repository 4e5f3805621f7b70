"""Shared seam for the smoke test's end-to-end scenarios: small JSONL files with faults
planted at known rows, rules dicts, user model files, and the real CLI."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner, Result

from preflight import run_preflight
from preflight.cli import main
from preflight.report.model import Report, SmokeFinding, SmokeResult

# Varied English words for lm / chat / classification text (seeded, so every run is the same).
WORDS = tuple(str.split(
    "river stone light garden winter morning quiet market bridge window letter orange paper "
    "music silver forest harbor engine candle valley old young bright heavy slow sudden warm "
    "walks carries finds opens watches builds remembers follows sings paints near under "
    "across behind beside a the every some one this that her his their our"
))
# The regression target is a linear function of four features (plus an offset).
WEIGHTS = (0.5, -1.0, 2.0, 0.25)
OFFSET = 1.0
# The preamble every user model file starts with.
MODEL_HEADER = (
    "from __future__ import annotations\n"
    "import os\n"
    "import torch\n"
    "from torch import nn\n"
    "from torch.nn import functional as F\n"
)


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Train on one thread: the models are tiny, and on a busy two-core machine torch's
    default thread pool spins and makes each run tens of times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    """Write ``records`` as JSON Lines to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_rules(path: Path, rules: dict[str, Any]) -> Path:
    """Write a rules dict as a rules file (JSON is valid YAML)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rules, indent=2), encoding="utf-8")
    return path


def write_model(path: Path, body: str) -> Path:
    """Write a user model file: the imports above, then ``body`` (dedented)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MODEL_HEADER + textwrap.dedent(body), encoding="utf-8")
    return path


def sentence(rng: random.Random) -> str:
    """One made-up English sentence of 6 to 14 words."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 14))]
    return " ".join(words).capitalize() + "."


def regression_records(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` rows ``{id, features, target}`` with target = WEIGHTS·features + OFFSET; no
    feature is 0 (a 0 is what one of the user models breaks on)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = [round(rng.uniform(0.1, 1.0) * rng.choice((-1, 1)), 4) for _ in WEIGHTS]
        y = sum(w * v for w, v in zip(WEIGHTS, x, strict=True)) + OFFSET
        out.append({"id": f"r{i}", "features": x, "target": round(y, 6)})
    return out


def regression_rules(*, rules: list[dict[str, Any]] | None = None,
                     **smoke: Any) -> dict[str, Any]:
    """A regression rules dict over ``regression_records``; ``smoke`` keys go to ``smoke:``."""
    return {
        "task": "regression",
        "fields": {"features": "features", "target": "target", "id": "id"},
        "smoke": {"samples": 100, **smoke},
        "rules": rules if rules is not None else [{"id": "schema", "check": "schema"}],
    }


def gate(tmp_path: Path, records: list[dict[str, Any]], rules: dict[str, Any], *,
         name: str = "data.jsonl", out: str = "out") -> Report:
    """Write ``records`` and run the gate with the smoke test on them."""
    path = write_jsonl(tmp_path / name, records)
    return run_preflight(path, rules=rules, out=tmp_path / out, smoke=True, formats=["json"])


def smoke_of(report: Report) -> SmokeResult:
    """The report's smoke section (which must be there)."""
    assert report.smoke is not None
    return report.smoke


def codes(smoke: SmokeResult) -> list[str]:
    """The smoke findings' codes, in order."""
    return [f.code for f in smoke.findings]


def finding(smoke: SmokeResult, code: str) -> SmokeFinding:
    """The one smoke finding with ``code``."""
    found = [f for f in smoke.findings if f.code == code]
    assert len(found) == 1, f"expected one {code!r} finding, got {codes(smoke)}"
    return found[0]


def invoke(*args: str | Path) -> Result:
    """Run the CLI in-process."""
    return CliRunner().invoke(main, [str(a) for a in args])


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a fresh interpreter (what torch imports or warns there is visible)."""
    return subprocess.run(
        [sys.executable, "-m", "preflight", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )


def flat(text: str) -> str:
    """Console text with its line wrapping undone."""
    return " ".join(text.split())


def read_report(out: Path) -> dict[str, Any]:
    """report.json in ``out``, as written."""
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


# sqrt(x0**2 * gain): finite forward, but at x0 == 0 the backward is inf * 0 = NaN
# (format with eps="" for the fault, eps=" + 1e-6" for the fix).
# A linear regressor over the built-in collate's {"features": (rows, 4)}: the class only.
LINEAR_NET = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, inputs):
        return self.lin(inputs["features"]).squeeze(-1)
"""

SQRT_OF_FEATURE = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.gain = nn.Parameter(torch.ones(1))

    def forward(self, inputs):
        x = inputs["features"]
        return self.lin(x).squeeze(-1) + torch.sqrt(x[:, 0] ** 2 * self.gain{eps})


def build():
    return Net(), F.mse_loss, None
"""
