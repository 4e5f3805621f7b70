"""Tokenizer loading and the exact bounds per family (``preflight.tokenizer``), and the
command line's handling of a tokenizer that cannot be loaded (exit 2 before any data is read).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight.cli import main
from preflight.errors import ConfigError
from preflight.tokenizer import TokenCounter, estimate_counter, load_tokenizer
from tests.tokenizers import (
    build_bpe,
    build_bpe_nfkc,
    build_bpe_truncating,
    build_chat_folder,
    build_wordpiece,
    encode_all,
    install_tiny_tiktoken,
    write_jsonl,
)

# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every built tokenizer, once per session."""
    root = tmp_path_factory.mktemp("tokenizers")
    build_bpe(root / "bpe")
    build_bpe(root / "bpe_prefix", add_prefix_space=True)
    build_bpe(root / "bpe_digits", split_digits=True)
    build_bpe_truncating(root / "bpe_trunc")
    build_bpe_nfkc(root / "bpe_nfkc")
    build_wordpiece(root / "wordpiece")
    build_chat_folder(root / "chat")
    return root


@pytest.fixture(scope="session")
def tiktoken_counter() -> TokenCounter:
    with pytest.MonkeyPatch.context() as mp:
        install_tiny_tiktoken(mp)
        return load_tokenizer("tiktoken:tiny")


def _load(tok_dir: Path, name: str) -> TokenCounter:
    return load_tokenizer(str(tok_dir / name / "tokenizer.json"))


_CACHE: dict[tuple[Path, str], TokenCounter] = {}


def _load_cached(tok_dir: Path, name: str) -> TokenCounter:
    key = (tok_dir, name)
    if key not in _CACHE:
        _CACHE[key] = _load(tok_dir, name)
    return _CACHE[key]


# ---------------------------------------------------------------- text strategy

_PIECES = [
    "🙂", "👨\u200d👩\u200d👧", "🇩🇪",
    "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "東", "京", "語", "데이터", "ﷺ", "ﬁ", "e\u0301", "\u0308", "\u0301\u0301\u0301", "\x00",
    "\x07", "\x1b", "\x7f", "\x85", "\u200b", "\ufeff", "\u202e", "\ue000", " ", "  ", "\n",
    "\r\n", "\t", "<s>", "</s>", "the", " the", " package", "'s", "123", "4567890", "Ω",
]
# Text read from data is valid UTF-8: no lone surrogates.
_char = st.characters(codec="utf-8")
_piece = st.one_of(_char, st.sampled_from(_PIECES), st.text(_char, max_size=5))
_mixed = st.lists(_piece, max_size=60).map("".join)
_runs = st.builds(lambda s, n: s * n, st.lists(_piece, min_size=1, max_size=3).map("".join),
                  st.integers(1, 400))
TEXTS = st.one_of(st.text(_char), _mixed, _runs,
                  st.lists(st.one_of(_mixed, _runs), max_size=4).map("".join))
PROPERTY = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _check_bounds(counter: TokenCounter, text: str) -> None:
    nbytes = np.array([len(text.encode("utf-8"))])
    for specials in (True, False):
        count = int(counter.count([text], add_special_tokens=specials)[0])
        upper = counter.upper_bound(nbytes, specials=specials)
        lower = counter.lower_bound(nbytes, specials=specials)
        assert upper is not None and lower is not None
        assert int(lower[0]) <= count <= int(upper[0]), (text, specials, lower, count, upper)


# ---------------------------------------------------------------- bounds per family


@pytest.mark.parametrize("name", ["bpe", "bpe_prefix", "bpe_digits"])
def test_byte_level_bpe_is_bounded(tok_dir: Path, name: str) -> None:
    counter = _load(tok_dir, name)
    assert counter.family == "byte_level_bpe"
    assert counter.byte_bound and counter.exact
    assert counter.specials == 2
    assert counter.longest_token_bytes is not None and counter.longest_token_bytes >= 4


@PROPERTY
@given(text=TEXTS)
def test_bounds_hold_for_byte_level_bpe(tok_dir: Path, text: str) -> None:
    _check_bounds(_load_cached(tok_dir, "bpe"), text)


