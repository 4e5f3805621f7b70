"""`preflight diff OLD NEW` on reports of the gate run twice over two versions of one file:
rules that started or stopped failing, grown counts, new and removed rules, the smoke verdict;
exit 0 when no rule got worse, 1 when one did, 2 for a report that cannot be read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from preflight.report.diff import diff_reports
from preflight.report.model import load_report
from tests.report.conftest import Run, flat, gate, invoke

RULES: dict[str, Any] = {
    "fields": {"text": "text", "id": "id"},
    "rules": [{"id": "hidden", "check": "invisible_unicode"},
              {"id": "empty", "check": "empty", "severity": "warn"}],
}
# The same rules plus one that fails on every record.
WITH_NEW = {**RULES, "rules": [*RULES["rules"],
                               {"id": "short", "check": "token_length", "max_tokens": 2}]}
# The same rules less `empty`.
WITHOUT_EMPTY = {**RULES, "rules": RULES["rules"][:1]}


def version(zero_width_rows: tuple[int, ...]) -> list[dict[str, Any]]:
    """Ten records, with a zero-width space planted in ``zero_width_rows``."""
    return [{"id": f"d{i}",
             "text": f"Record {i}\u200b is here." if i in zero_width_rows
             else f"Record {i} is here."} for i in range(10)]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """report.json of each run by name; every run reads the same path, rewritten between."""
    tmp = tmp_path_factory.mktemp("diff")
    data = tmp / "data.jsonl"
    plan = {
        "clean": ((), RULES),
        "clean-again": ((), RULES),
        "one-hidden": ((3,), RULES),
        "three-hidden": ((3, 5, 7), RULES),
        "clean-new-rule": ((), WITH_NEW),
        "clean-fewer-rules": ((), WITHOUT_EMPTY),
    }
    out = {}
    for name, (rows, rules) in plan.items():
        run = gate(data, version(rows), rules, tmp / name, formats=("json",))
        out[name] = run.path("json")
    return out


def diff(old: Path, new: Path, *extra: str) -> tuple[int, str]:
    result = invoke("diff", old, new, *extra)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def diff_json(old: Path, new: Path) -> tuple[int, dict[str, Any]]:
    code, output = diff(old, new, "--json")
    return code, json.loads(output)


def changes(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in payload["rules"]}


def row(output: str, rule_id: str) -> list[str]:
    """The cells of a rule's line in the console table."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").split("│")]
        if len(cells) > 2 and cells[1] == rule_id:
            return cells
    raise AssertionError(f"{rule_id} not listed:\n{output}")


def test_rule_that_started_failing_is_worse(reports: dict[str, Path]) -> None:
    code, output = diff(reports["clean"], reports["one-hidden"])
    assert code == 1
    assert row(output, "hidden")[:4] == ["worse", "hidden", "invisible_unicode", "pass → fail"]
    assert row(output, "hidden")[4:] == ["0 → 1", "+1"]
    assert "WORSE a rule got worse" in flat(output)
    assert "old: " in output and "(pass) → new:" in flat(output) and "(fail)" in output


def test_rule_that_stopped_failing_is_better(reports: dict[str, Path]) -> None:
    code, output = diff(reports["one-hidden"], reports["clean"])
    assert code == 0
    assert row(output, "hidden")[:4] == ["better", "hidden", "invisible_unicode", "fail → pass"]
    assert "OK no rule got worse" in flat(output)


def test_violations_that_grew_while_failing_are_worse(reports: dict[str, Path]) -> None:
    code, payload = diff_json(reports["one-hidden"], reports["three-hidden"])
    assert code == 1
    hidden = changes(payload)["hidden"]
    assert (hidden["change"], hidden["old_status"], hidden["new_status"]) == (
        "worse", "fail", "fail")
    assert (hidden["old_violations"], hidden["new_violations"], hidden["delta"]) == (1, 3, 2)
    assert payload["worse"] is True


def test_violations_that_shrank_while_failing_are_better(reports: dict[str, Path]) -> None:
    code, output = diff(reports["three-hidden"], reports["one-hidden"])
    assert code == 0
    assert row(output, "hidden")[0] == "better"
    assert row(output, "hidden")[-1] == "-2"


