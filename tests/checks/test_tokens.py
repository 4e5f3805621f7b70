"""``token_length`` through the real pipeline: exact answers although most texts skip the
tokenizer, limits, the estimate, chat rendering and joined text fields."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from preflight import run_preflight
from preflight.report.model import Report, RuleResult
from tests.tokenizers import (
    build_bpe,
    build_bpe_nfkc,
    build_bpe_truncating,
    build_chat_folder,
    build_wordpiece,
    encode_all,
    install_tiny_tiktoken,
    made_up_text,
    tiny_tiktoken,
    write_jsonl,
)

RULE = "len"


@pytest.fixture(scope="session")
def toks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokenizers")
    return {
        "bpe": build_bpe(root / "bpe"),
        "bpe_prefix": build_bpe(root / "bpe_prefix", add_prefix_space=True),
        "bpe_trunc": build_bpe_truncating(root / "bpe_trunc"),
        "bpe_nfkc": build_bpe_nfkc(root / "bpe_nfkc"),
        "wordpiece": build_wordpiece(root / "wordpiece"),
        "chat": build_chat_folder(root / "chat"),
        "chat_plain": build_chat_folder(root / "chat_plain", template=None),
    }


class Run:
    def __init__(self, report: Report, out: Path) -> None:
        self.report = report
        self.out = out

    @property
    def result(self) -> RuleResult:
        return self.report.rule(RULE)

    @property
    def stats(self) -> dict[str, Any]:
        return self.result.stats

    def findings(self, code: str | None = None) -> pl.DataFrame:
        frame = pl.read_parquet(self.out / "findings.parquet").filter(pl.col("rule") == RULE)
        return frame if code is None else frame.filter(pl.col("code") == code)

    def rows(self, code: str) -> set[int]:
        return set(self.findings(code).get_column("row").to_list())

    def counts(self, code: str = "too_long") -> dict[int, int]:
        """The token count each finding's detail states, by row."""
        out = {}
        for row, detail in self.findings(code).select("row", "detail").iter_rows():
            out[row] = int(re.match(r"~?([\d,]+) tokens", detail).group(1).replace(",", ""))
        return out


@pytest.fixture
def check(tmp_path: Path):
    n = [0]

    def run(records: list[dict[str, Any]], *, model: dict[str, Any] | None = None,
            fields: dict[str, Any] | None = None, **params: Any) -> Run:
        n[0] += 1
        path = write_jsonl(tmp_path / f"data{n[0]}.jsonl", records)
        rules = {
            "fields": fields or {"text": "text", "id": "id"},
            "model": {k: str(v) if isinstance(v, Path) else v
                      for k, v in (model or {}).items()},
            "rules": [{"id": RULE, "check": "token_length", **params}],
        }
        out = tmp_path / f"out{n[0]}"
        return Run(run_preflight(path, rules=rules, out=out, smoke=False), out)

    return run


def corpus(n: int = 1500, *, seed: int = 7) -> list[dict[str, Any]]:
    """Records with a wide spread of lengths (most short, some up to ~2 kB), some odd Unicode,
    and a few without text (null or absent)."""
    rng = random.Random(seed)
    base = " ".join(made_up_text(400, seed=seed))
    extras = ["東京の数据🙂", "e\u0301" * 5, "\x07 bell", "🇩🇪👨\u200d👩\u200d👧", "ﷺ ﬁ", "<s>"]
    records: list[dict[str, Any]] = []
    for i in range(n):
        if i % 97 == 5:
            records.append({"id": str(i), "text": None})
            continue
        if i % 89 == 3:
            records.append({"id": str(i)})
            continue
        r = rng.random()
        size = (rng.randint(0, 20) if r < 0.15 else rng.randint(20, 60) if r < 0.7
                else rng.randint(60, 400) if r < 0.9 else rng.randint(400, 2000))
        start = rng.randrange(len(base) - size)
        text = base[start:start + size]
        if rng.random() < 0.1:
            text += rng.choice(extras)
        records.append({"id": str(i), "text": text})
    return records


