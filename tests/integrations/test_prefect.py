"""The Prefect task: a real tiny flow run in-process against a temporary Prefect API."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

prefect = pytest.importorskip("prefect")

from prefect.artifacts import Artifact  # noqa: E402
from prefect.testing.utilities import prefect_test_harness  # noqa: E402

from preflight import ConfigError, PreflightFailed  # noqa: E402
from preflight.integrations.prefect import preflight_task, run_gate  # noqa: E402

RULES = {"rules": [{"id": "hidden", "check": "invisible_unicode"}]}
CLEAN = [{"id": "a1", "text": "The quick brown fox."}, {"id": "a2", "text": "Rivers run."}]
FAULTY = [*CLEAN, {"id": "a3", "text": "hidden\u200bspace"}]


@pytest.fixture(scope="module", autouse=True)
def harness() -> Iterator[None]:
    """One temporary Prefect API and database for the module. It takes seconds to start,
    and over Prefect's 30 s on a loaded 2-core CI machine (CI runs the six integrations side
    by side): the wait is raised; a server that starts sooner is used sooner."""
    with prefect_test_harness(server_startup_timeout=300):
        yield


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def rule(summary: dict[str, Any], rule_id: str) -> dict[str, Any]:
    return summary["rules"][rule_id]


def gate_flow(tmp_path: Path, records: list[dict[str, Any]], **options: Any) -> Any:
    """A flow that writes the data, then gates it; returns the flow run's final state."""
    gate = preflight_task()

    @prefect.flow(name="prepare")
    def prepare() -> dict[str, Any]:
        data = write_jsonl(tmp_path / "data.jsonl", records)
        return gate(data, rules=RULES, out=tmp_path / "out", **options)

    return prepare(return_state=True)


def test_a_failed_gate_fails_the_flow_run(tmp_path: Path) -> None:
    state = gate_flow(tmp_path, FAULTY, artifact_key="preflight-faulty")
    assert state.is_failed()
    assert "preflight gate failed" in state.message
    assert "hidden" in state.message
    with pytest.raises(PreflightFailed) as info:
        state.result()
    assert info.value.report.rule("hidden").codes == {"zero_width_space": 1}
    assert (tmp_path / "out" / "report.json").is_file()  # written before the task failed
    artifact = Artifact.get("preflight-faulty")
    assert artifact is not None
    assert "FAIL" in artifact.data
    assert "hidden" in artifact.data


def test_clean_data_completes_with_the_summary(tmp_path: Path) -> None:
    state = gate_flow(tmp_path, CLEAN, artifact_key="preflight-clean")
    assert state.is_completed()
    summary = state.result()
    assert summary["verdict"] == "pass"
    assert summary["reasons"] == []
    assert summary["records"] == 2
    assert rule(summary, "hidden") == {"check": "invisible_unicode", "severity": "error",
                                       "status": "pass", "blocking": True, "violations": 0,
                                       "codes": {}}
    assert summary["report"] == str(tmp_path / "out" / "report.json")
    assert json.loads(json.dumps(summary)) == summary
    assert "PASS" in Artifact.get("preflight-clean").data


def test_fail_false_reports_without_failing(tmp_path: Path) -> None:
    state = gate_flow(tmp_path, FAULTY, fail=False, artifact_key=None)
    assert state.is_completed()
    summary = state.result()
    assert summary["verdict"] == "fail"
    assert rule(summary, "hidden")["codes"] == {"zero_width_space": 1}


def test_run_gate_outside_a_run_publishes_nothing(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", FAULTY)
    summary = run_gate(data, rules=RULES, fail=False, artifact_key="preflight-outside")
    assert summary["verdict"] == "fail"
    assert summary["report"] is None
    assert Artifact.get("preflight-outside") is None
    with pytest.raises(PreflightFailed):
        run_gate(data, rules=RULES, artifact_key=None)


def test_missing_prefect_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prefect", None)  # import prefect now raises ImportError
    with pytest.raises(ConfigError, match=r"dataset-preflight\[prefect\]"):
        preflight_task()
