"""JSON arrays in every common layout: an element whose quote or bracket never closes is one
malformed unit, cut where the next element starts, never at an object nested in it; a valid
element is never cut. Depth is a line's indentation, measured alike for the element and the
line that may start the next one (found by review: in the ``}, {`` layout an element's ``{``
sits at column 3, and a nested ``  {`` line, at 2, was taken for the next element; the first
element, ``[{``, was measured at column 1)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.cli import main
from preflight.source import jsonarray
from preflight.source.jsonarray import elements
from tests.source.helpers import malformed, read, rows, values, write


def _braces(value: Any, indent: int = 0, step: int = 2) -> str:
    """Hand-written style: each object's members on lines of their own, and a list of
    objects joined ``}, {`` (its ``}, {`` lines at the indentation of the list's key)."""
    if isinstance(value, dict) and value:
        pad = " " * (indent + step)
        body = ",\n".join(f"{pad}{json.dumps(k)}: {_braces(v, indent + step, step)}"
                          for k, v in value.items())
        return "{\n" + body + "\n" + " " * indent + "}"
    if isinstance(value, list) and value and all(isinstance(v, dict) and v for v in value):
        return "[" + ", ".join(_braces(v, indent, step) for v in value) + "]"
    return json.dumps(value)


def _record(k: int) -> dict[str, Any]:
    # Objects nested in lists and in objects: lines that start with "{" or "}, {" inside.
    return {"id": k, "text": f"t{k}",
            "meta": {"k": [{"n": 1, "m": {"deep": [{"z": 1}, {"z": 2}]}}, {"n": 2}]},
            "items": [{"a": 1}, {"a": 2, "b": {"c": 3}}]}


def _brief(records: list[dict[str, Any]]) -> str:
    """The report's layout: ``[{`` then ``}, {`` at column 0, nested objects on lines of
    their own at column 2, left of the element's ``{`` (column 3)."""
    def one(r: dict[str, Any]) -> str:
        head = json.dumps({k: v for k, v in r.items() if k not in ("meta", "items")})[:-1]
        nested = ", ".join(json.dumps(n) for n in r["meta"]["k"])
        items = "\n  }, {\n".join("    " + json.dumps(i)[1:-1] for i in r["items"])
        return (head + ', "meta": {"k": [\n  ' + nested + '\n]},\n  "items": [{\n' + items
                + "\n  }]\n}")
    return "[" + ", ".join(one(r) for r in records) + "]\n"


def _lists_on_lines(value: Any, indent: int = 0) -> str:
    """Objects on one line, but each list of objects one to a line, deeper by 2, its "]"
    back at the list's line's indentation: the next element starts on the line that closes
    the one before (``]}, {``)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_lists_on_lines(v, indent)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        pad = " " * (indent + 2)
        return ("[\n" + ",\n".join(pad + _lists_on_lines(v, indent + 2) for v in value)
                + "\n" + " " * indent + "]")
    return json.dumps(value)


_LAYOUTS: dict[str, Callable[[list[dict[str, Any]]], str]] = {
    "one-per-line": lambda rs: "[" + ",\n".join(json.dumps(r) for r in rs) + "]\n",
    "indent-2": lambda rs: json.dumps(rs, indent=2) + "\n",
    "indent-4": lambda rs: json.dumps(rs, indent=4) + "\n",
    "tabs": lambda rs: json.dumps(rs, indent="\t") + "\n",
    "comma-first": lambda rs: "[ " + "\n, ".join(json.dumps(r, indent=2) for r in rs) + "\n]\n",
    "brace-comma-brace": lambda rs: "[" + ", ".join(json.dumps(r, indent=2) for r in rs) + "]",
    "brace-comma-brace-nested": lambda rs: "[" + ", ".join(_braces(r) for r in rs) + "]\n",
    "brace-comma-brace-indented": lambda rs: (
        "[\n  " + ", ".join(_braces(r, 2) for r in rs) + "\n]\n"),
    "brace-comma-brace-step-1": lambda rs: "[" + ", ".join(_braces(r, 0, 1) for r in rs) + "]",
    "report": _brief,
    "closers-then-brace": lambda rs: "[" + ", ".join(_lists_on_lines(r) for r in rs) + "]",
    # The first element shares the "[" line, the others sit under its "{", deeper than the
    # "[" line (found by review: a runaway first element swallowed every later one).
    "pprint": lambda rs: "[" + ",\n ".join(json.dumps(r) for r in rs) + "]\n",
    "bracket-space": lambda rs: "[ " + ",\n  ".join(
        json.dumps(r, indent=2).replace("\n", "\n  ") for r in rs) + " ]\n",
    # Jackson's default: "[ {", then "}, {" at the "[" line's indentation, nested ones deeper.
    "jackson": lambda rs: "[ " + ", ".join(_braces(r) for r in rs) + " ]\n",
    "comma-first-tabs": lambda rs: "[\t" + "\n,\t".join(json.dumps(r, indent="\t")
                                                       for r in rs) + "\n]\n",
}
# Each breaks element ``at`` right after its id; the first two run away (a quote out of step
# from there; a brace that never closes), the last is well delimited (its "}" closes it).
_BREAKS = {
    "unclosed-quote": '"o": "never closed, ',
    "unclosed-brace": '"o": {"x": 1, ',
    "unclosed-list": '"o": [1, ',
}
_N = 7


def _broken(layout: str, at: int, bad: str) -> tuple[str, str]:
    text = _LAYOUTS[layout]([_record(k) for k in range(_N)])
    assert json.loads(text) == [_record(k) for k in range(_N)]
    broken = text.replace(f'"id": {at},', f'"id": {at}, {bad}', 1)
    assert broken != text
    return text, broken


@pytest.mark.parametrize("at", [0, 1, 3, _N - 1], ids=["first", "second", "middle", "last"])
@pytest.mark.parametrize("bad", list(_BREAKS.values()), ids=list(_BREAKS))
@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_a_broken_element_is_one_unit_and_every_other_element_its_own_record(
        tmp_path: Path, layout: str, bad: str, at: int) -> None:
    _, broken = _broken(layout, at, bad)
    path = write(tmp_path, "d.json", broken.encode())
    others = [k for k in range(_N) if k != at]
    # The gate's reading (fast stretches, the scanner from the broken element on)...
    batches = read(path)
    assert rows(batches) == others
    assert values(batches, "id") == others
    assert [r for r, _ in malformed(batches)] == [at]
    # No nested object read as a record (its members would be columns of their own).
    assert all(set(b.frame.columns) == {"id", "text", "meta", "items"} for b in batches)
    # ...and fix's (the scanner alone): the same units, the broken one as written.
    units = list(elements(path.open("rb")))
    assert [(u.row, u.malformed is not None) for u in units] == [
        (k, k == at) for k in range(_N)]
    assert [u.record for u in units if u.record is not None] == [_record(k) for k in others]
    [cut] = [u.raw for u in units if u.malformed is not None]
    assert cut.lstrip().startswith("{") and f'"id": {at}, {bad}' in cut
    assert f'"id": {at + 1},' not in cut


@pytest.mark.parametrize("at", [0, 4], ids=["first", "middle"])
@pytest.mark.parametrize("layout", ["brace-comma-brace-nested", "report", "indent-2"])
def test_a_long_unclosed_brace_is_cut_early_where_the_arrays_end_would_cut_it(
        monkeypatch: pytest.MonkeyPatch, layout: str, at: int) -> None:
    # ``MAX_OPEN_CHARS`` on, an element still open is cut at once (strict): in these
    # layouts too, at the next element, as reading on to the array's end cuts it.
    _, broken = _broken(layout, at, _BREAKS["unclosed-brace"])
    data = broken.encode()
    monkeypatch.setattr(jsonarray, "_READ", 64)

    def units(cap: int) -> list[tuple[int, bool, str]]:
        monkeypatch.setattr(jsonarray, "MAX_OPEN_CHARS", cap)
        return [(u.row, u.malformed is not None, u.raw) for u in elements(_Stream(data))]

    capped = units(100)
    assert capped == units(1 << 40)
    assert [(row, bad) for row, bad, _ in capped] == [(k, k == at) for k in range(_N)]


def test_elements_sharing_a_line_are_read_after_a_broken_one_on_their_line(
        tmp_path: Path) -> None:
    # Three elements to a line: an element whose quote never closes is cut where the next
    # element starts on its line ("}, {", the run after it read as the array's elements),
    # not at the next line (its neighbours on the line went into its unit, before).
    records = [{"id": k, "meta": {"k": [{"n": 1}]}} for k in range(9)]
    lines = [", ".join(json.dumps(r) for r in records[k:k + 3]) for k in range(0, 9, 3)]
    text = "[" + ",\n".join(lines) + "]\n"
    for at in (3, 4, 5):  # first, middle, last on its line
        broken = text.replace(f'"id": {at},', f'"id": {at}, "o": "open,', 1)
        path = write(tmp_path, f"d{at}.json", broken.encode())
        batches = read(path)
        assert malformed(batches) == [(at, "invalid_json")]
        assert rows(batches) == [k for k in range(9) if k != at]
        assert values(batches, "id") == [k for k in range(9) if k != at]
        [cut] = [u.raw for u in elements(path.open("rb")) if u.malformed is not None]
        assert cut.startswith(f'{{"id": {at}, "o": "open,') and f'"id": {at + 1},' not in cut


class _Stream:
    """A binary stream over bytes."""

    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def read(self, n: int = -1) -> bytes:
        n = len(self._data) - self._at if n < 0 else n
        chunk = self._data[self._at:self._at + n]
        self._at += len(chunk)
        return chunk


# -- valid arrays are never cut ------------------------------------------------------------

_KEY = st.sampled_from(["id", "text", "items", "k", "n"])
_VALUE = st.recursive(
    st.none() | st.integers(-9, 9) | st.text("ab {}[],\"\n", max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY, inner, max_size=3)
    | st.lists(st.dictionaries(_KEY, inner, min_size=1, max_size=3), min_size=1, max_size=3),
    max_leaves=12,
)
_RECORDS = st.lists(st.dictionaries(_KEY, _VALUE, min_size=1, max_size=4), min_size=1,
                    max_size=6)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=_RECORDS, layout=st.sampled_from(sorted(set(_LAYOUTS) - {"report"})),
       read_size=st.sampled_from([1, 16, 4096]))
def test_no_valid_element_is_cut_in_any_layout(monkeypatch: pytest.MonkeyPatch,
                                               records: list[dict[str, Any]], layout: str,
                                               read_size: int) -> None:
    # Read in small pieces with the cap at one character, every element is asked at each
    # piece whether a line inside it starts an element (the early cut, strict): none does,
    # nested "{" and "}, {" lines included.
    monkeypatch.setattr(jsonarray, "_READ", read_size)
    monkeypatch.setattr(jsonarray, "MAX_OPEN_CHARS", 1)
    data = _LAYOUTS[layout](records).encode()
    assert json.loads(data) == records
    units = list(elements(_Stream(data)))
    assert [u.malformed for u in units] == [None] * len(records)
    assert [u.record for u in units] == records


@pytest.mark.parametrize("layout", ["brace-comma-brace-nested", "report",
                                    "brace-comma-brace-indented"])
def test_a_valid_array_with_nested_brace_lines_reads_whole_on_every_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    # The gate's reading, fast or handed to the scanner at an odd element, and the cap.
    monkeypatch.setattr(jsonarray, "MAX_OPEN_CHARS", 1)
    records = [_record(k) for k in range(_N)]
    text = _LAYOUTS[layout](records)
    second = text.rindex("{", 0, text.index('"id": 2,'))
    odd = text[:second] + "5, " + text[second:]  # a bare number before element 2
    assert values(read(write(tmp_path, "a.json", text.encode())), "id") == list(range(_N))
    batches = read(write(tmp_path, "b.json", odd.encode()))
    assert malformed(batches) == [(2, "not_an_object")]
    assert rows(batches) == [0, 1, *range(3, _N + 1)]
    assert values(batches, "id") == list(range(_N))
    assert all(set(b.frame.columns) == {"id", "text", "meta", "items"} for b in batches)


# -- check and fix agree -----------------------------------------------------------------


def _check(src: Path, rules: Path, out: Path) -> list[int]:
    result = CliRunner().invoke(main, ["check", str(src), "--rules", str(rules), "--no-smoke",
                                       "--out", str(out), "--quiet", "--no-progress"])
    assert result.exit_code == 1, result.output
    found = pl.read_parquet(out / "findings.parquet")
    return found.filter(pl.col("check") == "malformed").get_column("row").to_list()


def _fix(src: Path, rules: Path, out: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    clean, quarantine = out / "clean.jsonl", out / "q.jsonl"
    result = CliRunner().invoke(main, ["fix", str(src), "--rules", str(rules),
                                       "--out", str(clean), "--quarantine", str(quarantine),
                                       "--no-progress"])
    assert result.exit_code == 0, result.output
    return ([json.loads(x) for x in clean.read_bytes().splitlines()],
            [json.loads(x) for x in quarantine.read_bytes().splitlines()])


@pytest.mark.parametrize("action", ["quarantine", "none"])
@pytest.mark.parametrize("at", [0, 3])
@pytest.mark.parametrize("layout", ["report", "brace-comma-brace-nested", "pprint"])
@pytest.mark.parametrize("bad", [_BREAKS["unclosed-quote"], _BREAKS["unclosed-brace"]],
                         ids=["unclosed-quote", "unclosed-brace"])
def test_check_and_fix_agree_on_a_runaway_element(tmp_path: Path, layout: str, bad: str,
                                                  at: int, action: str) -> None:
    # check finds the one malformed row; fix keeps every other element and sets the broken
    # one aside as written (under ``fix: none`` too: spanning lines, it cannot be one
    # JSON Lines line).
    _, broken = _broken(layout, at, bad)
    src = write(tmp_path, "d.json", broken.encode())
    rules = write(tmp_path, "rules.yaml", (
        "fields: {text: text, id: id}\nrules:\n  - check: malformed\n"
        f"    fix: {action}\n  - check: invisible_unicode\n").encode())
    assert _check(src, rules, tmp_path / "report") == [at]
    clean, quarantine = _fix(src, rules, tmp_path / "fixed")
    assert clean == [_record(k) for k in range(_N) if k != at]
    [entry] = quarantine
    assert entry["row"] == at
    units = [u for u in elements(src.open("rb")) if u.malformed is not None]
    assert [entry["raw"]] == [u.raw for u in units]
    assert entry["raw"] in broken
