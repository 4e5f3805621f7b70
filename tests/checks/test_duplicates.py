"""exact_duplicate: copies hidden by case, spacing, invisibles or normalisation form."""

from __future__ import annotations

import polars as pl

import preflight.source.jsonl as jsonl

COPIES = [
    "Hello World",  # 0: kept
    "hello   world",  # 1: case, extra spaces
    "HELLO\tWORLD\n",  # 2: tab, trailing newline
    "Hel\u200blo World",  # 3: injected zero-width space
    "something else",  # 4
    "café au lait",  # 5: kept (NFC)
    "cafe\u0301 au lait",  # 6: NFD
    "Straße",  # 7: kept
    "STRASSE",  # 8: casefold
    "  hello world  ",  # 9: ends trimmed
]


def test_copies_form_one_cluster_per_text_with_the_first_row_kept(gate):
    g = gate(COPIES, "exact_duplicate")
    f = g.findings()
    assert dict(f.select("row", "cluster").iter_rows()) == {1: 0, 2: 0, 3: 0, 6: 5, 8: 7, 9: 0}
    assert set(f.get_column("code")) == {"exact_duplicate_of"}
    assert g.result.stats["clusters"] == 3
    assert g.result.violations == 6
    assert 0 not in g.rows() and 5 not in g.rows() and 7 not in g.rows()


def test_ids_of_duplicates_are_reported(gate):
    g = gate(["same", "same"], "exact_duplicate")
    assert g.findings().select("row", "id", "cluster").rows() == [(1, "r1", 0)]


def test_distinct_texts_are_not_grouped(gate):
    g = gate(["one", "two", "one two", "onetwo", "two one"], "exact_duplicate")
    assert g.result.codes == {}
    assert g.result.stats["clusters"] == 0
    assert g.findings().height == 0


def test_empty_texts_are_never_grouped(gate):
    records = ["", "", "   ", "\u200b", "\n\t", {"id": "n", "text": None}, {"id": "m"}]
    g = gate(records, "exact_duplicate")
    assert g.result.codes == {}
    assert g.result.stats["clusters"] == 0


def test_min_chars_ignores_short_documents(gate):
    g = gate(["ok", "OK", "a longer text", "A longer text"], "exact_duplicate", min_chars=5)
    assert dict(g.findings().select("row", "cluster").iter_rows()) == {3: 2}


def test_largest_clusters_are_listed_biggest_first(gate):
    g = gate(["a", "b", "a", "b", "a", "c"], "exact_duplicate")
    top = g.result.stats["largest_clusters"]
    assert [(c["kept_row"], c["size"]) for c in top] == [(0, 3), (1, 2)]


def test_cluster_sizes_count_clusters_per_size(gate):
    g = gate(["a", "b", "a", "b", "a", "c", "d", "d"], "exact_duplicate")
    assert g.result.stats["cluster_sizes"] == {"2": 2, "3": 1}
    assert g.result.stats["clusters"] == 3


def test_findings_order_is_deterministic(gate):
    texts = [f"text {i % 7}" for i in range(60)]
    runs = [gate(texts, "exact_duplicate").findings() for _ in range(3)]
    assert runs[0].equals(runs[1])
    assert runs[1].equals(runs[2])
    rows = runs[0].get_column("row").to_list()
    assert rows == sorted(rows)
    assert runs[0].get_column("cluster").to_list() == [r % 7 for r in rows]


def test_duplicates_across_batches(gate, monkeypatch):
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 64)  # a few records per batch
    texts = [f"document number {i % 5}" for i in range(30)]
    g = gate(texts, "exact_duplicate")
    f = g.findings().sort("row")
    assert f.get_column("row").to_list() == list(range(5, 30))
    assert f.get_column("cluster").to_list() == [r % 5 for r in range(5, 30)]
    assert f.get_column("id").to_list() == [f"r{r}" for r in range(5, 30)]
    assert g.result.stats["clusters"] == 5


def test_chat_documents_are_compared_whole(gate):
    def chat(*contents: str) -> dict:
        return {"messages": [{"role": r, "content": c}
                             for r, c in zip(["user", "assistant"], contents, strict=False)]}

    records = [chat("hi", "hello"), chat("HI", "hello "), chat("hi", "bye"), chat("hi")]
    g = gate(records, "exact_duplicate", fields={"messages": "messages"})
    assert g.findings().select("row", "cluster").rows() == [(1, 0)]


def test_findings_columns(gate):
    g = gate(["x", "x"], "exact_duplicate")
    assert g.findings().schema == pl.Schema({
        "row": pl.Int64, "file": pl.String, "rule": pl.String, "check": pl.String,
        "code": pl.String, "detail": pl.String, "id": pl.String, "cluster": pl.Int64,
        "partner": pl.Int64,
    })
