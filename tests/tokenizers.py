"""Builders of small tokenizers for the token-length tests: nothing is downloaded.

Each builder takes a folder and returns the path of what it wrote (a ``tokenizer.json`` or a
tokenizer folder). They are plain functions so that each test module can call them once from a
session-scoped fixture (``tmp_path_factory``). The training text is made up here, so the tests
do not depend on the shared corpus.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers.processors import TemplateProcessing

SPECIALS = ["<s>", "</s>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'tool' %}{{ raise_exception('tool turns are not supported') }}{% endif %}"
    "<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}"
    "{% endfor %}"
)

_WORD_TEXT = (
    "the of and to in is for that with on as by this package provides library files "
    "development documentation tools data support server client python module interface "
    "plugin network system kernel user config tests runtime shared static binary header "
    "program command line graphical desktop manager utility format image audio video "
    "font theme language translation database query cache memory thread process event "
    "café naïve über straße 東京 数据 パッケージ данные πακέτο 🙂 🚀"
)
_WORDS = _WORD_TEXT.split()


def made_up_text(n: int, *, seed: int = 0) -> list[str]:
    """``n`` records of made-up, description-like text with a spread of lengths."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 80))]
        text = " ".join(words).capitalize() + "."
        if rng.random() < 0.3:
            text += f" Version {rng.randint(0, 99)}.{rng.randint(0, 99)}, "
            text += f"size {rng.randint(1, 10**6)} bytes.\n"
        out.append(text)
    return out


def _byte_level_bpe(
    *, add_prefix_space: bool = False, normalizer: Any = None, split_digits: bool = False,
    corpus: list[str] | None = None, steps: list[Any] | None = None,
) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.pre_tokenizer = (
        pre_tokenizers.Sequence(steps) if steps is not None
        else pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if split_digits
        else byte_level
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1000,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=SPECIALS,
        show_progress=False,
    )
    tok.train_from_iterator(corpus or made_up_text(400), trainer=trainer)
    tok.post_processor = TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> $B </s>",
        special_tokens=[(s, tok.token_to_id(s)) for s in SPECIALS],
    )
    return tok


def _save(tok: Tokenizer, folder: Path, name: str = "tokenizer.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    tok.save(str(path))
    return path


def build_bpe(folder: Path, *, add_prefix_space: bool = False, split_digits: bool = False,
              corpus: list[str] | None = None) -> Path:
    """A byte-level BPE (~1000 tokens, no normalizer) adding ``<s> ... </s>``; with
    ``split_digits`` its pre-tokenizer is a Sequence (digits split, then ByteLevel), as in
    Llama 3-style tokenizers; trained on ``corpus`` (default: ``made_up_text``)."""
    tok = _byte_level_bpe(add_prefix_space=add_prefix_space, split_digits=split_digits,
                          corpus=corpus)
    return _save(tok, folder)


# Llama 3's pre-tokenizer split (then ByteLevel without its own regex).
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def build_bpe_split(folder: Path, *, pattern: str = LLAMA3_SPLIT, use_regex: bool = False,
                    corpus: list[str] | None = None) -> Path:
    """The byte-level BPE with a ``Split`` pre-tokenizer on ``pattern`` before ByteLevel
    (Llama 3's layout)."""
    from tokenizers import Regex

    tok = _byte_level_bpe(corpus=corpus)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex),
    ])
    return _save(tok, folder)


def build_bpe_steps(folder: Path, steps: list[Any], *, added: list[str] | None = None
                    ) -> Path:
    """A byte-level BPE trained under the pre-tokenizer ``Sequence(steps)``, with
    ``added`` (non-special) added tokens."""
    tok = _byte_level_bpe(steps=steps)
    if added:
        tok.add_tokens(added)
    return _save(tok, folder)


def build_bpe_no_regex(folder: Path) -> Path:
    """The byte-level BPE with ByteLevel's regex off: the whole text is one piece."""
    tok = _byte_level_bpe()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    return _save(tok, folder)


def build_bpe_truncating(folder: Path) -> Path:
    """The byte-level BPE with truncation to 8 tokens saved in its tokenizer.json."""
    tok = _byte_level_bpe()
    tok.enable_truncation(8)
    return _save(tok, folder)


def build_bpe_nfkc(folder: Path) -> Path:
    """A byte-level BPE behind an NFKC normalizer: no byte bound is proven for it."""
    return _save(_byte_level_bpe(normalizer=normalizers.NFKC()), folder)


