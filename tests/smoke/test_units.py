"""Unit tests of the smoke test's parts: hash sampling, the sample draw, the encoder and
collate, control rows, ddmin, the training loop (index guard, GradScaler order) and the
``smoke:`` config section. Everything runs on the CPU in fp32, bf16 or CPU fp16."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

from preflight.batch import record_key
from preflight.config import Fields, ModelFacts, SmokeConfig, load_rules, with_overrides
from preflight.errors import ConfigError
from preflight.sampling import BottomK, draw, priority
from preflight.smoke.control import control_rows
from preflight.smoke.encode import (
    BYTE_VOCAB,
    IGNORE,
    Collate,
    Encoder,
    compact_vocab,
    infer_task,
)
from preflight.smoke.localize import ddmin, minimal_rows
from preflight.smoke.loop import Setup, learned, per_row_losses, train
from preflight.smoke.models import build_builtin
from preflight.source import jsonl, open_source
from preflight.tokenizer import TokenCounter, load_tokenizer
from tests.tokenizers import build_bpe, build_bpe_with_added, build_chat_folder

NONE_FLAGGED = np.zeros(0, dtype=np.int64)


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> TokenCounter:
    return load_tokenizer(str(build_bpe(tmp_path_factory.mktemp("tok") / "bpe")))


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_chat_folder(tmp_path_factory.mktemp("tok") / "chat")


@pytest.fixture(scope="module")
def chat_tok(chat_folder: Path) -> TokenCounter:
    return load_tokenizer(str(chat_folder))


def _keys(rows: list[int] | np.ndarray, file_index: int = 0) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.int64)
    return record_key(np.full(len(rows), file_index), rows)


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    # allow_nan: NaN is written as the bare literal, as Python's json writes it.
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _records(n: int) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "text": f"record number {i}", "x": float(i)} for i in range(n)]


# --- sampling ------------------------------------------------------------------------


def test_priority_is_deterministic_per_seed_and_differs_across_seeds() -> None:
    keys = np.arange(1000, dtype=np.int64)
    a, b = priority(keys, 0), priority(keys.copy(), 0)
    assert a.dtype == np.uint64
    assert np.array_equal(a, b)
    other = priority(keys, 1)
    assert (a != other).mean() > 0.99
    assert len(np.unique(a)) == len(keys)  # splitmix64 is a bijection: no ties
    # The order is not the key order (a hash, not a counter).
    assert not np.array_equal(np.argsort(a), keys)
    # One key alone gets the same priority as within a batch.
    assert priority(keys[17:18], 0)[0] == a[17]


def _brute_bottom_k(keys: np.ndarray, k: int, seed: int) -> np.ndarray:
    unique = np.unique(keys)
    return unique[np.argsort(priority(unique, seed))][:k]


@pytest.mark.parametrize("seed", [0, 3, 12345])
@pytest.mark.parametrize("k", [1, 7, 50, 400])
def test_bottom_k_keeps_the_k_lowest_priorities_whatever_the_chunking(seed: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    keys = np.concatenate([rng.integers(0, 2**45, 300), _keys(np.arange(200), 2)])
    keys = np.concatenate([keys, keys[:60]])  # duplicates
    expected = _brute_bottom_k(keys, k, seed)
    for trial in range(4):
        order = rng.permutation(len(keys))
        cuts = np.sort(rng.choice(np.arange(1, len(keys)), size=trial * 5, replace=False))
        bk = BottomK(k, seed)
        for chunk in np.split(keys[order], cuts):
            bk.add(chunk)
        assert np.array_equal(bk.keys(), expected)
        assert len(bk) == min(k, len(np.unique(keys)))


def test_bottom_k_counts_duplicates_once() -> None:
    bk = BottomK(5, 0)
    bk.add(np.array([7, 7, 7], dtype=np.int64))
    bk.add(np.array([7, 8], dtype=np.int64))
    bk.add(np.array([], dtype=np.int64))
    assert sorted(bk.keys().tolist()) == [7, 8]
    assert len(bk) == 2
    bk.add(np.arange(100, dtype=np.int64))
    assert len(bk) == 5
    assert len(set(bk.keys().tolist())) == 5
    assert np.array_equal(bk.keys(), _brute_bottom_k(np.arange(100), 5, 0))


def test_bottom_k_of_zero_keeps_nothing() -> None:
    bk = BottomK(0, 0)
    bk.add(np.arange(10, dtype=np.int64))
    assert len(bk) == 0
    assert bk.keys().tolist() == []


# --- draw ----------------------------------------------------------------------------


def test_draw_returns_k_rows_deterministically(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", _records(300))
    a = draw(open_source(path), k=20, seed=0, flagged=NONE_FLAGGED, id_field="id")
    b = draw(open_source(path), k=20, seed=0, flagged=NONE_FLAGGED, id_field="id")
    c = draw(open_source(path), k=20, seed=1, flagged=NONE_FLAGGED, id_field="id")
    assert len(a) == 20
    assert [s.row for s in a] == [s.row for s in b]
    assert [s.row for s in a] != [s.row for s in c]
    assert [s.row for s in a] == sorted(s.row for s in a)  # file order
    assert len({s.row for s in a}) == 20
    # The k lowest hash priorities of all records' keys, nothing else.
    assert np.array_equal(np.sort(_keys([s.row for s in a])),
                          np.sort(_brute_bottom_k(_keys(np.arange(300)), 20, 0)))
    for s in a:
        assert s.record["id"] == f"r{s.row}" == s.id
        assert s.record["text"] == f"record number {s.row}"
        assert s.file_index == 0 and s.file is None and not s.flagged
        assert s.key == int(_keys([s.row])[0])


def test_draw_includes_flagged_rows_at_most_half(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", _records(300))
    few = _keys([5, 250, 123])
    sample = draw(open_source(path), k=20, seed=0, flagged=few, id_field=None)
    assert len(sample) == 20
    assert sorted(s.row for s in sample if s.flagged) == [5, 123, 250]
    # Rows that were not passed in as flagged are never marked flagged.
    assert all(s.flagged == (s.row in (5, 123, 250)) for s in sample)

    many = _keys(np.arange(100, 160))
    sample = draw(open_source(path), k=20, seed=0, flagged=many, id_field=None)
    flagged = [s.row for s in sample if s.flagged]
    assert len(sample) == 20
    assert len(flagged) == 10
    assert set(flagged) <= set(range(100, 160))
    # The k // 2 flagged keys of lowest priority, whatever order they were given in.
    keys = _keys(np.arange(100, 160))
    expected = sorted(keys[np.argsort(priority(keys, 0), kind="stable")][:10].tolist())
    assert flagged == expected


def test_draw_fills_in_for_unreadable_flagged_keys(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", _records(50))
    missing = _keys([10_000, 10_001])  # past the end of the file
    sample = draw(open_source(path), k=10, seed=0, flagged=missing, id_field=None)
    assert len(sample) == 10
    assert not any(s.flagged for s in sample)


def test_draw_is_the_same_whatever_the_reader_batch_size(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "d.jsonl", _records(400))
    flagged = _keys([3, 399, 200])
    whole = draw(open_source(path), k=25, seed=7, flagged=flagged, id_field="id")
    assert len(list(open_source(path).batches())) == 1
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 300)
    monkeypatch.setattr(jsonl, "PIECE_BYTES", 100)
    assert len(list(open_source(path).batches())) > 40
    pieces = draw(open_source(path), k=25, seed=7, flagged=flagged, id_field="id")
    assert [(s.row, s.flagged, s.record) for s in pieces] == \
        [(s.row, s.flagged, s.record) for s in whole]
    # Batch by batch, the pool still ends as the k lowest priorities of the file.
    for k in (2, 3, 25):
        for seed in (0, 1, 2):
            sample = draw(open_source(path), k=k, seed=seed, flagged=NONE_FLAGGED, id_field=None)
            assert np.array_equal(np.sort(_keys([s.row for s in sample])),
                                  np.sort(_brute_bottom_k(_keys(np.arange(400)), k, seed)))


def test_draw_with_fewer_records_than_k_takes_all(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", _records(7))
    sample = draw(open_source(path), k=100, seed=0, flagged=_keys([2]), id_field=None)
    assert [s.row for s in sample] == list(range(7))
    assert [s.row for s in sample if s.flagged] == [2]


def test_draw_with_one_record_per_batch_takes_all_when_k_is_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "d.jsonl", _records(6))
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 8)
    assert len(list(open_source(path).batches())) == 6
    for seed in range(12):
        for k in (6, 7):
            sample = draw(open_source(path), k=k, seed=seed, flagged=NONE_FLAGGED,
                          id_field=None)
            assert [s.row for s in sample] == list(range(6))


def test_draw_honours_limit(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", _records(300))
    sample = draw(open_source(path), k=20, seed=0, flagged=_keys([250]), id_field=None,
                  limit=40)
    assert len(sample) == 20
    assert max(s.row for s in sample) < 40
    assert not any(s.flagged for s in sample)  # row 250 is past the limit
    small = draw(open_source(path), k=20, seed=0, flagged=NONE_FLAGGED, id_field=None, limit=5)
    assert [s.row for s in small] == list(range(5))


def test_draw_keeps_nan_and_mixed_types_as_written(tmp_path: Path) -> None:
    records = [
        {"t": "a", "v": 1, "x": 0.5},
        {"t": "b", "v": "one", "x": math.nan},
        {"t": "c", "v": 2.5, "x": 1.5},
        {"t": "d", "v": None, "x": -math.inf},
        {"t": "e", "v": [1, 2], "x": 2.0},
    ]
    path = _write(tmp_path / "d.jsonl", records)
    assert "NaN" in path.read_text()
    sample = draw(open_source(path), k=10, seed=0, flagged=NONE_FLAGGED, id_field=None)
    got = [s.record for s in sample]
    assert [r["v"] for r in got] == [1, "one", 2.5, None, [1, 2]]
    assert type(got[0]["v"]) is int and type(got[2]["v"]) is float
    xs = [r["x"] for r in got]
    assert math.isnan(xs[1]) and xs[3] == -math.inf
    assert [xs[0], xs[2], xs[4]] == [0.5, 1.5, 2.0]
    assert [r["t"] for r in got] == list("abcde")


# --- Encoder and Collate -------------------------------------------------------------


def test_infer_task_from_fields() -> None:
    assert infer_task(None, Fields(messages="m", label="y")) == "chat"
    assert infer_task(None, Fields(text="t", label="y")) == "classification"
    assert infer_task(None, Fields(features=["a"], target="y")) == "regression"
    assert infer_task(None, Fields(text="t")) == "lm"
    assert infer_task(None, Fields(input_ids="ids")) == "lm"
    assert infer_task(None, Fields(id="id", features="f")) is None
    assert infer_task(None, Fields()) is None
    assert infer_task("regression", Fields(text="t", label="y")) == "regression"


def test_byte_fallback_without_a_tokenizer() -> None:
    enc = Encoder("lm", Fields(text="t"), ModelFacts(), None, max_length=16)
    assert enc.vocab_size == BYTE_VOCAB == 256
    assert enc.tokenizer == "bytes"
    rows = [{"t": "héllo"}, {"t": "東"}, {"t": None}]
    out = enc.encode(rows)
    assert out[0].ids == list("héllo".encode())
    assert out[1].ids == [0xE6, 0x9D, 0xB1]
    assert out[2].ids == []
    assert enc.problems(rows) == [[], [], []]  # no tokens: nothing to learn, no fault
    # The declared vocabulary size wins over the byte vocabulary.
    assert Encoder("lm", Fields(text="t"), ModelFacts(vocab_size=999), None,
                   max_length=8).vocab_size == 999


def test_a_token_id_past_int64_is_shown_as_written() -> None:
    # It was "token id -1": an id no int64 holds (or written as a float past 2**62) was
    # encoded as -1 and the detail showed that stand-in.
    enc = Encoder("lm", Fields(input_ids="ids", token_labels="y"), ModelFacts(vocab_size=100),
                  None, max_length=16)
    rows = [{"ids": [1, 2**64 + 5], "y": [1, 2]}, {"ids": [1, 1e20], "y": [1, 2]},
            {"ids": [1, "abc"], "y": [1, True]}, {"ids": [1, -1], "y": [1, 2]}]
    details = [[d for _, d in found] for found in enc.problems(rows)]
    assert details == [
        [f"token id {2**64 + 5} outside [0, 100) (past int64: no tensor can hold it)"],
        [f"token id {10**20} outside [0, 100) (past int64: no tensor can hold it)"],
        ["token id 'abc' is not an integer (ids are in [0, 100))",
         "token label true is not an integer (ids are in [0, 100))"],
        ["token id -1 outside [0, 100)"]]


def test_two_text_fields_are_joined_by_a_newline() -> None:
    enc = Encoder("lm", Fields(text=["a", "b"]), ModelFacts(), None, max_length=16)
    rows = [{"a": "x", "b": "y"}]
    assert enc.encode(rows)[0].ids == list(b"x\ny")


def test_lm_collate_targets_are_the_next_bytes_within_max_length() -> None:
    enc = Encoder("lm", Fields(text="t"), ModelFacts(), None, max_length=4)
    rows = [{"t": "abcdef"}, {"t": "xy"}]
    inputs, targets = Collate(enc)(rows)
    assert inputs["ids"].tolist() == [list(b"abcd"), [*b"xy", 0, 0]]
    assert inputs["mask"].tolist() == [[True] * 4, [True, True, False, False]]
    assert targets.tolist() == [list(b"bcde"), [ord("y"), IGNORE, IGNORE, IGNORE]]


def test_bpe_ids_match_the_tokenizers_own_encode(bpe: TokenCounter) -> None:
    enc = Encoder("lm", Fields(text="t"), ModelFacts(), bpe, max_length=64)
    reference = Tokenizer.from_file(bpe.name)
    texts = ["the package provides library files", "café 東京 🙂", "x"]
    rows = [{"t": t} for t in texts]
    got = [e.ids for e in enc.encode(rows)]
    assert got == [reference.encode(t).ids for t in texts]
    assert enc.vocab_size == reference.get_vocab_size() == bpe.vocab_size
    assert enc.tokenizer == bpe.name
    assert enc.problems(rows) == [[], [], []]


def _chat(user: str, answer: str | None, *more: dict[str, str]) -> list[dict[str, str]]:
    turns = [{"role": "user", "content": user}]
    if answer is not None:
        turns.append({"role": "assistant", "content": answer})
    return [*turns, *more]


def _assistant_spans(render: Any, turns: list[dict[str, str]]) -> list[tuple[int, int]]:
    """Character spans of the assistant turns in the rendered conversation."""
    spans, start = [], 0
    for k, turn in enumerate(turns):
        end = len(render(turns[: k + 1]))
        if turn["role"] == "assistant":
            spans.append((start, end))
        start = end
    return spans


def test_chat_targets_are_assistant_bytes_only_without_a_tokenizer() -> None:
    turns = _chat("hello there", "the answer", {"role": "user", "content": "again?"},
                  {"role": "assistant", "content": "yes"})
    enc = Encoder("chat", Fields(messages="m"), ModelFacts(), None, max_length=512)
    rows = [{"m": turns}]
    _, targets = Collate(enc)(rows)
    text = enc._render(turns)
    data = text.encode()
    assistant = [False] * len(data)
    for start, end in _assistant_spans(enc._render, turns):
        b0, b1 = len(text[:start].encode()), len(text[:end].encode())
        assistant[b0:b1] = [True] * (b1 - b0)
    expected = [data[i + 1] if assistant[i + 1] else IGNORE for i in range(len(data) - 1)]
    assert targets[0].tolist() == [*expected, IGNORE]
    labelled = bytes(t for t in targets[0].tolist() if t != IGNORE).decode()
    assert "the answer" in labelled and "yes" in labelled
    assert "hello" not in labelled and "again" not in labelled
    assert enc.problems(rows) == [[]]


def _content_tokens(tok: Tokenizer, text: str, needle: str) -> list[int]:
    """Positions (in the encoding with specials) of the tokens inside ``needle``."""
    e = tok.encode(text)
    a = text.index(needle)
    b = a + len(needle)
    return [i for i, (s, t) in enumerate(e.offsets) if t > s and a <= s and t <= b]


def test_chat_targets_cover_the_answer_not_the_prompt_with_bpe(chat_tok: TokenCounter) -> None:
    turns = _chat("hello there user", "the package provides")
    enc = Encoder("chat", Fields(messages="m"), ModelFacts(), chat_tok, max_length=128)
    rows = [{"m": turns}]
    _, targets = Collate(enc)(rows)
    ids = enc.encode(rows)[0].ids
    text = chat_tok.render(turns)
    ref = Tokenizer.from_file(chat_tok.name)
    assert ids == ref.encode(text).ids
    y = targets[0].tolist()
    for pos in _content_tokens(ref, text, "the package provides"):
        assert y[pos - 1] == ids[pos]
    for pos in _content_tokens(ref, text, "hello there user"):
        assert y[pos - 1] == IGNORE
    assert enc.problems(rows) == [[]]


def test_chat_targets_are_exactly_the_assistant_tokens_with_bpe(chat_tok: TokenCounter) -> None:
    turns = _chat("hello there", "the package", {"role": "user", "content": "again"},
                  {"role": "assistant", "content": "yes"})
    enc = Encoder("chat", Fields(messages="m"), ModelFacts(), chat_tok, max_length=512)
    rows = [{"m": turns}]
    _, targets = Collate(enc)(rows)
    text = chat_tok.render(turns)
    e = Tokenizer.from_file(chat_tok.name).encode(text)
    spans = _assistant_spans(chat_tok.render, turns)
    assistant = [t > s and any(a <= s < b for a, b in spans) for s, t in e.offsets]
    expected = [e.ids[i + 1] if assistant[i + 1] else IGNORE for i in range(len(e.ids) - 1)]
    assert targets[0].tolist() == [*expected, IGNORE]


@pytest.mark.parametrize("use_bpe", [False, True])
def test_chat_long_prompt_keeps_assistant_targets_in_the_window(
    use_bpe: bool, chat_tok: TokenCounter
) -> None:
    n = 32
    tok = chat_tok if use_bpe else None
    turns = _chat("the data " * 300, "package provides library files")
    enc = Encoder("chat", Fields(messages="m"), ModelFacts(), tok, max_length=n)
    rows = [{"m": turns}]
    inputs, targets = Collate(enc)(rows)
    ids = enc.encode(rows)[0].ids
    assert len(ids) > 10 * n
    assert targets.shape == (1, n) and inputs["ids"].shape == (1, n)
    y = targets[0].tolist()
    labelled = [t for t in y if t != IGNORE]
    assert len(labelled) >= 5
    # The window is a contiguous run of the real ids, targets the next id of each.
    x = inputs["ids"][0].tolist()
    start = next(s for s in range(len(ids)) if ids[s : s + n] == x)
    assert start > 0
    assert all(t == IGNORE or t == ids[start + i + 1] for i, t in enumerate(y))
    assert enc.problems(rows) == [[]]


def test_chat_without_an_assistant_turn_is_all_labels_ignored(chat_tok: TokenCounter) -> None:
    for tok in (None, chat_tok):
        enc = Encoder("chat", Fields(messages="m"), ModelFacts(), tok, max_length=64)
        rows = [{"m": _chat("hi", None)}, {"m": _chat("hi", "hello")}, {"m": "not a list"}]
        codes = [[c for c, _ in p] for p in enc.problems(rows)]
        assert codes[0] == ["all_labels_ignored"]
        assert codes[1] == []
        assert codes[2] == ["all_labels_ignored"]
        _, targets = Collate(enc)(rows[:1])
        assert (targets == IGNORE).all()


def test_classification_with_declared_string_labels() -> None:
    model = ModelFacts(labels=["neg", "pos", "mixed"])
    enc = Encoder("classification", Fields(text="t", label="y"), model, None, max_length=16)
    rows = [{"t": "a", "y": "pos"}, {"t": "b", "y": "neg"}, {"t": "c", "y": "mixed"},
            {"t": "d", "y": "maybe"}, {"t": "e", "y": 1}, {"t": "f", "y": None}]
    assert enc.classes == 3
    assert [e.label for e in enc.encode(rows)[:3]] == [1, 0, 2]
    codes = [[c for c, _ in p] for p in enc.problems(rows)]
    assert codes == [[], [], [], ["label_not_a_class"], ["label_not_a_class"],
                     ["label_not_a_class"]]
    inputs, targets = Collate(enc)(rows[:3])
    assert targets.dtype == torch.long and targets.tolist() == [1, 0, 2]
    assert inputs["ids"].shape == (3, 1)


def test_classification_integer_labels_out_of_range() -> None:
    enc = Encoder("classification", Fields(text="t", label="y"), ModelFacts(num_classes=3),
                  None, max_length=16)
    rows = [{"t": "a", "y": 7}, {"t": "b", "y": 2}, {"t": "c", "y": -2}, {"t": "d", "y": 1.0},
            {"t": "e", "y": True}, {"t": "f", "y": "2"}]
    codes = [[c for c, _ in p] for p in enc.problems(rows)]
    assert codes == [["label_out_of_range"], [], ["label_out_of_range"], [],
                     ["label_not_a_class"], ["label_not_a_class"]]
    assert enc.encode(rows)[3].label == 1


def test_a_negative_label_is_reported_once() -> None:
    # One finding per row and code: a negative class with a class count known was once
    # reported twice ("outside [0, 3)" and "is negative").
    for model in (ModelFacts(num_classes=3), ModelFacts()):
        enc = Encoder("classification", Fields(text="t", label="y"), model, None,
                      max_length=16)
        rows = [{"t": "c", "y": -2}]
        assert [c for c, _ in enc.problems(rows)[0]] == ["label_out_of_range"]


def test_set_classes_from_the_sample_when_none_declared() -> None:
    enc = Encoder("classification", Fields(text="t", label="y"), ModelFacts(), None,
                  max_length=8)
    rows = [{"t": "a", "y": 0}, {"t": "b", "y": 4}, {"t": "c", "y": "x"}]
    assert enc.classes is None
    enc.set_classes(enc.encode(rows))
    assert enc.classes == 5


def test_declared_int_labels_survive_a_float_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "l.jsonl", [{"t": "a", "y": 0}, {"t": "b", "y": 1},
                                         {"t": "c", "y": math.nan}, {"t": "d", "y": 2}])
    rows = [s.record for s in draw(open_source(path), k=10, seed=0, flagged=NONE_FLAGGED,
                                   id_field=None)]
    enc = Encoder("classification", Fields(text="t", label="y"), ModelFacts(labels=[0, 1, 2]),
                  None, max_length=8)
    codes = [[c for c, _ in p] for p in enc.problems(rows)]
    assert codes == [[], [], ["label_not_a_class"], []]


def test_token_ids_out_of_range() -> None:
    fields = Fields(input_ids="ids", token_labels="labels")
    enc = Encoder("lm", fields, ModelFacts(vocab_size=100), None, max_length=8)
    rows = [
        {"ids": [1, 2, 99], "labels": [IGNORE, 2, 99]},
        {"ids": [1, 2, 100], "labels": [IGNORE, 2, 3]},
        {"ids": [1, -3, 5], "labels": [IGNORE, 2, 3]},
        {"ids": [1, 2, 3], "labels": [IGNORE, 2, 100]},
        {"ids": [1, 2.5, 3], "labels": [IGNORE, 2, 3]},
        {"ids": [1, 2, 3], "labels": [IGNORE, IGNORE, IGNORE]},
    ]
    codes = [[c for c, _ in p] for p in enc.problems(rows)]
    assert codes == [[], ["token_id_out_of_range"], ["token_id_out_of_range"],
                     ["token_label_out_of_range"], ["token_id_out_of_range"],
                     ["all_labels_ignored"]]
    # Without a declared vocabulary the byte vocabulary (256) bounds the ids.
    enc = Encoder("lm", Fields(input_ids="ids"), ModelFacts(), None, max_length=8)
    rows = [{"ids": [1, 255]}, {"ids": [1, 256]}]
    assert [[c for c, _ in p] for p in enc.problems(rows)] == [[], ["token_id_out_of_range"]]


def test_regression_keeps_nan_and_huge_targets() -> None:
    enc = Encoder("regression", Fields(features="f", target="y"), ModelFacts(), None,
                  max_length=8)
    rows = [{"f": [1, 2, 3], "y": math.nan}, {"f": [4, 5, 6], "y": 1e30},
            {"f": [7, 8, 9], "y": "2.5"}, {"f": [0, 0, 0], "y": "abc"},
            {"f": [1, 1, 1], "y": True}]
    inputs, targets = Collate(enc)(rows)
    assert targets.dtype == torch.float32
    # A number written as a string is not parsed (a collate would not either): NaN.
    assert math.isnan(targets[0]) and math.isnan(targets[2]) and math.isnan(targets[3])
    assert targets[1].item() == pytest.approx(1e30, rel=1e-6)
    assert targets[4].item() == 1.0
    assert inputs["features"].dtype == torch.float32
    assert inputs["features"].tolist()[:2] == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert "ids" not in inputs
    assert enc.problems(rows) == [[]] * 5  # bad values are encoded, not reported here


def test_regression_features_as_a_list_of_columns() -> None:
    enc = Encoder("regression", Fields(features=["a", "b"], target="y"), ModelFacts(), None,
                  max_length=8)
    rows = [{"a": 1, "b": 2.5, "y": 0}, {"a": None, "b": "3", "y": 1}, {"b": 1e30, "y": 2}]
    inputs, targets = Collate(enc)(rows)
    f = inputs["features"]
    assert f.shape == (3, 2)
    assert f[0].tolist() == [1.0, 2.5]
    assert math.isnan(f[1, 0]) and math.isnan(f[1, 1])  # null and "3": not numbers
    assert math.isnan(f[2, 0]) and f[2, 1].item() == pytest.approx(1e30, rel=1e-6)
    assert targets.tolist() == [0.0, 1.0, 2.0]


def test_ragged_feature_lists_are_padded_with_nan() -> None:
    enc = Encoder("regression", Fields(features="f", target="y"), ModelFacts(), None,
                  max_length=8)
    rows = [{"f": [1, 2, 3], "y": 0}, {"f": [4], "y": 1}, {"f": 5, "y": 2}]
    inputs, _ = Collate(enc)(rows)
    f = inputs["features"]
    assert f.shape == (3, 3)
    assert f[1, 0].item() == 4.0 and torch.isnan(f[1, 1:]).all()
    assert f[2, 0].item() == 5.0


def test_compact_vocab_maps_used_in_range_ids_from_one() -> None:
    enc = Encoder("lm", Fields(input_ids="ids"), ModelFacts(vocab_size=1000), None,
                  max_length=8)
    rows = [{"ids": [500, 7, 999]}, {"ids": [7, 1000, -1]}]
    vocab = compact_vocab(enc.encode(rows), enc.vocab_size)
    assert vocab == {7: 1, 500: 2, 999: 3}
    inputs, targets = Collate(enc, vocab)(rows[:1])
    assert inputs["ids"].tolist() == [[2, 1, 3]]
    assert targets.tolist() == [[1, 3, IGNORE]]


def test_encoder_memo_is_not_fooled_by_reused_object_ids() -> None:
    enc = Encoder("lm", Fields(text="t"), ModelFacts(), None, max_length=16)
    got = [enc.encode([{"t": f"row {i}"}])[0].ids for i in range(20)]
    assert got == [list(f"row {i}".encode()) for i in range(20)]


# --- control rows --------------------------------------------------------------------


def _control_case(task: str) -> tuple[Fields, ModelFacts, list[dict[str, Any]]]:
    if task == "lm":
        fields = Fields(text="text", id="id")
        rows = [{"id": i, "text": "some real text " * (i + 1), "extra": i} for i in range(12)]
        return fields, ModelFacts(), rows
    if task == "lm_ids":
        fields = Fields(input_ids="ids", token_labels="labels")
        rows = [{"ids": [1, 2, 3] * 5, "labels": [IGNORE] * 15} for _ in range(12)]
        return fields, ModelFacts(vocab_size=50), rows
    if task == "chat":
        fields = Fields(messages="messages")
        rows = [{"messages": [{"role": "user", "content": "q" * 3}], "meta": {"a": 1}}
                for _ in range(12)]
        return fields, ModelFacts(), rows
    if task == "classification":
        fields = Fields(text="t", label="y", features="f")
        rows = [{"t": "x", "y": "spam" if i % 2 else "bogus", "f": [math.nan, 1.0, 1e30]}
                for i in range(12)]
        return fields, ModelFacts(labels=["ham", "spam", "eggs"]), rows
    if task == "classification_int":
        fields = Fields(text="t", label="y")
        rows = [{"t": "x" * i, "y": 9} for i in range(12)]
        return fields, ModelFacts(num_classes=4), rows
    fields = Fields(features=["a", "b", "c"], target="y")
    rows = [{"a": math.nan, "b": "s", "c": 1e30, "y": math.inf} for _ in range(12)]
    return fields, ModelFacts(), rows


@pytest.mark.parametrize(
    "case", ["lm", "lm_ids", "chat", "classification", "classification_int", "regression"]
)
def test_control_rows_are_in_spec(case: str) -> None:
    fields, model, real = _control_case(case)
    task = case.split("_")[0]
    enc = Encoder(task, fields, model, None, max_length=32)
    rows = control_rows(task, fields, model, real, seed=0, vocab_size=enc.vocab_size,
                        classes=enc.classes, max_length=32)
    assert len(rows) == len(real)
    assert [set(r) for r in rows] == [set(r) for r in real]
    assert enc.problems(rows) == [[]] * len(rows)
    again = control_rows(task, fields, model, real, seed=0, vocab_size=enc.vocab_size,
                         classes=enc.classes, max_length=32)
    assert again == rows
    encoded = enc.encode(rows)
    if task == "classification":
        labels = [e.label for e in encoded]
        assert all(0 <= c < enc.classes for c in labels)
        assert len(set(labels)) > 1
    for e in encoded:
        for v in [*(e.features or []), *([e.target] if e.target is not None else [])]:
            assert math.isfinite(v)
    if fields.id:
        assert [r[fields.id] for r in rows] == [f"control-{i}" for i in range(len(rows))]
    _, targets = Collate(enc)(rows)
    if task in ("lm", "chat"):
        assert (targets != IGNORE).sum(1).min() > 0
    else:
        assert torch.isfinite(targets.float()).all()


def test_control_rows_with_a_bpe_tokenizer_have_no_problems(chat_tok: TokenCounter) -> None:
    fields, model, real = _control_case("chat")
    enc = Encoder("chat", fields, model, chat_tok, max_length=32)
    rows = control_rows("chat", fields, model, real, seed=3, vocab_size=enc.vocab_size,
                        classes=None, max_length=32)
    assert enc.problems(rows) == [[]] * len(rows)


# --- ddmin ---------------------------------------------------------------------------


class _Counted:
    def __init__(self, predicate: Any) -> None:
        self.predicate = predicate
        self.calls: list[list[int]] = []

    def __call__(self, subset: list[int]) -> bool:
        self.calls.append(list(subset))
        return self.predicate(set(subset))


@pytest.mark.parametrize(("predicate", "answers"), [
    (lambda s: 17 in s, [[17]]),
    (lambda s: {3, 40} <= s, [[3, 40]]),
    (lambda s: len(s & {5, 6, 7}) >= 2, [[5, 6], [5, 7], [6, 7]]),
])
def test_ddmin_finds_a_one_minimal_failing_subset(predicate: Any,
                                                  answers: list[list[int]]) -> None:
    fails = _Counted(predicate)
    found = ddmin(list(range(100)), fails, budget=10_000, seconds=60)
    assert found in answers
    assert fails(found)
    for x in found:  # 1-minimal: dropping any one element passes
        assert not fails([i for i in found if i != x])
    assert len(fails.calls) < 200  # far fewer than 2**100 subsets


def test_ddmin_with_the_default_budget_finds_the_pair() -> None:
    fails = _Counted(lambda s: {3, 40} <= s)
    assert ddmin(list(range(100)), fails) == [3, 40]
    assert len(fails.calls) <= 64


def test_ddmin_on_one_item_or_a_failing_singleton() -> None:
    fails = _Counted(lambda s: 0 in s)
    assert ddmin([0], fails) == [0]
    assert fails.calls == []


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 8, 13])
def test_ddmin_stops_at_the_budget_with_a_failing_set(budget: int) -> None:
    fails = _Counted(lambda s: {3, 40} <= s)
    found = ddmin(list(range(100)), fails, budget=budget)
    assert {3, 40} <= set(found)


def test_ddmin_never_calls_more_than_the_budget() -> None:
    for budget in (1, 2, 3, 5, 8, 13, 21):
        fails = _Counted(lambda s: {3, 40} <= s)
        ddmin(list(range(100)), fails, budget=budget)
        assert len(fails.calls) <= budget, (budget, len(fails.calls))


def test_ddmin_stops_at_the_deadline() -> None:
    fails = _Counted(lambda s: 17 in s)
    assert ddmin(list(range(100)), fails, seconds=0.0) == list(range(100))
    assert fails.calls == []


def test_minimal_rows_tries_known_rows_then_nan_losses_first() -> None:
    fails = _Counted(lambda s: 4 in s)
    losses = [0.1] * 10
    assert minimal_rows(10, losses, fails, known=[4, 4, 9]) == [4]
    assert fails.calls[0] == [4, 9]

    fails = _Counted(lambda s: 4 in s)
    losses[4] = math.nan
    assert minimal_rows(10, losses, fails, known=[1]) == [4]
    assert fails.calls[:2] == [[1], [4]]
    assert len(fails.calls) == 2

    fails = _Counted(lambda s: 4 in s)
    assert minimal_rows(10, [0.1] * 10, fails) == [4]
    assert fails.calls[0] == [0, 1, 2, 3, 4]


# --- the training loop ---------------------------------------------------------------


def _setup(task: str, spec: dict[str, Any], precision: str = "fp32", **cfg: Any) -> Setup:
    model, loss_fn = build_builtin(task, spec)
    return Setup(template=model, initial=copy.deepcopy(model.state_dict()), loss_fn=loss_fn,
                 cfg=SmokeConfig(**cfg), device=torch.device("cpu"), precision=precision)


def _regression_batch(scale: float = 1.0) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 3, generator=g)
    return {"features": x}, scale * (x @ torch.tensor([1.0, -2.0, 0.5]))


def test_train_learns_a_clean_regression_batch() -> None:
    setup = _setup("regression", {"features": 3, "bias": 0.0}, steps=30)
    out = train(setup, [_regression_batch()], steps=30)
    assert not out.failed
    assert out.run.steps == 30 and len(out.run.loss) == 30 and len(out.run.grad_norm) == 30
    assert all(x is not None and math.isfinite(x) for x in out.run.loss)
    assert out.run.learned is True
    assert learned(out.run.loss, 0.5)
    assert out.run.scale == [] and out.run.skipped_steps == 0
    again = train(setup, [_regression_batch()], steps=30)
    assert again.run.loss == out.run.loss  # seeded: the same curve twice


def test_train_stops_at_step_zero_on_a_nan_target() -> None:
    inputs, targets = _regression_batch()
    targets[5] = math.nan
    setup = _setup("regression", {"features": 3, "bias": 0.0})
    out = train(setup, [(inputs, targets)], steps=10)
    assert out.failed
    assert out.run.first_bad_step == 0
    assert out.bad_rows == [5]
    assert "targets" in out.run.failure and "nan" in out.run.failure
    assert out.run.learned is None and out.run.loss == []


def test_train_names_the_row_of_a_nan_feature() -> None:
    inputs, targets = _regression_batch()
    inputs["features"][11, 2] = math.inf
    out = train(_setup("regression", {"features": 3, "bias": 0.0}), [(inputs, targets)],
                steps=10)
    assert out.failed and out.bad_rows == [11]
    assert "inputs.features" in out.run.failure


def test_train_stops_on_an_infinite_loss() -> None:
    inputs, targets = _regression_batch()
    targets[2] = 1e30  # squares past float32
    out = train(_setup("regression", {"features": 3, "bias": 0.0}), [(inputs, targets)],
                steps=10)
    assert out.failed and out.run.first_bad_step == 0
    assert out.run.loss == [None]
    assert "loss is inf" in out.run.failure


def test_embedding_index_out_of_range_is_caught_by_the_guard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked_up: list[int] = []
    real = torch.nn.functional.embedding

    def embedding(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        looked_up.append(int(x.max()))
        return real(x, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "embedding", embedding)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 10, (8, 5), generator=g)
    ids[3, 2] = 10
    ids[6, 0] = 42
    batch = ({"ids": ids, "mask": torch.ones(8, 5, dtype=torch.bool)}, torch.zeros(8))
    setup = _setup("regression", {"vocab": 10, "bias": 0.0})
    out = train(setup, [batch], steps=5)
    assert out.failed and out.run.first_bad_step == 0
    assert out.bad_rows == [3, 6]
    assert "index 10 outside [0, 10) in embed" in out.run.failure
    assert looked_up == []  # torch never saw the bad index
    ids[3, 2], ids[6, 0] = 0, 0
    assert not train(setup, [batch], steps=5).failed
    assert looked_up and max(looked_up) < 10


def test_class_target_out_of_range_is_caught_before_the_loss() -> None:
    g = torch.Generator().manual_seed(2)
    feats = torch.randn(6, 4, generator=g)
    targets = torch.tensor([0, 1, 2, 7, 1, -1])
    setup = _setup("classification", {"features": 4, "classes": 3})
    out = train(setup, [({"features": feats}, targets)], steps=5)
    assert out.failed and out.bad_rows == [3, 5]
    assert "target 7 outside [0, 3)" in out.run.failure


def test_per_row_losses_nan_where_a_row_fails_alone() -> None:
    inputs, targets = _regression_batch()
    targets[4] = math.nan
    targets[9] = 1e30
    batches = [({"features": inputs["features"][i : i + 1]}, targets[i : i + 1])
               for i in range(16)]
    losses = per_row_losses(_setup("regression", {"features": 3, "bias": 0.0}), batches)
    assert len(losses) == 16
    assert [i for i, x in enumerate(losses) if math.isnan(x)] == [4, 9]
    assert all(math.isfinite(x) for i, x in enumerate(losses) if i not in (4, 9))


@pytest.mark.parametrize(("losses", "drop", "expected"), [
    ([], 0.1, False),
    ([1.0, 0.1, 0.1], 0.1, False),  # fewer than four losses
    ([1.0, None, None, 0.1, 0.1], 0.1, False),  # Nones do not count
    ([1.0, None, 0.5, 0.1, 0.1, 0.1], 0.1, True),
    ([None, 2.0, 1.0, 1.0, 1.0], 0.1, True),  # the first finite loss is the start
    ([1.0, 0.95, 0.95, 0.95], 0.1, False),  # fell, but by less than min_drop
    ([1.0, 0.5, 0.5, 0.5], 0.5, True),
    ([1.0, 0.2, 0.2, 3.0], 0.1, False),  # the mean of the last three is what counts
    ([1.0, 1.0, 1.0, 1.0], 0.0, True),
    ([1e-7, 1e-7, 1e-7, 1e-7], 0.5, True),  # already at zero loss
])
def test_learned_edge_cases(losses: list[float | None], drop: float, expected: bool) -> None:
    assert learned(losses, drop) is expected


def test_learned_is_false_when_the_loss_climbs_from_near_zero() -> None:
    assert learned([1e-7, 5.0, 5.0, 5.0], 0.1) is False


# --- GradScaler order ----------------------------------------------------------------


def _record_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    scaler = torch.amp.GradScaler
    for name in ("scale", "unscale_", "step", "update"):
        original = getattr(scaler, name)

        def wrapped(self: Any, *args: Any, _name: str = name, _orig: Any = original,
                    **kwargs: Any) -> Any:
            calls.append(_name)
            return _orig(self, *args, **kwargs)

        monkeypatch.setattr(scaler, name, wrapped)
    clip = torch.nn.utils.clip_grad_norm_

    def clip_wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append("clip")
        return clip(*args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip_wrapped)
    backward = torch.Tensor.backward

    def backward_wrapped(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        calls.append("backward")
        return backward(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "backward", backward_wrapped)
    return calls


ONE_STEP = ["scale", "backward", "unscale_", "clip", "step", "update"]


def test_fp16_grad_scaler_order_and_skipped_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    enabled: list[bool] = []
    init = torch.amp.GradScaler.__init__

    def init_wrapped(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        enabled.append(self.is_enabled())

    monkeypatch.setattr(torch.amp.GradScaler, "__init__", init_wrapped)
    calls = _record_calls(monkeypatch)
    steps = 8
    # Targets x3: the first scaled gradients (x 65536, then x 32768) overflow fp16.
    setup = _setup("regression", {"features": 3, "bias": 0.0}, precision="fp16")
    out = train(setup, [_regression_batch(3.0)], steps=steps)
    assert enabled == [True]
    assert not out.failed, out.run.failure
    assert calls == ONE_STEP * steps
    run = out.run
    assert len(run.scale) == steps and len(run.loss) == steps
    assert run.scale[0] == 65536.0
    assert 1 <= run.skipped_steps <= steps // 2
    skipped = [i for i, g in enumerate(run.grad_norm) if g is None]
    assert len(skipped) == run.skipped_steps and skipped[0] == 0
    for i in skipped:  # a skipped step halves the scale for the next one
        if i + 1 < steps:
            assert run.scale[i + 1] == run.scale[i] / 2
    assert run.scale[-1] < run.scale[0]


def test_fp16_too_many_skipped_steps_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record_calls(monkeypatch)
    setup = _setup("regression", {"features": 3, "bias": 0.0}, precision="fp16")
    out = train(setup, [_regression_batch(1e5)], steps=6)
    assert out.failed
    assert "even with loss scaling" in out.run.failure
    assert out.run.skipped_steps == 4 and out.run.first_bad_step == 3
    # The steps before the last one ran in the full order; the failing one stopped at clip.
    assert calls == ONE_STEP * 3 + ONE_STEP[:4]


def test_bf16_on_cpu_runs_without_a_scaler(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record_calls(monkeypatch)
    setup = _setup("regression", {"features": 3, "bias": 0.0}, precision="bf16")
    out = train(setup, [_regression_batch()], steps=6)
    assert not out.failed
    assert out.run.scale == [] and out.run.skipped_steps == 0
    assert all(g is not None for g in out.run.grad_norm)
    assert calls == ONE_STEP * 6  # the disabled scaler's calls pass straight through


# --- config --------------------------------------------------------------------------

RULES = {"rules": [{"id": "empty", "check": "empty"}]}


def test_smoke_section_typo_names_the_key_with_a_hint() -> None:
    with pytest.raises(ConfigError) as e:
        load_rules({**RULES, "smoke": {"stesp": 5}})
    msg = str(e.value)
    assert "smoke.stesp" in msg and "did you mean 'steps'" in msg
    with pytest.raises(ConfigError, match=r"smoke\.max_lenght.*did you mean 'max_length'"):
        load_rules({**RULES, "smoke": {"max_lenght": 5}})
    with pytest.raises(ConfigError, match=r"smoke\.precision"):
        load_rules({**RULES, "smoke": {"precision": "fp8"}})


def test_smoke_section_loads_with_defaults_and_values() -> None:
    assert load_rules(RULES).smoke == SmokeConfig()
    rules = load_rules({**RULES, "smoke": {"steps": 12, "clip": None, "precision": "bf16"}})
    assert rules.smoke.steps == 12 and rules.smoke.clip is None
    assert rules.smoke.precision == "bf16"


def test_with_overrides_sets_smoke_values() -> None:
    rules = load_rules(RULES)
    out = with_overrides(rules, sets=["smoke.steps=5", "smoke.clip=", "smoke.lr=0.5"])
    assert out.smoke.steps == 5 and out.smoke.clip is None and out.smoke.lr == 0.5
    assert out.smoke.samples == rules.smoke.samples
    out = with_overrides(rules, smoke={"steps": 7, "seed": None})
    assert out.smoke.steps == 7 and out.smoke.seed == 0
    # --set wins over the smoke= options (applied after them).
    out = with_overrides(rules, smoke={"steps": 7}, sets=["smoke.steps=9"])
    assert out.smoke.steps == 9


def test_with_overrides_rejects_bad_smoke_settings() -> None:
    rules = load_rules(RULES)
    with pytest.raises(ConfigError, match=r"smoke\.stepz.*did you mean 'steps'"):
        with_overrides(rules, sets=["smoke.stepz=5"])
    with pytest.raises(ConfigError, match=r"smoke\.steps"):
        with_overrides(rules, sets=["smoke.steps=2"])
    with pytest.raises(ConfigError) as e:
        with_overrides(rules, sets=["smok.steps=5"])
    assert "no rule 'smok'" in str(e.value) and "smoke.PARAM" in str(e.value)


def test_builtin_embedding_is_sized_from_the_tokenizer(tmp_path: Path) -> None:
    """A declared model.vocab_size smaller than the tokenizer is the `vocab` check's
    finding; preflight's own model embeds every id the tokenizer makes."""
    tok = load_tokenizer(str(build_bpe_with_added(tmp_path / "tok", ["<|sep|>"])))
    enc = Encoder("lm", Fields(text="t"), ModelFacts(vocab_size=1000), tok, max_length=16)
    rows = [{"t": "hello <|sep|> world"}, {"t": "plain"}]
    assert enc.problems(rows)[0] and enc.vocab_size == 1000  # a user's model: its size
    enc = Encoder("lm", Fields(text="t"), ModelFacts(vocab_size=1000), tok, max_length=16)
    enc.size_for_builtin(enc.encode(rows))
    assert enc.vocab_size == 1001
    assert enc.problems(rows) == [[], []]
    assert 1000 in compact_vocab(enc.encode(rows), enc.vocab_size)
    # Ids read from a field keep the declared size: nothing else bounds them.
    enc = Encoder("lm", Fields(input_ids="ids"), ModelFacts(vocab_size=10), None, max_length=8)
    rows = [{"ids": [1, 12]}]
    enc.size_for_builtin(enc.encode(rows))
    assert enc.vocab_size == 10 and enc.problems(rows)[0]
