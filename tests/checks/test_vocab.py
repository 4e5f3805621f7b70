"""``vocab`` through the real pipeline and CLI: a tokenizer that gained tokens its model's
embedding has no row for, found in the gate without training (``--no-smoke``), from the rules'
``model.vocab_size`` or an ``hf:`` model folder; only candidate texts are encoded, and no text
twice."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner, Result
from tokenizers import Tokenizer

from preflight import resolve, run_preflight
from preflight.cli import main
from preflight.tokenizer import TokenCounter, load_tokenizer
from tests.tokenizers import (
    build_bpe_with_added,
    build_chat_folder,
    made_up_text,
    write_hf_folder,
    write_jsonl,
)

SEP = "<|sep|>"
SEP_ROWS = (5, 17, 280)  # 280: past the calibration's first 256 documents
N = 300


@pytest.fixture(scope="module")
def sep_tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 1,000-token BPE plus added ``<|sep|>`` (id 1,000)."""
    return build_bpe_with_added(tmp_path_factory.mktemp("sep"), [SEP])


def corpus(tmp_path: Path, rows: tuple[int, ...] = SEP_ROWS) -> Path:
    texts = [t.replace("\n", " ") for t in made_up_text(N, seed=3)]
    records = [{"id": f"r{i}", "text": f"{t} {SEP} {t[:20]}" if i in rows else t}
               for i, t in enumerate(texts)]
    return write_jsonl(tmp_path / "data.jsonl", records)


def write_rules(path: Path, rules: dict[str, Any]) -> Path:
    path.write_text(json.dumps(rules), encoding="utf-8")
    return path


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def findings(out: Path, rule: str = "vocab") -> pl.DataFrame:
    return pl.read_parquet(out / "findings.parquet").filter(pl.col("rule") == rule)


def rows_of(frame: pl.DataFrame, code: str) -> list[int | None]:
    return sorted(frame.filter(pl.col("code") == code).get_column("row").to_list(),
                  key=lambda r: -1 if r is None else r)


def schema_only(tok: Path, vocab_size: int, **extra: Any) -> dict[str, Any]:
    """Rules that do not list `vocab`: it is added because the model is known."""
    return {"fields": {"text": "text", "id": "id"},
            "model": {"tokenizer": str(tok), "vocab_size": vocab_size, **extra},
            "rules": [{"id": "schema", "check": "schema"}]}


# ---------------------------------------------------------------- model.vocab_size


def test_added_token_past_the_embedding_fails_the_gate_without_smoke(
        tmp_path: Path, sep_tok: Path) -> None:
    data = corpus(tmp_path)
    rules = write_rules(tmp_path / "rules.yaml", schema_only(sep_tok, 1000))
    out = tmp_path / "out"
    result = invoke("check", data, "--rules", rules, "--no-smoke", "--out", out)
    assert result.exit_code == 1, result.output
    report = json.loads((out / "report.json").read_text())
    vocab = next(r for r in report["rules"] if r["id"] == "vocab")
    assert vocab["status"] == "fail" and vocab["severity"] == "error"
    assert any("added rule 'vocab'" in n for n in report["rules_file"]["notes"])
    found = findings(out)
    assert rows_of(found, "token_id_out_of_range") == list(SEP_ROWS)
    detail = found.filter(pl.col("row") == 5).get_column("detail")[0]
    assert detail == "token `<|sep|>` has id 1,000; the model's embedding has 1,000 rows"
    mismatch = found.filter(pl.col("code") == "vocab_mismatch")
    assert mismatch.height == 1 and mismatch.get_column("row")[0] is None
    assert mismatch.get_column("detail")[0].startswith(
        "tokenizer has 1,001 tokens incl. added `<|sep|>` (id 1,000), the model's embedding "
        "has 1,000 rows: resize_token_embeddings")
    assert vocab["violations"] == len(SEP_ROWS) + 1  # the rows, and the tokenizer itself


def test_a_correctly_sized_embedding_passes(tmp_path: Path, sep_tok: Path) -> None:
    data = corpus(tmp_path)
    rules = write_rules(tmp_path / "rules.yaml", schema_only(sep_tok, 1001))
    out = tmp_path / "out"
    result = invoke("check", data, "--rules", rules, "--no-smoke", "--out", out)
    assert result.exit_code == 0, result.output
    assert findings(out).height == 0
    # An embedding padded past the tokenizer (a multiple of 64) is fine too.
    rules = write_rules(tmp_path / "rules.yaml", schema_only(sep_tok, 1024))
    assert invoke("check", data, "--rules", rules, "--no-smoke", "--out", out).exit_code == 0


