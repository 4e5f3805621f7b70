"""The smoke sample drawn while the gate reads equals the one a separate read draws."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from preflight import run_preflight
from preflight.batch import record_key
from preflight.sampling import BottomK, Sampler, draw
from preflight.source import open_source


def _corpus(path: Path, n: int) -> Path:
    lines = []
    for i in range(n):
        text = f"document {i % 40} about topic {i % 7}"  # exact duplicates: flagged at the end
        if i % 53 == 0:
            text += "\u200b"  # flagged during the scan
        lines.append(json.dumps({"id": f"d{i}", "text": text}))
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def _gate(path: Path, out: Path, samples: int, rules: list[dict]) -> tuple[list[int], list[int],
                                                                          pl.DataFrame]:
    spec = {"fields": {"text": "text", "id": "id"},
            "smoke": {"samples": samples, "seed": 3, "steps": 4}, "rules": rules}
    report = run_preflight(path, rules=spec, out=out, smoke=True)
    assert report.smoke is not None
    return (report.smoke.sample_rows, report.smoke.flagged_in_sample,
            pl.read_parquet(out / "findings.parquet"))


HIDDEN = {"id": "hidden", "check": "invisible_unicode"}
DUPES = {"id": "dupes", "check": "exact_duplicate"}


@pytest.mark.parametrize("samples", [10, 60])
def test_sample_drawn_during_the_gate_matches_a_separate_draw(tmp_path: Path,
                                                              samples: int) -> None:
    """Rows flagged while reading: the same sample as one separate read draws."""
    path = _corpus(tmp_path / "data.jsonl", 400)
    rows, flagged_rows, found = _gate(path, tmp_path / "out", samples, [HIDDEN])
    keys = BottomK(samples, 3)
    found_rows = found.get_column("row").to_numpy()
    keys.add(record_key(np.zeros(len(found_rows), dtype=np.int64), found_rows))
    alone = draw(open_source(path), k=samples, seed=3, flagged=keys.keys(), id_field="id")
    assert rows == sorted(s.row for s in alone)
    assert flagged_rows == sorted(s.row for s in alone if s.flagged)
    assert len(flagged_rows) == min(samples // 2, len(set(found_rows.tolist())))


def test_rows_flagged_at_the_end_fill_up_with_the_earliest(tmp_path: Path) -> None:
    """Duplicates are known only at the end: the flagged part takes the rows flagged while
    reading first, then the earliest duplicates (a short second read), deterministically."""
    path = _corpus(tmp_path / "data.jsonl", 400)
    rows, flagged_rows, found = _gate(path, tmp_path / "a", 60, [HIDDEN, DUPES])
    again = _gate(path, tmp_path / "b", 60, [HIDDEN, DUPES])
    assert (rows, flagged_rows) == again[:2]
    hidden = set(found.filter(pl.col("rule") == "hidden").get_column("row").to_list())
    dupes = sorted(set(found.filter(pl.col("rule") == "dupes").get_column("row").to_list()))
    assert hidden <= set(flagged_rows)  # 8 rows, all held from the first read
    earliest = [r for r in dupes if r not in hidden][: 30 - len(hidden)]
    assert set(earliest) <= set(flagged_rows)  # the rest of the flagged half
    # Every sampled row a rule flagged is marked (random picks may be duplicates too).
    assert set(flagged_rows) == set(rows) & (hidden | set(dupes))
    assert len(rows) == 60


def test_finish_reads_again_only_up_to_the_last_missing_flagged_row(tmp_path: Path) -> None:
    path = _corpus(tmp_path / "data.jsonl", 300)
    src = open_source(path)
    sampler = Sampler(20, 0, id_field="id")
    for batch in src.batches():
        sampler.offer(batch)  # nothing flagged yet: the random part only
    sampler.flagged.add(np.array([5, 17], dtype=np.int64))  # flagged at the end
    read: list[int] = []

    def batches():  # one record per batch, to see where the read stops
        for batch in src.batches():
            for i in range(len(batch)):
                one = batch.head(i + 1)
                one = type(batch)(frame=one.frame[i:], rows=one.rows[i:], file=batch.file)
                read.append(int(one.rows[0]))
                yield one

    sample = sampler.finish(batches())
    assert {s.row for s in sample if s.flagged} == {5, 17}
    assert len(sample) == 20
    assert read[-1] == 17  # stopped at the last missing flagged row
