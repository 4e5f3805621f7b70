"""Token counting on every worker: with ``--workers 2`` the texts are counted in the worker
processes, each with its own tokenizer (and its own cache of piece counts), and the
findings, counts and report equal ``--workers 1`` on a corpus with planted too-long and
too-short texts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from preflight import run_preflight
from preflight.config import load_rules
from preflight.executor import launch, pool
from tests.executor.cases import same_findings, same_report
from tests.tokenizers import build_bpe, encode_all, made_up_text

LONG = {37, 400, 1111}  # planted: far past the window
SHORT = {5, 700}  # planted: below min_tokens


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pool the small test file, cut into pieces of about 8 KB."""
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 8_000)


def test_token_length_encodes_on_the_workers_with_one_processs_findings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = build_bpe(tmp_path / "tok")
    texts = made_up_text(1_300, seed=17)
    for i in LONG:
        texts[i] = " ".join(texts[i] for _ in range(12))
    for i in SHORT:
        texts[i] = "Ok"  # at most 2 tokens, + <s> and </s>
    path = tmp_path / "tok.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    rules = load_rules({
        "fields": {"text": "text"},
        "model": {"context_window": 96, "tokenizer": str(tokenizer)},
        "rules": [{"id": "tok", "check": "token_length", "min_tokens": 5}],
    })
    real = encode_all(tokenizer, texts)
    one = run_preflight(path, rules, tmp_path / "one", workers=1, smoke=False)
    # The driver calibrates on the first batch's first texts, and encodes nothing else.
    from preflight import tokenizer as tokenizer_module

    load = tokenizer_module.load_tokenizer
    here: list[str] = []

    def counted(spec: str, **kwargs: object) -> object:
        counter = load(spec, **kwargs)  # type: ignore[arg-type]
        count, ids = counter.count_series, counter.ids
        assert counter.pieces is not None and ids is not None

        def spy_count(batch: pl.Series, *, add_special_tokens: bool = True) -> np.ndarray:
            here.extend(batch.to_list())
            return count(batch, add_special_tokens=add_special_tokens)

        def spy_ids(batch: list[str], specials: bool) -> list[list[int]]:
            here.extend(batch)
            return ids(batch, specials)

        counter.count_series, counter.ids = spy_count, spy_ids  # type: ignore[method-assign]
        return counter

    import preflight.resolve as resolve

    monkeypatch.setattr(resolve, "load_tokenizer", counted)
    two = run_preflight(path, rules, tmp_path / "two", workers=2, smoke=False)
    assert "pool:scan" in two.timings and two.environment["workers"] == 2

    stats = one.rule("tok").stats
    assert one.rule("tok").codes == {"too_long": sum(c > 96 for c in real),
                                     "too_short": sum(c < 5 for c in real)}
    assert {i for i, c in enumerate(real) if c > 96} >= LONG
    assert {i for i, c in enumerate(real) if c < 5} >= SHORT
    assert stats["encoded"] > 0
    same_findings(one, two, tmp_path / "one", tmp_path / "two")
    same_report(one, two)
    # Only the calibration ran here: the counts were the workers'.
    assert 0 < len(here) <= 256 < stats["encoded"]
