"""CSV: the fast path (record boundaries by numpy, clean stretches read by Arrow) gives the
rows, cells and malformed rows the exact reader (Python's strict ``csv``) gives, on random
files of good and odd rows, in blocks of any size."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.batch import Batch
from preflight.source import csv as csv_source
from preflight.source import csv_scan
from preflight.source.tracked import open_stream

_CELL = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_characters='",\r\n'), max_size=6),
    st.integers(-1000, 1000).map(str),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6).map(
        lambda t: '"' + t.replace('"', '""') + '"'),  # quoted: commas, quotes, line breaks
)
_GOOD = st.lists(_CELL, min_size=3, max_size=3).map(lambda cells: ",".join(cells).encode())
# Every kind of row the exact reader treats specially, each with its own verdict.
_ODD_ROWS = [
    b"a,b", b"a,b,c,d",                      # wrong field count
    b'a,"b,c', b'"a"x,b,c', b'a,b"c,d',      # a quote that does not close where it should
    b'a, "b",c', b'a,"b" ,c',                # spaces around quotes
    b"a,\xff\xfe,c",                         # invalid UTF-8
    b"", b"   ", b",,",                      # blank, spaces, empty cells
    b"a,b\rc,d,e", b"x\x00y,1,2",            # a bare carriage return, a NUL
    b"\xef\xbb\xbfa,b,c",                    # a BOM that is not at the file's start
    b'1,2.5,"3"', b"1,,3", b"a,b,c",         # typing per batch
]
_ROWS = st.lists(st.one_of(_GOOD, _GOOD, st.sampled_from(_ODD_ROWS)), max_size=30)


def _cells(batches: list[Batch]) -> dict[int, dict[str, str | None]]:
    """Each record's cells as written (typing aside: it is per batch)."""
    out: dict[int, dict[str, str | None]] = {}
    for b in batches:
        columns = {name: (b.written[name] if name in b.written else b.frame[name]).to_list()
                   for name in b.frame.columns}
        for k, row in enumerate(b.rows.tolist()):
            out[row] = {name: values[k] for name, values in columns.items()}
    return out


def _exact(path: Path, delimiter: str) -> list[Batch]:
    stream, raw = open_stream(path)
    with stream:
        return list(csv_source._exact(stream, raw, delimiter, 0, "d.csv"))


@pytest.mark.parametrize("delimiter", [",", "\t", ";"], ids=["comma", "tab", "semicolon"])
@pytest.mark.parametrize(("chunk", "exact_records"), [(24, 1), (300, 2), (8 << 20, 64)],
                         ids=["tiny-blocks", "blocks", "one"])
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rows=_ROWS, header=st.sampled_from([b"x,y,z", b'"x","y,1",z', b"x,x,z"]),
       bom=st.booleans(), line_end=st.sampled_from([b"\n", b"\r\n"]),
       last_end=st.booleans())
def test_fast_path_equals_the_exact_reader(tmp_path: Path, chunk: int, exact_records: int,
                                           delimiter: str,
                                           rows: list[bytes], header: bytes, bom: bool,
                                           line_end: bytes, last_end: bool) -> None:
    data = (b"\xef\xbb\xbf" if bom else b"") + line_end.join([header, *rows])
    data += line_end if last_end else b""
    # The rows are written with commas: swap them with the delimiter (both ways).
    data = data.translate(bytes.maketrans(b"," + delimiter.encode(), delimiter.encode() + b","))
    path = tmp_path / "d.csv"
    path.write_bytes(data)
    saved = csv_scan.CHUNK_BYTES, csv_scan.EXACT_RECORDS
    csv_scan.CHUNK_BYTES, csv_scan.EXACT_RECORDS = chunk, exact_records
    try:
        fast = list(csv_source.read_csv(path, 0, "d.csv", {"delimiter": delimiter}))
    finally:
        csv_scan.CHUNK_BYTES, csv_scan.EXACT_RECORDS = saved
    exact = _exact(path, delimiter)
    assert [r for b in fast for r in b.rows.tolist()] == [r for b in exact for r in b.rows.tolist()]
    assert _cells(fast) == _cells(exact)
    assert [m for b in fast for m in b.malformed] == [m for b in exact for m in b.malformed]
    assert sum(b.progress for b in fast) == sum(b.progress for b in exact)
    assert all(b.file == "d.csv" and b.textual for b in fast)
    if chunk == 8 << 20 and fast and exact:  # the first batch, which fields come from
        assert fast[0].rows.tolist() == exact[0].rows.tolist()