def test_two_affected_rows_fail_by_default(tmp_path: Path, sep_tok: Path) -> None:
    """Fail closed: two rows out of 300 are two crashes waiting on a GPU."""
    report = run_preflight(corpus(tmp_path, (40, 41)), schema_only(sep_tok, 1000),
                           tmp_path / "out", smoke=False)
    assert report.verdict == "fail"
    assert report.rule("vocab").codes == {"token_id_out_of_range": 2, "vocab_mismatch": 1}


def test_special_token_past_the_embedding(tmp_path: Path) -> None:
    """A pad token added to the tokenizer but never to the model: no text holds it, yet
    every padded batch does."""
    folder = tmp_path / "tok"
    tok = build_bpe_with_added(folder, ["<|pad|>"],
                               config={"pad_token": "<|pad|>", "eos_token": "</s>"})
    report = run_preflight(corpus(tmp_path, ()), schema_only(tok, 1000), tmp_path / "out",
                           smoke=False)
    found = findings(tmp_path / "out")
    special = found.filter(pl.col("code") == "special_token_out_of_range")
    assert special.get_column("detail").to_list() == [
        "pad token `<|pad|>` has id 1,000; the model's embedding has 1,000 rows"]
    assert special.get_column("row").to_list() == [None]
    assert rows_of(found, "token_id_out_of_range") == []
    assert report.verdict == "fail"


def test_a_special_token_the_config_names_but_the_tokenizer_lacks(tmp_path: Path) -> None:
    folder = tmp_path / "tok"
    tok = build_bpe_with_added(folder, [], config={"pad_token": "<pad>"})
    run_preflight(corpus(tmp_path, ()), schema_only(tok, 1000), tmp_path / "out", smoke=False)
    special = findings(tmp_path / "out").filter(pl.col("code") == "special_token_out_of_range")
    assert special.height == 1
    assert "not in the tokenizer" in special.get_column("detail")[0]
    # With room for it in the embedding, loading it appends it within range: nothing found.
    run_preflight(corpus(tmp_path, ()), schema_only(tok, 1001), tmp_path / "out2", smoke=False)
    assert findings(tmp_path / "out2").height == 0


def test_a_token_added_to_every_text_is_one_corpus_finding(tmp_path: Path) -> None:
    """The post-processor appends `<|end|>` (id 1,000) to every text: one finding, not one
    per record."""
    tok = build_bpe_with_added(tmp_path / "tok", ["<|end|>"], template_end="<|end|>")
    run_preflight(corpus(tmp_path, ()), schema_only(tok, 1000), tmp_path / "out", smoke=False)
    found = findings(tmp_path / "out")
    special = found.filter(pl.col("code") == "special_token_out_of_range")
    assert special.get_column("detail").to_list() == [
        "token `<|end|>` (id 1,000) is added to every text by the tokenizer; the model's "
        "embedding has 1,000 rows"]
    assert rows_of(found, "token_id_out_of_range") == []


def test_a_base_vocabulary_larger_than_the_embedding_encodes_every_text(
        tmp_path: Path, sep_tok: Path) -> None:
    texts = ["a", "b c", *made_up_text(40, seed=4)]
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": str(i), "text": t}
                                              for i, t in enumerate(texts)])
    ref = Tokenizer.from_file(str(sep_tok))
    high = [i for i, t in enumerate(texts) if max(ref.encode(t).ids) >= 500]
    assert 0 < len(high) < len(texts) and 0 not in high and 1 not in high
    report = run_preflight(data, schema_only(sep_tok, 500), tmp_path / "out", smoke=False)
    found = findings(tmp_path / "out")
    assert rows_of(found, "token_id_out_of_range") == high
    mismatch = found.filter(pl.col("code") == "vocab_mismatch").get_column("detail")[0]
    assert "base vocabulary reaches id 999" in mismatch
    assert "every text was encoded" in mismatch
    stats = report.rule("vocab").stats
    assert stats["encoded"] == stats["searched"] == len(texts)
    assert stats["encode_all"]


