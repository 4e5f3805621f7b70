"""Property tests for fix over every input format: JSON Lines, JSON array, CSV, Parquet,
Arrow and a folder of shards.

Generated records carry random values that a careless writer would change (integers past 64
bits, ``1e400``, ``1.10``, leading zeros and padded cells in CSV, nulls, nested values) and
random planted faults with a known fate: a zero-width space (stripped in place), an exact copy
of an earlier text (quarantined), an empty text (quarantined), a malformed unit (quarantined
as written). For each format: clean + quarantine hold every input unit exactly once, in
order; untouched records are byte-identical (text formats) or value-identical with the same
schema (Parquet/Arrow); changed records differ only in their text; a second fix is a no-op.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight import FixOptions, run_preflight

RULES = {"fields": {"text": "text", "id": "id"},
         "rules": [{"id": "malformed", "check": "malformed"},
                   {"id": "empty", "check": "empty"},
                   {"id": "invisible", "check": "invisible_unicode"},
                   {"id": "dupes", "check": "exact_duplicate"}]}
WORDS = ["river", "stone", "baker", "winter", "lamp", "harbour", "copper", "meadow"]
JSON_EXTRAS = ["123456789012345678901234567890", "-18446744073709551617", "1e400", "1.10",
               "null", '{"a": [1, {"b": null}], "c": "x"}', "0", "2.5E-3", "true", '"s"']
CSV_EXTRAS = ["00123", "1E5", "nan", " 7 ", "", "123456789012345678901234567890", "-0", "x y"]
MALFORMED_JSON = ["{oops}", "[1, 2]", "7", '"just a string"']


@dataclass
class Record:
    id: int
    text: str
    extra: str  # a JSON literal (JSON formats), a cell (CSV), an index into ARROW_VALUES
    fate: str  # clean | changed | quarantined

    def fixed_text(self) -> str:
        return self.text.replace("\u200b", "")


@st.composite
def corpora(draw: st.DrawFn, extras: list[str]) -> list[Record | str]:
    """Records and (as plain strings) malformed units, with the fate of each."""
    units: list[Record | str] = []
    texts: list[str] = []
    for k in range(draw(st.integers(3, 10))):
        if k and draw(st.integers(0, 5)) == 0:
            units.append(draw(st.sampled_from(MALFORMED_JSON)))
            continue
        words = draw(st.lists(st.sampled_from(WORDS), min_size=3, max_size=6))
        text = " ".join([w.capitalize() if i == 0 else w for i, w in enumerate(words)])
        text += f" number {k}."
        fate = "clean"
        roll = draw(st.integers(0, 7))
        if roll == 0 and texts:
            text, fate = draw(st.sampled_from(texts)), "quarantined"
        elif roll == 1 and k:
            text, fate = "", "quarantined"
        elif roll in (2, 3):
            at = draw(st.integers(1, len(text) - 1))
            text, fate = text[:at] + "\u200b" + text[at:], "changed"
        if fate != "quarantined":
            texts.append(text.replace("\u200b", ""))
        units.append(Record(k, text, draw(st.sampled_from(extras)), fate))
    return units


def _json_record(r: Record) -> str:
    return '{"id": %d, "text": %s, "extra": %s}' % (r.id, json.dumps(r.text), r.extra)


def _exact(text: bytes | str) -> Any:
    """JSON parsed with numbers kept as written, to compare values exactly."""
    return json.loads(text, parse_float=str, parse_int=str,
                      parse_constant=str)


def _fix(src: Path, folder: Path, out_name: str) -> tuple[Path, list[dict[str, Any]], dict]:
    out, quarantine = folder / out_name, folder / "rejected.jsonl"
    report = run_preflight(src, RULES, fix=FixOptions(out=out, quarantine=quarantine),
                           smoke=False)
    assert report.fix is not None
    entries = []
    for line in quarantine.read_bytes().splitlines():
        entry = json.loads(line)
        entry["_line"] = line
        entries.append(entry)
    return out, entries, report.fix


def _check_text_format(units: list[Record | str], lines_in: list[bytes], clean: Path,
                       entries: list[dict[str, Any]]) -> None:
    """JSON Lines / JSON array / shards: every unit once, untouched bytes kept."""
    clean_lines = clean.read_bytes().splitlines()
    expected_clean = []
    expected_quarantine = []
    for row, (unit, raw) in enumerate(zip(units, lines_in, strict=True)):
        if isinstance(unit, str) or unit.fate == "quarantined":
            expected_quarantine.append((row, unit, raw))
        else:
            expected_clean.append((unit, raw))
    assert [e["row"] for e in entries] == [r for r, _, _ in expected_quarantine]
    for entry, (_, unit, raw) in zip(entries, expected_quarantine, strict=True):
        if isinstance(unit, str):
            assert entry["raw"] == unit
        else:  # the record spliced in as written: numbers exactly as in the input
            assert entry["_line"].endswith(b'"record": ' + raw + b"}")
    assert len(clean_lines) == len(expected_clean)
    for line, (unit, raw) in zip(clean_lines, expected_clean, strict=True):
        if unit.fate == "clean":
            assert line == raw
        else:
            assert _exact(line) == {**_exact(raw), "text": unit.fixed_text()}


@pytest.mark.parametrize("layout", ["jsonl", "json", "shards"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(units=corpora(JSON_EXTRAS))
def test_json_formats_keep_every_unit_as_written(layout: str, units: list[Record | str]) -> None:
    lines = [u.encode() if isinstance(u, str) else _json_record(u).encode() for u in units]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if layout == "json":
            src = folder / "in.json"
            src.write_bytes(b"[\n  " + b",\n  ".join(lines) + b"\n]\n")
            # elements are kept with the whitespace between tokens removed
            lines = [_compact(u, x) for u, x in zip(units, lines, strict=True)]
        elif layout == "shards":
            src = folder / "in"
            src.mkdir()
            half = len(lines) // 2
            (src / "a.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[:half]))
            (src / "b.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[half:]))
        else:
            src = folder / "in.jsonl"
            src.write_bytes(b"".join(x + b"\n" for x in lines))
        clean, entries, manifest = _fix(src, folder / "out", "clean.jsonl")
        assert manifest["balanced"] and manifest["input"]["records"] == len(units)
        if layout == "shards":  # rows restart in each shard; the order is (file, row)
            half = len(units) // 2
            for e in entries:
                e["row"] += half if e["file"] == "b.jsonl" else 0
        _check_text_format(units, lines, clean, entries)
        again, entries2, _ = _fix(clean, folder / "again", "clean.jsonl")
        assert again.read_bytes() == clean.read_bytes() and entries2 == []


def _compact(unit: Record | str, line: bytes) -> bytes:
    """An element as the array reader keeps it: whitespace between tokens removed."""
    if isinstance(unit, str):
        return line
    return ('{"id":%d,"text":%s,"extra":%s}' % (unit.id, json.dumps(unit.text),
                                               _compact_literal(unit.extra))).encode()


def _compact_literal(literal: str) -> str:
    out, in_string, escaped = [], False, False
    for ch in literal:
        if in_string:
            out.append(ch)
            escaped = ch == "\\" and not escaped
            in_string = not (ch == '"' and not escaped)
        elif ch == '"':
            out.append(ch)
            in_string = True
        elif not ch.isspace():
            out.append(ch)
    return "".join(out)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(units=corpora(CSV_EXTRAS))
def test_csv_keeps_every_row_and_every_cell_as_written(units: list[Record | str]) -> None:
    import csv
    import io

    rows = []
    for u in units:
        if isinstance(u, str):
            rows.append(b"1,two,three,four\r\n")  # wrong field count
            continue
        text = io.StringIO()
        csv.writer(text).writerow([str(u.id), u.text, u.extra])
        rows.append(text.getvalue().encode())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        src = folder / "in.csv"
        src.write_bytes(b"id,text,extra\r\n" + b"".join(rows))
        # CSV out: untouched rows byte for byte
        clean, entries, manifest = _fix(src, folder / "csv", "clean.csv")
        assert manifest["balanced"]
        kept = [(u, r) for u, r in zip(units, rows, strict=True)
                if not isinstance(u, str) and u.fate != "quarantined"]
        quarantined = [k for k, u in enumerate(units)
                       if isinstance(u, str) or u.fate == "quarantined"]
        assert [e["row"] for e in entries] == quarantined
        for e in entries:
            if "raw" in e:
                assert e["raw"].encode() == rows[e["row"]]
        body = clean.read_bytes().removeprefix(b"id,text,extra\r\n")
        expected = b""
        for u, r in kept:
            if u.fate == "clean":
                expected += r
            else:
                text = io.StringIO()
                csv.writer(text).writerow([str(u.id), u.fixed_text(), u.extra])
                expected += text.getvalue().encode()
        assert body == expected
        again, entries2, _ = _fix(clean, folder / "again", "clean.csv")
        assert again.read_bytes() == clean.read_bytes() and entries2 == []
        # JSON Lines out: every cell a string, as written
        clean, _, _ = _fix(src, folder / "jsonl", "clean.jsonl")
        assert [json.loads(x) for x in clean.read_bytes().splitlines()] == [
            {"id": str(u.id), "text": u.fixed_text(), "extra": u.extra} for u, _ in kept]


ARROW_VALUES = [
    (2**64 - 1, 0.1, None, [{"k": "a", "v": 1}]),
    (0, -0.0, 1.5, []),
    (2**63, float("inf"), None, None),
    (7, 1e-40, -2.25, [{"k": "b", "v": None}]),
]
ARROW_SCHEMA = pa.schema([
    ("id", pa.int16()), ("text", pa.large_string()), ("u", pa.uint64()), ("f", pa.float32()),
    ("maybe", pa.float64()),
    ("nested", pa.list_(pa.struct([("k", pa.string()), ("v", pa.int8())]))),
    ("cat", pa.dictionary(pa.int8(), pa.string())),
], metadata={b"origin": b"test"})


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(units=corpora([str(k) for k in range(len(ARROW_VALUES))]))
def test_arrow_formats_keep_schema_and_values(suffix: str, units: list[Record | str]) -> None:
    records = [u for u in units if not isinstance(u, str)]  # Arrow has no malformed rows

    def row(r: Record, text: str) -> dict[str, Any]:
        u, f, maybe, nested = ARROW_VALUES[int(r.extra)]
        return {"id": r.id, "text": text, "u": u, "f": f, "maybe": maybe, "nested": nested,
                "cat": WORDS[r.id % 3]}

    table = pa.Table.from_pylist([row(r, r.text) for r in records], schema=ARROW_SCHEMA)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        src = folder / f"in{suffix}"
        write = pq.write_table if suffix == ".parquet" else feather.write_feather
        read = pq.read_table if suffix == ".parquet" else feather.read_table
        write(table, src)
        clean, entries, manifest = _fix(src, folder / "out", f"clean{suffix}")
        assert manifest["balanced"]
        expected_schema = read(src).schema
        got = read(clean)
        assert got.schema.equals(expected_schema, check_metadata=True)
        kept = [r for r in records if r.fate != "quarantined"]
        want = pa.Table.from_pylist([row(r, r.fixed_text()) for r in kept], schema=ARROW_SCHEMA)
        assert got.to_pylist() == want.to_pylist()
        assert [e["row"] for e in entries] == [k for k, r in enumerate(records)
                                               if r.fate == "quarantined"]
        for e in entries:
            assert e["record"]["u"] == ARROW_VALUES[int(records[e["row"]].extra)][0]
        again, entries2, _ = _fix(clean, folder / "again", f"clean{suffix}")
        assert read(again).equals(got) and entries2 == []
