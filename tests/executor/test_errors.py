"""Choosing an executor: mistakes are exit 2 with a message that says what to do, before any
data is read, whether or not Ray is installed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight import ConfigError, FixOptions, run_preflight
from preflight.cli import main

RAY = importlib.util.find_spec("ray") is not None


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(5)))
    return path


def check(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", "--no-smoke", *map(str, args)])
    return result.exit_code, result.output


def test_address_needs_the_ray_executor(data: Path, tmp_path: Path) -> None:
    code, out = check(data, "--address", "ray://head:10001", "--out", tmp_path / "o")
    assert code == 2
    assert "--executor ray" in out


def test_limit_is_for_the_local_executor(data: Path, tmp_path: Path) -> None:
    code, out = check(data, "--executor", "ray", "--limit", "2", "--out", tmp_path / "o")
    assert code == 2
    assert "--limit" in out and "local" in out
    assert not (tmp_path / "o" / "report.json").exists()


def test_unknown_executor(data: Path, tmp_path: Path) -> None:
    code, out = check(data, "--executor", "spark", "--out", tmp_path / "o")
    assert code == 2
    assert "local" in out and "ray" in out
    with pytest.raises(ConfigError, match="unknown executor"):
        run_preflight(data, executor="spark", smoke=False)


def test_a_datasets_object_runs_locally_only() -> None:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": ["a", "b"]})
    with pytest.raises(ConfigError, match="local executor"):
        run_preflight(ds, executor="ray", smoke=False)


def test_fix_runs_locally_only(data: Path, tmp_path: Path) -> None:
    options = FixOptions(out=tmp_path / "clean.jsonl", quarantine=tmp_path / "q.jsonl")
    with pytest.raises(ConfigError, match="local executor"):
        run_preflight(data, fix=options, executor="ray")


@pytest.mark.skipif(RAY, reason="Ray is installed here; this is about it missing")
def test_missing_ray_names_the_extra(data: Path, tmp_path: Path) -> None:
    code, out = check(data, "--executor", "ray", "--out", tmp_path / "o")
    assert code == 2
    assert "dataset-preflight[ray]" in out