def test_chat_content_is_checked_as_rendered(tmp_path: Path) -> None:
    folder = build_chat_folder(tmp_path / "chat")
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.add_special_tokens([SEP])
    tok.save(str(folder / "tokenizer.json"))
    chats = [{"messages": [{"role": "user", "content": f"question {i}"},
                           {"role": "assistant", "content": "answer" + (SEP if i == 2 else "")}]}
             for i in range(5)]
    data = write_jsonl(tmp_path / "chat.jsonl", chats)
    rules = {"fields": {"messages": "messages"},
             "model": {"tokenizer": str(folder), "vocab_size": 1000},
             "rules": [{"id": "vocab", "check": "vocab"}]}
    run_preflight(data, rules, tmp_path / "out", smoke=False)
    assert rows_of(findings(tmp_path / "out"), "token_id_out_of_range") == [2]


# ---------------------------------------------------------------- an hf: model folder


def test_hf_folder_alone_gives_the_gate_its_tokenizer_and_embedding(
        tmp_path: Path, sep_tok: Path) -> None:
    model = write_hf_folder(tmp_path / "model", sep_tok, vocab_size=1000)
    data = corpus(tmp_path)
    out = tmp_path / "out"
    result = invoke("check", data, "--model", f"hf:{model}", "--no-smoke", "--out", out)
    assert result.exit_code == 1, result.output
    found = findings(out)
    assert rows_of(found, "token_id_out_of_range") == list(SEP_ROWS)
    assert rows_of(found, "vocab_mismatch") == [None]
    report = json.loads((out / "report.json").read_text())
    notes = " ".join(report["rules_file"]["notes"])
    assert "vocab_size 1,000" in notes and "added rule 'vocab'" in notes
    # The same folder with a resized embedding passes.
    write_hf_folder(model, None, vocab_size=1001)
    result = invoke("check", data, "--model", f"hf:{model}", "--no-smoke", "--out", out)
    assert result.exit_code == 0, result.output


def test_hf_folder_in_the_rules_smoke_section(tmp_path: Path, sep_tok: Path) -> None:
    write_hf_folder(tmp_path / "model", sep_tok, vocab_size=1000,
                    text_config={"vocab_size": 5})  # the top-level value wins
    rules = write_rules(tmp_path / "rules.yaml", {
        "fields": {"text": "text"}, "smoke": {"model": "hf-config:model", "enabled": False},
        "rules": [{"id": "schema", "check": "schema"}]})
    report = run_preflight(corpus(tmp_path), rules, tmp_path / "out")
    assert report.rule("vocab").codes["token_id_out_of_range"] == len(SEP_ROWS)


