"""``preflight fix``: each action on its own, the command line end to end on the sample corpus,
the dry run, the output formats, atomic writes, shards and compressed input, and known bugs."""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import json
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner, Result
from tokenizers import Tokenizer

from preflight import ConfigError, FixOptions, run_preflight
from preflight.cli import main
from preflight.fix.writers.text import JsonlWriter
from preflight.text import is_invisible
from tests.tokenizers import build_bpe, made_up_text

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
PRETRAIN = SAMPLE / "pretrain.jsonl"
FAULTS: list[dict[str, Any]] = json.loads((SAMPLE / "pretrain.faults.json").read_text("utf-8"))

PLAIN = [
    "The quick brown fox jumps over the lazy dog.",
    "A second, entirely different sentence about rivers.",
    "Third record: the weather was cold and bright all week.",
    "Fourth: the market opened late because of the heavy snow.",
    "Fifth and last, a note about the village baker and his bread.",
]


# -- helpers ------------------------------------------------------------------------------


def line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return path


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    return write_lines(path, [line(r) for r in records])


def rules(*items: dict[str, Any], **model: Any) -> dict[str, Any]:
    """A rules dict over `text` and `id` with just the given rules."""
    data: dict[str, Any] = {"fields": {"text": "text", "id": "id"}, "rules": list(items)}
    if model:
        data["model"] = model
    return data


def fix(src: Path, folder: Path, rule_set: Any = None, **options: Any
        ) -> tuple[dict[str, Any], list[bytes], list[dict[str, Any]]]:
    """Run fix; return the manifest, the clean output's lines and the quarantine entries."""
    out, quarantine = folder / "clean.jsonl", folder / "rejected.jsonl"
    report = run_preflight(src, rule_set, fix=FixOptions(out=out, quarantine=quarantine,
                                                        **options), smoke=False)
    assert report.fix is not None
    assert quarantine.is_file()  # always written, even when empty
    entries = [json.loads(x) for x in quarantine.read_bytes().splitlines()]
    return report.fix, out.read_bytes().splitlines(keepends=True), entries


def texts(clean: list[bytes]) -> dict[str, Any]:
    return {r["id"]: r.get("text") for r in map(json.loads, clean) if isinstance(r, dict)}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_balanced(manifest: dict[str, Any], n_input: int) -> None:
    assert manifest["balanced"] is True
    assert manifest["input"]["records"] == n_input
    assert manifest["clean"]["records"] + manifest["quarantine"]["records"] == n_input


# -- each action on its own ---------------------------------------------------------------


def test_repair_mends_mojibake_and_quarantines_what_it_cannot(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "in.jsonl", [
        line({"id": "moji", "text": "The cafÃ© said: donâ€™t wait, itâ€¦ closes soon."}),
        line({"id": "fffd", "text": "A bro\ufffdken byte sits in this sentence."}),
        line({"id": "nfd", "text": "The Cafe\u0301 on the corner was closed."}),
        line({"id": "plain", "text": PLAIN[0]}),
    ])
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "enc", "check": "encoding", "fix": "repair"}))
    assert texts(clean) == {
        "moji": "The café said: don’t wait, it… closes soon.",
        "nfd": "The Café on the corner was closed.",
        "plain": PLAIN[0],
    }
    assert clean[2] == line({"id": "plain", "text": PLAIN[0]})  # untouched, byte for byte
    [entry] = entries
    assert (entry["row"], entry["id"]) == (1, "fffd")
    assert entry["record"] == {"id": "fffd", "text": "A bro\ufffdken byte sits in this sentence."}
    [reason] = entry["reasons"]
    assert reason["rule"] == "enc"
    assert reason["check"] == "encoding"
    assert reason["code"] == "replacement_character"
    assert reason["action"] == "quarantine"
    assert reason["detail"]
    assert_balanced(manifest, 4)
    assert manifest["clean"]["changed"] == 2


