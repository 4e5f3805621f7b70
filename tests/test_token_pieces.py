"""Counting tokens from the counts of text pieces (``preflight.token_pieces``): which
tokenizers qualify; counts equal to encoding every text (hypothesis, on random texts with
the characters the splits treat differently, across batches that share the cache); each
distinct piece encoded once; exact counts with a full table, a tiny one, long pieces and
rounds; a failed encode leaves no stale entry; and the token_length check's verdicts equal
encoding every text on random texts and windows."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Regex, pre_tokenizers

from preflight import token_pieces
from preflight.batch import Batch
from preflight.checks.base import Context
from preflight.checks.tokens import TokenLength
from preflight.config import Fields, ModelFacts
from preflight.tokenizer import TokenCounter, load_tokenizer
from preflight.tokenizer.bounds import TIKTOKEN_SPACE_SPLITTING
from tests.tokenizers import (
    LLAMA3_SPLIT,
    build_bpe,
    build_bpe_nfkc,
    build_bpe_no_regex,
    build_bpe_split,
    build_bpe_steps,
    build_bpe_with_added,
    build_wordpiece,
    made_up_text,
)

QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLITTING = ["bpe", "bpe_prefix", "bpe_digits", "bpe_llama3", "bpe_qwen2", "bpe_added",
             "bpe_added_lstrip", "bpe_added_word", "bpe_odd_chars", "bpe_llama3_odd_chars"]

# Letters, digits, spaces of several kinds (NBSP, ideographic, thin, a zero-width one, the
# ASCII separators Python calls whitespace), newlines, tabs, quotes and contractions,
# punctuation, non-Latin scripts, emoji and the added tokens, so that pieces start and end
# next to each of them.
_CHARS = [*list("ab zé東🙂 1 2\n\t'sdl.,!-"), "\xa0", "\u3000", "\u2009", "\u200b", "\x1c",
          "\x85", "  ", "'ll", " 'S", "<|sep|>", "<mask>", " <mask>", "tok", " tok ", "123",
          "\r\n", "é ", "東 ", "🙂 "]


def odd_corpus() -> list[str]:
    """Texts of ``_CHARS``, so that a tokenizer trained on them has tokens for runs of
    spaces, tabs and other whitespace: a wrong cut then changes a count."""
    rng = random.Random(0)
    return ["".join(rng.choices(_CHARS, k=rng.randint(5, 60))) for _ in range(3000)]


@pytest.fixture(scope="module")
def counters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TokenCounter]:
    root = tmp_path_factory.mktemp("pieces")
    paths = {
        "bpe": build_bpe(root / "bpe"),
        "bpe_prefix": build_bpe(root / "prefix", add_prefix_space=True),
        "bpe_digits": build_bpe(root / "digits", split_digits=True),
        "bpe_llama3": build_bpe_split(root / "llama3"),
        "bpe_qwen2": build_bpe_split(root / "qwen2", pattern=QWEN2_SPLIT),
        "bpe_added": build_bpe_with_added(root / "added", ["<|sep|>"]),
        "bpe_added_lstrip": build_bpe_with_added(root / "lstrip", ["<mask>"], lstrip=True),
        "bpe_added_word": build_bpe_with_added(root / "word", ["tok"], special=False,
                                               single_word=True),
        "bpe_odd_chars": build_bpe(root / "odd_chars", corpus=odd_corpus()),
        "bpe_llama3_odd_chars": build_bpe_split(root / "llama3_odd", corpus=odd_corpus()),
        "bpe_no_regex": build_bpe_no_regex(root / "noregex"),
        "bpe_odd_split": build_bpe_split(root / "odd", pattern=r"\S+ \S+|\s+"),
        "bpe_spaced_added": build_bpe_with_added(root / "spaced", ["<| sep |>"]),
        "bpe_nfkc": build_bpe_nfkc(root / "nfkc"),
        "wordpiece": build_wordpiece(root / "wp"),
    }
    return {name: load_tokenizer(str(path)) for name, path in paths.items()}


def test_which_tokenizers_count_by_pieces(counters: dict[str, TokenCounter]) -> None:
    """GPT-2's, Llama 3's and Qwen 2's splits qualify (with Digits, a prefix space, added
    tokens without whitespace); no regex, an unknown split, an added token holding a
    space, a normalizer or another model do not, and count every text whole."""
    found = {name: c.pieces is not None for name, c in counters.items()}
    assert found == {**dict.fromkeys(SPLITTING, True),
                     **dict.fromkeys(["bpe_no_regex", "bpe_odd_split", "bpe_spaced_added",
                                      "bpe_nfkc", "wordpiece"], False)}


texts = st.lists(st.sampled_from(_CHARS), min_size=0, max_size=60).map("".join)


def _llama3_split() -> object:
    return pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False)


def test_byte_level_must_be_the_last_step(tmp_path: Path) -> None:
    """After ByteLevel a space is "Ġ", a letter to any regex: a Split after it joins a word
    and the space after it ("the of" is 2 tokens, ``theĠ`` ``of``), and a second ByteLevel
    maps each byte twice. Neither layout is counted by pieces or given a byte bound."""
    after = build_bpe_steps(tmp_path / "after", [
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False), _llama3_split()])
    twice = build_bpe_steps(tmp_path / "twice", [
        pre_tokenizers.ByteLevel(), pre_tokenizers.ByteLevel(use_regex=False)])
    for path in (after, twice):
        counter = load_tokenizer(str(path))
        assert not counter.byte_bound and counter.pieces is None
        docs = ["the of", "the package", "\x07" * 20, *made_up_text(30)]
        assert counter.count_series(pl.Series(docs)).tolist() == counter.count(docs).tolist()
    assert load_tokenizer(str(after)).count(["the of"], add_special_tokens=False)[0] == 2


@pytest.fixture(scope="module")
def per_split(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TokenCounter]:
    """ByteLevel(add_prefix_space) after a Split, and after nothing but with a one-byte
    added token: both prefix a space to every split, not only to the text's start."""
    root = tmp_path_factory.mktemp("per_split")
    return {
        "split": load_tokenizer(str(build_bpe_steps(root / "split", [
            _llama3_split(), pre_tokenizers.ByteLevel(add_prefix_space=True,
                                                      use_regex=False)]))),
        "added": load_tokenizer(str(build_bpe_steps(root / "added", [
            pre_tokenizers.ByteLevel(add_prefix_space=True)], added=["|"]))),
    }


