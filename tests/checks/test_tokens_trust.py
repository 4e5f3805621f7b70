"""``token_length`` where a shortcut or a reading could pass a text in silence (hostile
review of issue 17): the lower byte bound only where it holds, BPE dropout switched off,
a Parquet text column stored as ``binary``, text fields holding numbers or lists, and
rule values that would make every text fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers

from preflight import run_preflight
from preflight.errors import ConfigError
from preflight.tokenizer import load_tokenizer
from tests.tokenizers import _save, build_bpe, build_bpe_steps, made_up_text, write_jsonl

RULE = "len"


def _gate(tmp_path: Path, data: Path, tokenizer: Path, **params: Any) -> tuple[Any, pl.DataFrame]:
    rules = {"fields": {"text": "text"},
             "model": {"context_window": params.pop("window", 4096),
                       "tokenizer": str(tokenizer)},
             "rules": [{"id": RULE, "check": "token_length", **params}]}
    out = tmp_path / f"out_{data.stem}_{tokenizer.parent.name}"
    report = run_preflight(data, rules=rules, out=out, smoke=False)
    found = pl.read_parquet(out / "findings.parquet").filter(pl.col("rule") == RULE)
    return report, found


def _ascii_only(folder: Path) -> Path:
    """A byte-level BPE whose vocabulary lacks most non-ASCII bytes (no unk token: the
    tokenizer drops them, so 600 bytes of CJK count 0 tokens)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    ascii_text = [t.encode("ascii", "ignore").decode() for t in made_up_text(200)]
    tok.train_from_iterator(ascii_text, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<s>"], show_progress=False))
    return _save(tok, folder)


def _lstrip_mask(folder: Path) -> Path:
    """RoBERTa's layout: ``<mask>`` swallows the whitespace on its left."""
    path = build_bpe(folder)
    tok = Tokenizer.from_file(str(path))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    return _save(tok, folder)


@pytest.fixture(scope="module")
def loose(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tokenizers where a token can cover more bytes than the longest vocabulary entry."""
    root = tmp_path_factory.mktemp("loose")
    return {
        "lstrip": _lstrip_mask(root / "lstrip"),
        "whitespace_split": build_bpe_steps(root / "ws", [
            pre_tokenizers.WhitespaceSplit(), pre_tokenizers.ByteLevel(add_prefix_space=True)]),
        "ascii_only": _ascii_only(root / "ascii"),
    }


@pytest.mark.parametrize(("name", "text"), [
    ("lstrip", " " * 1000 + "<mask>"),
    ("whitespace_split", "a" + " " * 1000 + "b"),
    ("ascii_only", "数据" * 300),
])
def test_no_lower_bound_where_a_token_can_cover_more(tmp_path: Path, loose: dict[str, Path],
                                                     name: str, text: str) -> None:
    """A long text of few tokens is too short, and is found: the lower bound
    ``⌈bytes / longest⌉`` would have settled it as long enough without counting it."""
    counter = load_tokenizer(str(loose[name]))
    assert counter.lower_bound(np.array([len(text.encode())])) is None
    real = int(counter.count([text])[0])
    assert real < 8 < len(text.encode()) // 17
    data = write_jsonl(tmp_path / "short.jsonl", [{"text": text}, {"text": "fine " * 40}])
    report, found = _gate(tmp_path, data, loose[name], min_tokens=8)
    assert found.select("row", "code").rows() == [(0, "too_short")]
    assert report.rule(RULE).status == "fail"


def test_the_lower_bound_still_settles_plain_byte_level_bpe(tmp_path: Path) -> None:
    counter = load_tokenizer(str(build_bpe(tmp_path / "bpe")))
    assert counter.longest_token_bytes is not None
    lower = counter.lower_bound(np.array([1000]))
    assert lower is not None and int(lower[0]) > 8


def test_bpe_dropout_is_switched_off(tmp_path: Path) -> None:
    """A tokenizer.json saved with BPE dropout counts the same every time (dropout is a
    training-time regularizer; counts with it would be random)."""
    path = build_bpe(tmp_path / "bpe")
    spec = json.loads(path.read_text())
    spec["model"]["dropout"] = 0.5
    dropped = tmp_path / "dropout.json"
    dropped.write_text(json.dumps(spec))
    texts = made_up_text(40, seed=3)
    plain = load_tokenizer(str(path)).count(texts).tolist()
    counter = load_tokenizer(str(dropped))
    assert all(counter.count(texts).tolist() == plain for _ in range(5))


def test_a_binary_parquet_text_column_is_read_as_text(tmp_path: Path) -> None:
    """Some Spark and Hive writers store text as BYTE_ARRAY without the UTF-8 annotation:
    it is text all the same (too long here), and invalid UTF-8 in it is reported."""
    tokenizer = build_bpe(tmp_path / "bpe")
    data = tmp_path / "bin.parquet"
    pq.write_table(pa.table({"text": pa.array([("word " * 100).encode(), b"short text",
                                               b"bad \xff byte"], pa.binary())}), data)
    _, found = _gate(tmp_path, data, tokenizer, window=40)
    assert found.select("row", "code").rows() == [(0, "too_long")]
    rules = {"fields": {"text": "text"},
             "rules": [{"id": "enc", "check": "encoding"}, {"id": "empty", "check": "empty"}]}
    other = run_preflight(data, rules=rules, out=tmp_path / "enc", smoke=False)
    assert other.rule("enc").codes == {"replacement_character": 1}
    assert other.rule("empty").violations == 0


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_text_field_that_is_not_text_is_a_finding(tmp_path: Path, fmt: str) -> None:
    """A number or a list where the text should be cannot be counted: ``not_text``, not a
    silent pass."""
    tokenizer = build_bpe(tmp_path / "bpe")
    if fmt == "jsonl":
        data = write_jsonl(tmp_path / "types.jsonl", [{"text": "fine text"}, {"text": 5},
                                                      {"text": ["a", "b"]}, {"text": None}])
        expected = [(1, "not_text", "text: integer, not text; not counted"),
                    (2, "not_text", "text: array, not text; not counted")]
    else:
        data = tmp_path / "types.parquet"
        pq.write_table(pa.table({"text": pa.array([1, 2, None], pa.int64())}), data)
        expected = [(0, "not_text", "text: integer, not text; not counted"),
                    (1, "not_text", "text: integer, not text; not counted")]
    report, found = _gate(tmp_path, data, tokenizer)
    assert found.select("row", "code", "detail").rows() == expected
    assert report.rule(RULE).status == "fail"


def test_min_tokens_above_the_limit_is_a_rule_error(tmp_path: Path) -> None:
    tokenizer = build_bpe(tmp_path / "bpe")
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "fine text"}])
    rules = {"fields": {"text": "text"},
             "model": {"context_window": 64, "tokenizer": str(tokenizer)},
             "rules": [{"id": RULE, "check": "token_length", "min_tokens": 100}]}
    report = run_preflight(data, rules=rules, out=tmp_path / "o", smoke=False)
    assert report.rule(RULE).status == "error"
    assert "min_tokens 100 is above the token limit 64" in (report.rule(RULE).message or "")
    rules["model"].pop("context_window")
    rules["rules"][0].pop("min_tokens")
    report = run_preflight(data, rules=rules, out=tmp_path / "o2", smoke=False)
    assert "--context-window" in (report.rule(RULE).message or "")


def test_tokenizer_paths_say_what_is_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no tokenizer in folder .*empty: it holds none of"):
        load_tokenizer(str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        load_tokenizer("missing.json", base=Path("."))
    assert str(e.value).count("missing.json") == 1
