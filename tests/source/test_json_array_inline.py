"""JSON arrays on one line (``json.dump(list)``): an element whose quote or bracket never
closes is cut where the next element starts on its line, so the elements after it are read
(found by review: one such element near the start of a 300 MB array made the rest one
``truncated`` unit, 3 records of 1.2 M read, and the file held in memory to learn that)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.cli import main
from preflight.source import array_inline
from preflight.source.array_values import RUNAWAY_INLINE
from preflight.source.jsonarray import Element, elements
from tests.source.helpers import malformed, read, rows, values, write

_N = 8
_MSG = {"role": "user", "content": "a message"}


def _chat(k: int) -> dict[str, Any]:
    return {"id": k, "messages": [{"role": "user", "content": f"q{k}"},
                                  {"role": "assistant", "content": f"a{k}"},
                                  {"role": "user", "content": f"more {k}"}]}


def _plain(k: int) -> dict[str, Any]:
    return {"id": k, "text": f"text {k}"}


# Each plants one fault in element ``at``'s text; the elements it takes along into its unit
# (a missing "}" after a string leaves no "}, {" before the next element: that one goes too).
_FAULTS = {
    "no-closing-quote": (lambda t: t[:-2] + "}", 0),
    "no-opening-quote": (lambda t: t.replace('"text', "text", 1), 0),
    "no-closing-brace": (lambda t: t[:-1], 1),
    "extra-opening-brace": (lambda t: "{" + t, 0),
}
_SEPARATORS = {"comma-space": (", ", ": "), "comma": (",", ":")}


def _one_line(records: list[dict[str, Any]], sep: str, faults: dict[int, Any]) -> bytes:
    item, key = _SEPARATORS[sep]
    texts = [json.dumps(r, separators=(item, key)) for r in records]
    for at, fault in faults.items():
        texts[at] = fault(texts[at])
    return ("[" + item.join(texts) + "]").encode()


def _units(path: Path) -> list[Element]:
    return list(elements(path.open("rb")))


@pytest.mark.parametrize("sep", list(_SEPARATORS))
@pytest.mark.parametrize("at", [0, 1, 3], ids=["first", "second", "middle"])
@pytest.mark.parametrize("fault", list(_FAULTS))
def test_a_broken_element_on_one_line_is_one_unit_and_later_elements_are_records(
        tmp_path: Path, fault: str, at: int, sep: str) -> None:
    plant, taken = _FAULTS[fault]
    path = write(tmp_path, "d.json", _one_line([_plain(k) for k in range(_N)], sep,
                                               {at: plant}))
    kept = [k for k in range(_N) if not at <= k <= at + taken]
    # Units are numbered in order: the elements after a unit that took two are one on.
    unit_rows = [k if k < at else k - taken for k in kept]
    batches = read(path)  # the gate's reading (fast stretches, then the scanner)
    assert values(batches, "id") == kept
    assert rows(batches) == unit_rows
    assert malformed(batches) == [(at, "invalid_json")]
    units = _units(path)  # fix's reading: the same units
    assert [u.row for u in units if u.record is not None] == unit_rows
    [bad] = [u for u in units if u.malformed is not None]
    assert (bad.malformed.code, bad.malformed.detail) == RUNAWAY_INLINE  # type: ignore[union-attr]
    assert bad.raw.startswith("{") and f'"id"{_SEPARATORS[sep][1]}{at + taken + 1}' not in bad.raw


def test_the_review_reproducer_reads_every_later_element(tmp_path: Path) -> None:
    path = write(tmp_path, "d.json",
                 b'[{"text": "r0"}, {"text": "r1}, {"text": "r2"}, {"text": "r3"}]')
    units = _units(path)
    assert [(u.row, u.raw if u.malformed else u.record) for u in units] == [
        (0, {"text": "r0"}), (1, '{"text": "r1}, '), (2, {"text": "r2"}), (3, {"text": "r3"})]
    batches = read(path)
    assert values(batches, "text") == ["r0", "r2", "r3"]
    assert malformed(batches) == [(1, "invalid_json")]


@pytest.mark.parametrize("fault", list(_FAULTS))
def test_a_broken_last_element_stays_one_unit(tmp_path: Path, fault: str) -> None:
    # Nothing after it to cut at: quotes out of step run to the file's end (truncated, as
    # before); a bracket is one unit up to the array's "]" (invalid_json, as before).
    plant, _ = _FAULTS[fault]
    path = write(tmp_path, "d.json", _one_line([_plain(k) for k in range(_N)], "comma-space",
                                               {_N - 1: plant}))
    batches = read(path)
    assert values(batches, "id") == list(range(_N - 1))
    assert malformed(batches) == [
        (_N - 1, "truncated" if fault.endswith("quote") else "invalid_json")]


@pytest.mark.parametrize("message", [0, 2], ids=["first-message", "last-message"])
@pytest.mark.parametrize("at", [0, 3])
def test_a_chat_element_with_an_unclosed_quote_yields_no_message_as_a_record(
        tmp_path: Path, at: int, message: int) -> None:
    # The string that never closes swallows "}, {" of its own messages list: the objects
    # after it read cleanly, up to the list's "]}". A run that ends in a closer is nested in
    # the element, not the array's: the cut is at the next element.
    records = [_chat(k) for k in range(_N)]
    text = json.dumps(records)
    needle = json.dumps(records[at]["messages"][message]["content"])
    broken = text.replace(needle, needle[:-1], 1)
    assert broken != text
    path = write(tmp_path, "d.json", broken.encode())
    batches = read(path)
    assert values(batches, "id") == [k for k in range(_N) if k != at]
    assert rows(batches) == [k for k in range(_N) if k != at]
    assert malformed(batches) == [(at, "invalid_json")]
    assert all(set(b.frame.columns) == {"id", "messages"} for b in batches)
    [bad] = [u.raw for u in _units(path) if u.malformed is not None]
    assert bad == json.dumps(records[at]).replace(needle, needle[:-1]) + ", "


def test_a_chat_element_with_an_unclosed_message_brace_is_one_unit(tmp_path: Path) -> None:
    # A message's "}" missing: the element's brackets still close (its "]" closes the
    # message too); the messages after it are nested runs ("}]}" follows): no record.
    records = [_chat(k) for k in range(_N)]
    text = json.dumps(records)
    broken = text.replace('"content": "q2"}', '"content": "q2"', 1)
    path = write(tmp_path, "d.json", broken.encode())
    batches = read(path)
    assert values(batches, "id") == [k for k in range(_N) if k != 2]
    assert malformed(batches) == [(2, "invalid_json")]
    assert all(set(b.frame.columns) == {"id", "messages"} for b in batches)


def test_a_chat_element_broken_in_two_messages_keeps_its_messages(tmp_path: Path) -> None:
    # Two quotes that never close in one element: the run from the first one's swallowed
    # "}, {" meets the second broken message, which closes the list ("}]}, {"): nested, so
    # the element is cut at the next element and no message is read as a record.
    records = [_chat(k) for k in range(_N)]
    text = json.dumps(records)
    broken = text.replace('"q2"}', '"q2}', 1).replace('"more 2"}', '"more 2}', 1)
    path = write(tmp_path, "d.json", broken.encode())
    batches = read(path)
    assert values(batches, "id") == [k for k in range(_N) if k != 2]
    assert malformed(batches) == [(2, "invalid_json")]


@pytest.mark.parametrize("apart", [1, 2, 4], ids=["adjacent", "one-between", "far"])
def test_two_broken_elements_on_one_line(tmp_path: Path, apart: int) -> None:
    # Each is its own unit when a clean element stands between them; two in a row are one
    # unit (the first one's run starts with the second, which is not clean).
    plant, _ = _FAULTS["no-closing-quote"]
    path = write(tmp_path, "d.json", _one_line([_plain(k) for k in range(_N)], "comma-space",
                                               {1: plant, 1 + apart: plant}))
    batches = read(path)
    if apart == 1:
        assert values(batches, "id") == [0, 3, 4, 5, 6, 7]
        assert rows(batches) == [0, 2, 3, 4, 5, 6]
        assert malformed(batches) == [(1, "invalid_json")]
    else:
        assert values(batches, "id") == [k for k in range(_N) if k not in (1, 1 + apart)]
        assert rows(batches) == [k for k in range(_N) if k not in (1, 1 + apart)]
        assert malformed(batches) == [(1, "invalid_json"), (1 + apart, "invalid_json")]


def test_a_string_ending_in_a_boundary_in_a_valid_element_is_not_cut(tmp_path: Path) -> None:
    # "}, {" then the closing quote, in valid strings, and a valid run after it: a valid
    # element is never cut (its text decodes), however its strings end.
    records = [{"id": 0, "code": "f() {}, {"}, {"id": 1, "k": "x}, {"},
               {"id": 2, "nested": [{"a": "}, {"}, {"b": 1}]}]
    path = write(tmp_path, "d.json", json.dumps(records).encode())
    assert [u.record for u in _units(path)] == records


def test_fix_keeps_every_element_of_a_one_line_array(tmp_path: Path) -> None:
    # fix reads with the same scanner: each broken element is set aside as written, up to
    # where the next one starts; the output and the quarantine hold every element.
    plant, _ = _FAULTS["no-closing-quote"]
    records = [_plain(k) for k in range(_N)]
    data = _one_line(records, "comma-space", {1: plant, 5: plant})
    src = write(tmp_path, "d.json", data)
    out, quarantine = tmp_path / "o.jsonl", tmp_path / "q.jsonl"
    result = CliRunner().invoke(main, ["check", str(src), "--no-smoke", "--out",
                                       str(tmp_path / "report"), "--quiet", "--no-progress"])
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["source"]["records"] == _N - 2
    result = CliRunner().invoke(main, ["fix", str(src), "--out", str(out),
                                       "--quarantine", str(quarantine), "--no-progress"])
    assert result.exit_code == 0, result.output
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert kept == [r for r in records if r["id"] not in (1, 5)]
    set_aside = [json.loads(line) for line in quarantine.read_text().splitlines()]
    assert [q["row"] for q in set_aside] == [1, 5]
    texts = [json.dumps(r) for r in records]
    assert [q["raw"] for q in set_aside] == [plant(texts[1]) + ", ", plant(texts[5]) + ", "]


def test_a_broken_element_is_cut_without_reading_to_the_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # An unclosed bracket is known at the array's end; the in-line cut is decided within its
    # window: the rest of a long one-line array is not read (nor held) first.
    monkeypatch.setattr(array_inline, "WINDOW", 2_000)
    plant, _ = _FAULTS["no-closing-brace"]
    data = _one_line([_plain(k) for k in range(5_000)], "comma-space", {3: plant})

    class Counted:
        def __init__(self) -> None:
            self.at = 0

        def read(self, n: int = -1) -> bytes:
            n = 4_096 if n < 0 else min(n, 4_096)
            chunk = data[self.at:self.at + n]
            self.at += len(chunk)
            return chunk

    stream = Counted()
    for unit in elements(stream):
        if unit.row == 3:
            assert unit.malformed is not None
            break
    assert stream.at < 40_000


def test_a_long_nested_list_in_a_broken_element_is_run_through_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each "}, {" between the messages of an element whose bracket never closes starts a
    # run of clean objects that ends at the list's "]," (nested: turned down). The run from
    # the first message is turned down for all later ones: 2,000 messages were 2,000 runs
    # through the rest of the list (5,000 took 35 s).
    runs: list[int] = []
    run = array_inline.InlineCut._run

    def counted(self: array_inline.InlineCut, start: int) -> tuple[bool, int, int]:
        runs.append(start)
        return run(self, start)

    monkeypatch.setattr(array_inline.InlineCut, "_run", counted)
    broken = json.dumps({"text": "t", "messages": [_MSG] * 2_000})[:-1]  # no closing brace
    data = ('[{"text": "a"}, ' + broken + ', {"text": "after"}, {"text": "last"}]').encode()
    units = list(elements(io.BytesIO(data)))
    assert [u.malformed is not None for u in units] == [False, True, False, False]
    assert units[2].record == {"text": "after"}
    assert len(runs) < 10, len(runs)


def test_a_valid_element_with_nothing_to_cut_at_is_not_decoded_to_look(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A large valid element (a long list of numbers: no "}, {" in it) was decoded by the
    # in-line cut's first-error probe on every refill of the buffer.
    probes: list[int] = []
    first_error = array_inline.InlineCut._first_error

    def counted(self: array_inline.InlineCut) -> int | None:
        probes.append(self.pos)
        return first_error(self)

    monkeypatch.setattr(array_inline.InlineCut, "_first_error", counted)
    data = json.dumps([{"text": "a"}, {"text": "b", "v": [0.5] * 400_000}, {"text": "c"}])
    units = list(elements(io.BytesIO(data.encode())))
    assert [u.malformed for u in units] == [None, None, None]
    assert units[1].record is not None and len(units[1].record["v"]) == 400_000
    assert probes == []


# -- random one-line arrays with planted faults ------------------------------------------

_WORD = st.text("abc xyz", max_size=5)
_MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                  "content": _WORD})
_RECORD = st.fixed_dictionaries({"t": _WORD}, optional={
    "messages": st.lists(_MESSAGE, min_size=1, max_size=4),
    "meta": st.dictionaries(st.sampled_from(["k", "n"]), _WORD, max_size=2),
    "tags": st.lists(_WORD, max_size=3)})


def _plant(text: str, how: int, where: int) -> str:
    """One fault in a record's text: a quote, a brace, dropped or added."""
    if how == 0:  # a string's closing quote (one before a "," or "}")
        ends = [i for i in range(1, len(text)) if text[i] == '"' and text[i + 1] in ",}]"]
        i = ends[where % len(ends)]
        return text[:i] + text[i + 1:]
    if how == 1:  # a key's opening quote
        keys = [i for i in range(1, len(text) - 1) if text[i] == '"' and text[i - 1] in "{, "
                and text[text.find('"', i + 1) + 1] == ":"]
        i = keys[where % len(keys)]
        return text[:i] + text[i + 1:]
    if how == 2:
        return text[:-1]  # the element's own "}"
    return "{" + text


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=st.lists(_RECORD, min_size=2, max_size=12), sep=st.sampled_from([", ", ","]),
       faults=st.dictionaries(st.integers(0, 11), st.tuples(st.integers(0, 3),
                                                            st.integers(0, 50)), max_size=2),
       read_size=st.sampled_from([7, 1 << 20]))