@pytest.mark.parametrize(("planted", "repaired"), [
    # U+00C5 is C3 85 in UTF-8; read as Latin-1, 0x85 is the C1 control NEL.
    ("Ã\x85ngstrÃ¶m units are tiny.", "Ångström units are tiny."),
    # U+2026 is E2 80 A6; read as cp1252 it is "â€¦".
    ("Wait for itâ€¦ now.", "Wait for it… now."),
])
def test_repair_comes_before_strip(tmp_path: Path, planted: str, repaired: str) -> None:
    """Mojibake can carry C1 controls that strip would delete: repair must see them first."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": planted},
                                              {"id": "b", "text": PLAIN[1]}])
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "hidden", "check": "invisible_unicode", "fix": "strip"},
        {"id": "enc", "check": "encoding", "fix": "repair"}))
    assert texts(clean)["a"] == repaired
    assert entries == []
    assert manifest["order"][:3] == ["repair", "normalize", "strip"]


def test_normalize_applies_nfc_and_quarantines_other_encoding_damage(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "nfd", "text": "Cafe\u0301 and re\u0301sume\u0301 are decomposed here."},
        {"id": "moji", "text": "The cafÃ© is open today, come along."},
        {"id": "fffd", "text": "Broken \ufffd byte in this one."},
        {"id": "plain", "text": PLAIN[0]},
    ])
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "enc", "check": "encoding", "fix": "normalize"}))
    got = texts(clean)
    assert got == {"nfd": "Café and résumé are decomposed here.", "plain": PLAIN[0]}
    assert unicodedata.is_normalized("NFC", got["nfd"])
    assert [(e["row"], e["id"]) for e in entries] == [(1, "moji"), (2, "fffd")]
    assert [[r["code"] for r in e["reasons"]] for e in entries] == [
        ["mojibake"], ["replacement_character"]]
    assert {r["action"] for e in entries for r in e["reasons"]} == {"quarantine"}
    assert entries[0]["record"]["text"] == "The cafÃ© is open today, come along."
    assert_balanced(manifest, 4)


STRIPPED = {
    "zwsp": ("ri\u200bver", "river"),
    "bidi": ("invoice_\u202egpj.exe\u202c now", "invoice_gpj.exe now"),
    "isolate": ("user \u2066admin\u2069 left", "user admin left"),
    "tags": ("see.\U000e0049\U000e0047\U000e004e\U000e004f\U000e0052\U000e0045", "see."),
    "soft_hyphen": ("peo\u00adple", "people"),
    "bel": ("bell\x07 rang", "bell rang"),
    "nel": ("next\x85line", "nextline"),
    "bom": ("mid\ufefftext", "midtext"),
    "word_joiner": ("wo\u2060rd", "word"),
}
KEPT = {
    "emoji_zwj": "The family \U0001f468\u200d\U0001f469\u200d\U0001f467 went to the park.",
    "persian_zwnj": "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \u0628\u0631\u0648\u0645",
    "hindi_zwj": "\u0915\u094d\u200d\u0937 is a conjunct in Hindi text.",
    "whitespace": "Tabs\tand\nnewlines\r\nare fine.",
}


def test_strip_deletes_invisible_characters_and_keeps_the_allowed_joiners(
    tmp_path: Path,
) -> None:
    records = [{"id": name, "text": f"Record {name}: {planted} end."}
               for name, (planted, _) in STRIPPED.items()]
    records += [{"id": name, "text": text} for name, text in KEPT.items()]
    records.append({"id": "both", "text": "Fami\u200bly \U0001f468\u200d\U0001f469 here."})
    src = write_jsonl(tmp_path / "in.jsonl", records)
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "hidden", "check": "invisible_unicode", "fix": "strip"}))
    assert entries == []
    got = texts(clean)
    for name, (_, fixed) in STRIPPED.items():
        assert got[name] == f"Record {name}: {fixed} end.", name  # deleted, not replaced
    for k, name in enumerate(KEPT, start=len(STRIPPED)):
        assert clean[k] == src.read_bytes().splitlines(keepends=True)[k], name  # byte for byte
    assert got["both"] == "Family \U0001f468\u200d\U0001f469 here."
    assert not any(is_invisible(ch) for name in STRIPPED for ch in got[name])
    assert manifest["clean"]["changed"] == len(STRIPPED) + 1
    assert manifest["findings_per_rule_and_action"]["hidden"]["strip"] >= len(STRIPPED) + 1


def test_a_fix_that_leaves_no_text_quarantines_the_record(tmp_path: Path) -> None:
    """Stripping the zero-width characters of " \u200b \u200b " leaves only spaces: nothing
    to train on, so the record goes to the quarantine, saying why, and is not lost."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": " \u200b \u200b "},
                                             {"id": "b", "text": "Fine\u200b text."}])
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "hidden", "check": "invisible_unicode", "fix": "strip"}))
    assert texts(clean) == {"b": "Fine text."}
    assert [(e["code"], e["detail"]) for e in entries[0]["reasons"]] == [
        ("empty_after_fix", "text: empty or only whitespace after strip")]
    assert_balanced(manifest, 2)


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_bpe(tmp_path_factory.mktemp("bpe"))


def long_text(tokenizer: Tokenizer, at_least: int = 500) -> str:
    text = " ".join(made_up_text(60, seed=5))
    assert len(tokenizer.encode(text).ids) >= at_least
    return text