@PROPERTY
@given(text=TEXTS)
def test_bounds_hold_for_byte_level_bpe_with_prefix_space(tok_dir: Path, text: str) -> None:
    _check_bounds(_load_cached(tok_dir, "bpe_prefix"), text)


@PROPERTY
@given(text=TEXTS)
def test_bounds_hold_for_sequence_pre_tokenizer(tok_dir: Path, text: str) -> None:
    _check_bounds(_load_cached(tok_dir, "bpe_digits"), text)


@PROPERTY
@given(text=TEXTS)
def test_bounds_hold_for_tiktoken(tiktoken_counter: TokenCounter, text: str) -> None:
    _check_bounds(tiktoken_counter, text)


@PROPERTY
@given(text=TEXTS)
def test_counts_match_the_tokenizer_itself(tok_dir: Path, text: str) -> None:
    """The counter counts what the tokenizer encodes, specials included or not."""
    path = tok_dir / "bpe_prefix" / "tokenizer.json"
    counter = _load_cached(tok_dir, "bpe_prefix")
    for specials in (True, False):
        assert counter.count([text], add_special_tokens=specials).tolist() == encode_all(
            path, [text], specials=specials
        )


@pytest.mark.parametrize("name", ["bpe_nfkc", "wordpiece"])
def test_no_bound_without_a_proof(tok_dir: Path, name: str) -> None:
    counter = _load(tok_dir, name)
    assert not counter.byte_bound
    assert counter.family != "byte_level_bpe"
    nbytes = np.array([0, 10, 1000])
    for specials in (True, False):
        assert counter.upper_bound(nbytes, specials=specials) is None
        assert counter.lower_bound(nbytes, specials=specials) is None


def test_nfkc_would_break_the_byte_bound(tok_dir: Path) -> None:
    """Why a normalizer disables the bound: NFKC expands U+FDFA (3 bytes) to 18 letters."""
    counter = _load(tok_dir, "bpe_nfkc")
    text = "\ufdfa" * 4
    assert int(counter.count([text])[0]) > len(text.encode()) + 1 + counter.specials


def test_wordpiece_family(tok_dir: Path) -> None:
    counter = _load(tok_dir, "wordpiece")
    assert counter.family == "WordPiece"
    assert counter.specials == 2
    assert counter.count(["the package", ""]).tolist() == encode_all(
        tok_dir / "wordpiece" / "tokenizer.json", ["the package", ""]
    )


def test_tiktoken_counter(tiktoken_counter: TokenCounter) -> None:
    from tests.tokenizers import tiny_tiktoken

    enc = tiny_tiktoken()
    texts = ["the package and 東京", "", "x" * 50, "<|endoftext|> is plain text here"]
    assert tiktoken_counter.name == "tiktoken:tiny"
    assert tiktoken_counter.family == "tiktoken"
    assert tiktoken_counter.byte_bound and tiktoken_counter.specials == 0
    assert tiktoken_counter.longest_token_bytes == max(len(b) for b in enc.token_byte_values())
    expected = [len(enc.encode_ordinary(t)) for t in texts]
    assert tiktoken_counter.count(texts).tolist() == expected
    assert tiktoken_counter.count(texts, add_special_tokens=False).tolist() == expected


def test_unknown_tiktoken_encoding_offline_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_tiny_tiktoken(monkeypatch)
    with pytest.raises(ConfigError) as info:
        load_tokenizer("tiktoken:cl100k_base")
    message = str(info.value)
    assert "cl100k_base" in message and "offline" in message