@pytest.mark.parametrize("name", ["split", "added"])
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from([*_CHARS, "|", "|a", "\x07|"]), max_size=40).map("".join))
def test_the_byte_bound_holds_when_every_split_gets_a_space(per_split: dict[str, TokenCounter],
                                                            name: str, text: str) -> None:
    counter = per_split[name]
    assert counter.prefix_per_split and counter.byte_bound
    nbytes = np.array([len(text.encode())])
    for specials in (True, False):
        upper = counter.upper_bound(nbytes, specials=specials)
        assert upper is not None
        assert int(counter.count([text], add_special_tokens=specials)[0]) <= int(upper[0])
    got = counter.count_series(pl.Series([text]))
    assert got.tolist() == counter.count([text]).tolist()


def test_a_text_over_the_window_by_prefix_spaces_is_found(per_split: dict[str, TokenCounter]
                                                          ) -> None:
    """"|\\x07" × 10 is 20 bytes and 32 tokens here ("|", then " \\x07", two tokens, ten
    times, and the specials): a bound of bytes + 3 would settle it as fitting a 24-token
    window without counting it."""
    counter = per_split["added"]
    docs = ["|\x07" * 10, "ok"]
    real = counter.count(docs).tolist()
    assert real[0] > 24 >= len(docs[0].encode()) + 1 + counter.specials
    found, _ = _scan(counter, docs, 24, 0, batch=2)
    assert found.rows() == [(0, "too_long", f"{real[0]:,} tokens > limit 24")]