def _texts(records: list[dict[str, Any]]) -> dict[int, str]:
    return {i: r["text"] for i, r in enumerate(records) if isinstance(r.get("text"), str)}


def _assert_histogram(stats: dict[str, Any], with_text: int) -> None:
    hist = stats["histogram"]
    assert sum(hist["exact"]) + sum(hist["estimated"]) == with_text
    assert sum(hist["exact"]) == stats["encoded"]
    assert len(hist["edges"]) == len(hist["exact"]) + 1 == len(hist["estimated"]) + 1
    assert hist["edges"][-1] is None  # the open last bin (beyond twice the limit)


# ---------------------------------------------------------------- exact although skipped


@pytest.mark.parametrize(("limit", "minimum"), [(64, 0), (128, 5)])
@pytest.mark.parametrize("name", ["bpe", "bpe_prefix"])
def test_exact_answer_although_most_texts_are_skipped(check, toks, name: str, limit: int,
                                                      minimum: int) -> None:
    records = corpus()
    texts = _texts(records)
    real = dict(zip(texts, encode_all(toks[name], list(texts.values())), strict=True))
    run = check(records, model={"context_window": limit, "tokenizer": toks[name]},
                min_tokens=minimum)
    stats = run.stats
    expected_long = {i for i, c in real.items() if c > limit}
    expected_short = {i for i, c in real.items() if c < minimum}
    assert expected_long  # the corpus exercises both sides
    assert expected_short or not minimum
    assert run.rows("too_long") == expected_long
    assert run.rows("too_short") == expected_short
    assert run.counts("too_long") == {i: real[i] for i in expected_long}
    assert run.counts("too_short") == {i: real[i] for i in expected_short}
    assert stats["family"] == "byte_level_bpe" and stats["estimated"] is False
    assert stats["limit"] == limit and stats["min_tokens"] == minimum
    assert stats["skipped_by_bound"] > 0
    if not minimum:
        assert stats["skipped_by_bound"] > stats["encoded"]  # most texts skip the tokenizer
    assert stats["encoded"] + stats["skipped_by_bound"] == len(texts)
    _assert_histogram(stats, len(texts))
    pct = stats["percentiles"]
    assert {"p50", "p90", "p95", "p99", "max"} <= set(pct)
    assert pct["max"] == max(real.values())  # the longest text is always encoded
    assert run.result.violations == len(expected_long | expected_short)
    assert run.result.status == "fail"