def test_unknown_tiktoken_name_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken

    def get_encoding(name: str) -> None:
        raise ValueError(f"Unknown encoding {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    with pytest.raises(ConfigError, match="no_such_encoding"):
        load_tokenizer("tiktoken:no_such_encoding")


# ---------------------------------------------------------------- loading


def test_truncation_in_the_file_is_ignored(tok_dir: Path) -> None:
    path = tok_dir / "bpe_trunc" / "tokenizer.json"
    assert json.loads(path.read_text())["truncation"] is not None
    counter = load_tokenizer(str(path))
    text = "the package provides " * 30
    count = int(counter.count([text])[0])
    assert count > 8
    assert count == encode_all(path, [text])[0]


def test_folder_and_file_load_the_chat_template(tok_dir: Path) -> None:
    for spec in (tok_dir / "chat", tok_dir / "chat" / "tokenizer.json"):
        counter = load_tokenizer(str(spec))
        assert counter.chat_template is not None and "raise_exception" in counter.chat_template
        assert counter.template_vars["eos_token"] == "</s>"  # read from an AddedToken dict
        assert counter.template_vars["bos_token"] == "<s>"
    assert load_tokenizer(str(tok_dir / "bpe")).chat_template is None


def test_folder_without_tokenizer_json_needs_transformers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.txt").write_text("[UNK]\nthe\n")
    monkeypatch.setitem(sys.modules, "transformers", None)  # not installed
    with pytest.raises(ConfigError, match="needs transformers"):
        load_tokenizer(str(tmp_path / "tok"))


def test_folder_transformers_cannot_load_is_a_config_error(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.txt").write_text("[UNK]\nthe\n")
    with pytest.raises(ConfigError, match="cannot load tokenizer folder"):
        load_tokenizer(str(tmp_path / "tok"))


def test_broken_tokenizer_json_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": "nope"}')
    with pytest.raises(ConfigError, match="cannot load tokenizer"):
        load_tokenizer(str(bad))


def test_broken_tokenizer_config_is_a_config_error(tok_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tok"
    shutil.copytree(tok_dir / "bpe", folder)
    (folder / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"tokenizer_config\.json"):
        load_tokenizer(str(folder))


def test_missing_path_names_every_path_tried(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_tokenizer("nowhere/tokenizer.json", base=tmp_path / "rules")
    message = str(info.value)
    assert "nowhere/tokenizer.json" in message
    assert str(tmp_path / "rules" / "nowhere" / "tokenizer.json") in message


def test_relative_path_is_tried_beside_the_rules(tok_dir: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(tok_dir / "bpe", tmp_path / "rules" / "tok")
    monkeypatch.chdir(tmp_path)
    counter = load_tokenizer("tok/tokenizer.json", base=tmp_path / "rules")
    assert counter.byte_bound
    assert Path(counter.name) == tmp_path / "rules" / "tok" / "tokenizer.json"


def test_estimate_counter() -> None:
    counter = estimate_counter()
    assert not counter.exact and counter.family == "estimate"
    assert counter.count(["", "abc", "abcd", "東京"]).tolist() == [0, 1, 2, 2]
    assert counter.upper_bound(np.array([5])) is None


# ---------------------------------------------------------------- the command line


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def _squash(text: str) -> str:
    return "".join(text.split())


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "data.jsonl",
                       [{"id": str(i), "text": f"record {i} of the package"} for i in range(5)])


def test_cli_missing_tokenizer_is_exit_2_before_reading(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out,
                     "--context-window", "64",
                     "--tokenizer", tmp_path / "missing" / "tokenizer.json")
    assert result.exit_code == 2, result.output
    assert "tokenizer not found" in result.output
    assert _squash(str(tmp_path / "missing" / "tokenizer.json")) in _squash(result.output)
    assert "Traceback" not in result.output
    assert not out.exists()


def test_cli_missing_tokenizer_in_rules_names_both_paths(data: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    rules = rules_dir / "rules.yaml"
    rules.write_text("fields: {text: text}\nmodel: {context_window: 64, tokenizer: tok.json}\n"
                     "rules:\n  - {id: len, check: token_length}\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = _invoke("check", "--no-smoke", data, "--rules", rules, "--no-progress", "--out", "out")
    assert result.exit_code == 2, result.output
    squashed = _squash(result.output)
    assert "tok.json" in squashed
    assert _squash(str(rules_dir / "tok.json")) in squashed
    assert not (work / "out").exists()
    validated = _invoke("rules", "validate", rules)
    assert validated.exit_code == 2, validated.output
    assert _squash(str(rules_dir / "tok.json")) in _squash(validated.output)


def test_cli_relative_tokenizer_resolves_beside_the_rules(
    data: Path, tok_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules_dir = tmp_path / "rules"
    shutil.copytree(tok_dir / "bpe", rules_dir / "tok")
    rules = rules_dir / "rules.yaml"
    rules.write_text("fields: {text: text}\n"
                     "model: {context_window: 64, tokenizer: tok/tokenizer.json}\n"
                     "rules:\n  - {id: len, check: token_length}\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert _invoke("rules", "validate", rules).exit_code == 0
    result = _invoke("check", "--no-smoke", data, "--rules", rules, "--no-progress", "--out",
                     "out", "--json",
                     "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads((work / "out" / "report.json").read_text())
    stats = next(r for r in report["rules"] if r["id"] == "len")["stats"]
    assert Path(stats["tokenizer"]) == rules_dir / "tok" / "tokenizer.json"
    assert stats["family"] == "byte_level_bpe" and stats["estimated"] is False


def test_cli_subprocess_missing_tokenizer(data: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "preflight", "check", str(data), "--no-progress",
         "--out", "out", "--context-window", "64", "--tokenizer", "no/such/tokenizer.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "no/such/tokenizer.json" in _squash(proc.stderr)
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_cli_tiktoken_offline_is_exit_2(data: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    install_tiny_tiktoken(monkeypatch)
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out,
                     "--context-window", "64",
                     "--tokenizer", "tiktoken:o200k_base")
    assert result.exit_code == 2, result.output
    assert "o200k_base" in result.output
    assert not out.exists()


def test_cli_broken_chat_template_is_a_config_error(tok_dir: Path, tmp_path: Path) -> None:
    folder = build_chat_folder(tmp_path / "tok", template="{% for m in messages %}{{ m }")
    data = write_jsonl(tmp_path / "chat.jsonl",
                       [{"id": "1", "messages": [{"role": "user", "content": "hi"}]}])
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out,
                     "--context-window", "64",
                     "--tokenizer", folder)
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output
    assert "chat_template" in result.output or "tokenizer_config.json" in result.output
    assert not out.exists()


# ------------------------------------------------- bounds on what a tokenizer can ask


def _subprocess_check(data: Path, out: Path, *args: str | Path) -> subprocess.CompletedProcess:
    """The real CLI in a child with a deadline, so a read that never ends fails the test
    instead of hanging it."""
    return subprocess.run([sys.executable, "-m", "preflight", "check", "--no-smoke",
                           str(data), "--no-progress", "--out", str(out),
                           *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "huge"])
def test_tokenizer_that_cannot_be_a_file_is_refused_unread(data: Path, tmp_path: Path,
                                                           kind: str) -> None:
    if kind == "dev-zero":
        path, message = Path("/dev/zero"), "is not a regular file"
    elif kind == "fifo":
        path, message = tmp_path / "tokenizer.json", "is not a regular file"
        os.mkfifo(path)  # nobody writes: opening it would block forever
    else:
        path, message = tmp_path / "tokenizer.json", "a tokenizer file is at most 1 GiB"
        with path.open("wb") as f:  # sparse: no disk used
            f.truncate(2**30 + 1)
    out = tmp_path / "out"
    proc = _subprocess_check(data, out, "--context-window", "64", "--tokenizer", path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert message in " ".join(proc.stderr.split())
    assert str(path) in _squash(proc.stderr) or str(path) in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_tiktoken_never_tries_the_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import requests
    import tiktoken.registry

    tried: list[str] = []

    def no_network(*args: object, **kwargs: object) -> None:
        tried.append(str(args[:2]))
        raise requests.ConnectionError("the test forbids the network")

    monkeypatch.setattr(requests, "get", no_network)
    monkeypatch.setattr(requests.Session, "request", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})  # nothing loaded before
    with pytest.raises(ConfigError) as info:
        load_tokenizer("tiktoken:cl100k_base")
    assert tried == []
    message = str(info.value)
    assert "'cl100k_base' is not cached" in message
    assert "TIKTOKEN_CACHE_DIR" in message and "tokenizer.json" in message


# Two nested loops of 100,000: 10^10 steps, whatever the conversation.
NESTED_RANGE = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                "{% endfor %}{% for m in messages %}{{ m['content'] }}{% endfor %}")


def test_chat_template_that_would_hang_is_a_config_error(tmp_path: Path) -> None:
    folder = build_chat_folder(tmp_path / "tok", template=NESTED_RANGE)
    data = write_jsonl(tmp_path / "chat.jsonl",
                       [{"id": "1", "messages": [{"role": "user", "content": "hi"}]}])
    out = tmp_path / "out"
    started = time.perf_counter()
    proc = _subprocess_check(data, out, "--context-window", "64", "--tokenizer", folder)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert time.perf_counter() - started < 30
    assert "broke a limit" in " ".join(proc.stderr.split())
    assert "1,000,000 times in range()" in " ".join(proc.stderr.split())
    assert not out.exists()


@pytest.mark.parametrize(("template", "message"), [
    ("{{ 'x' * 10**12 }}", "a repetition in the chat template is too large"),
    ("{{ 10 ** 1000000000 }}", "a power in the chat template is too large"),
    ("{% for i in range(10**7) %}{% endfor %}", "range() of 10,000,000 items"),
    ("{% set s = namespace(v='x') %}{% for i in range(64) %}{% set s.v = s.v ~ s.v %}"
     "{% endfor %}{{ s.v }}", "a concatenation in the chat template is too large"),
    ("{% for i in range(100000) %}{{ 'y' * 10000 }}{% endfor %}", "rendered more than 64 MiB"),
])
def test_chat_template_limits(tmp_path: Path, template: str, message: str) -> None:
    folder = build_chat_folder(tmp_path / "tok", template=template)
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_tokenizer(str(folder))
    assert time.perf_counter() - started < 10


def test_chat_template_over_a_limit_on_one_record_is_its_finding(tmp_path: Path) -> None:
    # Quadratic in the content's length: fine on short turns, past the step limit on one
    # long turn (1,500^2 > 1,000,000), which becomes that record's chat_template_error.
    template = ("{% for m in messages %}{% for i in range(m['content']|length) %}"
                "{% for j in range(m['content']|length) %}{% endfor %}{% endfor %}"
                "<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}")
    folder = build_chat_folder(tmp_path / "tok", template=template)
    records = [{"id": str(i), "messages": [{"role": "user", "content": "hi there"},
                                           {"role": "assistant", "content": "hello"}]}
               for i in range(4)]
    records[2]["messages"][0]["content"] = "word " * 300
    data = write_jsonl(tmp_path / "chat.jsonl", records)
    out = tmp_path / "out"
    result = _invoke("check", "--no-smoke", data, "--no-progress", "--out", out,
                     "--context-window", "4096", "--tokenizer", folder)
    assert result.exit_code == 1, result.output
    import polars as pl

    found = pl.read_parquet(out / "findings.parquet").filter(
        pl.col("code") == "chat_template_error")
    assert found.get_column("row").to_list() == [2]
    assert "looped more than 1,000,000 times" in found.get_column("detail").item()


@pytest.mark.parametrize(("rayon", "expected"), [("1", 1), (None, "cores")])
def test_tiktoken_threads_follow_the_process_budget(monkeypatch: pytest.MonkeyPatch,
                                                    rayon: str | None,
                                                    expected: int | str) -> None:
    """One thread in a pool worker (RAYON_NUM_THREADS=1 there): N workers do not each start
    a thread per core; elsewhere the cores this process may use."""
    from preflight.cores import available_cores

    enc = install_tiny_tiktoken(monkeypatch)
    if rayon is None:
        monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("RAYON_NUM_THREADS", rayon)
    asked: list[int] = []
    batch = enc.encode_ordinary_batch

    def spy(texts: list[str], *, num_threads: int) -> list[list[int]]:
        asked.append(num_threads)
        return batch(texts, num_threads=num_threads)

    monkeypatch.setattr(enc, "encode_ordinary_batch", spy)
    counter = load_tokenizer("tiktoken:tiny")
    assert counter.count(["the package", "and"]).tolist() == [
        len(enc.encode_ordinary("the package")), len(enc.encode_ordinary("and"))]
    assert asked == [available_cores() if expected == "cores" else expected]


def test_json_of_another_shape_says_what_tokenizer_file_to_give(tmp_path: Path) -> None:
    # Valid JSON, but not a tokenizer: tokenizers' own words ("expected `,` or `}` at line 1
    # column 5") read like a syntax error and said nothing of what to give instead.
    other = tmp_path / "config.json"
    other.write_text('{"a": 1}')
    with pytest.raises(ConfigError) as info:
        load_tokenizer(str(other))
    assert "the tokenizers library cannot read it (" in str(info.value)
    assert "; give a tokenizer.json as the tokenizers library writes it" in str(info.value)
