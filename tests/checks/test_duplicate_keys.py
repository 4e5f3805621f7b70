"""The byte-level fold keeps every duplicate key: exact and near duplicates group the same
rows as with the regex fold it replaced (the reference in ``tests/test_fold_properties``),
on the shipped sample corpora and on a corpus of whitespace, case and format variants."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from preflight import run_preflight
from tests.test_fold_properties import reference_fold

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
CORPORA = sorted(SAMPLE.glob("*.jsonl"))
RULES = {"version": 1, "rules": [
    {"id": "exact", "check": "exact_duplicate", "severity": "warn"},
    {"id": "near", "check": "near_duplicate", "severity": "warn"},
]}


def _groups(path: Path, out: Path) -> pl.DataFrame:
    run_preflight(path, rules=RULES, out=out, smoke=False)
    return (pl.read_parquet(out / "findings.parquet")
            .filter(pl.col("rule").is_in(["exact", "near"]))
            .select("rule", "row", "cluster", "code", "detail")
            .sort("rule", "row", "code"))


def _with_both_folds(path: Path, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> tuple[pl.DataFrame, pl.DataFrame]:
    new = _groups(path, tmp_path / "new")
    with monkeypatch.context() as m:
        m.setattr("preflight.batch.fold", reference_fold)
        old = _groups(path, tmp_path / "old")
    return new, old


@pytest.mark.parametrize("path", CORPORA, ids=[p.stem for p in CORPORA])
def test_sample_corpus_groups_are_unchanged(path: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    new, old = _with_both_folds(path, tmp_path, monkeypatch)
    assert new.equals(old)


@pytest.mark.parametrize("shape", ["text", "messages"])
def test_whitespace_variants_group_as_before(shape: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    bases = [f"Record {i} says the quick brown fox jumps over lazy dog number {i}."
             for i in range(6)]
    variants = [
        lambda t: t,
        lambda t: "  " + t.replace(" ", "\t") + "\n",
        lambda t: t.replace(" ", "\u00a0\u3000").upper(),
        lambda t: t.replace(" ", " \r\n ", 3),
        lambda t: "\u2028" + t.replace("o", "o\u200b") + " \u2029",
        lambda t: t.replace(" ", "\x0b\x0c", 2) + "\u205f",
        lambda t: t.replace(" ", "\x1c"),  # not whitespace: a different text
    ]
    rows = [{"id": f"{b}-{v}", "text": variant(base)}
            for v, variant in enumerate(variants) for b, base in enumerate(bases)]
    if shape == "messages":  # several texts per record, joined by the field separator
        rows = [{"id": r["id"], "messages": [{"role": "user", "content": " Hi "},
                                             {"role": "assistant", "content": r["text"]}]}
                for r in rows]
    path = tmp_path / "variants.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    new, old = _with_both_folds(path, tmp_path, monkeypatch)
    assert new.equals(old)
    exact = new.filter(pl.col("rule") == "exact")
    # Every variant but the last is a copy of its base (row b); the \x1c ones are not.
    expected = [(v * 6 + b, b) for v in range(1, 6) for b in range(6)]
    assert sorted(zip(exact["row"], exact["cluster"], strict=True)) == sorted(expected)
