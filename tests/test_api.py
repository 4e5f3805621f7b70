"""The Python API: the public surface, run_preflight, Report and PreflightFailed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import preflight
from preflight import (
    ConfigError,
    InputError,
    PreflightError,
    PreflightFailed,
    Report,
    RuleSet,
    load_rules,
    run_preflight,
)

CLEAN = [
    {"id": "a1", "text": "The quick brown fox jumps over the lazy dog."},
    {"id": "a2", "text": "A second, entirely different sentence about rivers."},
]
FAULTY = [*CLEAN, {"id": "a3", "text": "hidden\u200bspace in here"}]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_all_is_sorted_and_resolves() -> None:
    assert preflight.__all__ == sorted(preflight.__all__)
    for name in preflight.__all__:
        assert getattr(preflight, name) is not None, name
    assert {"run_preflight", "load_rules", "Report", "PreflightFailed"} <= set(preflight.__all__)


def test_exception_tree_and_exit_codes() -> None:
    assert issubclass(ConfigError, PreflightError)
    assert issubclass(InputError, PreflightError)
    assert issubclass(PreflightFailed, PreflightError)
    assert (ConfigError.exit_code, InputError.exit_code, PreflightFailed.exit_code) == (2, 3, 1)


def test_run_preflight_on_a_clean_file(tmp_path: Path) -> None:
    report = run_preflight(write_jsonl(tmp_path / "clean.jsonl", CLEAN), smoke=False)
    assert isinstance(report, Report)
    assert report.passed
    assert report.verdict == "pass"
    assert report.source.records == 2
    assert report.raise_for_status() is report


def test_raise_for_status_on_a_failing_run(tmp_path: Path) -> None:
    report = run_preflight(str(write_jsonl(tmp_path / "faulty.jsonl", FAULTY)), smoke=False)
    assert not report.passed
    with pytest.raises(PreflightFailed) as info:
        report.raise_for_status()
    assert info.value.report is report
    assert info.value.exit_code == 1
    assert "hidden-chars" in str(info.value)
    assert report.rule("hidden-chars").codes == {"zero_width_space": 1}


def test_run_preflight_on_a_datasets_dataset() -> None:
    datasets = pytest.importorskip("datasets")
    good = datasets.Dataset.from_dict({"id": [1, 2], "text": ["hello world", "bye now"]})
    report = run_preflight(good, smoke=False)
    assert report.passed
    assert report.source.records == 2

    bad = datasets.Dataset.from_dict({"text": ["hello world", "bad\u202etext"]})
    report = run_preflight(bad, smoke=False)
    assert not report.passed
    assert report.rule("hidden-chars").codes == {"bidi_control": 1}
    assert report.rule("hidden-chars").examples[0].row == 1


def test_rules_as_a_dict(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "faulty.jsonl", FAULTY)
    rules = {"fields": {"text": "text"}, "rules": [{"id": "only-empty", "check": "empty"}]}
    report = run_preflight(data, rules=rules, smoke=False)
    assert report.passed  # the hidden character is not checked by these rules
    assert "only-empty" in [r.id for r in report.rules]
    assert "hidden-chars" not in [r.id for r in report.rules]
    assert report.rules_file.path is None


def test_rules_as_a_path_and_as_a_ruleset(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "faulty.jsonl", FAULTY)
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {id: hidden, check: invisible_unicode}\n")
    for given in (rules, str(rules)):
        report = run_preflight(data, rules=given, smoke=False)
        assert not report.passed
        assert report.rule("hidden").status == "fail"
        assert report.rules_file.path == str(rules)
    ruleset = load_rules(rules)
    assert isinstance(ruleset, RuleSet)
    assert run_preflight(data, rules=ruleset, smoke=False).rule("hidden").violations == 1


def test_preset_keyword(tmp_path: Path) -> None:
    report = run_preflight(write_jsonl(tmp_path / "clean.jsonl", CLEAN), preset="pretrain-text",
                           smoke=False)
    assert report.passed
    assert report.rules_file.preset == "pretrain-text"


def test_out_none_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_jsonl(tmp_path / "faulty.jsonl", FAULTY)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    report = run_preflight(data, out=None, smoke=False)
    assert not report.passed
    assert report.outputs == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_out_writes_report_and_findings(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "faulty.jsonl", FAULTY)
    report = run_preflight(data, out=tmp_path / "out", smoke=False)
    assert (tmp_path / "out" / "report.json").is_file()
    assert (tmp_path / "out" / "findings.parquet").is_file()
    assert (tmp_path / "out" / "report.html").is_file()  # json and html by default
    assert set(report.outputs) == {"report", "findings", "html"}
    junit_only = run_preflight(data, out=tmp_path / "junit", smoke=False, formats=["junit"])
    assert set(junit_only.outputs) == {"findings", "junit"}
    assert sorted(p.name for p in (tmp_path / "junit").iterdir()) == [
        "findings.parquet", "report.junit.xml"]
    on_disk = Report.model_validate_json((tmp_path / "out" / "report.json").read_text())
    assert on_disk.verdict == report.verdict
    assert on_disk.rules == report.rules


def test_strict_and_limit_keywords(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "dupes.jsonl", [*CLEAN, CLEAN[0]])
    assert run_preflight(data, smoke=False).passed  # duplicates are a warn rule by default
    assert not run_preflight(data, strict=True, smoke=False).passed
    assert run_preflight(data, limit=2, strict=True,
                         smoke=False).passed  # the copy is past the limit
    with pytest.raises(ConfigError):
        run_preflight(data, limit=0, smoke=False)


def test_errors_raise_preflight_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        run_preflight(tmp_path / "absent.jsonl", smoke=False)
    with pytest.raises(ConfigError):
        run_preflight(write_jsonl(tmp_path / "clean.jsonl", CLEAN),
                      rules={"rules": [{"check": "no_such_check"}]}, smoke=False)


def test_preflight_failed_survives_pickling(tmp_path: Path) -> None:
    import pickle

    report = run_preflight(write_jsonl(tmp_path / "faulty.jsonl", FAULTY), smoke=False)
    error = PreflightFailed(report)
    again = pickle.loads(pickle.dumps(error))
    assert isinstance(again, PreflightFailed)
    assert again.report == report and str(again) == str(error)


def test_the_environment_records_what_a_rerun_needs(tmp_path: Path) -> None:
    from preflight.environment import model_facts

    model = tmp_path / "model.py"
    model.write_text("def build():\n    pass\n")
    ckpt = tmp_path / "w.safetensors"
    ckpt.write_bytes(b"weights")
    facts = model_facts(f"{model}:build", str(ckpt))
    assert facts["model"] == f"{model}:build"
    assert facts["model_files_xxh3"].startswith("model.py=")
    assert "w.safetensors=" in facts["model_files_xxh3"]
    ckpt.write_bytes(b"other weights")
    assert model_facts(f"{model}:build", str(ckpt)) != facts  # the hash follows the bytes
    assert model_facts(None, None) == {}
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"x")
    names = [x.split("=")[0] for x in model_facts(f"hf:{hf}", None)["model_files_xxh3"]
             .split(", ")]
    assert names == ["config.json", "model.safetensors"]
    assert model_facts(f"hf-config:{hf}", None)["model_files_xxh3"].startswith("config.json=")
    assert "safetensors" not in model_facts(f"hf-config:{hf}", None)["model_files_xxh3"]


def test_the_environment_names_versions_and_the_container(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from preflight.environment import environment

    monkeypatch.setenv("CONTAINER_IMAGE", "registry.example/train@sha256:abc")
    env = environment()
    assert env["container_image"] == "registry.example/train@sha256:abc"
    assert env["tokenizers"] and env["datasets"]