def test_exact_across_many_batches(check, toks, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small read blocks: many batches, calibration on the first only; rows stay right."""
    import preflight.source.jsonl as jsonl

    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 16 << 10)
    records = corpus(2500, seed=21)
    texts = _texts(records)
    real = dict(zip(texts, encode_all(toks["bpe"], list(texts.values())), strict=True))
    run = check(records, model={"context_window": 80, "tokenizer": toks["bpe"]}, min_tokens=4)
    assert run.rows("too_long") == {i for i, c in real.items() if c > 80}
    assert run.rows("too_short") == {i for i, c in real.items() if c < 4}
    assert run.stats["encoded"] + run.stats["skipped_by_bound"] == len(texts)
    assert run.stats["skipped_by_bound"] > 0
    _assert_histogram(run.stats, len(texts))


def test_exact_with_tiktoken(check, monkeypatch: pytest.MonkeyPatch) -> None:
    install_tiny_tiktoken(monkeypatch)
    enc = tiny_tiktoken()
    records = corpus(800, seed=3)
    texts = _texts(records)
    real = {i: len(enc.encode_ordinary(t)) for i, t in texts.items()}
    run = check(records, model={"context_window": 100, "tokenizer": "tiktoken:tiny"},
                min_tokens=5)
    assert run.stats["family"] == "tiktoken"
    assert run.rows("too_long") == {i for i, c in real.items() if c > 100}
    assert run.rows("too_short") == {i for i, c in real.items() if c < 5}
    assert run.stats["skipped_by_bound"] > 0
    assert run.stats["encoded"] + run.stats["skipped_by_bound"] == len(texts)
    _assert_histogram(run.stats, len(texts))


@pytest.mark.parametrize("name", ["wordpiece", "bpe_nfkc"])
def test_unbounded_families_encode_every_text(check, toks, name: str) -> None:
    records = corpus(600, seed=11)
    texts = _texts(records)
    real = dict(zip(texts, encode_all(toks[name], list(texts.values())), strict=True))
    run = check(records, model={"context_window": 48, "tokenizer": toks[name]}, min_tokens=6)
    assert run.stats["skipped_by_bound"] == 0
    assert run.stats["encoded"] == len(texts)
    assert run.rows("too_long") == {i for i, c in real.items() if c > 48}
    assert run.rows("too_short") == {i for i, c in real.items() if c < 6}
    assert run.counts("too_long") == {i: c for i, c in real.items() if c > 48}
    _assert_histogram(run.stats, len(texts))
    assert sum(run.stats["histogram"]["estimated"]) == 0


def test_nfkc_expansion_is_caught(check, toks) -> None:
    """A short text that NFKC blows up past the limit: the byte bound would have skipped it."""
    text = "\ufdfa" * 6  # 18 bytes; each becomes 18 letters
    real = encode_all(toks["bpe_nfkc"], [text])[0]
    assert real > 32 >= len(text.encode()) + 3
    run = check([{"id": "a", "text": text}],
                model={"context_window": 32, "tokenizer": toks["bpe_nfkc"]})
    assert run.rows("too_long") == {0}
    assert run.counts() == {0: real}


# ---------------------------------------------------------------- the limit


def _calibrated(toks, lengths: tuple[int, ...]) -> tuple[list[dict[str, Any]], list[int]]:
    """Texts of increasing real token counts."""
    words = ["the", "package", "provides", "development", "files", "for", "the", "library"]
    texts = [" ".join(words[i % len(words)] for i in range(n)) for n in lengths]
    return [{"id": str(i), "text": t} for i, t in enumerate(texts)], encode_all(toks["bpe"], texts)


def test_reserve_reduces_the_limit(check, toks) -> None:
    records, real = _calibrated(toks, (5, 20, 40, 55, 70, 90))
    run = check(records, model={"context_window": 64, "tokenizer": toks["bpe"]})
    assert run.stats["limit"] == 64
    assert run.rows("too_long") == {i for i, c in enumerate(real) if c > 64}
    run = check(records, model={"context_window": 64, "tokenizer": toks["bpe"]}, reserve=24)
    assert run.stats["limit"] == 40
    assert run.rows("too_long") == {i for i, c in enumerate(real) if c > 40}
    assert {i for i, c in enumerate(real) if 40 < c <= 64}  # the reserve made a difference


def test_max_tokens_overrides_the_context_window(check, toks) -> None:
    records, real = _calibrated(toks, (5, 20, 40, 55, 70, 90))
    run = check(records, model={"context_window": 4096, "tokenizer": toks["bpe"]},
                max_tokens=30)
    assert run.stats["limit"] == 30
    assert run.rows("too_long") == {i for i, c in enumerate(real) if c > 30}
    run = check(records, model={"tokenizer": toks["bpe"]}, max_tokens=50, reserve=10)
    assert run.stats["limit"] == 40
    assert run.rows("too_long") == {i for i, c in enumerate(real) if c > 40}


def test_no_limit_is_an_error_not_a_pass(check, toks) -> None:
    run = check([{"id": "a", "text": "hello"}], model={"tokenizer": toks["bpe"]})
    assert run.result.status == "error"
    assert "context_window" in (run.result.message or "")
    assert run.report.verdict == "fail"


def test_reserve_filling_the_window_is_an_error(check, toks) -> None:
    for reserve in (64, 100):
        run = check([{"id": "a", "text": "hello"}],
                    model={"context_window": 64, "tokenizer": toks["bpe"]}, reserve=reserve)
        assert run.result.status == "error"
        assert "reserve" in (run.result.message or "")
        assert run.report.verdict == "fail"


def test_truncation_in_the_tokenizer_does_not_cap_counts(check, toks) -> None:
    records, real = _calibrated(toks, (3, 100, 150))
    assert real[1] >= 100
    run = check(records, model={"context_window": 50, "tokenizer": toks["bpe_trunc"]})
    assert run.rows("too_long") == {1, 2}
    assert run.counts() == {1: real[1], 2: real[2]}


def test_passes_when_everything_fits(check, toks) -> None:
    records, _ = _calibrated(toks, (5, 10, 20))
    run = check(records, model={"context_window": 4096, "tokenizer": toks["bpe"]})
    assert run.result.status == "pass" and run.result.violations == 0
    assert run.stats["encoded"] == 0 and run.stats["skipped_by_bound"] == 3


# ---------------------------------------------------------------- the estimate


def test_no_tokenizer_uses_the_stated_estimate(check) -> None:
    texts = ["a" * 30, "b" * 300, "東京" * 40, "tiny"]  # 30, 300, 240, 4 bytes
    run = check([{"id": str(i), "text": t} for i, t in enumerate(texts)],
                model={"context_window": 64}, min_tokens=3)
    stats = run.stats
    assert stats["estimated"] is True and stats["family"] == "estimate"
    assert stats["encoded"] == 0 and stats["skipped_by_bound"] == 0
    # its own code: a verdict on estimates says so (and still fails)
    assert run.rows("too_long") == set()
    assert run.rows("too_long_estimated") == {1, 2}  # ceil(300/3)=100, ceil(240/3)=80 > 64
    assert run.rows("too_short") == {3}  # ceil(4/3)=2 < 3
    assert run.result.status == "fail"
    assert run.result.notes == ["estimated from bytes; give --tokenizer for exact counts"]
    details = run.findings().get_column("detail").to_list()
    assert details and all(d.startswith("~") for d in details)
    assert run.counts("too_long_estimated") == {1: 100, 2: 80}
    _assert_histogram(stats, len(texts))
    assert sum(stats["histogram"]["exact"]) == 0


# ---------------------------------------------------------------- chat


def _conversations() -> list[dict[str, Any]]:
    rng = random.Random(5)
    text = made_up_text(200, seed=5)
    out: list[dict[str, Any]] = []
    for i in range(40):
        turns = [{"role": "system", "content": text[i]}] if i % 3 == 0 else []
        for j in range(rng.randint(1, 4)):
            turns.append({"role": "user", "content": text[(i * 7 + j) % 200]})
            turns.append({"role": "assistant", "content": text[(i * 11 + j) % 200]})
        out.append({"id": str(i), "messages": turns})
    return out


CHAT_FIELDS = {"messages": "messages", "id": "id"}


def test_chat_counts_the_rendered_conversation(check, toks) -> None:
    records = _conversations()
    records[7]["messages"].append({"role": "tool", "content": "42"})
    rendered = {
        i: "".join(f"<|{t['role']}|>{t['content']}</s>" for t in r["messages"])
        for i, r in enumerate(records) if i != 7
    }
    path = toks["chat"] / "tokenizer.json"
    real = dict(zip(rendered, encode_all(path, list(rendered.values()), specials=False),
                    strict=True))
    limit = sorted(real.values())[len(real) // 2]
    run = check(records, model={"context_window": limit, "tokenizer": toks["chat"]},
                fields=CHAT_FIELDS, min_tokens=1)
    expected = {i for i, c in real.items() if c > limit}
    assert expected
    assert run.rows("too_long") == expected
    assert run.counts() == {i: real[i] for i in expected}
    assert run.rows("chat_template_error") == {7}
    detail = run.findings("chat_template_error").get_column("detail").item()
    assert "tool turns are not supported" in detail
    assert run.stats["encoded"] + run.stats["skipped_by_bound"] == len(rendered)


def test_chat_without_a_template_uses_the_plain_one(check, toks) -> None:
    records = _conversations()
    rendered = {
        i: "".join(f"<|{t['role']}|>\n{t['content']}\n" for t in r["messages"])
        for i, r in enumerate(records)
    }
    path = toks["chat_plain"] / "tokenizer.json"
    real = dict(zip(rendered, encode_all(path, list(rendered.values()), specials=False),
                    strict=True))
    limit = sorted(real.values())[len(real) // 3]
    run = check(records, model={"context_window": limit, "tokenizer": toks["chat_plain"]},
                fields=CHAT_FIELDS)
    assert run.rows("too_long") == {i for i, c in real.items() if c > limit}
    assert run.counts() == {i: c for i, c in real.items() if c > limit}
    assert not run.rows("chat_template_error")


def test_chat_without_a_tokenizer_is_estimated(check) -> None:
    records = [{"id": "a", "messages": [{"role": "user", "content": "x" * 200}]},
               {"id": "b", "messages": [{"role": "user", "content": "hi"}]}]
    run = check(records, model={"context_window": 50}, fields=CHAT_FIELDS)
    plain = len("<|user|>\n" + "x" * 200 + "\n")
    assert run.counts("too_long_estimated") == {0: -(-plain // 3)}
    assert run.stats["estimated"] is True


def test_chat_template_jinja_file_is_used(check, toks, tmp_path: Path) -> None:
    folder = build_chat_folder(tmp_path / "tok", template=None)
    (folder / "chat_template.jinja").write_text(
        "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}"
    )
    records = _conversations()
    rendered = ["".join(f"[{t['role']}] {t['content']}</s>" for t in r["messages"])
                for r in records]
    real = encode_all(folder / "tokenizer.json", rendered, specials=False)
    limit = sorted(real)[len(real) // 2]
    run = check(records, model={"context_window": limit, "tokenizer": folder},
                fields=CHAT_FIELDS)
    assert run.counts() == {i: c for i, c in enumerate(real) if c > limit}


@pytest.mark.parametrize("template", [
    "{% for m in messages %}{% if m['role'] == 'stop' %}{% break %}{% endif %}"
    "<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}{% endfor %}",
    "{% for m in messages %}<|{{ m['role'] }}|>{% if m['role'] == 'assistant' %}"
    "{% generation %}{{ m['content'] }}{% endgeneration %}{% else %}{{ m['content'] }}"
    "{% endif %}{{ eos_token }}{% endfor %}",
])
def test_chat_templates_transformers_accepts(check, toks, tmp_path: Path, template: str) -> None:
    folder = build_chat_folder(tmp_path / "tok", template=template)
    records = _conversations()
    rendered = ["".join(f"<|{t['role']}|>{t['content']}</s>" for t in r["messages"])
                for r in records]
    real = encode_all(folder / "tokenizer.json", rendered, specials=False)
    limit = sorted(real)[len(real) // 2]
    run = check(records, model={"context_window": limit, "tokenizer": folder},
                fields=CHAT_FIELDS)
    assert run.counts() == {i: c for i, c in enumerate(real) if c > limit}


# ---------------------------------------------------------------- several text fields


def test_text_fields_are_joined_by_newlines(check, toks) -> None:
    base = made_up_text(60, seed=9)
    records = [{"id": str(i), "title": base[i][:40], "body": base[i + 1]} for i in range(50)]
    records.append({"id": "only-title", "title": base[0] * 3})
    records.append({"id": "only-body", "body": base[1] * 3})
    joined = [
        "\n".join(r[k] for k in ("title", "body") if k in r) for r in records
    ]
    real = encode_all(toks["bpe"], joined)
    limit = sorted(real)[len(real) // 2]
    run = check(records, model={"context_window": limit, "tokenizer": toks["bpe"]},
                fields={"text": ["title", "body"], "id": "id"})
    expected = {i for i, c in enumerate(real) if c > limit}
    assert run.rows("too_long") == expected
    assert run.counts() == {i: real[i] for i in expected}


def test_private_use_e000_in_joined_fields_is_counted_as_written(check, toks) -> None:
    record = {"id": "a", "title": "x\ue000" * 20, "body": "y"}
    real = encode_all(toks["bpe"], ["x\ue000" * 20 + "\ny"])[0]
    run = check([record], model={"context_window": 10, "tokenizer": toks["bpe"]},
                fields={"text": ["title", "body"], "id": "id"})
    assert run.counts() == {0: real}