def test_a_clean_csv_is_read_by_arrow_up_to_its_end(tmp_path: Path) -> None:
    lines = ["id,text,score"] + [f'{k},"line {k}, with ""quotes""\nand a break",{k / 2}'
                                 for k in range(3000)]
    path = tmp_path / "d.csv"
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    calls: list[int] = []
    real = csv_source._exact
    csv_source._exact = lambda *a, **k: calls.append(k.get("row0", 0)) or real(*a, **k)
    saved = csv_scan.CHUNK_BYTES
    csv_scan.CHUNK_BYTES = 4096
    try:
        batches = list(csv_source.read_csv(path, 0, None, {"delimiter": ","}))
    finally:
        csv_source._exact, csv_scan.CHUNK_BYTES = real, saved
    assert calls == []  # the exact reader never ran
    assert [r for b in batches for r in b.rows.tolist()] == list(range(3000))
    assert [v for b in batches for v in b.values("text")] == [
        f'line {k}, with "quotes"\nand a break' for k in range(3000)]
    assert [v for b in batches for v in b.values("score")] == [k / 2 for k in range(3000)]
    assert len(batches) > 2


def test_a_wrong_cell_count_is_read_exactly_and_arrow_reads_on(tmp_path: Path) -> None:
    # Arrow refuses the stretch with the short row: halved down to a few records that the
    # exact reader reads; every other row still by Arrow.
    good = [f"{k},t{k}" for k in range(4000)]  # the first 16 KB stretch: ~1,600 records
    path = tmp_path / "d.csv"
    path.write_text("\n".join(["id,text", *good[:3000], "1,2,3", *good[3000:]]) + "\n")
    exact: list[int] = []
    real = csv_source._units
    csv_source._units = lambda data, *a: exact.append(len(r := real(data, *a))) or r
    saved = csv_scan.CHUNK_BYTES
    csv_scan.CHUNK_BYTES = 16 << 10
    try:
        batches = list(csv_source.read_csv(path, 0, None, {"delimiter": ","}))
    finally:
        csv_source._units, csv_scan.CHUNK_BYTES = real, saved
    assert [(m.row, m.code) for b in batches for m in b.malformed] == [(3000, "wrong_field_count")]
    assert [r for b in batches for r in b.rows.tolist()] == [*range(3000), *range(3001, 4001)]
    assert [v for b in batches for v in b.values("text")] == [f"t{k}" for k in range(4000)]
    assert 0 < sum(exact) <= csv_scan.EXACT_RECORDS  # a few records read exactly


def test_a_stray_quote_hands_the_rest_to_the_exact_reader(tmp_path: Path) -> None:
    good = [f"{k},t{k}" for k in range(40)]
    path = tmp_path / "d.csv"
    path.write_text("\n".join(["id,text", *good[:25], 'x"y,"z"w', *good[25:]]) + "\n")
    batches = list(csv_source.read_csv(path, 0, None, {"delimiter": ","}))
    assert [(m.row, m.code) for b in batches for m in b.malformed] == [(25, "unbalanced_quote")]
    assert [r for b in batches for r in b.rows.tolist()] == [*range(25), *range(26, 41)]
    assert [v for b in batches for v in b.values("text")] == [f"t{k}" for k in range(40)]


@pytest.mark.parametrize("odd", ["1,2,3", 'x"y,"z"w'], ids=["wrong-count", "stray-quote"])
def test_an_odd_row_near_the_start_keeps_the_first_batch_whole(tmp_path: Path, odd: str) -> None:
    # Fields are inferred from the first batch: an odd row among the first records must not
    # leave it with three of them (it is the exact reader's first batch, as before).
    good = [f"{k},t{k}" for k in range(500)]
    path = tmp_path / "d.csv"
    path.write_text("\n".join(["id,text", *good[:3], odd, *good[3:]]) + "\n")
    batches = list(csv_source.read_csv(path, 0, None, {"delimiter": ","}))
    assert batches[0].rows.tolist() == _exact(path, ",")[0].rows.tolist()
    assert len(batches[0]) == 500