def test_truncate_cuts_on_a_token_boundary_and_appends_the_marker(
    tmp_path: Path, bpe: Path,
) -> None:
    tok = Tokenizer.from_file(str(bpe))
    text = long_text(tok)
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "long", "text": text},
                                              {"id": "short", "text": PLAIN[0]}])
    marker = " [...]"
    manifest, clean, entries = fix(
        src, tmp_path / "out",
        rules({"id": "length", "check": "token_length", "fix": "truncate"},
              context_window=50, tokenizer=str(bpe)),
        marker=marker)
    assert entries == []
    got = texts(clean)
    assert got["short"] == PLAIN[0]
    cut = got["long"]
    assert cut.endswith(marker)
    kept = cut.removesuffix(marker)
    assert text.startswith(kept)
    n = len(tok.encode(cut).ids)  # with the special tokens, as the check counts
    assert 40 <= n <= 50
    # on a token boundary: the kept part's tokens are the first tokens of the whole text
    whole = tok.encode(text, add_special_tokens=False).ids
    part = tok.encode(kept, add_special_tokens=False).ids
    assert whole[: len(part)] == part
    assert manifest["findings_per_rule_and_action"] == {"length": {"truncate": 1}}
    assert manifest["clean"]["changed"] == 1


def test_truncate_through_the_cli_with_marker(tmp_path: Path, bpe: Path) -> None:
    tok = Tokenizer.from_file(str(bpe))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "long", "text": long_text(tok)},
                                              {"id": "short", "text": PLAIN[1]}])
    out, quarantine = tmp_path / "clean.jsonl", tmp_path / "rejected.jsonl"
    result = invoke("fix", src, "--out", out, "--quarantine", quarantine,
                    "--context-window", "50", "--tokenizer", bpe, "--marker", " <cut>")
    assert result.exit_code == 0, result.output
    cut = texts(out.read_bytes().splitlines())["long"]
    assert cut.endswith(" <cut>")
    assert len(tok.encode(cut).ids) <= 50
    assert quarantine.read_bytes() == b""


def test_truncate_without_a_tokenizer_quarantines_too_long_records(tmp_path: Path) -> None:
    text = " ".join(made_up_text(60, seed=5))
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "long", "text": text},
                                              {"id": "short", "text": PLAIN[0]}])
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "length", "check": "token_length", "fix": "truncate"}, context_window=50))
    assert texts(clean) == {"short": PLAIN[0]}
    [entry] = entries
    assert entry["record"]["text"] == text
    assert [(r["code"], r["action"]) for r in entry["reasons"]] == [
        ("too_long_estimated", "quarantine")]
    assert_balanced(manifest, 2)


def test_drop_sends_empty_records_to_the_quarantine(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "in.jsonl", [
        line({"id": "a", "text": PLAIN[0]}),
        line({"id": "empty", "text": ""}),
        line({"id": "spaces", "text": "  \n\t "}),
        line({"id": "missing"}),
        line({"id": "null", "text": None}),
        line({"id": "b", "text": PLAIN[1]}),
    ])
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "empty", "check": "empty", "fix": "drop"}))
    assert clean == src.read_bytes().splitlines(keepends=True)[0::5]
    assert [(e["row"], e["id"]) for e in entries] == [
        (1, "empty"), (2, "spaces"), (3, "missing"), (4, "null")]
    for entry in entries:
        assert {(r["rule"], r["check"], r["action"]) for r in entry["reasons"]} == {
            ("empty", "empty", "drop")}
    assert entries[2]["record"] == {"id": "missing"}
    assert entries[3]["record"] == {"id": "null", "text": None}
    assert manifest["findings_per_rule_and_action"] == {"empty": {"drop": 4}}
    assert_balanced(manifest, 6)


def test_keep_first_keeps_the_first_copy_and_quarantines_the_others(tmp_path: Path) -> None:
    original = "Copies of this sentence appear three times in the file."
    src = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "a", "text": PLAIN[0]},
        {"id": "first", "text": original},
        {"id": "b", "text": PLAIN[1]},
        {"id": "upper", "text": original.upper()},
        {"id": "c", "text": PLAIN[2]},
        {"id": "spaced", "text": "  " + original.replace(" ", "   ")},
        {"id": "d", "text": PLAIN[3]},
        {"id": "pair1", "text": PLAIN[4] + " Again."},
        {"id": "pair2", "text": PLAIN[4] + " Again."},
    ])
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "dupes", "check": "exact_duplicate", "fix": "keep_first"}))
    assert list(texts(clean)) == ["a", "first", "b", "c", "d", "pair1"]
    assert [(e["row"], e["id"]) for e in entries] == [(3, "upper"), (5, "spaced"), (8, "pair2")]
    kept = [[(r["code"], r["action"], r["kept_row"]) for r in e["reasons"]] for e in entries]
    assert kept == [[("exact_duplicate_of", "keep_first", 1)],
                    [("exact_duplicate_of", "keep_first", 1)],
                    [("exact_duplicate_of", "keep_first", 7)]]
    assert entries[1]["record"]["text"] == "  " + original.replace(" ", "   ")
    assert manifest["findings_per_rule_and_action"] == {"dupes": {"keep_first": 3}}


