"""End-to-end tests of the command line: exit codes, messages, and the output contract."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner, Result

from preflight.checks import registry
from preflight.cli import main
from preflight.config import preset_names

CLEAN = [
    {"id": "a1", "text": "The quick brown fox jumps over the lazy dog."},
    {"id": "a2", "text": "A second, entirely different sentence about rivers."},
    {"id": "a3", "text": "Third record: the weather was cold and bright all week."},
]
SECRET = "Zanzibarquux"


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def flat(text: str) -> str:
    """The message with line wrapping undone (the console wraps long lines)."""
    return " ".join(text.split())


def squash(text: str) -> str:
    """The message with all whitespace removed, for finding a path the console folded."""
    return "".join(text.split())


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "preflight", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )


def faulty(tmp_path: Path) -> Path:
    """A small file with one zero-width space planted in record 1 (an error rule)."""
    records = [dict(r) for r in CLEAN]
    records[1]["text"] = f"A second {SECRET}\u200b sentence about rivers."
    return write_jsonl(tmp_path / "faulty.jsonl", records)


# --------------------------------------------------------------------- the real console script


def test_subprocess_clean_file_exits_0(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    proc = run_cli("check", "--no-smoke", data, "--out", tmp_path / "out", "--no-progress",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "PASS" in proc.stdout
    assert (tmp_path / "out" / "report.json").is_file()


def test_subprocess_planted_fault_exits_1(tmp_path: Path) -> None:
    proc = run_cli("check", "--no-smoke", faulty(tmp_path), "--out", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr + proc.stdout
    assert "FAIL" in proc.stdout
    assert "hidden-chars" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_subprocess_bad_rules_exits_2_without_traceback(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {id: a, check: empty, max_fracton: 0.1}\n")
    data = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    proc = run_cli("check", "--no-smoke", data, "--rules", rules, "--out", tmp_path / "out",
                   cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "rules.yaml" in proc.stderr
    assert "max_fracton" in proc.stderr
    assert not (tmp_path / "out").exists()  # a config error stops before any data is read


def test_subprocess_missing_input_exits_3_without_traceback(tmp_path: Path) -> None:
    proc = run_cli("check", "--no-smoke", tmp_path / "nowhere.jsonl", cwd=tmp_path)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "nowhere.jsonl" in proc.stderr
    assert "not found" in proc.stderr


def test_error_message_keeps_a_long_path_intact(tmp_path: Path) -> None:
    # A path in an error message must survive on one line so it can be copied or grepped
    # from a CI log; the console must not wrap or fold it.
    deep = tmp_path / ("a" * 40) / ("b" * 50)
    deep.mkdir(parents=True)
    missing = deep / "missing-file.jsonl"
    proc = run_cli("check", "--no-smoke", missing, cwd=tmp_path)
    assert proc.returncode == 3
    assert str(missing) in proc.stderr


# --------------------------------------------------------------------- exit codes via CliRunner


def test_clean_file_passes(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "pass"
    assert all(r["status"] == "pass" for r in report["rules"])


def test_planted_fault_fails(tmp_path: Path) -> None:
    result = invoke("check", "--no-smoke", faulty(tmp_path), "--out", tmp_path / "out")
    assert result.exit_code == 1
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "fail"
    hidden = next(r for r in report["rules"] if r["check"] == "invisible_unicode")
    assert hidden["status"] == "fail"
    assert hidden["violations"] == 1
    assert hidden["codes"] == {"zero_width_space": 1}
    assert [e["row"] for e in hidden["examples"]] == [1]


def test_each_reason_for_a_fail_has_its_own_line(tmp_path: Path) -> None:
    """One reason stays on the FAIL line; several are listed one per line (joined, they
    wrapped mid-phrase on an ordinary terminal)."""
    one = invoke("check", "--no-smoke", faulty(tmp_path), "--out", tmp_path / "one")
    assert "FAIL rule 'hidden-chars' (error) failed: 1 violation(s)\n" in one.output
    records = [dict(r) for r in CLEAN] + [{"text": ""}, {"text": "a\u200bb"}]
    data = write_jsonl(tmp_path / "two.jsonl", records)
    two = invoke("check", "--no-smoke", data, "--out", tmp_path / "two")
    assert two.exit_code == 1
    report = json.loads((tmp_path / "two" / "report.json").read_text())
    assert len(report["reasons"]) >= 2
    lines = two.output.splitlines()
    at = lines.index(f"FAIL {len(report['reasons'])} reasons:")
    assert lines[at + 1:at + 1 + len(report["reasons"])] == [f"  {r}" for r in report["reasons"]]


def test_unknown_preset_exits_2(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    result = invoke("check", "--no-smoke", data, "--preset", "no-such-preset", "--out",
                    tmp_path / "out")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    message = flat(result.stderr)
    assert "no-such-preset" in message
    for name in preset_names():
        assert name in message  # says what to choose instead


def test_rules_and_preset_together_exits_2(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {id: e, check: empty}\n")
    result = invoke("check", "--no-smoke", data, "--rules", rules, "--preset", "default",
                    "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "preset" in result.stderr
    assert not (tmp_path / "out").exists()


def test_limit_zero_exits_2(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    result = invoke("check", "--no-smoke", data, "--limit", "0", "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "--limit" in result.stderr
    assert not (tmp_path / "out").exists()


def test_missing_rules_file_exits_2(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    result = invoke("check", "--no-smoke", data, "--rules", tmp_path / "nope.yaml")
    assert result.exit_code == 2
    assert "nope.yaml" in squash(result.stderr)


def test_missing_input_exits_3(tmp_path: Path) -> None:
    result = invoke("check", "--no-smoke", tmp_path / "absent.jsonl", "--out", tmp_path / "out")
    assert result.exit_code == 3
    assert "Traceback" not in result.output
    assert "absent.jsonl" in squash(result.stderr)


def test_unknown_extension_exits_3(tmp_path: Path) -> None:
    data = tmp_path / "data.xyz"
    data.write_text("hello\n")
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "out")
    assert result.exit_code == 3
    assert "Traceback" not in result.output
    message = flat(result.stderr)
    assert "data.xyz" in message
    assert ".jsonl" in message  # says which formats would work


def test_gzip_with_a_bad_header_exits_3(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl.gz"
    data.write_bytes(b"this is not gzip at all\n")
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "out")
    assert result.exit_code == 3
    assert "Traceback" not in result.output
    assert "data.jsonl.gz" in squash(result.stderr)


def test_truncated_gzip_exits_3(tmp_path: Path) -> None:
    payload = gzip.compress(b"".join(
        json.dumps({"text": f"record number {i} with some words"}).encode() + b"\n"
        for i in range(200)
    ))
    data = tmp_path / "data.jsonl.gz"
    data.write_bytes(payload[: len(payload) // 2])
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "out")
    assert result.exit_code == 3
    assert "Traceback" not in result.output
    assert "data.jsonl.gz" in squash(result.stderr)


def test_gzip_with_a_corrupt_stream_exits_3(tmp_path: Path) -> None:
    # A valid gzip header followed by a broken deflate stream: input unreadable (3), not an
    # "internal error".
    data = tmp_path / "data.jsonl.gz"
    data.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"garbage-deflate-stream" * 4)
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "out")
    assert "Traceback" not in result.output
    assert "internal error" not in result.stderr
    assert result.exit_code == 3
    assert "data.jsonl.gz" in squash(result.stderr)


def test_zero_readable_records_fails_the_gate(tmp_path: Path) -> None:
    data = tmp_path / "empty.jsonl"
    data.write_bytes(b"")
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "out")
    assert result.exit_code == 1
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "fail"
    assert report["source"]["records"] == 0


# --------------------------------------------------------------------- rules list / validate


def test_rules_list_shows_every_check_and_the_presets() -> None:
    result = invoke("rules", "list")
    assert result.exit_code == 0
    for name in registry.names():
        assert name in result.stdout
    for name in preset_names():
        assert name in result.stdout


def test_rules_list_json() -> None:
    result = invoke("rules", "list", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [c["check"] for c in data["checks"]] == registry.names()
    assert data["presets"] == preset_names()
    assert {"default", "pretrain-text"} <= set(data["presets"])
    assert {"id", "check", "severity", "max_count", "max_fraction", "fix"} <= set(
        data["rule_keys"]
    )
    checks = {c["check"]: c for c in data["checks"]}
    for c in checks.values():
        assert c["description"]
        assert c["fixes"]
        for p in c["params"]:
            assert {"name", "type", "default", "description"} <= set(p)
    params = {p["name"]: p for p in checks["exact_duplicate"]["params"]}
    assert params["min_chars"]["default"] == 1


def test_rules_validate_good_file(tmp_path: Path) -> None:
    rules = tmp_path / "good.yaml"
    rules.write_text(
        "version: 1\nfields: {text: text, id: id}\nrules:\n"
        "  - {id: hidden, check: invisible_unicode, severity: error, fix: strip}\n"
        "  - {id: dupes, check: exact_duplicate, severity: warn, max_fraction: 0.01}\n"
    )
    result = invoke("rules", "validate", rules)
    assert result.exit_code == 0, result.output
    assert "valid" in result.stdout


def test_rules_validate_missing_file_exits_2(tmp_path: Path) -> None:
    result = invoke("rules", "validate", tmp_path / "nope.yaml")
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "nope.yaml" in squash(result.stderr)


# --------------------------------------------------------------------- output contract


def test_report_json_contract(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "fields: {text: text, id: id}\nrules:\n"
        "  - {id: hidden, check: invisible_unicode}\n"
        "  - {id: dupes, check: exact_duplicate, severity: warn, max_fraction: 0.5}\n"
    )
    out = tmp_path / "out"
    result = invoke("check", "--no-smoke", faulty(tmp_path), "--rules", rules, "--out", out)
    assert result.exit_code == 1, result.output
    report = json.loads((out / "report.json").read_text())

    assert report["schema_version"]
    assert report["verdict"] == "fail"
    ids = [r["id"] for r in report["rules"]]
    assert {"hidden", "dupes"} <= set(ids)
    for r in report["rules"]:
        for key in ("id", "check", "severity", "status", "violations", "fraction",
                    "threshold", "examples"):
            assert key in r, (r["id"], key)
        assert f"rule:{r['id']}" in report["timings"]
    hidden = report["rules"][ids.index("hidden")]
    assert hidden["status"] == "fail"
    assert hidden["threshold"] == {"max_count": 0, "max_fraction": None}
    assert hidden["fraction"] == round(1 / 3, 6)
    ex = hidden["examples"][0]
    assert (ex["row"], ex["id"], ex["code"]) == (1, "a2", "zero_width_space")
    dupes = report["rules"][ids.index("dupes")]
    assert dupes["threshold"]["max_fraction"] == 0.5

    assert "read" in report["timings"]
    assert report["source"]["fingerprint"]
    assert report["source"]["records"] == 3
    assert report["rules_file"]["path"] == str(rules)
    assert report["rules_file"]["sha256"] == hashlib.sha256(rules.read_bytes()).hexdigest()
    assert report["environment"]["python"]
    assert "preflight" in report["environment"]


def test_findings_parquet_columns(tmp_path: Path) -> None:
    out = tmp_path / "out"
    invoke("check", "--no-smoke", faulty(tmp_path), "--out", out)
    table = pq.read_table(out / "findings.parquet")
    assert table.schema.names == ["row", "file", "rule", "check", "code", "detail", "id",
                                  "cluster", "partner"]
    types = {f.name: f.type for f in table.schema}
    assert types["row"] == pa.int64()
    assert types["cluster"] == pa.int64() and types["partner"] == pa.int64()
    for name in ("file", "rule", "check", "code", "detail", "id"):
        assert types[name] == pa.string(), name
    rows = table.to_pylist()
    assert [(f["row"], f["check"], f["code"], f["id"]) for f in rows] == [
        (1, "invisible_unicode", "zero_width_space", "a2")
    ]


def test_findings_parquet_written_even_when_empty(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("check", "--no-smoke", write_jsonl(tmp_path / "clean.jsonl", CLEAN), "--out",
                    out)
    assert result.exit_code == 0
    table = pq.read_table(out / "findings.parquet")
    assert table.num_rows == 0
    assert table.schema.names == ["row", "file", "rule", "check", "code", "detail", "id",
                                  "cluster", "partner"]


def test_snippets_are_redacted_by_default(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("check", "--no-smoke", faulty(tmp_path), "--out", out)
    assert result.exit_code == 1
    report_text = (out / "report.json").read_text(encoding="utf-8")
    assert SECRET not in report_text
    assert SECRET not in result.output
    hidden = next(r for r in json.loads(report_text)["rules"] if r["id"] == "hidden-chars")
    assert "<U+200B>" in hidden["examples"][0]["snippet"]
    findings = pq.read_table(out / "findings.parquet").to_pylist()
    assert all(SECRET not in (f["detail"] or "") for f in findings)


def test_show_text_puts_raw_text_in_examples(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("check", "--no-smoke", faulty(tmp_path), "--out", out, "--show-text")
    assert result.exit_code == 1
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    hidden = next(r for r in report["rules"] if r["id"] == "hidden-chars")
    assert SECRET in hidden["examples"][0]["snippet"]


def test_json_prints_the_report_on_stdout(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("check", "--no-smoke", faulty(tmp_path), "--out", out, "--json")
    assert result.exit_code == 1
    printed = json.loads(result.stdout)
    assert printed["verdict"] == "fail"
    assert printed == json.loads((out / "report.json").read_text())


def test_quiet_prints_nothing_on_stdout(tmp_path: Path) -> None:
    result = invoke("check", "--no-smoke", faulty(tmp_path), "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 1
    assert result.stdout == ""
    result = invoke("check", "--no-smoke", write_jsonl(tmp_path / "clean.jsonl", CLEAN),
                    "--out", tmp_path / "out2", "-q")
    assert result.exit_code == 0
    assert result.stdout == ""


def test_limit_checks_only_the_first_records(tmp_path: Path) -> None:
    records = [{"id": str(i), "text": f"record {i} is a sentence on its own"} for i in range(20)]
    records[10]["text"] = "late \u200b fault"
    data = write_jsonl(tmp_path / "many.jsonl", records)
    out = tmp_path / "out"
    result = invoke("check", "--no-smoke", data, "--limit", "5", "--out", out)
    assert result.exit_code == 0, result.output  # the fault at row 10 is past the limit
    report = json.loads((out / "report.json").read_text())
    assert report["source"]["records"] == 5
    assert report["source"]["limit"] == 5


def test_strict_fails_on_a_failed_warn_rule(tmp_path: Path) -> None:
    records = [*CLEAN, {"id": "copy", "text": CLEAN[0]["text"]}]
    data = write_jsonl(tmp_path / "dupes.jsonl", records)
    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "lenient")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "lenient" / "report.json").read_text())
    dupes = next(r for r in report["rules"] if r["check"] == "exact_duplicate")
    assert dupes["severity"] == "warn"
    assert dupes["status"] == "fail"

    result = invoke("check", "--no-smoke", data, "--out", tmp_path / "strict", "--strict")
    assert result.exit_code == 1
    report = json.loads((tmp_path / "strict" / "report.json").read_text())
    assert report["strict"] is True
    assert report["verdict"] == "fail"


# --------------------------------------------------------------------- determinism


def _comparable(report_path: Path) -> dict[str, Any]:
    report = json.loads(report_path.read_text())
    report.pop("timings")
    report.pop("outputs")
    return report


def test_two_runs_give_identical_outputs(tmp_path: Path) -> None:
    records = [dict(r) for r in CLEAN] * 3  # duplicates: corpus-wide findings with clusters
    records += [
        {"id": "z", "text": "zero\u200bwidth and caf\u00c3\u00a9 here"},
        {"id": "e", "text": ""},
    ]
    data = write_jsonl(tmp_path / "data.jsonl", records)
    for name in ("one", "two"):
        result = invoke("check", "--no-smoke", data, "--out", tmp_path / name)
        assert result.exit_code == 1
    one, two = tmp_path / "one", tmp_path / "two"
    assert (one / "findings.parquet").read_bytes() == (two / "findings.parquet").read_bytes()
    assert _comparable(one / "report.json") == _comparable(two / "report.json")
    assert pq.read_table(one / "findings.parquet").num_rows > 0


# --------------------------------------------------------------------- defaults and inference


def test_default_rules_infer_fields_and_say_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = invoke("check", "--no-smoke", write_jsonl(tmp_path / "clean.jsonl", CLEAN), "--out",
                    out)
    assert result.exit_code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["rules_file"]["preset"] == "default"
    assert "text" in report["rules_file"]["inferred"]
    assert report["rules_file"]["fields"]["text"] == "text"
    assert report["rules_file"]["fields"]["id"] == "id"
    assert "inferred text" in result.stdout


def test_an_id_is_never_inferred_as_text(tmp_path: Path) -> None:
    records = [{"id": "a-rather-long-identifier-0001", "features": [1.0, 2.0], "target": 0.5},
               {"id": "a-rather-long-identifier-0002", "features": [2.0, 1.0], "target": 1.5}]
    out = tmp_path / "out"
    invoke("check", "--no-smoke", write_jsonl(tmp_path / "t.jsonl", records), "--out", out)
    report = json.loads((out / "report.json").read_text())
    assert "text" not in report["rules_file"]["fields"]
    assert report["rules_file"]["fields"]["id"] == "id"


def test_a_content_field_is_inferred_as_text(tmp_path: Path) -> None:
    records = [{"content": "hello \u200b there"}, {"content": "plain text record"}]
    out = tmp_path / "out"
    result = invoke("check", "--no-smoke", write_jsonl(tmp_path / "c.jsonl", records), "--out", out)
    assert result.exit_code == 1  # the zero-width space was found in `content`
    report = json.loads((out / "report.json").read_text())
    assert report["rules_file"]["fields"]["text"] == "content"
    assert "content" in report["rules_file"]["inferred"]["text"]
    findings = pq.read_table(out / "findings.parquet").to_pylist()
    assert [(f["row"], f["code"]) for f in findings] == [(0, "zero_width_space")]


def test_preset_pretrain_text(tmp_path: Path) -> None:
    out = tmp_path / "out"
    data = write_jsonl(tmp_path / "clean.jsonl", CLEAN)
    result = invoke("check", "--no-smoke", data, "--preset", "pretrain-text", "--out", out)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["rules_file"]["preset"] == "pretrain-text"
    assert report["rules_file"]["inferred"] == {}  # the preset declares its fields
    checks = {r["check"] for r in report["rules"]}
    assert {"invisible_unicode", "exact_duplicate", "encoding", "empty"} <= checks

    result = invoke("check", "--no-smoke", faulty(tmp_path), "--preset", "pretrain-text",
                    "--out", tmp_path / "out2")
    assert result.exit_code == 1


def test_user_text_is_never_read_as_emoji_or_markup(tmp_path: Path) -> None:
    folder = tmp_path / ":thumbs_up:[bold]"
    folder.mkdir()
    data = write_jsonl(folder / "d.jsonl", [{"id": ":fire:", "text": "hid\u200bden"},
                                            {"id": "ok", "text": "fine"}])
    rules = folder / "rules.yaml"
    rules.write_text("version: 1\nfields: {id: id, text: text}\nrules:\n"
                     "  - {id: ':fire:[red]', check: invisible_unicode}\n", encoding="utf-8")
    out = tmp_path / "r"
    error = invoke("check", data, "--rules", rules, "--no-smoke", "--out", out)
    assert error.exit_code == 2  # a rule id may not hold ':', but the message shows it
    assert squash(f"error: {rules}: invalid rules file:") in squash(error.output)
    assert "(got ':fire:[red]')" in error.output
    rules.write_text(rules.read_text().replace("':fire:[red]'", "hidden"), encoding="utf-8")
    result = invoke("check", data, "--rules", rules, "--no-smoke", "--out", out)
    assert result.exit_code == 1, result.output
    text = squash(result.output)
    for output in (error.output, result.output):
        assert "\U0001f525" not in output and "\U0001f44d" not in output
    assert squash(str(data)) in text  # the path as written, brackets and all
    assert "id=:fire:zero_width_space" in text
    valid = invoke("rules", "validate", rules)
    assert squash(f"valid: {rules} (1 rules)") in squash(valid.output)
