"""Hugging Face tokenizers: a ``tokenizer.json`` loaded with the ``tokenizers`` library (with
its folder's chat template and special tokens), or a folder only ``transformers`` can load.

What a tokenizer path can ask is bounded: a tokenizer file must be a regular file of at most
1 GiB (``/dev/zero`` or a FIFO is refused before it is opened). ``tokenizers`` and
``transformers`` are imported only when a tokenizer is loaded.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from preflight.errors import ConfigError
from preflight.token_pieces import PieceCounter, pretokenized_counts
from preflight.tokenizer.bounds import (
    _byte_level_steps,
    _lower_bound_holds,
    _prefix_space_per_split,
    _splits_before_spaces,
)
from preflight.tokenizer.counter import TokenCounter

# A tokenizer file (tokenizer.json, tokenizer_config.json, chat_template.jinja) is read
# whole; the largest real ones are tens of MB.
MAX_TOKENIZER_BYTES = 2**30


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


def hf_tokenizer(path: Path, *, config: Path) -> TokenCounter:
    from tokenizers import Tokenizer

    _check_file(path)
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises plain Exception subclasses
        # tokenizers' own words ("expected `,` or `}` at line 1 column 5") do not say that
        # valid JSON of another shape is the wrong file, nor what the right one is.
        raise ConfigError(f"cannot load tokenizer {path}: the tokenizers library cannot read "
                          f"it ({e}); give a tokenizer.json as the tokenizers library writes "
                          "it (Tokenizer.save, or save_pretrained of a fast tokenizer), the "
                          "folder holding it, or tiktoken:NAME") from e
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


def transformers_tokenizer(path: Path) -> TokenCounter:
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