def test_quarantine_action_moves_flagged_records_untouched(tmp_path: Path) -> None:
    flagged = {"id": "z", "text": "Hidden\u200bspace here.", "score": 0.5}
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": PLAIN[0]}, flagged])
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "hidden", "check": "invisible_unicode", "fix": "quarantine"}))
    assert clean == [line({"id": "a", "text": PLAIN[0]})]
    [entry] = entries
    assert entry["record"] == flagged
    assert entry["id"] == "z"
    assert [(r["rule"], r["code"], r["action"]) for r in entry["reasons"]] == [
        ("hidden", "zero_width_space", "quarantine")]
    assert manifest["findings_per_rule_and_action"] == {"hidden": {"quarantine": 1}}


def test_none_leaves_flagged_records_alone(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "a", "text": "Hidden\u200bspace here."},
        {"id": "b", "text": ""},
        {"id": "c", "text": PLAIN[0]},
    ])
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "hidden", "check": "invisible_unicode", "fix": "none"},
        {"id": "empty", "check": "empty", "fix": "none"}))
    assert b"".join(clean) == src.read_bytes()
    assert entries == []
    assert manifest["clean"]["changed"] == 0
    assert_balanced(manifest, 3)


def test_malformed_with_fix_none_copies_the_lines_verbatim(tmp_path: Path) -> None:
    lines = [
        line({"id": "a", "text": PLAIN[0]}),
        b'{"id": "cut", "text": "unterminated\n',
        b"[1, 2, 3]\n",
        b'{"id": "bad", "text": "a raw \xff byte"}\n',
        line({"id": "b", "text": PLAIN[1]}),
    ]
    src = write_lines(tmp_path / "in.jsonl", lines)
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "malformed", "check": "malformed", "fix": "none"},
        {"id": "hidden", "check": "invisible_unicode", "fix": "strip"}))
    assert clean == lines
    assert entries == []
    assert_balanced(manifest, 5)


def test_malformed_lines_are_quarantined_verbatim(tmp_path: Path) -> None:
    lines = [
        line({"id": "a", "text": PLAIN[0]}),
        b'{"id": "cut", "text": "unterminated\n',
        b"[1, 2, 3]\n",
        b'{"id": "bad", "text": "a raw \xff byte"}\n',
        line({"id": "b", "text": PLAIN[1]}),
    ]
    src = write_lines(tmp_path / "in.jsonl", lines)
    manifest, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "malformed", "check": "malformed", "fix": "quarantine"}))
    assert clean == [lines[0], lines[4]]
    assert [e["row"] for e in entries] == [1, 2, 3]
    assert entries[0]["raw"] == '{"id": "cut", "text": "unterminated'
    assert entries[1]["raw"] == "[1, 2, 3]"
    assert "raw" not in entries[2]
    assert base64.b64decode(entries[2]["raw_base64"]) == lines[3].rstrip(b"\n")
    assert [e["reasons"][0]["code"] for e in entries] == [
        "invalid_json", "not_an_object", "invalid_utf8"]
    assert all(e["id"] is None and "record" not in e for e in entries)
    assert_balanced(manifest, 5)


def test_quarantine_file_and_manifest_are_written_when_nothing_is_wrong(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": str(k), "text": t}
                                              for k, t in enumerate(PLAIN)])
    out, quarantine = tmp_path / "o" / "clean.jsonl", tmp_path / "q" / "rejected.jsonl"
    report = run_preflight(src, fix=FixOptions(out=out, quarantine=quarantine), smoke=False)
    assert quarantine.read_bytes() == b""
    assert out.read_bytes() == src.read_bytes()
    manifest_path = tmp_path / "o" / "fix-manifest.json"
    assert report.fix["manifest_path"] == str(manifest_path)
    manifest = json.loads(manifest_path.read_text())
    assert manifest["quarantine"]["records"] == 0
    assert manifest["clean"]["changed"] == 0
    assert_balanced(manifest, len(PLAIN))
    assert manifest["findings_per_rule_and_action"] == {}
    # --manifest puts it elsewhere
    elsewhere = tmp_path / "m" / "where.json"
    report = run_preflight(src, fix=FixOptions(out=out, quarantine=quarantine,
                                               manifest=elsewhere), smoke=False)
    assert json.loads(elsewhere.read_text())["balanced"] is True


