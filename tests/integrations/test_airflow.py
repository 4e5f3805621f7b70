"""PreflightOperator in a real Airflow DAG run in-process with ``dag.test()``: a failed gate
fails the task (and its summary still reaches XCom), a clean corpus passes it."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Not importorskip: Airflow reads AIRFLOW_HOME and its database URL when first imported, so
# the import waits for the fixture below, which points both at a scratch folder.
if importlib.util.find_spec("airflow") is None:
    pytest.skip("apache-airflow is not installed (extra [airflow])", allow_module_level=True)

RULES = {"fields": {"text": "text"},
         "rules": [{"id": "hidden-chars", "check": "invisible_unicode"}]}
CLEAN = [{"id": "a", "text": "hello world"}, {"id": "b", "text": "plain text"}]
FAULTY = [{"id": "a", "text": "hello world"}, {"id": "b", "text": "zero\u200bwidth"}]

# Airflow 3's dag.test() serializes the DAG from its file in the dags folder, so the DAG is a
# real file: write_data >> gate >> collect (all_done), the run's folder and rows in its conf.
DAG_FILE = f'''
from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

try:  # Airflow 3
    from airflow.sdk import DAG, task
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.decorators import task

from preflight.integrations.airflow import PreflightOperator

with DAG("preflight_gate", schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:

    @task
    def write_data(dag_run=None) -> str:
        path = Path(dag_run.conf["folder"]) / "data.jsonl"
        path.write_text("".join(json.dumps(r) + "\\n" for r in dag_run.conf["rows"]), "utf-8")
        return str(path)

    # The upstream XCom resolves into the templated `path` and sets the dependency.
    # retries=2: a failed gate must fail at once, not come back for a retry (no delay, so a
    # regression shows as extra tries instead of a wait).
    gate = PreflightOperator(task_id="gate", path=write_data(), rules={RULES!r},
                             out="{{{{ dag_run.conf['folder'] }}}}/report",
                             retries=2, retry_delay=timedelta(0))

    @task(trigger_rule="all_done")
    def collect(dag_run=None, ti=None) -> None:
        seen = {{"key": ti.xcom_pull(task_ids="gate", key="preflight"),
                "return": ti.xcom_pull(task_ids="gate")}}
        (Path(dag_run.conf["folder"]) / "seen.json").write_text(json.dumps(seen), "utf-8")

    gate >> collect()
'''


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private AIRFLOW_HOME with a migrated sqlite database; nothing else is started."""
    home = tmp_path_factory.mktemp("airflow-home")
    (home / "dags").mkdir()
    (home / "dags" / "preflight_gate.py").write_text(DAG_FILE, "utf-8")
    mp = pytest.MonkeyPatch()
    mp.setenv("AIRFLOW_HOME", str(home))
    mp.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{home / 'airflow.db'}")
    mp.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    mp.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(home / "dags"))
    from airflow.utils import db

    db.initdb()  # the in-process `airflow db migrate`
    yield home
    mp.undo()


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")