def build_wordpiece(folder: Path) -> Path:
    """A WordPiece tokenizer with a BERT pre-tokenizer (not byte-level)."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=600, special_tokens=["[UNK]", "[CLS]", "[SEP]"], show_progress=False
    )
    tok.train_from_iterator(made_up_text(300, seed=1), trainer=trainer)
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[(s, tok.token_to_id(s)) for s in ("[CLS]", "[SEP]")],
    )
    return _save(tok, folder)


def build_chat_folder(folder: Path, *, template: str | None = CHAT_TEMPLATE) -> Path:
    """A tokenizer folder: the byte-level BPE plus ``tokenizer_config.json`` holding a Jinja
    ``chat_template`` (which rejects ``tool`` turns with ``raise_exception``) and tokens."""
    _save(_byte_level_bpe(), folder)
    config: dict[str, Any] = {
        "bos_token": "<s>",
        "eos_token": {"content": "</s>", "lstrip": False, "rstrip": False},
    }
    if template is not None:
        config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


# A tiny tiktoken encoding: every byte, plus a few merges (each reachable from its parts).
TIKTOKEN_PAT = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
_TIKTOKEN_MERGES = [
    b"th", b"the", b" t", b" th", b" the", b"in", b"ing", b"an", b"and", b" a", b" an",
    b" and", b"er", b"on", b"es", b"re", b" p", b"ac", b"ack", b"age", b"ag", b" pack",
    b" pa", b" pac", b" packa", b" packag", b" package", b"\xe6\x9d", b"\xe6\x9d\xb1",
]


def tiny_tiktoken() -> Any:
    """A small ``tiktoken.Encoding`` built locally (longest token: `` package``, 8 bytes)."""
    import tiktoken

    ranks = {bytes([i]): i for i in range(256)}
    for merge in _TIKTOKEN_MERGES:
        ranks.setdefault(merge, len(ranks))
    return tiktoken.Encoding(name="tiny", pat_str=TIKTOKEN_PAT, mergeable_ranks=ranks,
                             special_tokens={})


def install_tiny_tiktoken(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make ``tiktoken.get_encoding("tiny")`` return the tiny encoding; any other name fails
    as it does offline (a connection error while fetching the BPE file)."""
    import tiktoken

    enc = tiny_tiktoken()

    def get_encoding(name: str) -> Any:
        if name == "tiny":
            return enc
        raise ConnectionError(f"cannot fetch the BPE file for {name!r}: network unreachable")

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    return enc


def encode_all(tokenizer_json: Path, texts: list[str], *, specials: bool = True) -> list[int]:
    """The real token count of every text, with no truncation (the reference)."""
    tok = Tokenizer.from_file(str(tokenizer_json))
    tok.no_truncation()
    tok.no_padding()
    return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=specials)]


def iter_jsonl(records: list[dict[str, Any]]) -> Iterator[str]:
    for r in records:
        yield json.dumps(r, ensure_ascii=False) + "\n"


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(iter_jsonl(records)), encoding="utf-8")
    return path


def build_bpe_with_added(folder: Path, added: list[str], *, special: bool = True,
                         config: dict[str, Any] | None = None,
                         template_end: str | None = None, **options: bool) -> Path:
    """The byte-level BPE (ids 0-999) plus ``added`` tokens (ids from 1000, in order), saved
    as ``tokenizer.json``; with ``config``, a ``tokenizer_config.json`` beside it; with
    ``template_end``, its post-processor appends that added token to every text;
    ``options`` go to each ``AddedToken`` (``lstrip``, ``single_word``, ...)."""
    from tokenizers import AddedToken

    tok = _byte_level_bpe()
    tok.add_tokens([AddedToken(t, special=special, **options) for t in added])
    if template_end is not None:
        tok.post_processor = TemplateProcessing(
            single=f"<s> $A {template_end}",
            special_tokens=[("<s>", tok.token_to_id("<s>")),
                            (template_end, tok.token_to_id(template_end))],
        )
    path = _save(tok, folder)
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


def write_hf_folder(folder: Path, tokenizer_json: Path | None, *, vocab_size: int | None,
                    **config: Any) -> Path:
    """A model folder as ``save_pretrained`` leaves it, written by hand (nothing built):
    ``config.json`` with ``vocab_size`` (and ``config``), and the tokenizer beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    body = {"model_type": "gpt2", **config}
    if vocab_size is not None:
        body["vocab_size"] = vocab_size
    (folder / "config.json").write_text(json.dumps(body), encoding="utf-8")
    if tokenizer_json is not None:
        (folder / "tokenizer.json").write_bytes(tokenizer_json.read_bytes())
    return folder