def test_nan_literals_survive_a_fix(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "in.jsonl", [
        b'{"id": "a", "text": "Hidden\xe2\x80\x8bspace here.", "score": NaN, "x": -Infinity}\n',
        b'{"id": "b", "text": "Untouched text.", "score": NaN}\n',
    ])
    # (the default rules would flag the NaN scores: a numeric column; only text is fixed here)
    _, clean, entries = fix(src, tmp_path / "out", rules(
        {"id": "hidden-chars", "check": "invisible_unicode", "fix": "strip"}))
    assert clean == [b'{"id": "a", "text": "Hiddenspace here.", "score": NaN, "x": -Infinity}\n',
                     b'{"id": "b", "text": "Untouched text.", "score": NaN}\n']
    assert entries == []


# -- the command line on the sample corpus ------------------------------------------------


def _expected_sample() -> tuple[int, dict[int, int | None], set[int]]:
    """From pretrain.faults.json and the default rules: the input record count, the rows to
    quarantine (with the kept row of duplicates) and the rows to change."""
    n_lines = len(PRETRAIN.read_bytes().splitlines())
    blanks = {f["row"] for f in FAULTS if f["code"] == "blank_line"}
    quarantine: dict[int, int | None] = {}
    changes: set[int] = set()
    for f in FAULTS:
        if f["check"] in ("malformed", "schema", "empty") or f["code"] in (
                "replacement_character", "lone_surrogate"):
            quarantine.setdefault(f["row"], None)
        elif f["check"] == "exact_duplicate":
            quarantine[f["row"]] = f["cluster"]
        elif f["check"] == "invisible_unicode" or f["code"] in ("mojibake", "not_nfc"):
            changes.add(f["row"])
    return n_lines - len(blanks), quarantine, changes - set(quarantine)


def test_cli_fix_on_the_sample_corpus(tmp_path: Path) -> None:
    src = tmp_path / "data" / "pretrain.jsonl"
    src.parent.mkdir()
    src.write_bytes(PRETRAIN.read_bytes())
    before = sha256(src)
    out, quarantine = tmp_path / "out" / "clean.jsonl", tmp_path / "out" / "rejected.jsonl"
    result = invoke("fix", src, "--out", out, "--quarantine", quarantine)
    assert result.exit_code == 0, result.output
    assert sha256(src) == before
    assert sorted(p.name for p in src.parent.iterdir()) == ["pretrain.jsonl"]

    n_input, to_quarantine, to_change = _expected_sample()
    assert (n_input, len(to_quarantine)) == (299, 12)  # the numbers the README implies
    manifest = json.loads((out.parent / "fix-manifest.json").read_text())
    assert_balanced(manifest, n_input)
    assert manifest["quarantine"]["records"] == len(to_quarantine)
    assert manifest["clean"]["records"] == n_input - len(to_quarantine)
    assert manifest["clean"]["changed"] == len(to_change)
    assert manifest["input"]["blank_lines"] == 1
    assert f"{n_input} records" in result.output

    entries = [json.loads(x) for x in quarantine.read_bytes().splitlines()]
    assert [e["row"] for e in entries] == sorted(to_quarantine)
    raw = PRETRAIN.read_bytes().splitlines(keepends=True)
    for entry in entries:
        if to_quarantine[entry["row"]] is not None:
            dupes = [r for r in entry["reasons"] if r["check"] == "exact_duplicate"]
            assert [r["kept_row"] for r in dupes] == [to_quarantine[entry["row"]]]
        if "record" in entry:
            assert entry["record"] == json.loads(raw[entry["row"]])
            assert entry["id"] == f"doc-{entry['row']:05d}"
    # clean: every other line in order; the changed ones re-serialised, the rest verbatim
    kept_rows = [r for r in range(len(raw)) if r not in to_quarantine]
    clean = out.read_bytes().splitlines(keepends=True)
    assert len(clean) == len(kept_rows)
    for row, got in zip(kept_rows, clean, strict=True):
        if row in to_change:
            text = json.loads(got)["text"]
            assert not any(is_invisible(ch) for ch in text), row
            assert unicodedata.is_normalized("NFC", text)
            assert json.loads(got)["id"] == f"doc-{row:05d}"
        else:
            assert got == raw[row], row
    assert "café" in json.loads(clean[kept_rows.index(145)])["text"]

    report_dir = tmp_path / "report"
    result = invoke("check", "--no-smoke", out, "--out", report_dir, "--quiet")
    assert result.exit_code == 0, result.output

    again = tmp_path / "again"
    result = invoke("fix", out, "--out", again / "clean.jsonl",
                    "--quarantine", again / "rejected.jsonl")
    assert result.exit_code == 0, result.output
    assert (again / "clean.jsonl").read_bytes() == out.read_bytes()
    assert (again / "rejected.jsonl").read_bytes() == b""
    second = json.loads((again / "fix-manifest.json").read_text())
    assert (second["clean"]["changed"], second["quarantine"]["records"]) == (0, 0)


