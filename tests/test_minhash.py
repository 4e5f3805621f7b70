"""preflight.minhash: shingles, datasketch-identical signatures, band keys, exact Jaccard."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import polars as pl
import pytest
from datasketch import MinHash, MinHashLSH

from preflight.checks.near_pairs import bucket_members, link
from preflight.minhash import (
    CATCH_AT_THRESHOLD,
    band_keys,
    catch_probability,
    choose_bands,
    components,
    jaccard_pairs,
    permutations,
    shingles,
    signatures,
    sorted_sets,
)


def _shingles(texts: list[str], *, n: int = 5, char_n: int = 5, unit: str = "auto",
              seed: int = 1) -> list[np.ndarray]:
    values, offsets = shingles(pl.Series(texts, dtype=pl.String), n=n, char_n=char_n,
                               unit=unit, seed=seed)
    assert values.dtype == np.uint32
    assert offsets.dtype == np.int64
    assert offsets[0] == 0 and offsets[-1] == len(values) and len(offsets) == len(texts) + 1
    return [values[offsets[k]:offsets[k + 1]] for k in range(len(texts))]


def _csr(docs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    values = np.concatenate(docs).astype(np.uint32) if docs else np.zeros(0, np.uint32)
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    return values, offsets


def _datasketch(values: np.ndarray, num_perm: int = 128, seed: int = 1) -> MinHash:
    m = MinHash(num_perm=num_perm, seed=seed, hashfunc=lambda x: x)
    m.update_batch([int(v) for v in values])
    return m


def _random_docs(rng: np.random.Generator, count: int, low: int = 1, high: int = 500
                 ) -> list[np.ndarray]:
    return [rng.integers(0, 1 << 32, size=int(rng.integers(low, high + 1)), dtype=np.uint64)
            .astype(np.uint32) for _ in range(count)]


# --------------------------------------------------------------------- datasketch agreement


@pytest.mark.parametrize("num_perm", [64, 128, 256])
@pytest.mark.parametrize("seed", [0, 1, 42, 12345])
def test_permutations_equal_datasketch(num_perm, seed):
    a, b = permutations(num_perm, seed)
    ref_a, ref_b = MinHash(num_perm=num_perm, seed=seed).permutations
    assert a.dtype == np.uint32 and b.dtype == np.uint32
    assert np.array_equal(a, ref_a)
    assert np.array_equal(b, ref_b)
    assert (a % 2 == 1).all()  # odd multipliers: a permutation of the 32-bit range


@pytest.mark.parametrize("num_perm", [64, 128, 256])
@pytest.mark.parametrize("seed", [1, 7, 2024])
def test_signatures_equal_datasketch_bit_for_bit(num_perm, seed):
    rng = np.random.default_rng(seed)
    docs = _random_docs(rng, 40)
    docs += [np.array([0], np.uint32), np.array([0xFFFFFFFF], np.uint32),
             np.array([5, 5, 5], np.uint32)]
    values, offsets = _csr(docs)
    sig = signatures(values, offsets, *permutations(num_perm, seed))
    assert sig.dtype == np.uint32 and sig.shape == (len(docs), num_perm)
    for k, doc in enumerate(docs):
        assert np.array_equal(sig[k], _datasketch(doc, num_perm, seed).hashvalues), k


def test_signatures_of_real_shingles_equal_datasketch():
    texts = ["the quick brown fox jumps over the lazy dog again and again",
             "一段没有空格的中文文本用于测试字符级别的分片",
             "short", ""]
    docs = _shingles(texts)
    values, offsets = _csr(docs)
    sig = signatures(values, offsets, *permutations(128, 1))
    for k, doc in enumerate(docs):
        assert np.array_equal(sig[k], _datasketch(doc).hashvalues)


def test_jaccard_estimate_error_is_within_what_num_perm_allows():
    num_perm = 128
    rng = np.random.default_rng(3)
    docs, targets = [], rng.uniform(0.0, 1.0, 300)
    for target in targets:
        size = int(rng.integers(50, 300))
        shared = round(2 * size * target / (1 + target))  # J = shared / (2 size - shared)
        pool = rng.integers(0, 1 << 32, size=2 * size, dtype=np.uint64).astype(np.uint32)
        docs.append(pool[:size])
        docs.append(np.concatenate([pool[:shared], pool[size:2 * size - shared]]))
    values, offsets = _csr(docs)
    sig = signatures(values, offsets, *permutations(num_perm, 1))
    estimate = (sig[0::2] == sig[1::2]).mean(axis=1)
    set_values, set_offsets = sorted_sets(values, offsets)
    u = np.arange(0, len(docs), 2)
    exact = jaccard_pairs(set_values, set_offsets, u, u + 1)
    assert exact.min() < 0.1 and exact.max() > 0.9  # a spread of true similarities
    mae = float(np.abs(estimate - exact).mean())
    allowed = float(np.sqrt(exact * (1 - exact) / num_perm).mean())
    assert mae < 0.05
    assert mae < 1.5 * allowed
    theirs = np.array([_datasketch(docs[k]).jaccard(_datasketch(docs[k + 1]))
                       for k in range(0, len(docs), 2)])
    their_mae = float(np.abs(theirs - exact).mean())
    assert abs(mae - their_mae) < 0.01
    assert np.allclose(estimate, theirs)  # same signatures, same estimate


def _near_copy_corpus(seed: int = 5) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{k}" for k in range(3000)]
    texts = []
    for _ in range(120):
        words = list(rng.choice(vocab, 100))
        texts.append(" ".join(words))
        for edits in rng.choice([0, 1, 2, 4, 8, 15, 30], 2):
            copy = list(words)
            for at in rng.choice(100, int(edits), replace=False):
                copy[at] = str(rng.choice(vocab))
            texts.append(" ".join(copy))
    order = rng.permutation(len(texts))
    return [texts[k] for k in order]


def test_lsh_candidates_include_every_pair_datasketch_finds():
    bands, rows = 16, 8
    texts = _near_copy_corpus()
    docs = _shingles(texts)
    values, offsets = _csr(docs)
    sig = signatures(values, offsets, *permutations(128, 1))
    keys = band_keys(sig, bands, rows)
    assert keys.shape == (len(texts), bands) and keys.dtype == np.uint64

    lsh = MinHashLSH(num_perm=128, params=(bands, rows))
    minhashes = []
    for k, doc in enumerate(docs):
        m = _datasketch(doc)
        assert np.array_equal(m.hashvalues, sig[k])
        minhashes.append(m)
        lsh.insert(k, m)
    theirs = {(min(k, j), max(k, j)) for k, m in enumerate(minhashes)
              for j in lsh.query(m) if j != k}
    assert len(theirs) >= 100  # the planted copies make many candidates

    # The rule: documents sharing any band key.
    buckets: dict[tuple[int, int], list[int]] = defaultdict(list)
    for d in range(len(texts)):
        for band in range(bands):
            buckets[band, int(keys[d, band])].append(d)
    sharing = {(x, y) for members in buckets.values() for i, x in enumerate(members)
               for y in members[i + 1:]}
    assert sharing == theirs

    # The check's own compared pairs (every one accepted: no confirmation) connect every
    # datasketch pair.
    linked = link(*bucket_members(keys), len(texts), lambda u, v: None, 0.8)
    ours = set(zip(linked.u.tolist(), linked.v.tolist(), strict=True))
    assert all(x < y for x, y in ours)
    assert ours <= sharing
    missing = [(x, y) for x, y in theirs if linked.labels[x] != linked.labels[y]]
    assert missing == []


def test_lsh_agreement_with_hashvalues_built_minhash():
    texts = _near_copy_corpus(seed=9)[:120]
    docs = _shingles(texts)
    values, offsets = _csr(docs)
    sig = signatures(values, offsets, *permutations(128, 1))
    keys = band_keys(sig, 16, 8)
    lsh = MinHashLSH(num_perm=128, params=(16, 8))
    ms = [MinHash(128, 1, hashvalues=sig[k], scheme="affine32") for k in range(len(texts))]
    for k, m in enumerate(ms):
        lsh.insert(k, m)
    for k, m in enumerate(ms):
        theirs = set(lsh.query(m)) - {k}
        ours = {j for j in range(len(texts)) if j != k and (keys[j] == keys[k]).any()}
        assert ours == theirs, k


# --------------------------------------------------------------------- parameters


def test_choose_bands_for_recall():
    assert choose_bands(0.8, 128) == (18, 6)  # 16 x 8 catches a pair at 0.8 at 0.947 only
    for threshold, num_perm in [(0.5, 64), (0.9, 256), (0.8, 128), (0.7, 128), (0.8, 8)]:
        bands, rows = choose_bands(threshold, num_perm)
        assert bands * rows <= num_perm
        assert catch_probability(threshold, bands, rows) >= CATCH_AT_THRESHOLD
        # the most rows that can reach it (fewest false candidates), with the fewest bands
        assert catch_probability(threshold, bands - 1, rows) < CATCH_AT_THRESHOLD
        more = rows + 1
        assert catch_probability(threshold, num_perm // more, more) < CATCH_AT_THRESHOLD
    assert choose_bands(1.0, 128) == (1, 128)  # exact copies only
    assert choose_bands(0.1, 8) == (8, 1)  # out of reach: every permutation its own band


@pytest.mark.parametrize("threshold,num_perm", [(0.5, 1024), (0.25, 512), (0.06, 256),
                                                (0.001, 128), (1e-6, 2000)])
def test_choose_bands_survives_hits_too_rare_for_a_float(threshold: float, num_perm: int):
    """threshold ** rows underflows towards zero for many rows: the search goes on to fewer
    rows instead of raising on an infinite band count (a hostile review's crash)."""
    bands, rows = choose_bands(threshold, num_perm)
    assert bands >= 1 and bands * rows <= num_perm
    if rows > 1:
        assert catch_probability(threshold, bands, rows) >= CATCH_AT_THRESHOLD


def test_catch_probability():
    assert catch_probability(1.0, 16, 8) == 1.0
    assert catch_probability(0.0, 16, 8) == 0.0
    assert catch_probability(0.8, 16, 8) == pytest.approx(1 - (1 - 0.8**8) ** 16)
    assert catch_probability(0.8, 16, 8) > 0.9
    assert catch_probability(0.9, 16, 8) > 0.999
    assert catch_probability(0.5, 16, 8) < 0.1
    assert catch_probability(0.5, 1, 1) == pytest.approx(0.5)
    values = [catch_probability(s / 10, 16, 8) for s in range(11)]
    assert values == sorted(values)


# --------------------------------------------------------------------- graph, sets, Jaccard


def test_components_of_a_small_graph():
    u = np.array([4, 1, 2, 7, 6])
    v = np.array([5, 2, 3, 6, 8])
    assert components(u, v, 10).tolist() == [0, 1, 1, 1, 4, 4, 6, 6, 6, 9]
    assert components(np.zeros(0, np.int64), np.zeros(0, np.int64), 3).tolist() == [0, 1, 2]
    chain = np.arange(99, 0, -1)  # 99-98, 98-97, ...: a long chain, given backwards
    assert (components(chain, chain - 1, 100) == 0).all()


def test_sorted_sets_dedupe_and_sort():
    docs = [np.array([5, 3, 5, 1, 3], np.uint32), np.array([9], np.uint32),
            np.array([0xFFFFFFFF, 0, 0xFFFFFFFF], np.uint32), np.array([2, 2, 2], np.uint32)]
    values, offsets = sorted_sets(*_csr(docs))
    got = [values[offsets[k]:offsets[k + 1]].tolist() for k in range(len(docs))]
    assert got == [[1, 3, 5], [9], [0, 0xFFFFFFFF], [2]]
    assert offsets.tolist() == [0, 3, 4, 6, 7]


def test_jaccard_pairs_on_hand_made_sets():
    docs = [np.array(s, np.uint32) for s in
            ([1, 2, 3], [1, 2, 3], [4, 5], [1, 2, 3, 4], [], [], [3, 9])]
    values, offsets = sorted_sets(*_csr(docs))
    u = np.array([0, 0, 0, 4, 0, 0, 2])
    v = np.array([1, 2, 3, 5, 4, 6, 3])
    got = jaccard_pairs(values, offsets, u, v)
    assert got.tolist() == pytest.approx([1.0, 0.0, 0.75, 1.0, 0.0, 0.25, 1 / 5])
    assert jaccard_pairs(values, offsets, np.zeros(0, np.int64), np.zeros(0, np.int64)).size == 0


# --------------------------------------------------------------------- shingles


def test_empty_text_is_one_shingle():
    (empty,) = _shingles([""])
    assert len(empty) == 1
    for unit in ("word", "char", "auto"):
        assert len(_shingles([""], unit=unit)[0]) == 1


def test_text_shorter_than_n_words_is_one_shingle_of_the_whole_text():
    a, same, other, longer = _shingles(
        ["four words only here", "four words only here", "four words only there",
         "four words only here too"], unit="word")
    assert len(a) == 1 and len(other) == 1
    assert np.array_equal(a, same)
    assert a[0] != other[0]
    assert len(longer) == 1 and longer[0] not in (a[0], other[0])  # exactly n words: one n-gram


def test_word_mode_counts_words_minus_n_plus_one():
    text = " ".join(f"word{k}" for k in range(20))
    for n in (1, 3, 5, 20):
        assert len(_shingles([text], n=n, unit="word")[0]) == 20 - n + 1
    # A text without spaces is one word in word mode.
    assert len(_shingles(["一段没有空格的中文文本"], n=1, unit="word")[0]) == 1


def test_char_mode_counts_characters_not_bytes():
    text = "héllo wörld ñandú 日本語"  # 2- and 3-byte characters
    assert len(text.encode()) > len(text)
    for char_n in (1, 3, 5):
        got = _shingles([text], char_n=char_n, unit="char")[0]
        assert len(got) == len(text) - char_n + 1
    assert len(_shingles(["😀😃😄😁😆😅"], char_n=5, unit="char")[0]) == 2  # 4-byte characters


def test_auto_unit_uses_characters_for_text_without_spaces():
    cjk = "自然语言处理是人工智能的一个重要分支领域"
    auto, char, word = (_shingles([cjk], unit=u)[0] for u in ("auto", "char", "word"))
    assert len(auto) == len(cjk) - 5 + 1
    assert np.array_equal(auto, char)
    assert len(word) == 1
    spaced = "the quick brown fox jumps over the lazy dog"
    auto, word = (_shingles([spaced], unit=u)[0] for u in ("auto", "word"))
    assert np.array_equal(auto, word) and len(auto) == 9 - 5 + 1


def test_shingles_follow_the_text_and_seed():
    texts = ["the quick brown fox jumps over the lazy dog", "自然语言处理是人工智能的一个重要分支"]
    first, second = _shingles(texts, seed=1), _shingles(texts, seed=1)
    for x, y in zip(first, second, strict=True):
        assert np.array_equal(x, y)
    other = _shingles(texts, seed=2)
    for x, y in zip(first, other, strict=True):
        assert not np.array_equal(x, y)
    # Same text anywhere in a batch: same shingles (no state leaks between texts).
    batch = _shingles(["unrelated words here and there ok", texts[0], "", texts[1]])
    assert np.array_equal(batch[1], first[0]) and np.array_equal(batch[3], first[1])


def test_shingles_of_a_sliced_series():
    texts = pl.Series(["a b c d e f g", "one two three four five six", "x y z w v u"])
    values, offsets = shingles(texts.slice(1, 2), n=5, char_n=5, unit="auto", seed=1)
    expected = _shingles(["one two three four five six", "x y z w v u"])
    got = [values[offsets[k]:offsets[k + 1]] for k in range(2)]
    for x, y in zip(got, expected, strict=True):
        assert np.array_equal(x, y)


def test_word_order_matters_within_a_shingle():
    a, b = _shingles(["alpha beta gamma delta epsilon", "beta alpha gamma delta epsilon"])
    assert a[0] != b[0]


def test_signatures_deterministic_and_seed_dependent():
    values, offsets = _csr(_random_docs(np.random.default_rng(0), 10))
    one = signatures(values, offsets, *permutations(128, 1))
    again = signatures(values, offsets, *permutations(128, 1))
    other = signatures(values, offsets, *permutations(128, 2))
    assert np.array_equal(one, again)
    assert not np.array_equal(one, other)
    keys = band_keys(one, 16, 8)
    assert np.array_equal(keys, band_keys(again, 16, 8))
    assert len(set(keys[:, 0].tolist())) == 10
