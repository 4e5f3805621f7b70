"""The Dagster asset checks, run in a real in-process Dagster job."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

dg = pytest.importorskip("dagster")

from preflight import ConfigError  # noqa: E402
from preflight.integrations.dagster import preflight_asset_checks  # noqa: E402

CLEAN = [
    {"id": "a1", "text": "The quick brown fox jumps over the lazy dog."},
    {"id": "a2", "text": "A second, entirely different sentence about rivers."},
    {"id": "a3", "text": "Third line, about mountains and the weather up there."},
]
HIDDEN = {"id": "a4", "text": "hidden\u200bspace in here"}
DUPLICATE = {"id": "a5", "text": CLEAN[0]["text"]}
RULES = {"rules": [
    {"id": "hidden-chars", "check": "invisible_unicode", "severity": "error"},
    {"id": "dupes", "check": "exact_duplicate", "severity": "warn"},
]}


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def pipeline(tmp_path: Path, records: list[dict[str, Any]], **kwargs: Any) -> Any:
    """corpus (writes the JSONL) -> train, with the preflight checks on corpus; run it."""
    data = tmp_path / "corpus.jsonl"

    @dg.asset
    def corpus() -> None:
        write_jsonl(data, records)

    @dg.asset(deps=[corpus])
    def train() -> None:
        pass

    kwargs.setdefault("out", tmp_path / "report")
    source = kwargs.pop("source", data)
    checks = preflight_asset_checks(corpus, source, kwargs.pop("rules", RULES), **kwargs)
    return dg.materialize([corpus, train, *checks], raise_on_error=False)


def evaluations(result: Any) -> dict[str, Any]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def materialized(result: Any) -> set[str]:
    return {m.asset_key.to_user_string() for m in result.get_asset_materialization_events()}


def test_failing_error_rule_is_an_error_and_blocks_downstream(tmp_path: Path) -> None:
    result = pipeline(tmp_path, [*CLEAN, HIDDEN, DUPLICATE])
    checks = evaluations(result)
    assert set(checks) == {"preflight_hidden_chars", "preflight_dupes", "preflight_gate"}

    hidden = checks["preflight_hidden_chars"]
    assert not hidden.passed
    assert hidden.severity == dg.AssetCheckSeverity.ERROR
    assert hidden.blocking
    meta = {k: v.value for k, v in hidden.metadata.items()}
    assert meta["violations"] == 1
    assert meta["fraction"] == pytest.approx(0.2)
    assert meta["codes"] == {"zero_width_space": 1}
    assert [e["row"] for e in meta["examples"]] == [3]  # rows count from 0
    assert meta["report"] == str(tmp_path / "report" / "report.json")

    dupes = checks["preflight_dupes"]
    assert not dupes.passed
    assert dupes.severity == dg.AssetCheckSeverity.WARN
    assert not dupes.blocking

    gate = checks["preflight_gate"]
    assert not gate.passed and gate.severity == dg.AssetCheckSeverity.ERROR
    assert any("hidden-chars" in reason for reason in gate.metadata["reasons"].value)

    assert not result.success
    assert materialized(result) == {"corpus"}  # the blocking check stopped train


def test_clean_data_passes_every_check_and_runs_downstream(tmp_path: Path) -> None:
    result = pipeline(tmp_path, CLEAN)
    checks = evaluations(result)
    assert len(checks) == 3
    assert all(c.passed for c in checks.values())
    assert checks["preflight_hidden_chars"].metadata["violations"].value == 0
    assert result.success
    assert materialized(result) == {"corpus", "train"}


def test_failing_warn_rule_does_not_block(tmp_path: Path) -> None:
    result = pipeline(tmp_path, [*CLEAN, DUPLICATE], out=None)
    checks = evaluations(result)
    assert not checks["preflight_dupes"].passed
    assert checks["preflight_dupes"].severity == dg.AssetCheckSeverity.WARN
    assert checks["preflight_dupes"].metadata["codes"].value == {"exact_duplicate_of": 1}
    assert "report" not in checks["preflight_dupes"].metadata  # no out, no report file
    assert checks["preflight_hidden_chars"].passed and checks["preflight_gate"].passed
    assert result.success
    assert materialized(result) == {"corpus", "train"}


def test_strict_makes_a_warn_rule_block(tmp_path: Path) -> None:
    result = pipeline(tmp_path, [*CLEAN, DUPLICATE], strict=True)
    dupes = evaluations(result)["preflight_dupes"]
    assert not dupes.passed and dupes.blocking
    assert dupes.severity == dg.AssetCheckSeverity.ERROR
    assert materialized(result) == {"corpus"}


def test_source_can_be_a_callable_returning_a_dataset(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = [*CLEAN, HIDDEN]
    result = pipeline(tmp_path, rows, name="hf",
                      source=lambda: datasets.Dataset.from_list(rows))
    checks = evaluations(result)
    assert set(checks) == {"hf_hidden_chars", "hf_dupes", "hf_gate"}
    assert not checks["hf_hidden_chars"].passed
    assert checks["hf_hidden_chars"].metadata["codes"].value == {"zero_width_space": 1}


def test_empty_input_fails_the_gate_check(tmp_path: Path) -> None:
    result = pipeline(tmp_path, [])
    gate = evaluations(result)["preflight_gate"]
    assert not gate.passed
    assert "no readable records in the input" in gate.metadata["reasons"].value
    assert materialized(result) == {"corpus"}


def test_smoke_adds_a_check(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    rules = {**RULES, "smoke": {"steps": 4, "samples": 4, "device": "cpu"}}
    result = pipeline(tmp_path, CLEAN, rules=rules, smoke=True)
    smoke = evaluations(result)["preflight_smoke"]
    assert smoke.blocking
    assert smoke.metadata["verdict"].value == "pass", smoke.metadata["reason"].value
    assert smoke.passed


def test_rule_ids_that_collide_as_check_names_are_a_config_error() -> None:
    rules = {"rules": [{"id": "a-b", "check": "empty"}, {"id": "a.b", "check": "empty"}]}
    with pytest.raises(ConfigError, match="preflight_a_b"):
        preflight_asset_checks("corpus", "data.jsonl", rules)


def test_missing_dagster_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dagster", None)  # makes `import dagster` fail
    with pytest.raises(ConfigError, match=r"dataset-preflight\[dagster\]"):
        preflight_asset_checks("corpus", "data.jsonl", RULES)


def test_checks_on_two_assets_cannot_share_one_report_folder(tmp_path: Path) -> None:
    # Each run replaces report.json in `out`: the second asset's run used to overwrite the
    # first's report, whose checks then linked to a report about the other asset's data.
    out = tmp_path / "report"
    preflight_asset_checks("corpus_a", tmp_path / "a.jsonl", RULES, out=out)
    with pytest.raises(ConfigError, match=r"already the report folder .*'preflight' on asset "
                                          r"corpus_a.* on asset corpus_b"):
        preflight_asset_checks("corpus_b", tmp_path / "b.jsonl", RULES, out=out)
    with pytest.raises(ConfigError, match="already the report folder"):  # another name, same asset
        preflight_asset_checks("corpus_a", tmp_path / "a.jsonl", RULES, out=out, name="other")
    # The same folder, spelt otherwise.
    with pytest.raises(ConfigError, match="already the report folder"):
        preflight_asset_checks("corpus_b", tmp_path / "b.jsonl", RULES,
                               out=f"{out}/../{out.name}/")
    # The checks defined first are still this process's, whether or not anything holds them
    # (a notebook cell re-run after renaming its asset): the message says how to get past it.
    with pytest.raises(ConfigError, match="notebook cell re-run after renaming the asset "
                                          "needs a kernel restart, or the new out"):
        preflight_asset_checks("corpus_b", tmp_path / "b.jsonl", RULES, out=out)
    # Defining the same checks again (a reload) is not a clash.
    preflight_asset_checks("corpus_a", tmp_path / "a.jsonl", RULES, out=out)


def test_checks_on_two_assets_with_their_own_folders_keep_their_own_reports(
        tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", CLEAN)
    second = write_jsonl(tmp_path / "b.jsonl", [*CLEAN, HIDDEN])

    @dg.asset
    def corpus_a() -> None:
        pass

    @dg.asset
    def corpus_b() -> None:
        pass

    checks = [*preflight_asset_checks(corpus_a, first, RULES, out=tmp_path / "a"),
              *preflight_asset_checks(corpus_b, second, RULES, out=tmp_path / "b")]
    result = dg.materialize([corpus_a, corpus_b, *checks], raise_on_error=False)
    gates = {e.asset_key.to_user_string(): e for e in result.get_asset_check_evaluations()
             if e.check_name == "preflight_gate"}
    assert gates["corpus_a"].passed and not gates["corpus_b"].passed
    for asset, data in (("corpus_a", first), ("corpus_b", second)):
        report = json.loads(Path(gates[asset].metadata["report"].value).read_text())
        assert report["source"]["path"] == str(data)
