"""Fix cases found by a hostile review: what a changed CSV row, a full disk and odd numbers
do to the outputs."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from preflight import FixOptions, run_preflight

RULES = {"fields": {"text": "text", "id": "id"},
         "rules": [{"id": "invisible", "check": "invisible_unicode"}]}


def fix(src: Path, folder: Path, out: str, rules: Any = RULES) -> tuple[dict[str, Any], Path]:
    """Run fix; return the manifest and the clean output's path."""
    clean = folder / out
    report = run_preflight(src, rules, smoke=False,
                           fix=FixOptions(out=clean, quarantine=folder / "q.jsonl"))
    assert report.fix is not None and report.fix["balanced"] is True
    return report.fix, clean


@pytest.mark.parametrize("ending", [b"\n", b""])
def test_a_changed_csv_row_quotes_a_cell_holding_a_line_break(tmp_path: Path, ending: bytes
                                                              ) -> None:
    # The csv writer quotes only the characters of its line terminator: a row ending in
    # "\n" wrote a cell holding "\r" bare, and the last row (no ending) wrote "\n" bare,
    # so the clean CSV read back as more, broken rows.
    src = tmp_path / "in.csv"
    src.write_bytes(b'id,text\n0,"carriage\xe2\x80\x8b\rreturn"\n'
                    b'1,"line\xe2\x80\x8b\nfeed"' + ending)
    manifest, clean = fix(src, tmp_path / "out", "clean.csv")
    assert manifest["clean"]["changed"] == 2
    rows = list(csv.reader(io.StringIO(clean.read_bytes().decode(), newline="")))
    assert rows == [["id", "text"], ["0", "carriage\rreturn"], ["1", "line\nfeed"]]
    assert clean.read_bytes().endswith(b'feed"' + ending)
