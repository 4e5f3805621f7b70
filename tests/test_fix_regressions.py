"""Fix-mode cases found in review: implicit malformed rule, shards in a later round, JSON
arrays kept as written, relative eval paths in later rounds."""

from __future__ import annotations

import json
from pathlib import Path

from preflight import FixOptions, run_preflight

RULES = {
    "fields": {"text": "text", "id": "id"},
    "rules": [
        {"id": "inv", "check": "invisible_unicode", "fix": "strip"},
        {"id": "enc", "check": "encoding", "fix": "repair"},
        {"id": "ex", "check": "exact_duplicate", "fix": "keep_first"},
    ],
}


def _lines(path: Path, records: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in records), encoding="utf-8")
    return path


def _fix(src: Path, tmp: Path, rules: object = RULES) -> tuple[list[dict], list[dict], dict]:
    out, q = tmp / "out" / "clean.jsonl", tmp / "out" / "q.jsonl"
    report = run_preflight(src, rules, fix=FixOptions(out=out, quarantine=q), smoke=False)
    clean = [json.loads(x) for x in out.read_text().splitlines()]
    quarantine = [json.loads(x) for x in q.read_text().splitlines()]
    return clean, quarantine, report.fix


def test_malformed_lines_are_quarantined_without_a_malformed_rule(tmp_path: Path) -> None:
    src = _lines(tmp_path / "in.jsonl", [{"id": 0, "text": "one"}, "{bad json", "[1, 2]",
                                         {"id": 3, "text": "two"}])
    clean, quarantine, manifest = _fix(src, tmp_path)
    assert [r["id"] for r in clean] == [0, 3]
    assert [(e["row"], e["raw"]) for e in quarantine] == [(1, "{bad json"), (2, "[1, 2]")]
    assert manifest["balanced"]


def test_a_later_round_in_a_folder_of_shards_quarantines_the_right_record(tmp_path: Path
                                                                           ) -> None:
    shards = tmp_path / "shards"
    _lines(shards / "a.jsonl", [{"id": "a0", "text": "café au lait is good"},
                                {"id": "a1", "text": "cafÃ© au lait is good"}])
    _lines(shards / "b.jsonl", [{"id": "b0", "text": "beta three four"},
                                {"id": "b1", "text": "gamma five six"}])
    clean, quarantine, manifest = _fix(shards, tmp_path)
    assert [r["id"] for r in clean] == ["a0", "b0", "b1"]
    [entry] = quarantine
    assert (entry["file"], entry["row"], entry["id"]) == ("a.jsonl", 1, "a1")
    assert entry["record"]["text"] == "cafÃ© au lait is good"  # the original, not the repair
    assert entry["reasons"][0]["kept_row"] == 0
    assert "row 0 of a.jsonl" in entry["reasons"][0]["detail"]
    assert manifest["balanced"] and manifest["rounds"] == 2


def test_later_round_details_name_input_rows(tmp_path: Path) -> None:
    src = _lines(tmp_path / "in.jsonl", [{"id": 0, "text": "plain text"},
                                         {"id": 1, "text": "plain text"},
                                         {"id": 2, "text": "café au lait is good"},
                                         {"id": 3, "text": "cafÃ© au lait is good"}])
    _, quarantine, _ = _fix(src, tmp_path)
    late = next(e for e in quarantine if e["row"] == 3)
    assert late["reasons"][0]["kept_row"] == 2
    assert late["reasons"][0]["detail"].startswith("duplicate of row 2")


def test_a_json_array_keeps_its_records_as_written(tmp_path: Path) -> None:
    src = tmp_path / "in.json"
    src.write_text(json.dumps([{"id": 0, "text": "a\u200bb", "meta": {"k": 1}},
                               {"id": 1, "text": "ok", "score": 1.5}, 42,
                               {"id": 3, "text": "plain", "score": 2}]), encoding="utf-8")
    clean, quarantine, manifest = _fix(src, tmp_path)
    assert clean == [{"id": 0, "text": "ab", "meta": {"k": 1}},
                     {"id": 1, "text": "ok", "score": 1.5},
                     {"id": 3, "text": "plain", "score": 2}]
    assert [(e["row"], e["reasons"][0]["code"]) for e in quarantine] == [(2, "not_an_object")]
    assert manifest["balanced"]


def test_a_later_round_resolves_eval_beside_the_rules_file(tmp_path: Path, monkeypatch
                                                           ) -> None:
    cfg = tmp_path / "cfg"
    _lines(cfg / "eval.jsonl", [{"text": "something only the eval set says here"}])
    rules = cfg / "rules.yaml"
    rules.write_text(
        "fields: {text: text, id: id}\neval: eval.jsonl\nrules:\n"
        "  - {id: enc, check: encoding, fix: repair}\n"
        "  - {id: ex, check: exact_duplicate, fix: keep_first}\n"
        "  - {id: ov, check: overlap, fix: drop}\n")
    src = _lines(tmp_path / "in.jsonl", [{"id": 0, "text": "café au lait is good"},
                                         {"id": 1, "text": "cafÃ© au lait is good"}])
    monkeypatch.chdir(tmp_path / "cfg" / "..")
    clean, quarantine, manifest = _fix(src, tmp_path, rules)
    assert [r["id"] for r in clean] == [0]
    assert [e["row"] for e in quarantine] == [1]
    assert manifest["rounds"] == 2


def test_a_record_with_a_key_given_twice_is_quarantined_raw(tmp_path: Path) -> None:
    # The zero-width space hides in the value Python's json drops; the clean output must not
    # carry it (nor a file `datasets` refuses to load).
    line = '{"id": 1, "text": "zero\\u200bwidth", "text": "clean"}'
    src = _lines(tmp_path / "in.jsonl", [{"id": 0, "text": "one"}, line])
    clean, quarantine, manifest = _fix(src, tmp_path)
    assert clean == [{"id": 0, "text": "one"}]
    assert [(q["row"], q["malformed"]["code"], q["raw"]) for q in quarantine] == [
        (1, "duplicate_key", line)]
    assert manifest["balanced"]