def test_cli_dry_run_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "pretrain.jsonl"
    src.write_bytes(PRETRAIN.read_bytes())
    out, quarantine = tmp_path / "out" / "clean.jsonl", tmp_path / "out" / "rejected.jsonl"
    result = invoke("fix", src, "--out", out, "--quarantine", quarantine, "--dry-run")
    assert result.exit_code == 0, result.output
    assert not out.parent.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pretrain.jsonl"]
    text = " ".join(result.output.split())
    _, to_quarantine, to_change = _expected_sample()
    assert f"{len(to_change)} records would change" in text
    assert f"{len(to_quarantine)} would be quarantined" in text
    assert "<U+200B>" in result.output
    assert "before:" in result.output and "after:" in result.output


def test_dry_run_through_the_api(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "Hid\u200bden text."},
                                              {"id": "b", "text": ""}])
    out, quarantine = tmp_path / "clean.jsonl", tmp_path / "rejected.jsonl"
    report = run_preflight(src, fix=FixOptions(out=out, quarantine=quarantine, dry_run=True),
                           smoke=False)
    result = report.fix
    assert result["dry_run"] is True
    assert (result["would_change"], result["would_quarantine"]) == (1, 1)
    [example] = result["examples"]
    assert "<U+200B>" in example["before"] and "<U+200B>" not in example["after"]
    assert not out.exists() and not quarantine.exists()
    assert not (tmp_path / "fix-manifest.json").exists()


# -- formats ------------------------------------------------------------------------------


def test_parquet_in_parquet_out(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pl.DataFrame({
        "id": ["a", "b", "c", "d"],
        "text": ["Hello the\u200bre world.", PLAIN[0], "", PLAIN[0].upper()],
        "n": [1, 2, 3, 4],
    }).write_parquet(src)
    before = sha256(src)
    out, quarantine = tmp_path / "clean.parquet", tmp_path / "rejected.jsonl"
    result = invoke("fix", src, "--out", out, "--quarantine", quarantine)
    assert result.exit_code == 0, result.output
    assert sha256(src) == before
    frame = pl.read_parquet(out)
    assert frame.to_dicts() == [{"id": "a", "text": "Hello there world.", "n": 1},
                                {"id": "b", "text": PLAIN[0], "n": 2}]
    entries = [json.loads(x) for x in quarantine.read_bytes().splitlines()]
    assert [(e["row"], e["id"]) for e in entries] == [(2, "c"), (3, "d")]
    assert entries[1]["record"] == {"id": "d", "text": PLAIN[0].upper(), "n": 4}
    assert entries[1]["reasons"][0]["kept_row"] == 1


def test_parquet_to_jsonl_with_format(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pl.DataFrame({"id": ["a", "b"], "text": ["Hi\u200bdden.", PLAIN[1]]}).write_parquet(src)
    out = tmp_path / "clean.jsonl"
    result = invoke("fix", src, "--out", out, "--quarantine", tmp_path / "q.jsonl",
                    "--format", "jsonl")
    assert result.exit_code == 0, result.output
    assert [json.loads(x) for x in out.read_bytes().splitlines()] == [
        {"id": "a", "text": "Hidden."}, {"id": "b", "text": PLAIN[1]}]


def test_csv_in_jsonl_out(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    with open(src, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "text"])
        writer.writerows([["a", "Hello the\u200bre world."], ["b", PLAIN[1]], ["c", ""]])
    out, quarantine = tmp_path / "clean.jsonl", tmp_path / "rejected.jsonl"
    result = invoke("fix", src, "--out", out, "--quarantine", quarantine)
    assert result.exit_code == 0, result.output
    assert [json.loads(x) for x in out.read_bytes().splitlines()] == [
        {"id": "a", "text": "Hello there world."}, {"id": "b", "text": PLAIN[1]}]
    [entry] = [json.loads(x) for x in quarantine.read_bytes().splitlines()]
    assert (entry["row"], entry["id"]) == (2, "c")

    result = invoke("fix", src, "--out", tmp_path / "clean.parquet",
                    "--quarantine", quarantine, "--format", "parquet")
    assert result.exit_code == 0, result.output
    assert pl.read_parquet(tmp_path / "clean.parquet").to_dicts() == [
        {"id": "a", "text": "Hello there world."}, {"id": "b", "text": PLAIN[1]}]


@pytest.mark.parametrize("which", ["--out", "--quarantine"])
def test_an_output_equal_to_the_input_is_refused(tmp_path: Path, which: str) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "Hid\u200bden."}])
    before = src.read_bytes()
    paths = {"--out": tmp_path / "clean.jsonl", "--quarantine": tmp_path / "q.jsonl"}
    paths[which] = tmp_path / "." / "in.jsonl"
    result = invoke("fix", src, "--out", paths["--out"], "--quarantine", paths["--quarantine"])
    assert result.exit_code == 2
    assert "input" in result.output
    assert src.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