@pytest.mark.parametrize("name", SPLITTING)
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(texts, min_size=1, max_size=12), specials=st.booleans())
def test_counts_equal_encoding_every_text(counters: dict[str, TokenCounter], name: str,
                                          batch: list[str], specials: bool) -> None:
    """Every text's count from its pieces equals the tokenizer's count of the whole text,
    with or without the special tokens, while the cache fills across examples."""
    counter = counters[name]
    whole = counter.count(batch, add_special_tokens=specials)
    got = counter.count_series(pl.Series(batch, dtype=pl.String), add_special_tokens=specials)
    assert got.tolist() == whole.tolist()


def _with_space_tokens(ranks: dict[bytes, int]) -> dict[bytes, int]:
    """``ranks`` plus tokens for a space after other whitespace (each prefix merged first,
    so that tiktoken reaches them): a cut after such whitespace would change a count."""
    for run in ["\xa0 ", "\u3000 ", "\u2009 ", "\x85 ", "\t ", "\n ", "  ", "   ", "\x1c "]:
        raw = run.encode()
        for end in range(2, len(raw) + 1):
            ranks.setdefault(raw[:end], len(ranks))
    return ranks


@pytest.fixture(scope="module")
def tiktoken_counters() -> dict[str, TokenCounter]:
    """tiktoken encodings on each pattern that qualifies (GPT-2's, r50k's, cl100k's,
    o200k's), with merges trained on ``odd_corpus``, and one on a pattern that does not."""
    import tiktoken
    from tiktoken._educational import bpe_train

    rng = random.Random(1)  # and runs of whitespace of every kind, so that they merge
    spaces = "".join(rng.choices([" ", "\xa0", "\u3000", "\u2009", "\x85", "\u200b", "\t",
                                  "\n", "a", "é", "東"], k=6000))
    data = "".join(odd_corpus()[:300]) + spaces
    patterns = {f"pat{k}": p for k, p in enumerate(sorted(TIKTOKEN_SPACE_SPLITTING))}
    patterns["odd"] = r"\S+ \S+|\s+"
    encodings = {name: tiktoken.Encoding(name=name, pat_str=pat, special_tokens={},
                                         mergeable_ranks=_with_space_tokens(
                                             bpe_train(data, 300, pat, visualise=None)))
                 for name, pat in patterns.items()}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tiktoken, "get_encoding", encodings.__getitem__)
        return {name: load_tokenizer(f"tiktoken:{name}") for name in encodings}


def test_tiktoken_patterns_that_qualify(tiktoken_counters: dict[str, TokenCounter]) -> None:
    assert {name: c.pieces is not None for name, c in tiktoken_counters.items()} == {
        **{f"pat{k}": True for k in range(len(TIKTOKEN_SPACE_SPLITTING))}, "odd": False}


@pytest.mark.parametrize("name", [f"pat{k}" for k in range(4)])
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(texts, min_size=1, max_size=12))
def test_tiktoken_counts_equal_encoding_every_text(tiktoken_counters: dict[str, TokenCounter],
                                                   name: str, batch: list[str]) -> None:
    counter = tiktoken_counters[name]
    got = counter.count_series(pl.Series(batch, dtype=pl.String))
    assert got.tolist() == counter.count(batch).tolist()


@pytest.fixture
def fresh(counters: dict[str, TokenCounter]) -> tuple[TokenCounter, list[list[str]]]:
    """A newly loaded GPT-2-style counter whose piece counter records the words it encodes
    (one list per call)."""
    counter = load_tokenizer(counters["bpe"].name)
    assert counter.pieces is not None
    given_words: list[list[str]] = []
    count_words = counter.pieces._count_words

    def spy(words: list[str]) -> np.ndarray:
        given_words.append(list(words))
        return count_words(words)

    counter.pieces._count_words = spy
    return counter, given_words