def test_hf_folder_is_read_without_importing_transformers(tmp_path: Path,
                                                          sep_tok: Path) -> None:
    model = write_hf_folder(tmp_path / "model", sep_tok, vocab_size=1000)
    data = corpus(tmp_path)
    code = (
        "import sys\n"
        "from preflight.cli import main\n"
        "try:\n"
        f"    main(['check', {str(data)!r}, '--model', 'hf:{model}', '--no-smoke',\n"
        f"          '--out', {str(tmp_path / 'out')!r}, '--quiet'])\n"
        "except SystemExit as e:\n"
        "    print('exit', e.code, 'transformers' in sys.modules, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "exit 1 False False", done.stderr


def test_hf_folder_without_config_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    result = invoke("check", corpus(tmp_path), "--model", f"hf:{tmp_path / 'model'}",
                    "--no-smoke", "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "config.json" in result.output


def test_a_python_model_spec_adds_no_vocab_rule_by_itself(tmp_path: Path,
                                                          sep_tok: Path) -> None:
    """A `module:build` model is opaque to the gate: vocab runs only when the rules give
    the embedding size and a tokenizer."""
    rules: dict[str, Any] = {"fields": {"text": "text"}, "smoke": {"model": "mymodel:build"},
                             "rules": [{"id": "schema", "check": "schema"}]}
    report = run_preflight(corpus(tmp_path), rules, tmp_path / "out", smoke=False)
    assert [r.check for r in report.rules] == ["malformed", "schema"]
    rules["model"] = {"tokenizer": str(sep_tok)}
    report = run_preflight(corpus(tmp_path), rules, tmp_path / "out", smoke=False)
    assert "vocab" not in [r.check for r in report.rules]
    rules["model"]["vocab_size"] = 1000
    report = run_preflight(corpus(tmp_path), rules, tmp_path / "out", smoke=False)
    assert report.rule("vocab").status == "fail"
    # --no-smoke with a Python model is still a usage mistake (it only runs in the smoke).
    result = invoke("check", corpus(tmp_path), "--model", "mymodel:build", "--no-smoke")
    assert result.exit_code == 2


def test_a_listed_vocab_rule_is_not_added_twice(tmp_path: Path, sep_tok: Path) -> None:
    rules = schema_only(sep_tok, 1000)
    rules["rules"].append({"id": "ids", "check": "vocab", "severity": "warn",
                           "max_count": 10})
    report = run_preflight(corpus(tmp_path), rules, tmp_path / "out", smoke=False)
    assert [r.check for r in report.rules].count("vocab") == 1
    assert report.rule("ids").status == "pass" and report.verdict == "pass"


def test_no_embedding_size_is_an_error_not_a_pass(tmp_path: Path, sep_tok: Path) -> None:
    rules = {"fields": {"text": "text"}, "model": {"tokenizer": str(sep_tok)},
             "rules": [{"id": "vocab", "check": "vocab"}]}
    report = run_preflight(corpus(tmp_path), rules, tmp_path / "out", smoke=False)
    assert report.rule("vocab").status == "error"
    assert "vocab_size" in (report.rule("vocab").message or "")


# ---------------------------------------------------------------- encoding once


def counting(monkeypatch: pytest.MonkeyPatch, path: Path) -> Counter[str]:
    """Make the gate's tokenizer count every text it encodes."""
    seen: Counter[str] = Counter()
    real = load_tokenizer(str(path))
    assert real.ids is not None and real.encode is not None
    ids, encode = real.ids, real.encode

    def counted_ids(texts: list[str], specials: bool) -> list[list[int]]:
        seen.update(texts)
        return ids(texts, specials)

    def counted_encode(texts: list[str], specials: bool) -> list[int]:
        seen.update(texts)
        return encode(texts, specials)

    counter = dataclasses.replace(real, ids=counted_ids, encode=counted_encode)
    monkeypatch.setattr(resolve, "load_tokenizer", lambda spec, base=None: counter)
    return seen


def _texts(data: Path) -> list[str]:
    return [json.loads(line)["text"] for line in data.read_text().splitlines()]


def test_vocab_alone_encodes_only_the_texts_holding_a_suspect_token(
        tmp_path: Path, sep_tok: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = counting(monkeypatch, sep_tok)
    data = corpus(tmp_path)
    report = run_preflight(data, schema_only(sep_tok, 1000), tmp_path / "out", smoke=False)
    texts = _texts(data)
    assert seen == Counter(texts[i] for i in SEP_ROWS)
    assert report.rule("vocab").stats["encoded"] == len(SEP_ROWS)


def test_token_length_and_vocab_encode_each_text_once(
        tmp_path: Path, sep_tok: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = counting(monkeypatch, sep_tok)
    data = corpus(tmp_path)
    rules = schema_only(sep_tok, 1000, context_window=60)
    rules["rules"].append({"id": "len", "check": "token_length"})
    report = run_preflight(data, rules, tmp_path / "out", smoke=False)
    texts = _texts(data)
    assert len(set(texts)) == N
    # no text twice (token_length counts by pieces: their words, not texts)
    assert seen and max(seen[t] for t in texts if t in seen) == 1
    assert texts[280] in seen  # past the calibration: encoded for vocab, counted once
    assert report.rule("vocab").codes["token_id_out_of_range"] == len(SEP_ROWS)
    assert report.rule("len").stats["encoded"] > 0


def building_ids(monkeypatch: pytest.MonkeyPatch, tok: Path) -> list[int]:
    """Make the pipeline load ``tok`` with an ``ids`` that records how many texts each call
    asks to encode; return that record."""
    real = load_tokenizer(str(tok))
    built: list[int] = []

    def ids(texts: list[str], specials: bool) -> list[list[int]]:
        built.append(len(texts))
        assert real.ids is not None
        return real.ids(texts, specials)

    counter = dataclasses.replace(real, ids=ids)
    monkeypatch.setattr(resolve, "load_tokenizer", lambda spec, base=None: counter)
    return built


def test_token_length_alone_never_builds_token_ids(
        tmp_path: Path, sep_tok: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a check that reads ids, counts come from the tokenizer's counts (no id list
    per text), and they equal the counts through the ids."""
    built = building_ids(monkeypatch, sep_tok)
    data = corpus(tmp_path)
    rules = {"model": {"tokenizer": str(sep_tok), "context_window": 60},
             "rules": [{"id": "len", "check": "token_length"}]}
    alone = run_preflight(data, rules, tmp_path / "a", smoke=False)
    assert built == [] and alone.rule("len").stats["encoded"] > 0
    with_vocab = run_preflight(data, schema_only(sep_tok, 1000, context_window=60)
                               | {"rules": [{"id": "len", "check": "token_length"},
                                            {"id": "vocab", "check": "vocab"}]},
                               tmp_path / "b", smoke=False)
    assert built  # vocab reads the ids of the texts holding its suspect token
    assert alone.rule("len").stats == with_vocab.rule("len").stats
    fa, fb = findings(tmp_path / "a", "len"), findings(tmp_path / "b", "len")
    assert fa.height > 0 and fa.select("row", "detail").equals(fb.select("row", "detail"))


def test_an_embedding_that_fits_the_tokenizer_builds_no_ids(
        tmp_path: Path, sep_tok: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every id inside the embedding the implicit vocab rule encodes nothing, and
    token_length keeps counting by pieces: no id list is built for any text."""
    built = building_ids(monkeypatch, sep_tok)
    rules = schema_only(sep_tok, 5000, context_window=60)
    rules["rules"].append({"id": "len", "check": "token_length"})
    report = run_preflight(corpus(tmp_path), rules, tmp_path / "out", smoke=False)
    assert report.rule("vocab").status == "pass" and report.rule("vocab").stats["encoded"] == 0
    assert built == [] and report.rule("len").stats["encoded"] > 0


def test_counts_are_unchanged_by_the_shared_encoding(tmp_path: Path, sep_tok: Path) -> None:
    """token_length gives the same findings with vocab beside it as alone."""
    data = corpus(tmp_path)
    rules = schema_only(sep_tok, 1000, context_window=60)
    rules["rules"] = [{"id": "len", "check": "token_length"}]
    alone = run_preflight(data, {**rules, "model": {"tokenizer": str(sep_tok),
                                                    "context_window": 60}},
                          tmp_path / "a", smoke=False)
    both = run_preflight(data, rules, tmp_path / "b", smoke=False)
    assert alone.rule("len").codes == both.rule("len").codes
    assert alone.rule("len").stats == both.rule("len").stats
    fa, fb = findings(tmp_path / "a", "len"), findings(tmp_path / "b", "len")
    assert fa.select("row", "detail").equals(fb.select("row", "detail"))


def test_token_counter_knows_added_and_special_tokens(tmp_path: Path) -> None:
    tok = build_bpe_with_added(tmp_path / "tok", ["<|pad|>"], config={"pad_token": "<|pad|>"})
    counter: TokenCounter = load_tokenizer(str(tok))
    assert counter.added_tokens == {"<s>": 0, "</s>": 1, "<|pad|>": 1000}
    assert counter.base_max_id == 999 and counter.vocab_size == 1001
    assert counter.special_tokens == {"pad": ("<|pad|>", 1000)}
    assert counter.template_ids == (0, 1)
    assert counter.token_text is not None and counter.token_text(1000) == "<|pad|>"


def test_with_smoke_the_gate_names_the_rows_and_preflights_model_is_never_blamed(
        tmp_path: Path, sep_tok: Path) -> None:
    """The built-in model embeds every id the tokenizer makes, so the rows holding
    `<|sep|>` train there; the declared 1,000-row embedding is the vocab check's to judge."""
    rules = {**schema_only(sep_tok, 1000), "task": "lm", "smoke": {"steps": 8, "samples": 20}}
    report = run_preflight(corpus(tmp_path), rules, tmp_path / "out", smoke=True)
    assert report.smoke is not None
    assert set(SEP_ROWS) <= set(report.smoke.sample_rows)  # flagged rows are sampled
    assert report.smoke.verdict == "pass", report.smoke.reason
    assert report.verdict == "fail"
    assert report.rule("vocab").codes["token_id_out_of_range"] == len(SEP_ROWS)