def _run_dag(home: Path, folder: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Run the DAG file once on ``rows``; the task states and what ``collect`` read."""
    spec = importlib.util.spec_from_file_location("preflight_gate_dag",
                                                  home / "dags" / "preflight_gate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test(run_conf={"folder": str(folder), "rows": rows})
    seen = json.loads((folder / "seen.json").read_text("utf-8"))
    tis = run.get_task_instances()
    seen["states"] = {ti.task_id: str(ti.state) for ti in tis}
    seen["tries"] = {ti.task_id: ti.try_number for ti in tis}
    return seen


def test_faulty_data_fails_the_task_with_the_summary_in_xcom(
        airflow_home: Path, tmp_path: Path) -> None:
    seen = _run_dag(airflow_home, tmp_path, FAULTY)
    # "failed", not "up_for_retry": AirflowFailException skips the gate's two retries.
    assert seen["states"] == {"write_data": "success", "gate": "failed", "collect": "success"}
    assert seen["tries"]["gate"] == 1
    summary = seen["key"]
    assert summary["verdict"] == "fail"
    assert any("hidden-chars" in r for r in summary["reasons"])
    rule = summary["rules"]["hidden-chars"]
    assert (rule["status"], rule["violations"], rule["codes"]) == ("fail", 1,
                                                                  {"zero_width_space": 1})
    assert summary["report"] == str(tmp_path / "report" / "report.json")  # `out` was templated
    assert Path(summary["report"]).is_file()
    assert seen["return"] is None  # a failed task returns nothing


def test_clean_data_passes_with_the_summary_in_xcom(airflow_home: Path, tmp_path: Path) -> None:
    seen = _run_dag(airflow_home, tmp_path, CLEAN)
    assert seen["states"] == {"write_data": "success", "gate": "success", "collect": "success"}
    summary = seen["return"]
    assert summary == seen["key"]
    assert summary["verdict"] == "pass"
    assert summary["reasons"] == []
    assert summary["records"] == 2
    assert summary["rules"]["hidden-chars"]["violations"] == 0
    assert json.loads(Path(summary["report"]).read_text("utf-8"))["verdict"] == "pass"


class _TI:
    """Just the part of a task instance that execute() touches."""

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_execute_raises_fail_exception_with_the_reason(airflow_home: Path,
                                                       tmp_path: Path) -> None:
    from preflight.integrations.airflow import AirflowFailException, PreflightOperator

    data = tmp_path / "faulty.jsonl"
    _write_jsonl(data, FAULTY)
    op = PreflightOperator(task_id="gate", path=str(data), rules=RULES, xcom_key="gate")
    ti = _TI()
    with pytest.raises(AirflowFailException, match=r"hidden-chars.*1 violation"):
        op.execute({"ti": ti})
    assert ti.pushed["gate"]["rules"]["hidden-chars"]["codes"] == {"zero_width_space": 1}
    assert ti.pushed["gate"]["report"] is None  # no `out`, no report file


def test_a_wrong_rules_file_fails_without_retry(airflow_home: Path, tmp_path: Path) -> None:
    from preflight.integrations.airflow import AirflowFailException, PreflightOperator

    data = tmp_path / "clean.jsonl"
    _write_jsonl(data, CLEAN)
    op = PreflightOperator(task_id="gate", path=str(data),
                           rules={"rules": [{"check": "no_such_check"}]})
    with pytest.raises(AirflowFailException, match="no_such_check"):
        op.execute({"ti": _TI()})


def test_an_out_that_renders_empty_fails_the_task(airflow_home: Path, tmp_path: Path) -> None:
    # out="{{ var.value.reports }}" with the variable unset renders "": the gate ran and
    # passed with no report written, and nothing said so.
    from preflight.integrations.airflow import AirflowFailException, PreflightOperator

    data = tmp_path / "clean.jsonl"
    _write_jsonl(data, CLEAN)
    op = PreflightOperator(task_id="gate", path=str(data), rules=RULES, out="")
    with pytest.raises(AirflowFailException, match="out is empty"):
        op.execute({"ti": _TI()})


def test_formats_as_one_comma_separated_string(airflow_home: Path, tmp_path: Path) -> None:
    """As run_preflight takes it: the operator made a tuple of its characters."""
    from preflight.integrations.airflow import PreflightOperator

    data = tmp_path / "clean.jsonl"
    _write_jsonl(data, CLEAN)
    op = PreflightOperator(task_id="gate", path=str(data), rules=RULES,
                           out=str(tmp_path / "out"), formats="json,md")
    summary = op.execute({"ti": _TI()})
    assert sorted(p.name for p in (tmp_path / "out").glob("report.*")) == ["report.json",
                                                                          "report.md"]
    assert summary["verdict"] == "pass"


def test_missing_airflow_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from preflight.errors import ConfigError

    monkeypatch.setitem(sys.modules, "airflow", None)  # makes `import airflow` fail
    monkeypatch.delitem(sys.modules, "preflight.integrations.airflow", raising=False)
    with pytest.raises(ConfigError, match=r"dataset-preflight\[airflow\]"):
        importlib.import_module("preflight.integrations.airflow")
