"""near_duplicate: planted near-copies are found through the real pipeline, unrelated texts
are not; short, empty and CJK texts; stats, parameters, determinism, far-apart copies."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import polars as pl
import pytest

import preflight.source.jsonl as jsonl
from preflight import run_preflight
from preflight.checks.near_duplicates import NearDuplicate
from preflight.errors import ConfigError
from preflight.minhash import catch_probability

CHECK = "near_duplicate"
_VOCABULARY = (
    "time year people way day man thing woman life child world school state family student "
    "group country problem hand part place case week company system program question work "
    "government number night point home water room mother area money story fact month lot "
    "right study book eye job word business issue side kind head house service friend father "
    "power hour game line end member law car city community name president team minute idea "
    "kid body information back parent face others level office door health person art war "
    "history party result change morning reason research girl guy moment air teacher force "
    "education foot boy age policy music market sense nation plan college interest death "
    "experience effect class control care field development role effort rate heart drug show "
    "leader light voice wife police mind price report decision son view relationship town road "
    "arm difference value building action model season society tax director position player "
    "record paper space ground form event official matter center couple site project activity "
    "star table need court oil situation cost industry figure street image phone data picture "
    "practice piece land product doctor wall patient worker news test movie north love support "
    "technology step baby computer type attention film tree source organization hair window "
    "evidence population site river bridge garden winter summer autumn spring valley mountain"
)
WORDS = _VOCABULARY.split()
HANZI = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下"
    "过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都"
    "两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重"
    "新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想"
)


def sentence(rng: random.Random, words: int = 12) -> str:
    picked = [rng.choice(WORDS) for _ in range(words)]
    return " ".join([picked[0].capitalize(), *picked[1:-1], picked[-1] + "."])


def paragraph(seed: int, sentences: int = 5, words: int = 12) -> list[str]:
    rng = random.Random(seed)
    return [sentence(rng, words) for _ in range(sentences)]


def text(seed: int, sentences: int = 5, words: int = 12) -> str:
    return " ".join(paragraph(seed, sentences, words))


def chinese(seed: int, length: int = 200) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(HANZI) for _ in range(length))


def jaccard(a: str, b: str, n: int = 5, by_char: bool = False) -> float:
    """Exact Jaccard of shingle sets, computed independently of preflight (plain Python)."""

    def units(t: str) -> list[str]:
        t = t.replace("\u200b", "").casefold()
        return list(t) if by_char else t.split()

    def grams(t: str) -> set[tuple[str, ...]]:
        u = units(t)
        return {tuple(u[k:k + n]) for k in range(max(len(u) - n + 1, 1))}

    x, y = grams(a), grams(b)
    return len(x & y) / len(x | y)


def replace_words(t: str, changes: dict[int, str]) -> str:
    words = t.split()
    for at, word in changes.items():
        words[at] = word
    return " ".join(words)


def cluster_of(g) -> dict[int, int]:
    return dict(g.findings().select("row", "cluster").iter_rows())


# --------------------------------------------------------------------- planted near-copies


def test_planted_near_copies_are_found_with_the_first_row_kept(gate):
    a = text(1)  # 60 words
    long_b = paragraph(2, sentences=20)  # 240 words
    b = " ".join(long_b)
    reordered = long_b.copy()
    reordered[3], reordered[11] = reordered[11], reordered[3]
    b_reordered = " ".join(reordered)
    c = text(3)
    c_two_words = replace_words(c, {1: "zebra", 58: "quokka"})
    a_words = a.split()
    a_zwsp = " ".join([*a_words[:7], a_words[7][:2] + "\u200b" + a_words[7][2:], *a_words[8:]])
    records = [
        a,  # 0: kept
        text(10),  # 1: unrelated
        a_zwsp,  # 2: an injected zero-width space
        a.upper(),  # 3: case
        b,  # 4: kept
        b_reordered,  # 5: two whole sentences swapped
        c,  # 6: kept
        c_two_words,  # 7: two words changed
        text(11),  # 8: unrelated
        "  " + a.replace(" ", "\n  ").swapcase() + "\t",  # 9: spacing and case
    ]
    assert jaccard(a, a_zwsp) == 1.0 and jaccard(a, a.upper()) == 1.0
    assert jaccard(b, b_reordered) >= 0.85
    assert jaccard(c, c_two_words) >= 0.85
    g = gate(records, CHECK)
    assert cluster_of(g) == {2: 0, 3: 0, 9: 0, 5: 4, 7: 6}
    assert set(g.findings().get_column("code")) == {"near_duplicate_of"}
    assert g.result.codes == {"near_duplicate_of": 5}
    assert g.result.status == "fail" and g.result.violations == 5
    assert {0, 1, 4, 6, 8}.isdisjoint(g.rows())
    details = dict(g.findings().select("row", "detail").iter_rows())
    assert details[5].startswith("near-duplicate of row 4 (Jaccard 0.")
    assert details[2] == "near-duplicate of row 0 (Jaccard 1.00)"


def test_copy_found_only_when_its_true_jaccard_reaches_the_threshold(gate):
    c = text(4)  # 60 words
    edited = replace_words(c, {15: "zebra", 40: "quokka"})  # two words far apart
    true = jaccard(c, edited)
    assert 0.6 < true < 0.8  # ten of 56 shingles broken
    g = gate([c, edited, text(5)], CHECK)  # default threshold 0.8
    assert g.findings().height == 0
    assert g.result.stats["confirmed_pairs"] == 0
    threshold = round(true - 0.1, 2)
    g = gate([c, edited, text(5)], CHECK, threshold=threshold)
    bands, rows = g.result.stats["bands"], g.result.stats["rows"]
    assert catch_probability(true, bands, rows) > 0.99
    assert cluster_of(g) == {1: 0}
    assert g.findings().get_column("detail")[0] == f"near-duplicate of row 0 (Jaccard {true:.2f})"


def test_several_copies_form_one_cluster_on_the_first_row(gate):
    base = text(6, sentences=10)
    copies = [replace_words(base, {k: "zebra"}) for k in (0, 60, 119)]
    records = [text(7), base, *copies, text(8), base.lower()]
    g = gate(records, CHECK)
    assert cluster_of(g) == {2: 1, 3: 1, 4: 1, 6: 1}
    assert g.result.stats["clusters"] == 1
    assert g.result.stats["cluster_sizes"] == {"5": 1}


def test_unrelated_texts_with_a_common_boilerplate_footer_are_not_found(gate):
    footer = text(99, sentences=4)  # 48 words, the same in every record
    records = [f"{text(100 + k, sentences=7)} {footer}" for k in range(12)]  # 84-word bodies
    assert max(jaccard(records[0], r) for r in records[1:]) < 0.5
    g = gate(records, CHECK)
    assert g.findings().height == 0
    assert g.result.status == "pass"
    assert g.result.stats["confirmed_pairs"] == 0


# --------------------------------------------------------------------- short, empty, CJK


def test_identical_short_texts_are_near_duplicates(gate):
    records = ["hi there", "Hi   THERE", "hello", "bye now", "good morning all",
               "good evening all", "hello", "hi there friend"]
    g = gate(records, CHECK)
    assert cluster_of(g) == {1: 0, 6: 2}


def test_different_short_texts_are_not_near_duplicates(gate):
    records = ["one two three four", "one two three five", "one two three", "a", "b",
               "four three two one", "one two three four five six seven eight nine ten"]
    g = gate(records, CHECK)
    assert g.findings().height == 0
    assert g.result.stats["candidate_pairs"] == 0


def test_empty_and_whitespace_texts_are_never_findings(gate):
    records = ["", "", "   ", "\u200b", "\n\t", " \u200b ", {"id": "n", "text": None},
               {"id": "m"}, "", "real text that stays alone in this corpus"]
    g = gate(records, CHECK)
    assert g.findings().height == 0
    assert g.result.status == "pass"
    assert g.result.stats["clusters"] == 0


def test_cjk_near_copy_with_one_character_changed_is_found(gate):
    zh = chinese(1)
    changed = zh[:100] + ("国" if zh[100] != "国" else "家") + zh[101:]
    assert " " not in zh and jaccard(zh, changed, by_char=True) > 0.9
    records = [chinese(2), zh, chinese(3), changed, zh[:120] + "\u200b" + zh[120:]]
    g = gate(records, CHECK)
    assert cluster_of(g) == {3: 1, 4: 1}


def test_different_cjk_texts_are_not_found(gate):
    records = [chinese(k) for k in range(10, 20)]
    records.append("日本語の文章はスペースなしで書かれるので文字単位で分割する必要があります")
    records.append("日本語の文章は空白なしで書かれるため単語ではなく文字で比較するべきです")
    assert max(jaccard(records[0], r, by_char=True) for r in records[1:]) < 0.2
    g = gate(records, CHECK)
    assert g.findings().height == 0


# --------------------------------------------------------------------- report stats


def test_report_stats(gate):
    a, b = text(20, sentences=8), text(21, sentences=8)
    records = [a, b, a.upper(), text(22), b, a.lower(), text(23)]
    g = gate(records, CHECK)
    s = g.result.stats
    assert (s["num_perm"], s["bands"], s["rows"], s["threshold"]) == (128, 18, 6, 0.8)
    assert set(s["catch_probability"]) == {"0.7", "0.8", "0.9"}
    assert s["catch_probability"]["0.8"] == round(catch_probability(0.8, 18, 6), 4)
    assert s["catch_probability"]["0.9"] > s["catch_probability"]["0.8"] >= 0.995
    assert s["confirmed_by"] == "exact Jaccard"
    assert s["candidate_pairs"] >= s["confirmed_pairs"] >= 3
    assert s["clusters"] == 2
    assert s["cluster_sizes"] == {"2": 1, "3": 1}
    assert s["largest_clusters"] == [
        {"file_index": 0, "kept_row": 0, "size": 3},
        {"file_index": 0, "kept_row": 1, "size": 2},
    ]
    assert cluster_of(g) == {2: 0, 5: 0, 4: 1}


def test_confirm_false_accepts_lsh_candidates_and_one_process_never_reads_twice(gate,
                                                                                 monkeypatch):
    revisits: list[int] = []
    original = NearDuplicate.revisit

    def spy(self, batch):
        revisits.append(len(batch))
        return original(self, batch)

    monkeypatch.setattr(NearDuplicate, "revisit", spy)
    base = text(30)
    half = " ".join(base.split()[:30] + text(31).split()[30:])  # about a third of shingles
    true = jaccard(base, half)
    assert 0.2 < true < 0.5
    loose = {"bands": 64, "rows": 2}  # a pair this similar is almost surely a candidate
    assert catch_probability(true, 64, 2) > 0.99
    records = [base, text(32), half]

    g = gate(records, CHECK, confirm=False, **loose)
    assert revisits == []
    assert g.result.stats["confirmed_by"] == "LSH candidates only"
    assert cluster_of(g) == {2: 0}
    assert "Jaccard" not in g.findings().get_column("detail")[0]
    assert g.result.stats["confirmed_pairs"] == g.result.stats["candidate_pairs"] >= 1

    g = gate(records, CHECK, **loose)  # confirmed: the exact Jaccard is below 0.8
    assert revisits == []  # the sets were kept during the scan
    assert g.result.stats["confirmed_by"] == "exact Jaccard"
    assert g.findings().height == 0
    assert g.result.stats["candidate_pairs"] >= 1 and g.result.stats["confirmed_pairs"] == 0


def test_no_second_read_without_candidates(gate, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(NearDuplicate, "revisit", lambda self, batch: calls.append(1))
    g = gate([text(40), text(41), text(42)], CHECK)
    assert calls == []
    assert g.result.stats["candidate_pairs"] == 0


# --------------------------------------------------------------------- parameters


def test_explicit_bands_and_rows(gate):
    a = text(50, sentences=6)
    g = gate([a, text(51), a.upper()], CHECK, bands=32, rows=4)
    s = g.result.stats
    assert (s["bands"], s["rows"]) == (32, 4)
    assert s["catch_probability"]["0.8"] == round(catch_probability(0.8, 32, 4), 4)
    assert cluster_of(g) == {2: 0}
    g = gate([a, text(51), a.upper()], CHECK, num_perm=64, threshold=0.5)
    assert g.result.stats["num_perm"] == 64
    assert g.result.stats["bands"] * g.result.stats["rows"] <= 64
    assert cluster_of(g) == {2: 0}


@pytest.mark.parametrize(
    "params",
    [
        {"bands": 20, "rows": 8},  # 160 > 128
        {"bands": 16, "rows": 8, "num_perm": 64},
        {"bands": 16},
        {"rows": 8},
        {"threshold": 0},
        {"threshold": 1.5},
        {"unit": "sentence"},
        {"shingle": 5},
    ],
)
def test_bad_parameters_are_config_errors(tmp_path, params):
    path = tmp_path / "data.jsonl"
    path.write_text('{"text": "some text"}\n', encoding="utf-8")
    rules = {"fields": {"text": "text"}, "rules": [{"id": "r", "check": CHECK, **params}]}
    with pytest.raises(ConfigError) as info:
        run_preflight(path, rules=rules, smoke=False)
    assert info.value.exit_code == 2


def test_bands_times_rows_over_num_perm_exits_2_on_the_cli(tmp_path):
    from click.testing import CliRunner

    from preflight.cli import main

    data = tmp_path / "data.jsonl"
    data.write_text('{"text": "some text"}\n', encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "fields: {text: text}\nrules:\n  - {id: r, check: near_duplicate, bands: 20, rows: 8}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["check", "--no-smoke", str(data), "--rules", str(rules),
                                       "--out", str(out),
                                       "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "exceeds num_perm" in " ".join(result.output.split())


# --------------------------------------------------------------------- determinism


def test_two_runs_write_identical_findings(gate):
    records = []
    for k in range(30):
        base = text(200 + k % 10, sentences=6)
        records.append(base if k < 10 else replace_words(base, {k % 70: "zebra"}))
    first, second = gate(records, CHECK), gate(records, CHECK)
    assert first.findings().height == 20
    assert (first.out / "findings.parquet").read_bytes() == (
        second.out / "findings.parquet").read_bytes()
    assert first.result.stats == second.result.stats


def test_a_different_seed_still_finds_the_planted_copies(gate):
    a, b = text(60, sentences=8), text(61, sentences=8)
    records = [a, b, replace_words(a, {3: "zebra"}), text(62), b.upper()]
    expected = {2: 0, 4: 1}
    for seed in (0, 2, 7, 123456):
        assert cluster_of(gate(records, CHECK, seed=seed)) == expected, seed


# --------------------------------------------------------------------- corpus-wide state


def test_copies_far_apart_across_many_batches_are_found(gate, monkeypatch):
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(jsonl, "PIECE_BYTES", 1024)
    batches: list[int] = []
    original = NearDuplicate.scan

    def spy(self, batch):
        batches.append(len(batch))
        return original(self, batch)

    monkeypatch.setattr(NearDuplicate, "scan", spy)
    a, b = text(70, sentences=6), text(71, sentences=6)
    fillers = [text(1000 + k, sentences=2) for k in range(800)]
    records = [a, b, *fillers, replace_words(b, {0: "zebra"}), a.upper()]
    g = gate(records, CHECK)
    last = len(records) - 1
    assert len(batches) >= 30 and sum(batches) == len(records)
    assert cluster_of(g) == {last - 1: 1, last: 0}
    assert g.findings().sort("row").get_column("id").to_list() == [f"r{last - 1}", f"r{last}"]


# --------------------------------------------------------------------- text shapes


def test_multi_field_text(gate):
    title, body = "A report on rivers", text(80, sentences=6)
    records = [
        {"id": "a", "title": title, "body": body},
        {"id": "b", "title": "Something else", "body": text(81, sentences=6)},
        {"id": "c", "title": title.upper(), "body": body.replace(" ", "  ")},
        {"id": "d", "title": None, "body": text(82, sentences=6)},
        {"id": "e", "title": title, "body": replace_words(body, {9: "zebra"})},
        {"id": "f", "title": "Untitled"},
        {"id": "g", "title": "Untitled"},
    ]
    assert jaccard(f"{title} {body}", f"{title} {records[4]['body']}") > 0.85
    g = gate(records, CHECK, fields={"text": ["title", "body"], "id": "id"})
    assert cluster_of(g) == {2: 0, 4: 0, 6: 5}
    assert g.findings().sort("row").get_column("id").to_list() == ["c", "e", "g"]


def test_chat_messages(gate):
    def chat(seed: int) -> list[dict[str, str]]:
        return [{"role": "user", "content": text(seed, sentences=2)},
                {"role": "assistant", "content": text(seed + 1, sentences=4)}]

    one = chat(90)
    shouted = [{"role": m["role"], "content": m["content"].upper()} for m in one]
    records = [
        {"id": "a", "messages": one},
        {"id": "b", "messages": chat(92)},
        {"id": "c", "messages": shouted},
        {"id": "d", "messages": [{"role": "user", "content": one[0]["content"]},
                                 {"role": "assistant", "content": text(94, sentences=4)}]},
        {"id": "e", "messages": []},
        {"id": "f", "messages": []},
    ]
    g = gate(records, CHECK, fields={"messages": "messages", "id": "id"})
    assert cluster_of(g) == {2: 0}
    f = g.findings()
    assert f.get_column("id").to_list() == ["c"]
    assert f.schema["cluster"] == pl.Int64


def test_all_empty_fields_are_never_findings_multi_field(gate):
    records = [{"id": "a", "title": "", "body": ""}, {"id": "b", "title": "", "body": ""},
               {"id": "c", "title": " ", "body": "\u200b"}, {"id": "d"}, {"id": "e"}]
    g = gate(records, CHECK, fields={"text": ["title", "body"], "id": "id"})
    assert g.findings().height == 0


def test_all_empty_messages_are_never_findings(gate):
    empty = [{"role": "user", "content": ""}, {"role": "assistant", "content": " "}]
    records = [{"id": "a", "messages": empty}, {"id": "b", "messages": empty}]
    g = gate(records, CHECK, fields={"messages": "messages", "id": "id"})
    assert g.findings().height == 0


# --------------------------------------------------------------------- clusters and rules


def _chain() -> list[str]:
    """a ~ b and b ~ c above 0.8, but a and c below it."""
    a = text(110, sentences=20)
    b = replace_words(a, {20: "zebra", 70: "zebra", 120: "zebra", 170: "zebra"})
    c = replace_words(b, {45: "quokka", 95: "quokka", 145: "quokka", 195: "quokka"})
    assert jaccard(a, b) > 0.8 and jaccard(b, c) > 0.8 and jaccard(a, c) < 0.75
    return [a, text(111), b, c]


def test_a_chain_of_near_copies_is_one_cluster_on_its_first_row(gate):
    g = gate(_chain(), CHECK)
    assert cluster_of(g) == {2: 0, 3: 0}
    assert g.result.stats["cluster_sizes"] == {"3": 1}


def test_the_jaccard_in_a_detail_is_with_the_row_it_names(gate):
    records = _chain()
    g = gate(records, CHECK)
    for row, detail in g.findings().select("row", "detail").iter_rows():
        match = re.search(r"row ([\d,]+)[^\d]*?Jaccard ([\d.]+)", detail)
        assert match, detail
        other, quoted = int(match[1].replace(",", "")), float(match[2])
        assert quoted == pytest.approx(jaccard(records[row], records[other]), abs=0.005), detail


def test_word_unit_on_cjk_matches_only_whole_texts(gate):
    zh = chinese(5)
    changed = zh[:50] + ("国" if zh[50] != "国" else "家") + zh[51:]
    g = gate([zh, changed, zh], CHECK, unit="word")
    assert cluster_of(g) == {2: 0}
    g = gate([zh, changed, zh], CHECK, unit="char")
    assert cluster_of(g) == {1: 0, 2: 0}


def test_two_near_duplicate_rules_side_by_side(tmp_path):
    a = text(120, sentences=10)
    records = [a, text(121), replace_words(a, {3: "zebra"}), a.upper()]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"text": r}) + "\n" for r in records), encoding="utf-8")
    rules = {"fields": {"text": "text"}, "rules": [
        {"id": "loose", "check": CHECK},
        # LSH alone: few bands of many rows, so that a pair near 0.92 is no candidate
        {"id": "strict", "check": CHECK, "threshold": 0.99, "seed": 9, "confirm": False,
         "bands": 2, "rows": 64},
        {"id": "exact", "check": "exact_duplicate"},
    ]}
    report = run_preflight(path, rules=rules, out=tmp_path / "out", smoke=False)
    f = pl.read_parquet(tmp_path / "out" / "findings.parquet")
    by_rule = {rule: dict(f.filter(pl.col("rule") == rule).select("row", "cluster").iter_rows())
               for rule in ("loose", "strict", "exact")}
    assert by_rule == {"loose": {2: 0, 3: 0}, "strict": {3: 0}, "exact": {3: 0}}
    assert report.rule("strict").stats["confirmed_by"] == "LSH candidates only"


def test_confirmation_in_small_chunks_gives_the_same_clusters(gate, monkeypatch) -> None:
    """Candidate sets are read back from disk a chunk of pairs at a time; the chunk size
    changes nothing."""
    from preflight.checks import near_duplicates

    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
             "kappa", "lambda", "mu"]
    records = []
    for i in range(30):
        base = " ".join(words[(i // 3 + k) % len(words)] for k in range(12)) + f" group{i // 3}"
        records.append(base + (f" extra{i}" if i % 3 else ""))
    whole = gate(records, "near_duplicate", threshold=0.7)
    monkeypatch.setattr(near_duplicates, "_PAIRS_PER_CHUNK", 2)
    chunked = gate(records, "near_duplicate", threshold=0.7)
    assert whole.findings().height > 0
    assert chunked.findings().equals(whole.findings())
    assert chunked.result.stats == whole.result.stats


def _second_read_only(monkeypatch) -> None:
    """Make the local run confirm as a distributed one does: no sets kept by the scan."""
    real = NearDuplicate.__init__

    def init(self, params, ctx):
        real(self, params, ctx)
        self._keep_sets = False

    monkeypatch.setattr(NearDuplicate, "__init__", init)


@pytest.mark.parametrize("fields", [None, {"text": ["title", "text"], "id": "id"}])
def test_sets_kept_by_the_scan_equal_the_second_reads_and_leave_no_file(
        gate, monkeypatch, tmp_path, fields) -> None:
    """One process keeps every document's shingle set during the scan (no second read);
    the sets of the candidates, the findings and the stats are those the second read gives
    (on the same folded view, empty fields included), and TMPDIR is left empty."""
    import tempfile

    from preflight.checks import near_duplicates

    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setenv("TMPDIR", str(spill))
    monkeypatch.setattr(tempfile, "tempdir", None)
    seen: dict[str, dict[int, list[int]]] = {}
    real_jaccard = NearDuplicate._jaccard

    def capture(self, files, rows):  # every candidate's set, by record key, as confirmation sees it
        keys = np.concatenate(self._set_keys)
        sizes = np.concatenate(self._set_sizes)
        values = self._set_values.mapped(lambda view: view.tolist())
        ends = np.cumsum(sizes)
        sets = {int(k): values[e - n:e] for k, n, e in zip(keys, sizes, ends, strict=True)}
        wanted = self._record_keys()[np.unique(self._buckets[0])]
        seen["kept" if self._keep_sets else "reread"] = {int(k): sets[int(k)] for k in wanted}
        return real_jaccard(self, files, rows)

    monkeypatch.setattr(NearDuplicate, "_jaccard", capture)
    revisits: list[int] = []
    real_revisit = NearDuplicate.revisit
    monkeypatch.setattr(NearDuplicate, "revisit",
                        lambda self, batch: revisits.append(1) or real_revisit(self, batch))
    monkeypatch.setattr(near_duplicates, "_PAIRS_PER_CHUNK", 3)
    records = [text(i % 7, sentences=3) + (f" tail {i}" if i % 2 else "") for i in range(40)]
    records += ["短文本", text(99), "  "]
    if fields:  # an empty title leaves no separator behind in the folded view
        records = [{"id": f"r{i}", "title": ["", "Notes", None][i % 3], "text": t}
                   for i, t in enumerate(records)]
    kept = gate(records, CHECK, fields=fields)
    assert revisits == [] and list(spill.iterdir()) == []
    _second_read_only(monkeypatch)
    reread = gate(records, CHECK, fields=fields)
    assert revisits and list(spill.iterdir()) == []
    assert len(seen["kept"]) > 10 and seen["kept"] == seen["reread"]
    assert kept.findings().height > 10
    assert kept.findings().equals(reread.findings())
    assert kept.result.stats == reread.result.stats


def _full_disk(monkeypatch, *, when) -> list[str]:
    """TMPDIR is full whenever ``when()`` says so: a write then fails with ENOSPC. Returns the
    phases ("scan", "revisit") in which temporary files were opened."""
    import errno
    import os

    from preflight import spill

    real = spill.tempfile.TemporaryFile
    opened: list[str] = []

    class Full:
        def seek(self, *args):
            pass

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def temporary(**kw):
        opened.append(when())
        return Full() if opened[-1] == "full" else real(**kw)

    monkeypatch.setattr(spill.tempfile, "TemporaryFile", temporary)
    return opened


def test_a_full_tmpdir_during_the_scan_falls_back_to_a_second_read(gate, monkeypatch) -> None:
    """The sets of every document do not fit: the scan drops them and confirmation reads the
    candidates again (their sets are fewer); the findings are the same."""
    records = [text(i % 5, sentences=3) + (f" tail {i}" if i % 2 else "") for i in range(20)]
    fits = gate(records, CHECK)
    phase = ["scan"]
    real_revisit = NearDuplicate.revisit

    def revisit(self, batch):
        phase[0] = "revisit"
        return real_revisit(self, batch)

    monkeypatch.setattr(NearDuplicate, "revisit", revisit)
    opened = _full_disk(monkeypatch, when=lambda: "full" if phase[0] == "scan" else "room")
    fallback = gate(records, CHECK)
    assert opened == ["full", "room"]
    assert fits.findings().height > 5
    assert fallback.findings().equals(fits.findings())
    assert fallback.result.stats == fits.result.stats


def test_a_tmpdir_too_full_for_the_candidates_is_an_output_error(gate, monkeypatch) -> None:
    from preflight.errors import OutputError

    opened = _full_disk(monkeypatch, when=lambda: "full")
    a = text(1)
    with pytest.raises(OutputError, match=r"No space left on device.*free some space"):
        gate([a, text(2), a.upper()], CHECK)
    assert opened == ["full", "full"]  # the scan's spill, then the second read's


def _colliding_short_texts() -> tuple[str, str]:
    """Two different one-shingle texts whose 32-bit shingle hashes collide (found by a
    birthday search, so the test does not depend on the hash's constants)."""
    from preflight.checks.near_duplicates import NearDuplicateParams
    from preflight.minhash import LSH

    lsh = LSH(**NearDuplicateParams().model_dump(exclude={"confirm"}))
    texts = pl.Series([f"w{i} x" for i in range(300_000)])
    values, offsets = lsh.shingles(texts)
    assert (np.diff(offsets) == 1).all()  # one shingle each
    order = np.argsort(values, kind="stable")
    same = np.flatnonzero(values[order][1:] == values[order][:-1])
    assert len(same), "no 32-bit collision among 300,000 texts"
    return texts[int(order[same[0]])], texts[int(order[same[0] + 1])]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_32_bit_collision_of_short_texts_is_not_a_near_duplicate(
        tmp_path, monkeypatch, workers: int) -> None:
    """A hostile review's data loss: unrelated short texts flagged "Jaccard 1.00" (and
    dropped by fix) because their one shingle's 32-bit hashes collided."""
    from preflight.executor import launch, pool

    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 8_000)
    a, b = _colliding_short_texts()
    filler = [f"filler record number {i} with enough words to matter" for i in range(400)]
    texts = [a, *filler[:200], b, *filler[200:], a]  # the last one: a real copy of the first
    data = tmp_path / "short.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                            for i, t in enumerate(texts)))
    rules = {"rules": [{"id": "near", "check": "near_duplicate"}]}
    report = run_preflight(data, rules, tmp_path / "out", smoke=False, workers=workers)
    found = pl.read_parquet(tmp_path / "out" / "findings.parquet").filter(
        pl.col("rule") == "near")
    assert found.select("row", "cluster").rows() == [(len(texts) - 1, 0)]  # the real copy only
    assert report.environment["workers"] == workers


def test_overlap_ignores_a_32_bit_collision_of_short_texts(tmp_path) -> None:
    a, b = _colliding_short_texts()
    train, evals = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    train.write_text(json.dumps({"id": 0, "text": a}) + "\n"
                     + json.dumps({"id": 1, "text": "an unrelated training record"}) + "\n")
    evals.write_text(json.dumps({"id": 0, "text": b}) + "\n")
    rules = {"eval": str(evals), "rules": [{"id": "ov", "check": "overlap"}]}
    report = run_preflight(train, rules, tmp_path / "out", smoke=False)
    assert report.rule("ov").codes == {}