def test_unchanged_reports(reports: dict[str, Path]) -> None:
    code, output = diff(reports["clean"], reports["clean-again"])
    assert code == 0
    assert "no rule changed" in output
    assert "OK no rule got worse" in flat(output)
    code, payload = diff_json(reports["clean"], reports["clean-again"])
    assert code == 0
    assert {c["change"] for c in payload["rules"]} == {"same"}


def test_a_report_against_itself(reports: dict[str, Path]) -> None:
    code, output = diff(reports["three-hidden"], reports["three-hidden"])
    assert (code, "no rule changed" in output) == (0, True)


def test_new_failing_rule_is_worse(reports: dict[str, Path]) -> None:
    code, payload = diff_json(reports["clean"], reports["clean-new-rule"])
    assert code == 1
    short = changes(payload)["short"]
    assert (short["change"], short["old_status"], short["new_status"]) == ("new", None, "fail")
    assert short["new_violations"] == 10
    assert payload["worse"] is True
    code, output = diff(reports["clean"], reports["clean-new-rule"])
    assert code == 1
    assert row(output, "short")[:4] == ["new", "short", "token_length", "— → fail"]


def test_removed_rules_are_listed_and_not_worse(reports: dict[str, Path]) -> None:
    code, output = diff(reports["clean"], reports["clean-fewer-rules"])
    assert code == 0
    assert row(output, "empty")[:4] == ["removed", "empty", "empty", "pass → —"]
    # a failing rule that goes away is not worse either
    code, output = diff(reports["clean-new-rule"], reports["clean"])
    assert code == 0
    assert row(output, "short")[:4] == ["removed", "short", "token_length", "fail → —"]


def test_smoke_pass_to_data_fault_is_worse(smoke_pass: Run, smoke_fail: Run) -> None:
    code, output = diff(smoke_pass.path("json"), smoke_fail.path("json"))
    assert code == 1
    assert "no rule changed" in output
    assert "smoke test: pass → data_fault" in output
    assert "WORSE" in output
    code, payload = diff_json(smoke_pass.path("json"), smoke_fail.path("json"))
    assert (code, payload["smoke"], payload["worse"]) == (1, ["pass", "data_fault"], True)


def test_smoke_data_fault_to_pass_is_not_worse(smoke_pass: Run, smoke_fail: Run) -> None:
    code, output = diff(smoke_fail.path("json"), smoke_pass.path("json"))
    assert code == 0
    assert "smoke test: data_fault → pass" in output


@pytest.mark.parametrize(("old", "new"), [
    ("clean", "one-hidden"), ("three-hidden", "one-hidden"), ("clean", "clean-new-rule"),
    ("clean-new-rule", "clean-fewer-rules"),
])
def test_json_output_parses_and_matches_the_comparison(reports: dict[str, Path], old: str,
                                                       new: str) -> None:
    code, payload = diff_json(reports[old], reports[new])
    expected = diff_reports(load_report(reports[old]), load_report(reports[new]))
    assert payload == expected.model_dump(mode="json")
    assert code == (1 if expected.worse else 0)
    source = load_report(reports[old]).source.path
    assert payload["old"] == payload["new"] == source  # one file, two versions
    assert (payload["old_verdict"], payload["new_verdict"]) == (
        load_report(reports[old]).verdict, load_report(reports[new]).verdict)


def test_console_lists_worst_first(reports: dict[str, Path]) -> None:
    _, output = diff(reports["one-hidden"], reports["clean-new-rule"])
    listed = [line.split("│")[0].strip() for line in output.splitlines() if "│" in line]
    assert listed == ["new", "better"]


@pytest.mark.parametrize("which", ["old", "new"])
def test_missing_report_exits_2(reports: dict[str, Path], tmp_path: Path, which: str) -> None:
    missing = tmp_path / "nope" / "report.json"
    args = (missing, reports["clean"]) if which == "old" else (reports["clean"], missing)
    code, output = diff(*args)
    assert code == 2
    assert f"error: report not found: {missing}" in flat(output)


def test_not_a_report_exits_2(reports: dict[str, Path], tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"verdict": "pass"}), encoding="utf-8")
    code, output = diff(reports["clean"], other)
    assert code == 2
    assert "is not a preflight report.json" in flat(output)
