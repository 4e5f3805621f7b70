"""A key hiding a character (``"na\\u200bme"``) was renamed by ``fix`` only in the records
the checks flagged, those holding a value under it: its null-valued copies in other records
stayed, and a check of the clean output failed on them (a name no record holds a value
under). A chat turn's key that no record holds a value under was not flagged at all. Now
``fix`` renames such a key wherever it appears in JSON (JSON Lines, a JSON array), null or
not, counted in ``renamed_keys``; a record where the mended name is another key of the
object is set aside (``key_not_mendable``), as a flagged one is; and ``check`` flags a
turn's key no record holds a value under (a corpus-level finding)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from preflight import run_preflight
from preflight.cli import main
from preflight.fix.mend import Mender
from tests.outputs import write_records

ZW, TAG = "\u200b", "\U000e0041"
INPUTS = ["d.jsonl", "d.json", "escaped.jsonl"]  # raw characters; \u escapes (both)
OUTPUTS = ["c.jsonl", "c.json"]  # a .json clean output is JSON Lines too


def _write(tmp_path: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    if name == "escaped.jsonl":  # every hidden character as its \u escape
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path
    return write_records(tmp_path / name, rows)


def _fix(data: Path, out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                         dict[str, Any]]:
    """``preflight fix``, which must succeed: the clean records, the quarantine's entries,
    the manifest."""
    quarantine = out.parent / "q.jsonl"
    result = CliRunner().invoke(main, ["fix", str(data), "--out", str(out),
                                       "--quarantine", str(quarantine)])
    assert result.exit_code == 0, result.output
    clean = (pq.read_table(out).to_pylist() if out.suffix == ".parquet"
             else [json.loads(line) for line in out.read_text().splitlines()])
    aside = [json.loads(line) for line in quarantine.read_text().splitlines()]
    return clean, aside, json.loads((out.parent / "fix-manifest.json").read_text())


def _rechecks_clean(out: Path) -> None:
    again = run_preflight(out, smoke=False, out=out.parent / "again")
    assert again.verdict == "pass", again.reasons


def _rows() -> list[dict[str, Any]]:
    """Six records: a top-level key and a nested one hide characters; each holds a value in
    one record (flagged) and is null in others (not flagged)."""
    rows: list[dict[str, Any]] = [{"text": f"document {i} here", "meta": {"n": i}}
                                  for i in range(6)]
    rows[1][f"sco{ZW}re"] = 5
    rows[3][f"sco{ZW}re"] = None
    rows[4][f"sco{ZW}re"] = None
    rows[2]["meta"][f"so{TAG}urce"] = "web"
    rows[4]["meta"][f"so{TAG}urce"] = None
    rows[5]["meta"][f"so{TAG}urce"] = None
    return rows


@pytest.mark.parametrize("out", OUTPUTS)
@pytest.mark.parametrize("name", INPUTS)
def test_null_copies_of_a_hidden_key_are_renamed_too(tmp_path: Path, name: str,
                                                     out: str) -> None:
    rows = _rows()
    data = _write(tmp_path, name, rows)
    fixed, aside, manifest = _fix(data, tmp_path / out)
    assert aside == []
    want = json.loads(json.dumps(rows).replace("\\u200b", "").replace("\\udb40\\udc41", ""))
    assert fixed == want  # every value as it was, only the keys renamed
    assert list(fixed[4]) == ["text", "meta", "score"]  # in place, the order kept
    assert manifest["renamed_keys"] == [
        {"key": '["sco\\u200bre"]', "to": "score", "records": 3},
        {"key": 'meta["so\\udb40\\udc41urce"]', "to": "source", "records": 3}]
    assert manifest["clean"]["changed"] == 5
    if name == "d.jsonl":  # a line without the key is copied byte for byte
        assert (tmp_path / out).read_text().splitlines()[0] == data.read_text().splitlines()[0]
    _rechecks_clean(tmp_path / out)


@pytest.mark.parametrize("out", OUTPUTS)
@pytest.mark.parametrize("name", INPUTS)
def test_a_null_key_whose_mended_name_is_taken_sets_its_record_aside(
        tmp_path: Path, name: str, out: str) -> None:
    rows = _rows()
    rows[3]["score"] = 2  # beside its null "sco\u200bre": renamed, one value would be lost
    data = _write(tmp_path, name, rows)
    fixed, aside, manifest = _fix(data, tmp_path / out)
    assert [a["row"] for a in aside] == [3] and aside[0]["record"] == rows[3]
    assert aside[0]["reasons"][0]["code"] == "key_not_mendable"
    assert aside[0]["reasons"][0]["detail"].startswith(
        '["sco\\u200bre"] (key): would be another key of the same object')
    assert len(fixed) + len(aside) == len(rows)
    assert {"key": '["sco\\u200bre"]', "to": "score", "records": 2} in manifest["renamed_keys"]
    _rechecks_clean(tmp_path / out)


def _chats() -> list[dict[str, Any]]:
    """The chat repro: a turn's key hides a zero-width space, null wherever it appears."""
    rows: list[dict[str, Any]] = [
        {"messages": [{"role": "user", "content": f"hello there {i}"},
                      {"role": "assistant", "content": f"hi back {i}"}]} for i in range(4)]
    rows[0]["messages"][0][f"na{ZW}me"] = None
    rows[2]["messages"][1][f"na{ZW}me"] = None
    return rows


