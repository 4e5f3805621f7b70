"""Fix refuses output names that ``preflight check --out`` writes into its report folder.
Found by a hostile review: ``fix --quarantine o/report.json`` and then ``check --out o``
replaced the quarantine with the report (and ``fix --out o/findings.parquet`` replaced a
check's findings), with no word."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from preflight.cli import main


@pytest.mark.parametrize(("flag", "name"), [("--out", "findings.parquet"),
                                            ("--quarantine", "report.json"),
                                            ("--manifest", "report.json")])
def test_fix_refuses_a_report_name(tmp_path: Path, flag: str, name: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "one\u200btwo"}\n')
    paths = {"--out": tmp_path / "o" / "clean.jsonl", "--quarantine": tmp_path / "o" / "q.jsonl",
             "--manifest": tmp_path / "o" / "m.json"}
    paths[flag] = tmp_path / "o" / name
    args = ["fix", str(src), "--no-progress"]
    for k, v in paths.items():
        args += [k, str(v)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert f"{name} is a name `preflight check --out` writes" in result.output
    assert not (tmp_path / "o").exists()
