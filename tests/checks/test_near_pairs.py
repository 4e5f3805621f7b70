"""near_pairs: which bucket pairs are compared, on hand-made band keys and similarities, so
the bucket layout is exact: a partner that is neither first nor previous, the window, pairs
skipped once linked, and the work on a bucket of 100,000 members."""

from __future__ import annotations

import itertools

import numpy as np

from preflight.checks.near_pairs import WINDOW, bucket_members, link, partners, unique_counts


def similar_pairs(true: set[tuple[int, int]]):
    """A ``compare`` for ``link``: 0.9 for the pairs in ``true``, 0.1 for the others; it
    records every pair it is asked about."""
    asked: list[tuple[int, int]] = []

    def compare(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        pairs = list(zip(u.tolist(), v.tolist(), strict=True))
        asked.extend(pairs)
        return np.array([0.9 if p in true else 0.1 for p in pairs])

    return compare, asked


def test_bucket_members_in_read_order_with_ranks():
    keys = np.array([[5, 1], [7, 1], [5, 2], [9, 3], [5, 1]], dtype=np.uint64)
    members, ranks = bucket_members(keys)
    # band 0: bucket {0, 2, 4} (key 5); band 1: bucket {0, 1, 4} (key 1); singletons dropped
    assert members.tolist() == [0, 2, 4, 0, 1, 4]
    assert ranks.tolist() == [0, 1, 2, 0, 1, 2]


def test_a_partner_that_is_neither_first_nor_previous_in_its_bucket_is_found():
    n = 10
    keys = np.zeros((n, 1), dtype=np.uint64)  # one bucket holding every document
    compare, asked = similar_pairs({(2, 7)})
    linked = link(*bucket_members(keys), n, compare, 0.8)
    # (first, member) and (previous, member) alone would never ask about (2, 7)
    assert (2, 7) in asked
    assert list(zip(linked.u.tolist(), linked.v.tolist(), strict=True)) == [(2, 7)]
    assert linked.labels[7] == 2 and linked.labels[2] == 2
    assert set(np.flatnonzero(linked.labels != np.arange(n)).tolist()) == {7}


def test_with_a_window_as_wide_as_the_bucket_recall_equals_an_exhaustive_search():
    rng = np.random.default_rng(3)
    n = 60
    keys = rng.integers(0, 6, size=(n, 3)).astype(np.uint64)  # 3 bands of about 10 per bucket
    true = {(a, b) for a, b in itertools.combinations(range(n), 2) if rng.random() < 0.03}
    shared = {(a, b) for a, b in true if (keys[a] == keys[b]).any()}
    assert len(shared) >= 5
    compare, asked = similar_pairs(true)
    linked = link(*bucket_members(keys), n, compare, 0.8, window=n)
    found = set(linked.u.tolist()) | set(linked.v.tolist())
    assert found == {d for pair in shared for d in pair}  # every document with a partner
    assert all(p in true for p in zip(linked.u.tolist(), linked.v.tolist(), strict=True))
    assert len(asked) == len(set(asked))  # no pair compared twice across bands or rounds


def test_a_document_beyond_the_window_in_a_crowded_bucket_is_not_compared():
    n = WINDOW + 3
    keys = np.zeros((n, 1), dtype=np.uint64)
    compare, asked = similar_pairs({(0, n - 1)})
    linked = link(*bucket_members(keys), n, compare, 0.8)
    assert (0, n - 1) not in asked and not len(linked.u)  # the bound on the work
    assert all(b - a <= WINDOW for a, b in asked)


def test_linked_pairs_are_skipped_so_a_huge_bucket_of_copies_costs_one_pass():
    n, bands = 100_000, 4
    keys = np.zeros((n, bands), dtype=np.uint64)  # the same bucket in every band
    calls: list[int] = []

    def identical(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        calls.append(len(u))
        return np.ones(len(u))

    linked = link(*bucket_members(keys), n, identical, 0.8)
    assert linked.compared == sum(calls) == n - 1  # distance 1 links it all; rounds 2+ skip
    assert (linked.labels == 0).all()


def test_a_huge_bucket_of_strangers_costs_at_most_the_window_per_member():
    n = 100_000
    keys = np.zeros((n, 2), dtype=np.uint64)
    calls: list[int] = []

    def strangers(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        calls.append(len(u))
        return np.zeros(len(u))

    linked = link(*bucket_members(keys), n, strangers, 0.8)
    assert sum(calls) == linked.compared <= WINDOW * n
    assert not len(linked.u) and (linked.labels == np.arange(n)).all()


def test_partners_are_the_most_similar_confirmed_neighbour():
    # chain 0 - 1 - 2 and 3 - 1: 2's only neighbour is 1, 1's best is 3
    sims = {(0, 1): 0.85, (1, 2): 0.9, (1, 3): 0.95}
    keys = np.zeros((4, 1), dtype=np.uint64)

    def compare(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return np.array([sims.get((a, b), 0.2) for a, b in zip(u.tolist(), v.tolist(),
                                                                 strict=True)])

    linked = link(*bucket_members(keys), 4, compare, 0.8)
    nodes = np.arange(4)
    partner, best = partners(nodes, linked)
    assert partner.tolist() == [1, 3, 1, 1]
    assert best.tolist() == [0.85, 0.95, 0.9, 0.95]
    assert linked.labels.tolist() == [0, 0, 0, 0]


def test_without_confirmation_every_candidate_links_and_has_no_similarity():
    keys = np.array([[1], [1], [2], [1]], dtype=np.uint64)
    linked = link(*bucket_members(keys), 4, lambda u, v: None, 0.8)
    assert linked.labels.tolist() == [0, 0, 2, 0]
    assert np.isnan(linked.similarity).all() and linked.compared == len(linked.u) == 2


def test_unique_counts_matches_numpy_on_repeats_and_extremes():
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.integers(0, 50, 500), [np.iinfo(np.int64).max, -7, -7]])
    got, counts = unique_counts(values)
    want, want_counts = np.unique(values, return_counts=True)
    assert got.tolist() == want.tolist() and counts.tolist() == want_counts.tolist()
    empty, none = unique_counts(np.zeros(0, np.int64))
    assert len(empty) == 0 and len(none) == 0