# -- atomic outputs -----------------------------------------------------------------------


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_an_interrupted_run_leaves_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             error: type[BaseException]) -> None:
    src = write_jsonl(tmp_path / "data" / "in.jsonl",
                      [{"id": str(k), "text": f"Hid\u200bden {t}"} for k, t in enumerate(PLAIN)])
    folder = tmp_path / "out"
    folder.mkdir()
    calls = {"n": 0}
    change = JsonlWriter.change

    def failing(self: Any, unit: Any, rec: dict[str, Any]) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise error("interrupted")
        change(self, unit, rec)

    monkeypatch.setattr(JsonlWriter, "change", failing)
    with pytest.raises(error):
        run_preflight(src, fix=FixOptions(out=folder / "clean.jsonl",
                                          quarantine=folder / "rejected.jsonl"), smoke=False)
    assert calls["n"] == 3
    assert list(folder.iterdir()) == []  # no output, no manifest, no temporary file
    assert sorted(p.name for p in src.parent.iterdir()) == ["in.jsonl"]


def test_an_interrupted_run_keeps_the_previous_outputs(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    src = write_jsonl(tmp_path / "in.jsonl",
                      [{"id": str(k), "text": f"Hid\u200bden {t}"} for k, t in enumerate(PLAIN)])
    out, quarantine = tmp_path / "out" / "clean.jsonl", tmp_path / "out" / "rejected.jsonl"
    run_preflight(src, fix=FixOptions(out=out, quarantine=quarantine), smoke=False)
    previous = {p.name: p.read_bytes() for p in out.parent.iterdir()}
    assert sorted(previous) == ["clean.jsonl", "fix-manifest.json", "rejected.jsonl"]

    def failing(self: Any, unit: Any, rec: dict[str, Any]) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(JsonlWriter, "change", failing)
    with pytest.raises(RuntimeError):
        run_preflight(src, fix=FixOptions(out=out, quarantine=quarantine), smoke=False)
    assert {p.name: p.read_bytes() for p in out.parent.iterdir()} == previous


# -- shards and compressed input ----------------------------------------------------------


def test_a_folder_of_shards(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    write_jsonl(folder / "part-0.jsonl", [{"id": "a", "text": PLAIN[0]},
                                          {"id": "b", "text": "Hid\u200bden text here."}])
    write_jsonl(folder / "part-1.jsonl", [{"id": "c", "text": ""},
                                          {"id": "d", "text": PLAIN[0].upper()},
                                          {"id": "e", "text": PLAIN[2]}])
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    manifest, clean, entries = fix(folder, tmp_path / "out")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [json.loads(x) for x in clean] == [
        {"id": "a", "text": PLAIN[0]}, {"id": "b", "text": "Hidden text here."},
        {"id": "e", "text": PLAIN[2]}]
    assert [(e["file"], e["row"], e["id"]) for e in entries] == [
        ("part-1.jsonl", 0, "c"), ("part-1.jsonl", 1, "d")]
    assert entries[1]["record"] == {"id": "d", "text": PLAIN[0].upper()}
    assert_balanced(manifest, 5)


def test_gzip_input_gives_plain_jsonl(tmp_path: Path) -> None:
    lines = [line({"id": "a", "text": PLAIN[0]}), line({"id": "b", "text": "Hid\u200bden."}),
             b"\n", line({"id": "c", "text": ""})]
    src = tmp_path / "in.jsonl.gz"
    src.write_bytes(gzip.compress(b"".join(lines)))
    before = sha256(src)
    manifest, clean, entries = fix(src, tmp_path / "out")
    assert sha256(src) == before
    assert clean == [lines[0], line({"id": "b", "text": "Hidden."}), b"\n"]
    assert [e["row"] for e in entries] == [3]
    assert_balanced(manifest, 3)


# -- known bugs ---------------------------------------------------------------------------


def test_blank_line_before_a_duplicate_that_a_repair_reveals(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "in.jsonl", [
        line({"id": "a", "text": "The café is open today."}),
        b"\n",
        line({"id": "b", "text": PLAIN[1]}),
        line({"id": "c", "text": "The cafÃ© is open today."}),
    ])
    manifest, _, entries = fix(src, tmp_path / "out")
    assert [(e["row"], e["id"]) for e in entries] == [(3, "c")]
    assert_balanced(manifest, 3)


def test_a_duplicate_revealed_by_a_repair_is_quarantined_like_any_other(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "x", "text": "Broken \ufffd here."},
        {"id": "a", "text": "The café is open today."},
        {"id": "c", "text": "The cafÃ© is open today."},
        {"id": "d", "text": "Another bro\ufffdken record."},
    ])
    _, clean, entries = fix(src, tmp_path / "out")
    assert list(texts(clean)) == ["a"]
    assert [(e["row"], e["id"]) for e in entries] == [(0, "x"), (2, "c"), (3, "d")]
    assert entries[1]["record"] == {"id": "c", "text": "The cafÃ© is open today."}
    assert [r["kept_row"] for r in entries[1]["reasons"] if "kept_row" in r] == [1]


