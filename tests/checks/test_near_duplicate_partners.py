"""near_duplicate through the real pipeline, against an exhaustive pairwise Jaccard computed
here: every document with a partner at the threshold is found, every finding names a partner
it is really that similar to (``partner``), and ``cluster`` stays the component's kept row."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import polars as pl

from preflight.checks.near_pairs import WINDOW, bucket_members, link
from preflight.minhash import LSH
from preflight.text import fold
from tests.checks.test_near_duplicates import CHECK, WORDS, _chain, jaccard, text

THRESHOLD = 0.8


def words(seed: int, count: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(count))


def truth(records: list[str]) -> dict[tuple[int, int], float]:
    """Every pair at or above the threshold, by exhaustive search."""
    out = {}
    for a, b in itertools.combinations(range(len(records)), 2):
        j = jaccard(records[a], records[b])
        if j >= THRESHOLD:
            out[(a, b)] = j
    return out


def check_findings(g, records: list[str]) -> dict[int, tuple[int, int, str]]:
    """The findings as row -> (cluster, partner, detail), after checking what every finding
    must hold: its partner is at or above the threshold (the Jaccard the detail quotes), its
    cluster is the first row of its component and is not a finding itself."""
    found = {row: (cluster, partner, detail) for row, cluster, partner, detail in
             g.findings().select("row", "cluster", "partner", "detail").iter_rows()}
    for row, (cluster, partner, detail) in found.items():
        similarity = jaccard(records[row], records[partner])
        assert similarity >= THRESHOLD, (row, partner, similarity)
        quoted = re.search(r"row ([\d,]+)[^\d]*?Jaccard ([\d.]+)", detail)
        assert quoted and int(quoted[1].replace(",", "")) == partner, detail
        assert abs(float(quoted[2]) - similarity) < 0.005, detail
        assert cluster not in found and cluster < row
        component = {r for r in found if found[r][0] == cluster} | {cluster}
        assert partner in component and cluster == min(component)
    return found


def test_a_chain_names_each_members_real_partner_and_keeps_the_first_row(gate):
    records = _chain()  # a, unrelated, b, c: a ~ b ~ c, a and c below the threshold
    g = gate(records, CHECK)
    found = check_findings(g, records)
    assert {row: (c, p) for row, (c, p, _) in found.items()} == {2: (0, 0), 3: (0, 2)}
    assert jaccard(records[0], records[3]) < THRESHOLD  # the kept row is no partner of row 3
    assert found[3][2].endswith("in the cluster of row 0")


def crowded_block(k: int, before: int = 3, between: int = 5) -> list[str]:
    """An original, its copy (last word changed, Jaccard 0.99) ``between`` + 1 places later,
    and ``before`` + ``between`` crowd members: the original with 40 words in a row replaced
    (about 0.78 to it, below the threshold), so they share most of the pair's LSH buckets."""
    base = words(300 + k, 300).split()

    def crowd(j: int) -> str:
        rng = random.Random(1000 * k + j)
        changed = base.copy()
        at = rng.randrange(0, 250)
        changed[at:at + 40] = ["x" + rng.choice(WORDS) for _ in range(40)]
        return " ".join(changed)

    copy = [*base[:-1], "zebra"]
    return [*(crowd(j) for j in range(before)), " ".join(base),
            *(crowd(j) for j in range(before, before + between)), " ".join(copy)]


def first_or_previous_pairs(records: list[str], bands: int, rows: int) -> set[tuple[int, int]]:
    """The pairs the old scheme compared: each bucket member with its bucket's first and
    previous members."""
    lsh = LSH(num_perm=128, threshold=THRESHOLD, bands=bands, rows=rows, n=5, char_n=5,
              unit="auto", seed=1)
    members, ranks = bucket_members(lsh.band_keys(*lsh.shingles(fold(pl.Series(records)))))
    out = set()
    for at in np.flatnonzero(ranks > 0):
        for other in (members[at - ranks[at]], members[at - 1]):
            out.add((int(min(other, members[at])), int(max(other, members[at]))))
    return out


def test_a_partner_neither_first_nor_previous_in_crowded_buckets_is_found(gate):
    records = [r for k in range(3) for r in crowded_block(k)] + [text(7)]
    pairs = truth(records)  # exhaustive
    assert set(pairs) == {(3, 9), (13, 19), (23, 29)}
    # one row per band: a bucket is one equal MinHash value, so the crowd fills it
    old = first_or_previous_pairs(records, bands=32, rows=1)
    assert len(set(pairs) - old) >= 2  # pairs the old scheme never compared
    g = gate(records, CHECK, bands=32, rows=1)
    found = check_findings(g, records)
    flagged = set(found) | {c for c, _, _ in found.values()}
    assert flagged == {d for pair in pairs for d in pair}  # docs recall 1.0, precision 1.0
    assert {row: p for row, (_, p, _) in found.items()} == {9: 3, 19: 13, 29: 23}
    assert g.result.stats["window"] == WINDOW
    assert g.result.stats["candidate_pairs"] > g.result.stats["confirmed_pairs"] == 3


def test_identical_documents_form_one_cluster_each_with_a_partner_at_jaccard_one(gate):
    same = text(3, sentences=6)
    records = [text(4), *[same] * 40, same.upper(), text(5)]
    g = gate(records, CHECK)
    found = check_findings(g, records)
    assert set(found) == set(range(2, 42))
    assert {c for c, _, _ in found.values()} == {1}
    assert all(jaccard(records[r], records[p]) == 1.0 for r, (_, p, _) in found.items())
    assert g.result.stats["cluster_sizes"] == {"41": 1}
    # linked copies are not compared again: about one comparison per copy, not 40 x 40
    assert g.result.stats["candidate_pairs"] <= 2 * 41


def test_unconfirmed_findings_still_name_a_linked_partner(gate):
    a = text(8, sentences=6)
    records = [a, text(9), a.upper(), a.lower()]
    g = gate(records, CHECK, confirm=False)
    rows = dict(g.findings().select("row", "partner").iter_rows())
    assert set(rows) == {2, 3} and all(p in (0, 2, 3) and p != r for r, p in rows.items())
    assert dict(g.findings().select("row", "cluster").iter_rows()) == {2: 0, 3: 0}
    # the detail names the partner, says it is unconfirmed, and names the cluster of a chain
    for partner, detail in g.findings().select("partner", "detail").iter_rows():
        assert f"near-duplicate of row {partner} (LSH candidate, not confirmed)" in detail
        assert detail.endswith("in the cluster of row 0") == (partner != 0)


def test_a_huge_bucket_in_every_band_costs_linear_comparisons():
    """20,000 documents sharing their key in all 18 bands: similar ones are linked by the
    first round (one comparison each) and every later pair is skipped; dissimilar ones cost
    at most ``WINDOW`` comparisons each, once whatever the number of bands."""
    n, bands = 20_000, 18
    members, ranks = bucket_members(np.zeros((n, bands), dtype=np.uint64))
    assert len(members) == n * bands
    similar = link(members, ranks, n, lambda u, v: np.ones(len(u)), THRESHOLD)
    assert similar.compared == n - 1
    assert (similar.labels == 0).all()
    apart = link(members, ranks, n, lambda u, v: np.zeros(len(u)), THRESHOLD)
    assert apart.compared == sum(n - d for d in range(1, WINDOW + 1))
    assert len(apart.u) == 0 and (apart.labels == np.arange(n)).all()
