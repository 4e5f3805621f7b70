"""An output path that is also something preflight reads: the data, the eval file, the report
being rendered, or another output. Each is exit 2 before anything is removed or written;
before, `check out/report.json --out out` deleted its own input (the run clears the last
run's report files first) and `report render R --md R` overwrote the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from preflight import ConfigError, run_preflight
from preflight.cli import main

RECORDS = "".join(json.dumps({"text": f"record number {i}"}) + "\n" for i in range(3))


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("name", ["report.json", "findings.parquet", "smoke-replay.pt"])
def test_check_refuses_an_input_named_as_one_of_its_outputs(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    data = out / name
    if name == "findings.parquet":
        import polars as pl

        pl.DataFrame({"text": ["a b", "c d"]}).write_parquet(data)
    elif name == "report.json":
        data.write_text(json.dumps([{"text": "a b"}, {"text": "c d"}]))
    else:
        data.write_bytes(b"not data")
    before = data.read_bytes()
    result = invoke("check", data, "--out", out, "--no-smoke", "-q")
    if name == "smoke-replay.pt":  # not a data format: exit 3, and the file stays
        assert result.exit_code == 3, result.output
    else:
        assert result.exit_code == 2, result.output
        assert "is the input" in result.output and name in result.output
    assert data.read_bytes() == before


def test_check_refuses_an_eval_file_named_as_an_output(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text(RECORDS)
    out = tmp_path / "out"
    out.mkdir()
    eval_file = out / "report.json"
    eval_file.write_text(json.dumps([{"text": "record number 1"}]))
    with pytest.raises(ConfigError, match="is the eval file"):
        run_preflight(
            data,
            out=out,
            smoke=False,
            rules={"eval": str(eval_file), "rules": [{"id": "o", "check": "overlap"}]},
        )
    assert eval_file.exists()


def test_unreadable_input_named_as_an_output_is_kept(tmp_path: Path) -> None:
    # exit 3 clears the last run's report files; not the input itself
    out = tmp_path / "out"
    out.mkdir()
    data = out / "report.md"
    data.write_text(RECORDS)
    result = invoke("check", data, "--out", out, "--no-smoke", "-q")
    assert result.exit_code == 3, result.output
    assert data.read_text() == RECORDS


@pytest.fixture
def report_json(tmp_path: Path) -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text(RECORDS)
    run_preflight(data, out=tmp_path / "r", smoke=False, formats=["json"])
    return tmp_path / "r" / "report.json"


@pytest.mark.parametrize("fmt", ["md", "html", "junit"])
def test_render_refuses_to_overwrite_the_report(report_json: Path, fmt: str) -> None:
    before = report_json.read_bytes()
    result = invoke("report", "render", report_json, f"--{fmt}", report_json)
    assert result.exit_code == 2, result.output
    assert "is the report being rendered" in result.output
    assert report_json.read_bytes() == before


def test_render_refuses_one_path_for_two_formats(report_json: Path, tmp_path: Path) -> None:
    target = tmp_path / "x.md"
    result = invoke("report", "render", report_json, "--md", target, "--html", target)
    assert result.exit_code == 2, result.output
    assert "same file" in result.output
    assert not target.exists()


def test_render_to_a_folder_is_a_usage_error(report_json: Path, tmp_path: Path) -> None:
    result = invoke("report", "render", report_json, "--md", tmp_path)
    assert result.exit_code == 2, result.output
    assert "is a folder" in result.output


def test_a_second_run_into_a_folder_being_written_stops(tmp_path: Path) -> None:
    # Two runs into one --out at once mixed their files (report.json of one beside
    # findings.parquet of the other). The folder is locked while a run writes there.
    from preflight.out_folder import locked_out_dir

    data = tmp_path / "d.jsonl"
    data.write_text(RECORDS)
    out = tmp_path / "out"
    run_preflight(data, out=out, smoke=False, formats=["json"])
    before = (out / "report.json").read_bytes()
    with locked_out_dir(out):  # another run, mid-way
        with pytest.raises(ConfigError, match="another preflight run is writing"):
            run_preflight(data, out=out, smoke=False)
        result = invoke("check", data, "--out", out, "--no-smoke", "-q")
        assert result.exit_code == 2, result.output
        assert (out / "report.json").read_bytes() == before  # nothing of it removed
    run_preflight(data, out=out, smoke=False, formats=["json"])  # released: runs again
    assert sorted(p.name for p in out.iterdir()) == ["findings.parquet", "report.json"]


def test_a_checkpoint_named_as_the_replay_file_is_kept(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(RECORDS)
    out = tmp_path / "out"
    out.mkdir()
    checkpoint = out / "smoke-replay.pt"
    checkpoint.write_bytes(b"weights")
    with pytest.raises(ConfigError, match="is the checkpoint"):
        run_preflight(
            data,
            out=out,
            smoke=True,
            rules={
                "smoke": {"checkpoint": str(checkpoint)},
                "rules": [{"id": "e", "check": "empty"}],
            },
        )
    assert checkpoint.read_bytes() == b"weights"