def test_a_duplicate_revealed_by_a_strip(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [
        {"id": "a", "text": "Bring the ri\x07ver stones home."},
        {"id": "b", "text": "Bring the river stones home."},
    ])
    _, clean, entries = fix(src, tmp_path / "out")
    assert list(texts(clean)) == ["a"]
    assert [(e["row"], e["id"]) for e in entries] == [(1, "b")]
    _, clean2, entries2 = fix(tmp_path / "out" / "clean.jsonl", tmp_path / "again")
    assert (clean2, entries2) == (clean, [])


def test_a_text_that_strip_empties_is_quarantined(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": PLAIN[0]},
                                              {"id": "b", "text": "\u200b\u2060"}])
    _, clean, entries = fix(src, tmp_path / "out")
    assert list(texts(clean)) == ["a"]
    assert [(e["row"], e["record"]) for e in entries] == [(1, {"id": "b", "text": "\u200b\u2060"})]
    assert run_preflight(tmp_path / "out" / "clean.jsonl", smoke=False).passed


def test_a_lone_surrogate_is_quarantined(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "in.jsonl", [
        line({"id": "a", "text": PLAIN[0]}),
        b'{"id": "b", "text": "lone \\ud800 surrogate here"}\n',
    ])
    manifest, clean, entries = fix(src, tmp_path / "out")
    assert clean == [line({"id": "a", "text": PLAIN[0]})]
    [entry] = entries
    assert entry["row"] == 1
    assert [r["code"] for r in entry["reasons"]] == ["lone_surrogate"]
    assert_balanced(manifest, 2)


def test_a_manifest_path_equal_to_the_input_is_refused(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "Hid\u200bden."}])
    before = src.read_bytes()
    result = invoke("fix", src, "--out", tmp_path / "clean.jsonl",
                    "--quarantine", tmp_path / "q.jsonl", "--manifest", src)
    assert src.read_bytes() == before
    assert result.exit_code == 2


def test_out_equal_to_quarantine_is_refused(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": PLAIN[0]},
                                              {"id": "b", "text": ""}])
    both = tmp_path / "both.jsonl"
    result = invoke("fix", src, "--out", both, "--quarantine", both)
    assert result.exit_code == 2


def test_outputs_inside_an_input_folder_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    write_jsonl(folder / "part-0.jsonl", [{"id": "a", "text": PLAIN[0]}])
    write_jsonl(folder / "part-1.jsonl", [{"id": "b", "text": "Hid\u200bden."}])
    result = invoke("fix", folder, "--out", folder / "clean.jsonl",
                    "--quarantine", folder / "rejected.jsonl")
    assert sorted(p.name for p in folder.iterdir()) == ["part-0.jsonl", "part-1.jsonl"]
    assert result.exit_code == 2


def test_a_null_line_is_malformed(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "in.jsonl", [line({"id": "a", "text": PLAIN[0]}), b"null\n"])
    _, _, entries = fix(src, tmp_path / "out")
    [entry] = entries
    assert entry["raw"] == "null"
    assert [(r["check"], r["code"]) for r in entry["reasons"]] == [
        ("malformed", "not_an_object")]


def test_a_null_first_line_does_not_crash(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "in.jsonl", [b"null\n", line({"id": "a", "text": PLAIN[0]})])
    done = subprocess.run(
        [sys.executable, "-m", "preflight", "fix", str(src), "--out", str(tmp_path / "c.jsonl"),
         "--quarantine", str(tmp_path / "q.jsonl"), "--quiet"],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    [entry] = [json.loads(x) for x in (tmp_path / "q.jsonl").read_bytes().splitlines()]
    assert (entry["row"], entry["raw"]) == (0, "null")


def test_config_errors_come_before_any_output(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": PLAIN[0]}])
    with pytest.raises(ConfigError):
        run_preflight(src, fix=FixOptions(out=tmp_path / "o" / "clean.jsonl",
                                          quarantine=tmp_path / "o" / "q.jsonl",
                                          format="csv"), smoke=False)
    assert not (tmp_path / "o").exists()