@pytest.mark.parametrize("name", INPUTS)
def test_a_turns_key_no_record_holds_a_value_under_is_flagged(tmp_path: Path,
                                                              name: str) -> None:
    data = _write(tmp_path, name, _chats())
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    assert report.verdict == "fail"
    frame = report.findings().filter(pl.col("check") == "invisible_unicode")
    assert frame["row"].to_list() == [None]  # the corpus's: no record holds a value
    assert frame["code"].to_list() == ["zero_width_space"]
    assert frame["detail"][0].startswith('messages[*]["na\\u200bme"] (key)')


@pytest.mark.parametrize("out", [*OUTPUTS, "c.parquet"])
@pytest.mark.parametrize("name", INPUTS)
def test_fix_renames_a_turns_null_key_and_its_output_checks_clean(
        tmp_path: Path, name: str, out: str) -> None:
    rows = _chats()
    data = _write(tmp_path, name, rows)
    fixed, aside, manifest = _fix(data, tmp_path / out)
    assert aside == []
    want = copy.deepcopy(rows)
    want[0]["messages"][0] = {"role": "user", "content": "hello there 0", "name": None}
    want[2]["messages"][1] = {"role": "assistant", "content": "hi back 2", "name": None}
    if out == "c.parquet":  # a table's turns hold the union of their keys
        for turn in (t for r in want for t in r["messages"]):
            turn.setdefault("name", None)
    assert fixed == want
    assert manifest["renamed_keys"] == [
        {"key": 'messages[*]["na\\u200bme"]', "to": "name", "records": 2}]
    _rechecks_clean(tmp_path / out)


