"""`preflight check --format` writes the chosen report files; `preflight report render` makes
the same bytes again from report.json alone; unreadable reports exit 2 with a message."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import Result

from tests.report.conftest import (
    CUT_NOTE,
    FILES,
    SMOKE_RULES,
    failing_case,
    flat,
    invoke,
    passing_case,
    smoke_fail_records,
    write_jsonl,
    write_rules,
)

RENDERED = ("html", "junit", "md")


def check(data: Path, rules: Path, out: Path, *extra: str) -> Result:
    result = invoke("check", data, "--rules", rules, "--out", out, "--no-progress", *extra)
    assert "Traceback" not in result.output
    return result


def written(out: Path) -> set[str]:
    return {p.name for p in out.iterdir()}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory, one_torch_thread: None) -> dict[str, Path]:
    """`check --format json,html,junit,md` on the failing corpus (no smoke test) and on the
    regression corpus whose smoke test fails: the --out folder of each."""
    tmp = tmp_path_factory.mktemp("checked")
    records, raw, rules = failing_case()
    failing = check(write_jsonl(tmp / "failing.jsonl", records, raw),
                    write_rules(tmp / "failing.json", rules), tmp / "failing",
                    "--no-smoke", "--format", "json,html,junit,md")
    assert failing.exit_code == 1, failing.output
    smoke = check(write_jsonl(tmp / "smoke.jsonl", smoke_fail_records()),
                  write_rules(tmp / "smoke.json", SMOKE_RULES), tmp / "smoke",
                  "--format", "json,html,junit,md")
    assert smoke.exit_code == 1, smoke.output
    return {"failing": tmp / "failing", "smoke": tmp / "smoke"}


# -------------------------------------------------------------------------- check --format


def test_check_writes_every_chosen_format(checked: dict[str, Path]) -> None:
    assert written(checked["failing"]) == {*FILES.values(), "findings.parquet"}
    assert written(checked["smoke"]) >= {*FILES.values(), "findings.parquet"}


def test_check_writes_json_and_html_by_default(tmp_path: Path) -> None:
    records, rules = passing_case()
    result = check(write_jsonl(tmp_path / "data.jsonl", records),
                   write_rules(tmp_path / "rules.json", rules), tmp_path / "out", "--no-smoke")
    assert result.exit_code == 0, result.output
    assert written(tmp_path / "out") == {"report.json", "report.html", "findings.parquet"}


def test_check_writes_only_the_formats_asked(tmp_path: Path) -> None:
    records, rules = passing_case()
    result = check(write_jsonl(tmp_path / "data.jsonl", records),
                   write_rules(tmp_path / "rules.json", rules), tmp_path / "out", "--no-smoke",
                   "--format", " MD , junit,md")
    assert result.exit_code == 0, result.output
    assert written(tmp_path / "out") == {"report.md", "report.junit.xml", "findings.parquet"}


def test_check_rejects_an_unknown_format(tmp_path: Path) -> None:
    records, rules = passing_case()
    result = check(write_jsonl(tmp_path / "data.jsonl", records),
                   write_rules(tmp_path / "rules.json", rules), tmp_path / "out", "--no-smoke",
                   "--format", "json,pdf")
    assert result.exit_code == 2
    assert "--format 'json,pdf': choose from json, html, junit, md" in flat(result.output)
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------- report render


@pytest.mark.parametrize("run", ["failing", "smoke"])
def test_render_into_given_paths_makes_the_same_bytes(checked: dict[str, Path], run: str,
                                                      tmp_path: Path) -> None:
    out = checked[run]
    # report.json alone, in a folder of its own
    alone = tmp_path / "alone" / "report.json"
    alone.parent.mkdir()
    shutil.copy(out / "report.json", alone)
    targets = {"html": tmp_path / "a" / "page.html", "junit": tmp_path / "b" / "ci.xml",
               "md": tmp_path / "c" / "pr.md"}
    result = invoke("report", "render", alone, "--html", targets["html"],
                    "--junit", targets["junit"], "--md", targets["md"])
    assert result.exit_code == 0, result.output
    for fmt, path in targets.items():
        assert path.read_bytes() == (out / FILES[fmt]).read_bytes(), fmt
        assert f"{fmt}: {path}" in flat(result.output)
    assert written(alone.parent) == {"report.json"}


def test_render_with_no_option_writes_all_three_beside_the_json(checked: dict[str, Path],
                                                                tmp_path: Path) -> None:
    shutil.copy(checked["failing"] / "report.json", tmp_path / "report.json")
    result = invoke("report", "render", tmp_path / "report.json")
    assert result.exit_code == 0, result.output
    assert written(tmp_path) == set(FILES.values())
    for fmt in RENDERED:
        name = FILES[fmt]
        assert (tmp_path / name).read_bytes() == (checked["failing"] / name).read_bytes(), fmt


def test_render_one_format_writes_only_that(checked: dict[str, Path], tmp_path: Path) -> None:
    shutil.copy(checked["failing"] / "report.json", tmp_path / "report.json")
    result = invoke("report", "render", tmp_path / "report.json", "--junit", tmp_path / "j.xml")
    assert result.exit_code == 0, result.output
    assert written(tmp_path) == {"report.json", "j.xml"}


def test_render_md_max_chars(checked: dict[str, Path], tmp_path: Path) -> None:
    full = (checked["failing"] / "report.md").read_text(encoding="utf-8")
    limit = len(full) - 1
    result = invoke("report", "render", checked["failing"] / "report.json",
                    "--md", tmp_path / "short.md", "--md-max-chars", str(limit))
    assert result.exit_code == 0, result.output
    md = (tmp_path / "short.md").read_text(encoding="utf-8")
    assert len(md) <= limit
    assert md.rstrip("\n").endswith(CUT_NOTE)
    assert md.startswith("## ❌ preflight: **FAIL**")


def test_render_md_max_chars_has_a_floor(checked: dict[str, Path], tmp_path: Path) -> None:
    result = invoke("report", "render", checked["failing"] / "report.json",
                    "--md", tmp_path / "short.md", "--md-max-chars", "100")
    assert result.exit_code == 2
    assert "--md-max-chars" in result.output
    assert not (tmp_path / "short.md").exists()


def bad_reports(tmp: Path) -> dict[str, tuple[Path, str]]:
    """Files that are not a readable report, and the message each gets."""
    (tmp / "other.json").write_text('{"verdict": "pass"}', encoding="utf-8")
    (tmp / "page.html").write_text("<!DOCTYPE html><p>hi</p>", encoding="utf-8")
    (tmp / "binary.json").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    (tmp / "folder").mkdir()
    return {
        "missing": (tmp / "missing.json", "report not found"),
        "other json": (tmp / "other.json", "is not a preflight report.json"),
        "html": (tmp / "page.html", "is not a preflight report.json"),
        "binary": (tmp / "binary.json", "cannot read report"),
        "folder": (tmp / "folder", "cannot read report"),
    }


@pytest.mark.parametrize("case", ["missing", "other json", "html", "binary", "folder"])
def test_render_of_a_missing_or_invalid_report_exits_2(tmp_path: Path, case: str) -> None:
    path, message = bad_reports(tmp_path)[case]
    before = {p.name for p in tmp_path.iterdir()}
    result = invoke("report", "render", path)
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert "internal error" not in result.output
    assert message in flat(result.output)
    assert str(path) in flat(result.output)
    assert {p.name for p in tmp_path.iterdir()} == before
