"""Token counting with the model's real tokenizer, and the exact bounds that let most texts
skip it.

``load_tokenizer(spec)`` takes a ``tokenizer.json`` path, a local folder holding a
``tokenizer.json`` (with ``tokenizer_config.json`` for the chat template), a folder that only
``transformers`` can load, a Hugging Face name (``org/name``) found in the local hub cache
(``preflight.hf_cache``; looked up before the name is tried as a path), or
``tiktoken:NAME`` for an encoding already in tiktoken's cache. Nothing is downloaded.
With no tokenizer, ``estimate_counter()`` gives a stated estimate.

What a tokenizer path or its chat template can ask is bounded: a tokenizer file must be a
regular file of at most 1 GiB (``/dev/zero`` or a FIFO is refused before it is opened), and
a chat template renders in a sandbox with a bounded ``range``, bounded ``*``/``**``/``+``
results, an output-size limit and a time limit per render (``TemplateLimitError``). A
template that breaks a limit on a small sample conversation is a ``ConfigError`` at load;
one that breaks it on a record is that record's ``chat_template_error``.

Bounds (tested per family in ``tests/test_tokenizer.py``):

- byte-level BPE with no normalizer, ByteLevel last in its pre-tokenizer (GPT-2, RoBERTa,
  Llama 3, tiktoken): every token covers at least one byte of the text, so
  ``tokens <= utf8_bytes + 1 (prefix space) + specials`` (twice the bytes when ByteLevel adds
  a space before every split: ``prefix_per_split``), and
  no token covers more than the longest vocabulary entry, so
  ``tokens >= ceil(utf8_bytes / longest_token_bytes) + specials``;
- byte-level BPE whose pieces never join a non-space character and the space after it
  (GPT-2's or Llama 3's split, no added token holding a space; ``_splits_before_spaces``)
  and tiktoken encodings on GPT-2's, r50k's, cl100k's or o200k's pattern: a text's tokens
  are those of its start cut before such a space plus those of the rest, so a text counts
  as the sum of its pieces' counts, each distinct piece encoded once (``pieces``:
  ``preflight.token_pieces``);
- any other tokenizer: no bound is proven, every text is tokenised.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from preflight.cores import available_cores
from preflight.errors import ConfigError
from preflight.hf_cache import cached_snapshot, looks_like_repo_id, not_cached_hint
from preflight.paths import find_beside
from preflight.token_pieces import PieceCounter, pretokenized_counts

if TYPE_CHECKING:
    import polars as pl

# A tokenizer file (tokenizer.json, tokenizer_config.json, chat_template.jinja) is read
# whole; the largest real ones are tens of MB.
MAX_TOKENIZER_BYTES = 2**30
# One chat-template render: items in one range(), range() items in all loops together,
# characters rendered (also the size of one `*` or `+` result) and seconds.
TEMPLATE_MAX_RANGE = 100_000
TEMPLATE_MAX_STEPS = 1_000_000
TEMPLATE_MAX_CHARS = 64 * 2**20
TEMPLATE_MAX_SECONDS = 5.0
# A plain template for chat data when the tokenizer has none (documented in the README).
PLAIN_CHAT_TEMPLATE = "<|{role}|>\n{content}\n"
# The fallback estimate: about 3 UTF-8 bytes per token over-counts English (about 4) and
# matches CJK (3 bytes per character, about one token each).
ESTIMATE_BYTES_PER_TOKEN = 3.0


@dataclass
class TokenCounter:
    """Counts tokens for batches of texts; knows its exact bounds when they are proven."""

    name: str
    family: str
    encode: Callable[[list[str], bool], list[int]] | None
    specials: int = 0
    byte_bound: bool = False
    # ByteLevel may add a space before every split, not only the text's start: the upper
    # bound is two tokens a byte.
    prefix_per_split: bool = False
    longest_token_bytes: int | None = None
    chat_template: str | None = None
    template_vars: dict[str, Any] = field(default_factory=dict)
    # Text of the first ``k`` tokens, cut on a token boundary (None when not supported).
    prefix: Callable[[str, int], str] | None = None
    # Token ids per text (the smoke test trains on them) and the vocabulary's size.
    ids: Callable[[list[str], bool], list[list[int]]] | None = None
    vocab_size: int | None = None
    # What the ``vocab`` check compares with the model's embedding: the added tokens
    # (content -> id), those matched on normalized text (a substring search of the raw
    # text cannot rule them out), the largest id of an ordinary vocabulary entry, the
    # special tokens by role (``pad``, ``eos``, ...; None where the tokenizer lacks the
    # token its config names) and the ids the post-processor adds to every text.
    added_tokens: dict[str, int] = field(default_factory=dict)
    added_normalized: frozenset[str] = frozenset()
    base_max_id: int | None = None
    special_tokens: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    template_ids: tuple[int, ...] = ()
    # The vocabulary entry of an id, for messages (None when unknown).
    token_text: Callable[[int], str | None] | None = None
    # Counts from the counts of text pieces: set for the tokenizers whose tokens never
    # cross a space that follows a non-space character (see the docstring).
    pieces: PieceCounter | None = None
    _compiled: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.chat_template:
            self._compiled = compile_chat_template(self.chat_template, self.name,
                                                   probe=self._variables())

    def _variables(self) -> dict[str, Any]:
        return {k: v for k, v in self.template_vars.items() if v is not None}

    def render(self, turns: list[Any]) -> str:
        """A conversation as the model is trained on it: the chat template, or the plain one."""
        if self._compiled is None:
            return "".join(
                PLAIN_CHAT_TEMPLATE.format(role=t.get("role", ""), content=t.get("content") or "")
                for t in turns
                if isinstance(t, dict)
            )
        return render_limited(self._compiled, messages=turns, add_generation_prompt=False,
                              **self._variables())

    @property
    def exact(self) -> bool:
        """False for the estimate used when no tokenizer is configured."""
        return self.encode is not None

    def count(self, texts: list[str], *, add_special_tokens: bool = True) -> np.ndarray:
        """Token counts of ``texts`` (the batch API, on all cores)."""
        if not texts:
            return np.zeros(0, dtype=np.int64)
        if self.encode is None:
            return self.estimate(np.array([len(t.encode()) for t in texts]))
        return np.asarray(self.encode(texts, add_special_tokens), dtype=np.int64)

    def count_series(self, texts: pl.Series, *, add_special_tokens: bool = True) -> np.ndarray:
        """Token counts of a String Series of texts (no nulls): from the counts of their
        pieces when the tokenizer splits before spaces and its pieces repeat
        (``preflight.token_pieces``), else as ``count``."""
        if self.pieces is None or not self.pieces.worth():
            return self.count(texts.to_list(), add_special_tokens=add_special_tokens)
        return self.pieces.count(texts) + (self.specials if add_special_tokens else 0)

    def truncate(self, text: str, limit: int, marker: str = "") -> str:
        """``text`` cut on a token boundary so that it plus ``marker`` counts at most
        ``limit`` tokens (specials included); the text itself when it already fits."""
        if self.prefix is None:
            raise ValueError(f"{self.name} cannot truncate on token boundaries")
        if int(self.count([text])[0]) <= limit:
            return text
        keep = limit - self.specials - (int(self.count([marker], add_special_tokens=False)[0])
                                        if marker else 0)
        while keep > 0:
            cut = self.prefix(text, keep) + marker
            if int(self.count([cut])[0]) <= limit:  # re-tokenising can shift a boundary
                return cut
            keep -= 1
        return marker if int(self.count([marker])[0]) <= limit else ""

    def estimate(self, nbytes: np.ndarray) -> np.ndarray:
        """The stated estimate from UTF-8 byte counts."""
        return np.ceil(nbytes / ESTIMATE_BYTES_PER_TOKEN).astype(np.int64)

    def upper_bound(self, nbytes: np.ndarray, *, specials: bool = True) -> np.ndarray | None:
        """A proven upper bound on the token count per text, or None."""
        if not self.byte_bound:
            return None
        return (2 if self.prefix_per_split else 1) * nbytes + 1 + (self.specials if specials
                                                                    else 0)

    def lower_bound(self, nbytes: np.ndarray, *, specials: bool = True) -> np.ndarray | None:
        """A proven lower bound on the token count per text, or None."""
        if not self.byte_bound or not self.longest_token_bytes:
            return None
        return np.ceil(nbytes / self.longest_token_bytes).astype(np.int64) + (
            self.specials if specials else 0
        )


def estimate_counter() -> TokenCounter:
    """The counter used when the rules name no tokenizer."""
    return TokenCounter(name=f"estimate (UTF-8 bytes / {ESTIMATE_BYTES_PER_TOKEN:g})",
                        family="estimate", encode=None)


def load_tokenizer(spec: str, *, base: Path | None = None) -> TokenCounter:
    """Load the tokenizer ``spec`` names, offline; a problem is a ``ConfigError``."""
    if spec.startswith("tiktoken:"):
        return _tiktoken(spec.removeprefix("tiktoken:"))
    hub = looks_like_repo_id(spec)
    path = cached_snapshot(spec) if hub else None
    if path is None:
        try:
            path = find_beside(spec, base, what="tokenizer", hint=" (give a tokenizer.json, a "
                               "local tokenizer folder, a Hugging Face name in the local cache, "
                               "or tiktoken:NAME)")
        except ConfigError as e:
            if hub:
                raise ConfigError(f"tokenizer {not_cached_hint(spec)}; nor is {spec} a file "
                                  "or folder here") from e
            raise
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return _hf_tokenizer(path / "tokenizer.json", config=path / "tokenizer_config.json")
        if not any((path / name).is_file() for name in _TOKENIZER_FILES):
            raise ConfigError(f"no tokenizer in folder {path}: it holds none of "
                              f"{', '.join(_TOKENIZER_FILES)}; give the model's tokenizer "
                              "folder or its tokenizer.json")
        return _transformers(path)
    return _hf_tokenizer(path, config=path.parent / "tokenizer_config.json")


# What a tokenizer folder that only transformers can load holds (one of them at least).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                    "vocab.txt", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model")


def _check_file(path: Path, what: str = "tokenizer") -> None:
    """Refuse, before opening it, what cannot be a tokenizer file: a device, a FIFO, a
    socket, or a file past ``MAX_TOKENIZER_BYTES`` (each would be read into memory whole)."""
    try:
        st = path.stat()
    except OSError as e:
        raise ConfigError(f"cannot read {what} {path}: {e.strerror}") from e
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{what} {path} is not a regular file (a device, FIFO or socket); "
                          "give a tokenizer.json, a tokenizer folder or tiktoken:NAME")
    if st.st_size > MAX_TOKENIZER_BYTES:
        raise ConfigError(f"{what} {path} is {st.st_size / 2**30:.1f} GiB; a tokenizer file "
                          f"is at most {MAX_TOKENIZER_BYTES // 2**30} GiB (is it the right file?)")


def _read_text(path: Path) -> str:
    _check_file(path, what="tokenizer file")
    return path.read_text(encoding="utf-8")


def _hf_tokenizer(path: Path, *, config: Path) -> TokenCounter:
    from tokenizers import Tokenizer

    _check_file(path)
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises plain Exception subclasses
        raise ConfigError(f"cannot load tokenizer {path}: {e}") from e
    # A truncating or padding tokenizer would report the cut length, not the real one, and
    # BPE dropout (a training-time regularizer) random counts: all three are switched off.
    tok.no_truncation()
    tok.no_padding()
    if getattr(tok.model, "dropout", None):
        tok.model.dropout = None
    spec = json.loads(tok.to_str())
    steps = _byte_level_steps(spec)
    longest = None
    base = tok.get_vocab(with_added_tokens=False)
    added = tok.get_added_tokens_decoder()
    if steps is not None and _lower_bound_holds(spec, steps, base):
        # Byte-level vocabulary strings hold one character per byte.
        longest = max([len(t) for t in base] + [len(a.content.encode()) for a in added.values()]
                      + [1])
    shortest_added = min((len(a.content.encode()) for a in added.values()), default=0)
    template, variables = _chat_template(config)
    encode_fast = getattr(tok, "encode_batch_fast", tok.encode_batch)

    def encode(texts: list[str], add_special_tokens: bool) -> list[int]:
        # len() of an Encoding, not of its ids: no Python list per text
        return [len(e) for e in encode_fast(texts, add_special_tokens=add_special_tokens)]

    def prefix(text: str, k: int) -> str:
        offsets = tok.encode(text, add_special_tokens=False).offsets
        return text[: offsets[min(k, len(offsets)) - 1][1]] if k > 0 and offsets else ""

    def ids(texts: list[str], add_special_tokens: bool) -> list[list[int]]:
        return [e.ids for e in encode_fast(texts, add_special_tokens=add_special_tokens)]

    splits = steps is not None and _splits_before_spaces(spec, steps)
    added_ids = set(added)
    post = tuple(tok.encode("", add_special_tokens=True).ids)
    roles = _special_roles(variables, config.parent / "special_tokens_map.json")
    return TokenCounter(
        name=str(path),
        family=("byte_level_bpe" if steps is not None
                else spec.get("model", {}).get("type", "other")),
        encode=encode,
        specials=len(post),
        byte_bound=steps is not None,
        prefix_per_split=steps is not None and _prefix_space_per_split(steps, shortest_added),
        longest_token_bytes=longest,
        chat_template=template,
        template_vars=variables,
        prefix=prefix,
        ids=ids,
        vocab_size=tok.get_vocab_size(with_added_tokens=True),
        added_tokens={t.content: i for i, t in sorted(added.items())},
        added_normalized=frozenset(t.content for t in added.values()
                                   if t.normalized and spec.get("normalizer") is not None),
        base_max_id=max((i for i in base.values() if i not in added_ids), default=None),
        special_tokens={role: (token, tok.token_to_id(token)) for role, token in roles.items()},
        template_ids=post,
        token_text=tok.id_to_token,
        # encode_batch: encode_batch_fast leaves word_ids empty
        pieces=PieceCounter(pretokenized_counts(tok.encode_batch)) if splits else None,
    )


SPECIAL_ROLES = ("bos", "eos", "pad", "unk", "sep", "cls", "mask")


def _special_roles(variables: dict[str, Any], special_map: Path) -> dict[str, str]:
    """Role -> token of the special tokens a tokenizer folder declares
    (``tokenizer_config.json``'s ``*_token`` keys, then ``special_tokens_map.json``)."""
    found: dict[str, str] = {}
    if special_map.is_file():
        try:
            data = json.loads(_read_text(special_map))
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot read {special_map}: {e}") from e
        if isinstance(data, dict):
            for key, value in data.items():
                token = value.get("content") if isinstance(value, dict) else value
                if key.endswith("_token") and isinstance(token, str):
                    found[key.removesuffix("_token")] = token
    for key, token in variables.items():
        if key.endswith("_token") and isinstance(token, str):
            found[key.removesuffix("_token")] = token
    return {role: found[role] for role in SPECIAL_ROLES if role in found}


# Pre-tokenizer steps that only cut the text (or drop some of it) before ByteLevel maps it.
_CUTTING_STEPS = frozenset({"Split", "Digits", "Punctuation", "Whitespace", "WhitespaceSplit",
                            "UnicodeScripts", "CharDelimiterSplit"})
# ... of which these drop what they cut on.
_DROPPING_STEPS = frozenset({"Whitespace", "WhitespaceSplit", "CharDelimiterSplit"})


# The pre-tokenizer steps before a byte-level BPE's ByteLevel, and that step.
_Steps = tuple[list[dict[str, Any]], dict[str, Any]]


def _byte_level_steps(spec: dict[str, Any]) -> _Steps | None:
    """The steps before a byte-level BPE's ByteLevel, and that step: None unless the model
    is BPE with no normalizer and the pre-tokenizer is ByteLevel alone or last in a Sequence
    after cutting steps only. (After ByteLevel a space is ``Ġ``, a letter to any regex: a
    later step would join a word and the space after it, and a second ByteLevel would map
    every byte twice.)"""
    if spec.get("model", {}).get("type") != "BPE" or spec.get("normalizer") is not None:
        return None
    pre = spec.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    if not parts or parts[-1].get("type") != "ByteLevel":
        return None
    if any(p.get("type") not in _CUTTING_STEPS for p in parts[:-1]):
        return None
    return parts[:-1], parts[-1]


def _lower_bound_holds(spec: dict[str, Any], steps: _Steps, base: dict[str, int]) -> bool:
    """Whether no token covers more bytes than the longest vocabulary entry: no step before
    ByteLevel drops text (``Whitespace``, ``WhitespaceSplit``, ``CharDelimiterSplit``, a
    ``Removed`` behaviour), no added token swallows the whitespace beside it (``lstrip``,
    ``rstrip``), and the vocabulary holds all 256 byte symbols (a missing one is dropped,
    or fused into one unknown token with its neighbours)."""
    for part in steps[0]:
        if part.get("type") in _DROPPING_STEPS or part.get("behavior") == "Removed":
            return False
    if any(t.get("lstrip") or t.get("rstrip") for t in spec.get("added_tokens") or []):
        return False
    from tokenizers import pre_tokenizers

    return set(pre_tokenizers.ByteLevel.alphabet()) <= base.keys()


def _prefix_space_per_split(steps: _Steps, shortest_added: int) -> bool:
    """Whether ByteLevel may add a space before more than the text's start: it prefixes
    every split that does not start with one, and a cutting step before it, or an added
    token of one byte (which saves no token to pay for the next split's space), can make
    a split of every byte."""
    if not steps[1].get("add_prefix_space"):
        return False
    return bool(steps[0]) or shortest_added == 1


# Pre-tokenizer regexes none of whose matches holds a non-space character followed by a
# space (Llama 3 / GPT-4's, Qwen 2's); GPT-2's is ByteLevel's own (``use_regex``).
_SPACE_SPLITTING = frozenset({
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
})


# tiktoken patterns none of whose matches holds a non-space character followed by a space:
# GPT-2's (as released, and tiktoken's r50k/p50k with possessive quantifiers), cl100k's and
# o200k's. A match may read the end of the text (``\s++$``) only through whitespace, and a
# cut text's start ends with a non-space character.
_TIKTOKEN_SPACE_SPLITTING = frozenset({
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
})


def _splits_before_spaces(spec: dict[str, Any], steps: _Steps) -> bool:
    """Whether a byte-level BPE's pieces all end before a space that follows a non-space
    character: before its ByteLevel (GPT-2's regex, ``use_regex``) only a known ``Split``
    and ``Digits``, and no added token holds whitespace or strips the whitespace after it
    (added tokens are matched before the pre-tokenizer). BPE dropout is off by then."""
    before, byte_level = steps
    regex = bool(byte_level.get("use_regex", True))
    for part in before:
        if part.get("type") == "Split":
            if (part.get("pattern", {}).get("Regex") not in _SPACE_SPLITTING
                    or part.get("behavior") != "Isolated" or part.get("invert")):
                return False
            regex = True
        elif part.get("type") != "Digits":
            return False
    if not regex:
        return False
    return not any(t.get("rstrip") or any(c.isspace() for c in t.get("content", ""))
                   for t in spec.get("added_tokens") or [])


class TemplateLimitError(ValueError):
    """A chat-template render broke one of the limits above (a record's
    ``chat_template_error``, or a ``ConfigError`` when the sample conversation breaks it)."""


# The running render's budget, per thread (a render is never shared between threads).
_budget = threading.local()
_PROBE = [{"role": "system", "content": "You are a helpful assistant."},
          {"role": "user", "content": "Hello, how are you?"},
          {"role": "assistant", "content": "Fine, thank you."}]


def render_limited(template: Any, **variables: Any) -> str:
    """Render a template compiled by ``compile_chat_template`` within the limits above."""
    parts: list[str] = []
    size = 0
    with _limits():
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > TEMPLATE_MAX_CHARS:
                raise TemplateLimitError(f"the chat template rendered more than "
                                         f"{TEMPLATE_MAX_CHARS // 2**20} MiB")
            _tick(0)
            parts.append(chunk)
    return "".join(parts)


@contextlib.contextmanager
def _limits() -> Iterator[None]:
    _budget.steps = 0
    _budget.deadline = time.monotonic() + TEMPLATE_MAX_SECONDS
    try:
        yield
    finally:
        _budget.deadline = None


def _tick(steps: int) -> None:
    """Count loop steps and check the clock (outside a limited render: no limits)."""
    deadline = getattr(_budget, "deadline", None)
    if deadline is None:
        return
    _budget.steps += steps
    if _budget.steps > TEMPLATE_MAX_STEPS:
        raise TemplateLimitError(f"the chat template looped more than {TEMPLATE_MAX_STEPS:,} "
                                 "times in range() in one render")
    if time.monotonic() > deadline:
        raise TemplateLimitError(f"the chat template took more than {TEMPLATE_MAX_SECONDS:g} s "
                                 "to render one conversation")


class _Range:
    """``range`` for templates: at most ``TEMPLATE_MAX_RANGE`` items, each counted."""

    def __init__(self, *args: int) -> None:
        self._range = range(*args)
        if len(self._range) > TEMPLATE_MAX_RANGE:
            raise TemplateLimitError(f"range() of {len(self._range):,} items in the chat "
                                     f"template; at most {TEMPLATE_MAX_RANGE:,}")

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, index: Any) -> Any:
        return self._range[index]

    def __contains__(self, item: object) -> bool:
        return item in self._range

    def __iter__(self) -> Iterator[int]:
        for i in self._range:
            _tick(1)
            yield i

    def __reversed__(self) -> Iterator[int]:
        for i in reversed(self._range):
            _tick(1)
            yield i