def test_each_distinct_piece_is_encoded_once(fresh: tuple[TokenCounter, list[list[str]]]
                                             ) -> None:
    counter, given_words = fresh
    docs = made_up_text(300, seed=3)
    first = counter.count_series(pl.Series(docs))
    words = [w for group in given_words for w in group]
    assert len(words) == len(set(words))  # once per batch, however often it occurs
    assert "".join(words) != "".join(docs)  # repeated pieces were not sent again
    assert first.tolist() == counter.count(docs).tolist()
    given_words.clear()
    again = counter.count_series(pl.Series(list(reversed(docs))))
    assert given_words == [] and again.tolist() == first.tolist()[::-1]
    assert counter.pieces is not None and counter.pieces.encoded_bytes < len(
        "".join(docs).encode()) / 2


def test_limits_keep_counts_exact(fresh: tuple[TokenCounter, list[list[str]]],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A table of at most 32 slots that stops at 16 pieces, pieces over 6 bytes never
    remembered, rounds of 7 pieces, inputs of 3 words: the counts stay exact and the table
    within its limits."""
    counter, given_words = fresh
    monkeypatch.setattr(token_pieces, "_FIRST_SLOTS", 4)
    monkeypatch.setattr(token_pieces, "MAX_ENTRIES", 16)
    monkeypatch.setattr(token_pieces, "MAX_PIECE_BYTES", 6)
    monkeypatch.setattr(token_pieces, "_ROUND", 7)
    monkeypatch.setattr(token_pieces, "_WORDS_PER_INPUT", 3)
    pieces = token_pieces.PieceCounter(counter.pieces._count_words)  # type: ignore[union-attr]
    docs = [*made_up_text(80, seed=5), "", "x", " " * 30, "a " * 40]
    for _ in range(2):
        given_words.clear()
        got = pieces.count(pl.Series(docs))
        assert got.tolist() == counter.count(docs, add_special_tokens=False).tolist()
        assert 0 < pieces._entries <= 16 and len(pieces._values) == 32
        assert int((pieces._values >= 0).sum()) == pieces._entries
    # the second time, the long pieces and those past the table's limit were encoded again
    again = {w for g in given_words for w in g}
    assert any(len(w.encode()) > 6 for w in again) and any(len(w.encode()) <= 6 for w in again)


def test_a_full_table_drops_the_pieces_out_of_use(
        fresh: tuple[TokenCounter, list[list[str]]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Full, the table drops the pieces not found since it was last full and remembers the
    ones that come next (a corpus's pieces drift: one language's shards, then another's);
    pieces still in use stay, so a working set that fits is never encoded again."""
    counter, given_words = fresh
    monkeypatch.setattr(token_pieces, "MAX_ENTRIES", 8)
    pieces = token_pieces.PieceCounter(counter.pieces._count_words)  # type: ignore[union-attr]
    first = "alpha" + "".join(f" w{k}" for k in range(7))
    then = "omega" + "".join(f" v{k}" for k in range(7))
    expected = counter.count([then], add_special_tokens=False).tolist()
    pieces.count(pl.Series([first]))
    assert pieces._entries == 8
    for _ in range(3):  # the first pass finds first's pieces fresh; then they go
        assert pieces.count(pl.Series([then, then])).tolist() == expected * 2
    given_words.clear()
    assert pieces.count(pl.Series([then])).tolist() == expected
    assert given_words == [] and pieces._entries == 8
    for _ in range(3):  # a working set that fits stays
        pieces.count(pl.Series([then]))
    assert given_words == []
    pieces.count(pl.Series([first]))
    assert given_words == [first.replace(" ", "\0 ").split("\0")]  # first's went


def test_pieces_that_rarely_repeat_are_encoded_whole(counters: dict[str, TokenCounter],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Past FRESH_LIMIT of new bytes per block, batches are encoded whole (a word alone
    costs the tokenizer more than inside its text), but one in _PROBE_EVERY (then in twice
    as many, up to _PROBE_MAX) still goes by pieces, and a corpus that turns repetitive
    goes back to pieces. Counts stay exact."""
    monkeypatch.setattr(token_pieces, "_BLOCK_BYTES", 2_000)
    counter = load_tokenizer(counters["bpe"].name)
    assert counter.pieces is not None
    rng = random.Random(4)
    distinct = [" ".join("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=9))
                         for _ in range(40)) for _ in range(100)]
    ways = []
    for k in range(0, 100, 5):
        before = counter.pieces.counted_bytes
        batch = distinct[k: k + 5]
        got = counter.count_series(pl.Series(batch))
        assert got.tolist() == counter.count(batch).tolist()
        ways.append(counter.pieces.counted_bytes > before)
    assert ways[0] and ways.count(False) >= 10  # by pieces until a block is measured
    switched = ways.index(False)
    assert True in ways[switched:]  # still probing
    same = made_up_text(5, seed=1)
    for _ in range(120):  # repetitive now: a probe sees it and pieces come back
        counter.count_series(pl.Series(same))
    assert counter.pieces.worth() and counter.pieces._fresh <= token_pieces.FRESH_LIMIT


def test_the_table_grows_and_keeps_what_it_knew(fresh: tuple[TokenCounter, list[list[str]]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    counter, given_words = fresh
    monkeypatch.setattr(token_pieces, "_FIRST_SLOTS", 8)
    pieces = token_pieces.PieceCounter(counter.pieces._count_words)  # type: ignore[union-attr]
    docs = made_up_text(200, seed=8)
    got = pieces.count(pl.Series(docs[:100]))
    grown = len(pieces._values)
    got2 = pieces.count(pl.Series(docs))
    assert grown > 8 and len(pieces._values) >= grown
    assert np.concatenate([got, got2[100:]]).tolist() == counter.count(
        docs, add_special_tokens=False).tolist()
    given_words.clear()
    assert pieces.count(pl.Series(docs[:100])).tolist() == got.tolist()
    assert given_words == []  # the first hundred's pieces survived the growth


def test_a_failed_encode_leaves_no_placeholder(fresh: tuple[TokenCounter, list[list[str]]]
                                               ) -> None:
    """An encode that raises (a tokenizer error, Ctrl-C) empties the table: the next
    count is exact, not a stale placeholder's."""
    counter, _ = fresh
    assert counter.pieces is not None
    count_words = counter.pieces._count_words
    calls = {"n": 0}

    def fails_once(words: list[str]) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt
        return count_words(words)

    counter.pieces._count_words = fails_once
    docs = made_up_text(50, seed=2)
    with pytest.raises(KeyboardInterrupt):
        counter.count_series(pl.Series(docs))
    assert counter.pieces._entries == 0 and (counter.pieces._values == -1).all()
    assert counter.count_series(pl.Series(docs)).tolist() == counter.count(docs).tolist()


def test_spaces_after_whitespace_do_not_cut(fresh: tuple[TokenCounter, list[list[str]]]
                                            ) -> None:
    """A space cuts only after a character that is surely not whitespace: after a letter,
    a sign, é or 東, but not after another space, NBSP, a tab, U+3000 or U+200B."""
    counter, given_words = fresh
    counter.count_series(pl.Series(["a b", "é b", "東 b", "! b"]))
    assert sorted(w for g in given_words for w in g) == sorted(
        ["a", " b", "é", "東", "!"])
    given_words.clear()
    counter.count_series(pl.Series(["x  y", "x\u00a0 y", "x\t y", "x\u3000 y", "x\u200b y"]))
    assert sorted(w for g in given_words for w in g) == sorted(
        ["x", "  y", "x\u00a0 y", "x\t y", "x\u3000 y", "x\u200b y"])


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


@pytest.mark.parametrize("name", ["bpe", "bpe_llama3", "bpe_prefix"])
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), window=st.integers(4, 160), min_tokens=st.integers(0, 12),
       spaces=st.floats(0.0, 0.3))
def test_verdicts_equal_encoding_every_text(counters: dict[str, TokenCounter], name: str,
                                            seed: int, window: int, min_tokens: int,
                                            spaces: float) -> None:
    """Findings (rows, codes and the counts in their details) of the check equal those of
    encoding every text, on random texts and windows."""
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