def test_units_of_a_one_line_array_are_whole_elements(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: list[dict[str, Any]],
        sep: str, faults: dict[int, tuple[int, int]], read_size: int) -> None:
    # Nothing lost, nothing invented: the units are runs of whole elements in order, each
    # record one clean element as it was, each malformed unit holding a broken one.
    from preflight.source import jsonarray
    monkeypatch.setattr(jsonarray, "_READ", read_size)
    texts = [json.dumps(r, separators=(sep, ": ")) for r in records]
    # Two broken elements in a row are left out: their quotes can fall back in step inside
    # the second, which the scanner then reads as stray pieces (as it did before).
    broken = {k for k in faults if k < len(texts) and k + 1 not in faults}
    for k in broken:
        texts[k] = _plant(texts[k], *faults[k])
    path = tmp_path / "d.json"
    path.write_text("[" + sep.join(texts) + "]")
    k = 0
    for unit in elements(path.open("rb")):
        assert k < len(texts)
        if unit.record is not None:
            assert k not in broken and unit.record == records[k]
            k += 1
            continue
        start, raw = k, unit.raw
        while raw.startswith(texts[k]):  # the elements it holds, whole
            raw = raw[len(texts[k]):].removeprefix(sep)
            k += 1
            if k == len(texts) or not raw:
                break
        assert k > start and broken & set(range(start, k)), unit.raw
        assert raw in ("", "]"), unit.raw
    assert k == len(texts)
