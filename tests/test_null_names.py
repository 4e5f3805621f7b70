"""A struct field (or a column) whose name hides a character, holding no value in any
record, was flagged nowhere: a key is read in the records that hold a value under it, so the
name passed the gate on every format. It is still the schema's (and written on by ``fix``),
so it is now a corpus-level finding (no row) of the same code, the column as the struct
field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from preflight import run_preflight
from tests.outputs import write_shaped

ZW, RLO = "\u200b", "\u202e"
SHAPES = ["d.jsonl", "d.json", "d.parquet", "d.arrow", "shards", "dataset"]


def _rows() -> list[dict[str, Any]]:
    return [{"text": f"document {i} here", f"sco{RLO}re": None,
             "meta": {f"so{ZW}urce": None, "n": i}} for i in range(6)]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_name_no_record_holds_a_value_under_is_flagged_once(tmp_path: Path,
                                                              shape: str) -> None:
    data = write_shaped(tmp_path / shape, _rows())
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    frame = report.findings()
    hidden = frame.filter(frame["check"] == "invisible_unicode")
    assert hidden["row"].to_list() == [None, None]
    assert sorted(zip(hidden["code"], [d.split(": ")[0] for d in hidden["detail"]],
                      strict=True)) == [("bidi_control", '["sco\\u202ere"] (key)'),
                                        ("zero_width_space", 'meta["so\\u200burce"] (key)')]
    assert all(d.endswith("(no record holds a value under it: the schema's name)")
               for d in hidden["detail"])
    assert report.verdict == "fail"


def test_a_name_held_in_some_record_is_flagged_there_not_again(tmp_path: Path) -> None:
    rows = _rows()
    rows[4]["meta"][f"so{ZW}urce"] = "web"  # in the second shard
    data = write_shaped(tmp_path / "shards", rows)
    report = run_preflight(data, smoke=False, out=tmp_path / "r")
    hidden = report.findings().filter(
        report.findings()["code"] == "zero_width_space")
    assert hidden["row"].to_list() == [0] and hidden["file"].to_list() == ["part-1.parquet"]


def test_two_workers_find_what_one_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    """The names are state merged across pieces: a name held in one shard only is flagged
    there, not at the end; one held nowhere is flagged once, as with one worker."""
    from preflight import cores
    from preflight.executor import launch, pool

    monkeypatch.setattr(cores, "available_cores", lambda: 8)
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 1)
    rows = _rows()
    rows[5]["meta"][f"so{ZW}urce"] = "web"
    data = write_shaped(tmp_path / "shards", rows)
    found = []
    for workers in (1, 2):
        report = run_preflight(data, smoke=False, out=tmp_path / f"r{workers}",
                               workers=workers)
        assert report.environment["workers"] == workers
        assert ("pool:scan" in report.timings) == (workers == 2)
        hidden = report.findings().filter(report.findings()["check"] == "invisible_unicode")
        found.append(sorted(zip(hidden["row"].to_list(), hidden["code"].to_list(),
                                strict=True), key=str))
    assert found[0] == found[1] == sorted([(1, "zero_width_space"), (None, "bidi_control")],
                                          key=str)