def _bounded_binop(op: Callable[[Any, Any], Any], name: str, left: Any, right: Any) -> Any:
    """``*``, ``**`` and ``+`` in a template, refusing results past the size limit before
    computing them (``"x" * 10**12``, ``10 ** 10**9``)."""
    _tick(0)
    if name == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and (
            abs(left) > 1 and right * max(abs(left).bit_length(), 1) > 8 * TEMPLATE_MAX_CHARS):
        raise TemplateLimitError("a power in the chat template is too large")
    if name == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(n, int) and (
                    len(seq) * n > TEMPLATE_MAX_CHARS):
                raise TemplateLimitError("a repetition in the chat template is too large")
    if name == "+" and isinstance(left, str | list | tuple) and isinstance(
            right, str | list | tuple) and len(left) + len(right) > TEMPLATE_MAX_CHARS:
        raise TemplateLimitError("a concatenation in the chat template is too large")
    return op(left, right)


def compile_chat_template(source: str, where: str, *,
                          probe: dict[str, Any] | None = None) -> Any:
    """Compile a Hugging Face chat template the way transformers does (sandboxed Jinja with
    loop controls and the ``{% generation %}`` tag); a broken one is a ``ConfigError``.
    With ``probe`` (the template's variables), render a three-turn sample conversation
    once: a template that breaks a limit on it would break it on every record, so it is a
    ``ConfigError`` too (any other exception is left to the records)."""
    from jinja2 import TemplateError, nodes
    from jinja2.compiler import CodeGenerator
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Codegen(CodeGenerator):
        """``a ~ b`` checked like ``+`` (after the join: it has no hook before)."""

        def visit_Concat(self, node: Any, frame: Any) -> None:
            self.write("environment.bounded_concat(")
            super().visit_Concat(node, frame)
            self.write(")")

    class _Bounded(ImmutableSandboxedEnvironment):
        code_generator_class = _Codegen
        intercepted_binops = frozenset({"*", "**", "+"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            return _bounded_binop(self.binop_table[operator], operator, left, right)

        def bounded_concat(self, joined: Any) -> Any:
            _tick(0)
            if len(joined) > TEMPLATE_MAX_CHARS:
                raise TemplateLimitError("a concatenation in the chat template is too large")
            return joined

    class _Generation(Extension):
        """``{% generation %}...{% endgeneration %}`` marks assistant text; render it as is."""

        tags = {"generation"}  # noqa: RUF012 - Jinja's extension API

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    env = _Bounded(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", _Generation]
    )
    env.globals["raise_exception"] = raise_exception
    env.globals["range"] = _Range
    try:
        template = env.from_string(source)
    except TemplateError as e:
        raise ConfigError(f"the chat template of {where} is not valid Jinja: {e}") from e
    if probe is not None:
        try:
            render_limited(template, messages=_PROBE, add_generation_prompt=False, **probe)
        except TemplateLimitError as e:
            raise ConfigError(f"the chat template of {where} broke a limit on a three-turn "
                              f"sample conversation: {e}; fix the template") from e
        except Exception:  # a template may reject the sample; the records will tell
            pass
    return template


def _chat_template(config: Path) -> tuple[str | None, dict[str, Any]]:
    jinja = config.parent / "chat_template.jinja"  # newer transformers save it apart
    if not config.is_file():
        return (_read_text(jinja) if jinja.is_file() else None), {}
    try:
        data = json.loads(_read_text(config))
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read {config}: {e}") from e
    template = data.get("chat_template")
    if jinja.is_file():
        template = _read_text(jinja)
    if isinstance(template, list):  # named templates: take "default"
        template = next((t["template"] for t in template if t.get("name") == "default"), None)
    variables = {
        key: (value.get("content") if isinstance(value, dict) else value)
        for key, value in data.items()
        if key.endswith("_token") and isinstance(value, str | dict)
    }
    return template, variables


def _transformers(path: Path) -> TokenCounter:
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        raise ConfigError(
            f"{path} has no tokenizer.json; loading it needs transformers: "
            "pip install -c constraints.txt transformers"
        ) from e
    try:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as e:
        raise ConfigError(f"cannot load tokenizer folder {path}: {e}") from e

    def encode(texts: list[str], add_special_tokens: bool) -> list[int]:
        ids = tok(texts, add_special_tokens=add_special_tokens)["input_ids"]
        return [len(x) for x in ids]

    def ids(texts: list[str], add_special_tokens: bool) -> list[list[int]]:
        return [list(x) for x in tok(texts, add_special_tokens=add_special_tokens)["input_ids"]]

    added = {t.content: i for i, t in sorted(tok.added_tokens_decoder.items())}
    base = [i for t, i in tok.get_vocab().items() if t not in added]
    roles = {role: getattr(tok, f"{role}_token", None) for role in SPECIAL_ROLES}
    return TokenCounter(
        name=str(path),
        family=type(tok).__name__,
        encode=encode,
        specials=len(tok("", add_special_tokens=True)["input_ids"]),
        chat_template=getattr(tok, "chat_template", None),
        template_vars={k: getattr(tok, k, None) for k in ("bos_token", "eos_token")},
        ids=ids,
        vocab_size=len(tok),
        added_tokens=added,
        added_normalized=frozenset(t.content for t in tok.added_tokens_decoder.values()
                                   if t.normalized),
        base_max_id=max(base, default=None),
        special_tokens={role: (token, tok.convert_tokens_to_ids(token))
                        for role, token in roles.items() if isinstance(token, str)},
        template_ids=tuple(tok("", add_special_tokens=True)["input_ids"]),
        token_text=tok.convert_ids_to_tokens,
    )


class _NotCached(Exception):
    """tiktoken asked for a URL: the encoding's file is not in its local cache."""


_tiktoken_lock = threading.Lock()


@contextlib.contextmanager
def _tiktoken_offline() -> Iterator[None]:
    """Let tiktoken read its cache and local files, never a URL: its ``read_file`` is the
    one place it fetches (``requests.get`` for http(s), ``blobfile`` for other schemes)."""
    import tiktoken.load

    fetch = tiktoken.load.read_file

    def read_file(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise _NotCached(blobpath)
        return fetch(blobpath)

    with _tiktoken_lock:
        tiktoken.load.read_file = read_file
        try:
            yield
        finally:
            tiktoken.load.read_file = fetch


def _tiktoken(name: str) -> TokenCounter:
    try:
        import tiktoken
    except ImportError as e:
        raise ConfigError("tiktoken:NAME needs tiktoken: pip install tiktoken") from e
    try:
        with _tiktoken_offline():
            enc = tiktoken.get_encoding(name)
    except _NotCached as e:
        raise ConfigError(
            f"tiktoken encoding {name!r} is not cached on this machine, and preflight works "
            "offline (it never downloads): copy tiktoken's cache from a machine where "
            f"tiktoken.get_encoding({name!r}) has run and point TIKTOKEN_CACHE_DIR at it, or "
            "give the model's tokenizer.json instead"
        ) from e
    except Exception as e:
        raise ConfigError(
            f"tiktoken encoding {name!r} is not available offline ({type(e).__name__}: {e}); "
            "put it in tiktoken's cache (TIKTOKEN_CACHE_DIR) or use a tokenizer.json"
        ) from e
    # Its batch API runs a thread per core: the cores this process may use, one in a pool
    # worker (RAYON_NUM_THREADS there, as for the tokenizers library).
    threads = int(os.environ.get("RAYON_NUM_THREADS") or 0) or available_cores()

    def encode(texts: list[str], add_special_tokens: bool) -> list[int]:
        return [len(x) for x in enc.encode_ordinary_batch(texts, num_threads=threads)]

    def prefix(text: str, k: int) -> str:
        return enc.decode_bytes(enc.encode_ordinary(text)[:k]).decode("utf-8", "ignore")

    def ids(texts: list[str], add_special_tokens: bool) -> list[list[int]]:
        return enc.encode_ordinary_batch(texts, num_threads=threads)

    def count_words(words: list[str]) -> np.ndarray:
        return np.fromiter((len(x) for x in enc.encode_ordinary_batch(words, num_threads=threads)),
                           np.int64, len(words))

    splits = getattr(enc, "_pat_str", None) in _TIKTOKEN_SPACE_SPLITTING
    longest = max((len(b) for b in enc.token_byte_values()), default=1)
    # Ordinary encoding never yields a special token: the largest id below them all.
    specials = {enc.encode_single_token(t) for t in enc.special_tokens_set}
    base_max = enc.max_token_value
    while base_max in specials:
        base_max -= 1
    return TokenCounter(name=f"tiktoken:{name}", family="tiktoken", encode=encode,
                        byte_bound=True, longest_token_bytes=math.ceil(longest), prefix=prefix,
                        ids=ids, vocab_size=enc.n_vocab, base_max_id=base_max,
                        pieces=PieceCounter(count_words) if splits else None,
                        token_text=lambda i: enc.decode_single_token_bytes(i).decode(
                            "utf-8", "backslashreplace"))