def test_only_lines_holding_a_hidden_character_are_read_for_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines the checks did not flag are copied as written; only those holding a
    character found hiding in a key name (U+200B here), as written or escaped in any case,
    are walked for keys: one holding another (a ZWJ in an emoji, allowed) is not, and is
    copied byte for byte."""
    lines = ['{"text": "plain ascii here"}',
             '{"text": "caf\u00e9 \u2019quoted\u2019 and \\u00e9scaped"}',
             '{"text": "a family \U0001F468\u200d\U0001F469 here"}',
             '{"text": "one more", "n\u200b": null}',
             '{"text": "and the last", "n\\u200B": null}']
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(lines) + "\n")
    walked: list[dict[str, Any]] = []
    renamed_keys = Mender.renamed_keys

    def counted(self: Mender, record: dict[str, Any]) -> dict[str, Any]:
        walked.append(record)
        return renamed_keys(self, record)

    monkeypatch.setattr(Mender, "renamed_keys", counted)
    fixed, aside, manifest = _fix(data, tmp_path / "c.jsonl")
    assert [r["text"] for r in walked] == ["one more", "and the last"]
    assert aside == [] and fixed[3:] == [{"text": "one more", "n": None},
                                         {"text": "and the last", "n": None}]
    assert (tmp_path / "c.jsonl").read_text().splitlines()[:3] == lines[:3]
    assert manifest["renamed_keys"] == [{"key": '["n\\u200b"]', "to": "n", "records": 2}]


def test_no_line_is_looked_at_for_keys_when_no_key_hides_a_character(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Looking at each line the checks did not flag costs a pass over its bytes (a fix of
    250 MB ran ~15% longer): done only when the checks found a key hiding a character.
    Hidden characters in values (flagged, stripped) do not call for it."""
    lines = [{"text": f"value {i} with a hidden{ZW} character" if i % 3 == 0
              else f"plain value {i}"} for i in range(9)]
    data = write_records(tmp_path / "d.jsonl", lines)
    looked = []
    may_rename_keys = Mender.may_rename_keys

    def counted(self: Mender, raw: bytes, chars: frozenset[str]) -> bool:
        looked.append(raw)
        return may_rename_keys(self, raw, chars)

    monkeypatch.setattr(Mender, "may_rename_keys", counted)
    fixed, aside, manifest = _fix(data, tmp_path / "c.jsonl")
    assert looked == [] and aside == [] and manifest["clean"]["changed"] == 3
    assert all(ZW not in r["text"] for r in fixed)
    key = write_records(tmp_path / "k.jsonl", [*lines, {"text": "x", f"n{ZW}": 1}])
    _fix(key, tmp_path / "k" / "c.jsonl")
    assert len(looked) == 6  # the unflagged lines, once a key hides a character


def test_the_look_for_keys_finds_the_characters_found_as_written_or_escaped() -> None:
    """What ``may_rename_keys`` looks for comes from the key findings' paths: each character
    of a flagged key that is not printable ASCII, raw, as a ``\\u`` escape in either case, a
    surrogate pair's high half, or a short escape (``\\b``)."""
    from preflight.checks.nested_strings import key_characters
    from preflight.fix.plan import plan

    found = pl.DataFrame({
        "row": [None, 3, 4], "file": [None, None, None],
        "rule": ["hidden-chars"] * 3, "check": ["invisible_unicode"] * 3,
        "code": ["zero_width_space", "tag_character", "zero_width_space"],
        "detail": ['messages[*]["na\\u200bme"] (key): 1× U+200B at char 2',
                   'meta["so\\udb40\\udc41urce"] (key): 1× U+E0041 at char 2',
                   'text: 1× U+200B at char 4'],  # a value's, not a key's
        "cluster": [None, None, None]})
    keys = plan(found, [], can_truncate=False, chat=True).keys
    assert keys == {"\u200b", TAG} == key_characters(found["detail"][0]) | {TAG}
    assert key_characters('["a\\"b\\b"] (key): 1× U+0008 at char 3') == {"\b"}
    mender = Mender.__new__(Mender)
    mender._keys = {"strip"}
    lines = [(b'{"n\xe2\x80\x8b": null}', True),  # U+200B as written
             (b'{"n\\u200B": null}', True),  # escaped, upper case
             (b'{"n\\U200b": null}', False),  # no JSON escape
             (b'{"x": "\\udb40\\udc42"}', True),  # another tag: the same high half
             (b'{"x": "\\u200d and \\n"}', False),  # a ZWJ, a line break: not found
             (b'{"x": "\xe2\x80\x8d"}', False),
             (('{"t": "%s"}' % TAG).encode(), True)]
    for line, hit in lines:
        assert mender.may_rename_keys(line, keys) is hit, line
    assert mender.may_rename_keys(b'{"x\\b": 1}', frozenset({"\b"}))
    assert not mender.may_rename_keys(b'{"x\\f": 1}', frozenset({"\b"}))
