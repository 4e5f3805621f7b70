"""Proving fits from a prefix (``preflight.checks.token_bounds``): which tokenizers qualify,
the additivity the proof rests on (hypothesis, on random text and cuts), and the check's
verdicts and reported counts identical to encoding every text, on random texts and windows."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.batch import Batch
from preflight.checks.base import Context
from preflight.checks.token_bounds import _cut, cut_and_count, rest_counts
from preflight.checks.tokens import TokenLength
from preflight.config import Fields, ModelFacts
from preflight.tokenizer import TokenCounter, load_tokenizer
from tests.tokenizers import (
    build_bpe,
    build_bpe_nfkc,
    build_bpe_no_regex,
    build_bpe_split,
    build_bpe_with_added,
    build_wordpiece,
    made_up_text,
)

SPLITTING = ["bpe", "bpe_prefix", "bpe_digits", "bpe_llama3"]


@pytest.fixture(scope="module")
def counters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TokenCounter]:
    root = tmp_path_factory.mktemp("bounds")
    paths = {
        "bpe": build_bpe(root / "bpe"),
        "bpe_prefix": build_bpe(root / "prefix", add_prefix_space=True),
        "bpe_digits": build_bpe(root / "digits", split_digits=True),
        "bpe_llama3": build_bpe_split(root / "llama3"),
        "bpe_no_regex": build_bpe_no_regex(root / "noregex"),
        "bpe_odd_split": build_bpe_split(root / "odd", pattern=r"\S+ \S+|\s+"),
        "bpe_spaced_added": build_bpe_with_added(root / "added", ["<| sep |>"]),
        "bpe_added": build_bpe_with_added(root / "added2", ["<|sep|>"]),
        "bpe_nfkc": build_bpe_nfkc(root / "nfkc"),
        "wordpiece": build_wordpiece(root / "wp"),
    }
    return {name: load_tokenizer(str(path)) for name, path in paths.items()}


def test_which_tokenizers_split_before_spaces(counters: dict[str, TokenCounter]) -> None:
    """GPT-2's and Llama 3's splits qualify; no regex, an unknown split, an added token
    holding a space, a normalizer or another model do not."""
    found = {name: c.splits_before_spaces for name, c in counters.items()}
    assert found == {**dict.fromkeys(SPLITTING, True), "bpe_added": True,
                     "bpe_no_regex": False, "bpe_odd_split": False,
                     "bpe_spaced_added": False, "bpe_nfkc": False, "wordpiece": False}


# Letters, digits, spaces of several kinds, newlines, quotes, punctuation, non-Latin
# scripts and emoji: the characters the splits treat differently.
_CHARS = [*list("ab zé東🙂 1 2\n\t'sdl.,!-"), "\xa0", "\u3000", "\x1c", "  ", "'ll", "<|sep|>"]
texts = st.lists(st.sampled_from(_CHARS), min_size=1, max_size=60).map("".join)


@pytest.mark.parametrize("name", [*SPLITTING, "bpe_added"])
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, at=st.integers(0, 80))
def test_tokens_never_cross_the_cut(counters: dict[str, TokenCounter], name: str, text: str,
                                    at: int) -> None:
    """tokens(a + b) == tokens(a) + tokens(b) (+ the specials once) at every cut ``_cut``
    chooses: what makes ``tokens(a) + bytes(b)`` a proven upper bound."""
    counter = counters[name]
    cut = _cut(text, at)
    if cut <= 0:
        return
    head, tail = text[:cut], text[cut:]
    whole = int(counter.count([text])[0])
    parts = counter.count([head, tail], add_special_tokens=False)
    assert whole == int(parts.sum()) + counter.specials
    assert whole <= int(parts[0]) + len(tail.encode()) + counter.specials


def test_starts_bound_and_rests_complete_the_counts(counters: dict[str, TokenCounter]) -> None:
    """A start's tokens plus the bytes after it bound the text's tokens; plus the rest's
    tokens they are its exact count."""
    counter = counters["bpe"]
    docs = made_up_text(400, seed=4)
    nbytes = np.array([len(t.encode()) for t in docs])
    real = counter.count(docs, add_special_tokens=False)
    room = 60
    cut = cut_and_count(counter, docs, nbytes, room, float(nbytes.sum() / real.sum()))
    bounds = cut.bounds(len(docs), room)
    proven = bounds <= room
    assert (nbytes[proven] > room).sum() > 20  # texts the byte bound cannot settle
    assert (real[cut.chosen] <= bounds[cut.chosen]).all()
    assert (bounds[np.setdiff1d(np.arange(len(docs)), cut.chosen)] == room + 1).all()
    assert not proven[cut.chosen].all()  # some starts prove nothing ...
    rest = rest_counts(counter, [docs[k] for k in cut.chosen], cut.cuts)
    assert (cut.tokens + rest == real[cut.chosen]).all()  # ... and are not wasted
    unbounded = dataclasses.replace(counter, splits_before_spaces=False)
    assert len(cut_and_count(unbounded, docs, nbytes, room, 4.0).chosen) == 0


def _scan(counter: TokenCounter, docs: list[str], window: int, min_tokens: int,
          batch: int) -> tuple[pl.DataFrame, dict[str, object]]:
    """The check over ``docs`` in batches: its findings (row, code, detail) and summary."""
    ctx = Context(fields=Fields(text="text"), model=ModelFacts(context_window=window),
                  tokenizer=counter)
    check = TokenLength(TokenLength.Params(min_tokens=min_tokens), ctx)
    frames = []
    for k in range(0, len(docs), batch):
        chunk = docs[k: k + batch]
        found = check.scan(Batch(frame=pl.DataFrame({"text": chunk}, schema={"text": pl.String}),
                                 rows=np.arange(k, k + len(chunk))))
        if found is not None:
            frames.append(found.with_columns(pl.col("i").cast(pl.Int64) + k))
    out = (pl.concat(frames).select("i", "code", "detail") if frames
           else pl.DataFrame(schema={"i": pl.Int64, "code": pl.String, "detail": pl.String}))
    return out.sort("i", "code"), check.summary()


@pytest.mark.parametrize("name", SPLITTING)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), window=st.integers(4, 160), min_tokens=st.integers(0, 12),
       spaces=st.floats(0.0, 0.3))
def test_verdicts_equal_encoding_every_text(counters: dict[str, TokenCounter], name: str,
                                            seed: int, window: int, min_tokens: int,
                                            spaces: float) -> None:
    """Findings (rows, codes and the counts in their details) of the check with prefix
    proofs equal those of encoding every text, on random texts and windows."""
    rng = random.Random(seed)
    docs = [
        "".join(c + (rng.choice([" ", "  ", "\n", " \u00a0"]) if rng.random() < spaces else "")
                for c in t)
        for t in made_up_text(120, seed=seed)
    ]
    counter = counters[name]
    real = counter.count(docs)
    found, stats = _scan(counter, docs, window, min_tokens, batch=50)
    expected = sorted([(i, "too_long", f"{c:,} tokens > limit {window:,}")
                       for i, c in enumerate(real.tolist()) if c > window]
                      + [(i, "too_short", f"{c:,} tokens < min_tokens {min_tokens:,}")
                         for i, c in enumerate(real.tolist()) if c < min_tokens])
    assert found.rows() == expected
    assert stats["encoded"] + stats["skipped_by_bound"] == len(docs)


def test_prefix_proofs_encode_fewer_texts_for_the_same_findings(
        counters: dict[str, TokenCounter]) -> None:
    """At a window most texts exceed in bytes, prefixes settle texts the byte bound cannot,
    and the findings do not change."""
    counter = counters["bpe_llama3"]
    docs = made_up_text(600, seed=9)
    with_prefix, stats = _scan(counter, docs, 48, 3, batch=200)
    without, plain = _scan(dataclasses.replace(counter, splits_before_spaces=False), docs, 48, 3,
                           batch=200)
    assert with_prefix.rows() == without.rows() and with_prefix.height > 0
    assert stats["settled_by_prefix"] > 0 and plain["settled_by_prefix"] == 0
    assert stats["encoded"] + stats["settled_by_prefix"] == plain["encoded"]
    hist = stats["histogram"]
    assert sum(hist["exact"]) == stats["encoded"]  # settled texts count as estimated
    assert sum(hist["estimated"]) == stats["skipped_by_bound"]
