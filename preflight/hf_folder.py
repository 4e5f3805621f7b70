"""What a Hugging Face model folder tells the gate, read from its files alone.

``--model hf:DIR`` and ``--model hf-config:DIR`` (or ``smoke.model`` in a rules file) name a
folder saved with ``save_pretrained``. The smoke test builds the model from it; the gate only
needs two facts, and reads them without importing ``transformers`` or building anything:

- the tokenizer: ``DIR/tokenizer.json`` (loaded with ``tokenizers``), else the folder itself
  when it holds only a ``tokenizer_config.json`` (a tokenizer only ``transformers`` loads);
- the embedding's rows: ``vocab_size`` in ``config.json``, or ``text_config.vocab_size`` for
  configs that nest the language model's (multimodal models).

``read_facts`` also returns the special-token ids ``config.json`` declares (``pad_token_id``,
``bos_token_id``, ``eos_token_id``, ...), for code that pads or stops on them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from preflight.errors import ConfigError
from preflight.limits import MAX_VOCAB
from preflight.paths import find_beside

PREFIXES = ("hf:", "hf-config:")
# config.json is a few KB; anything past this is not one.
MAX_CONFIG_BYTES = 16 * 2**20
SPECIAL_ID_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id", "unk_token_id",
                   "sep_token_id", "decoder_start_token_id")


class FolderFacts(NamedTuple):
    """The facts of a model folder: each None (or empty) when the folder does not say."""

    tokenizer: Path | None
    vocab_size: int | None
    special_ids: dict[str, int | list[int]]


def is_hf_spec(spec: str | None) -> bool:
    """True for ``hf:DIR`` and ``hf-config:DIR`` model specs."""
    return bool(spec) and str(spec).startswith(PREFIXES)


def folder_of(spec: str, *, base: Path | None = None) -> Path:
    """The folder an ``hf:``/``hf-config:`` spec names (relative paths also tried beside the
    rules file, ``base``); a ``ConfigError`` when it is not a folder."""
    if not is_hf_spec(spec):
        raise ConfigError(f"{spec!r} is not a model folder spec; write hf:DIR or hf-config:DIR")
    name = spec.split(":", 1)[1]
    if not name:
        raise ConfigError(f"{spec!r} names no folder; write hf:DIR, e.g. hf:./my-model")
    folder = find_beside(name, base, what="model folder",
                         hint=" (hf:DIR names a folder saved with save_pretrained)")
    if not folder.is_dir():
        raise ConfigError(f"model folder {folder} is not a folder; hf:DIR names a folder "
                          "saved with save_pretrained (config.json, weights, tokenizer)")
    return folder


def read_facts(folder: Path) -> FolderFacts:
    """The tokenizer, embedding rows and special-token ids of a model folder; a
    ``ConfigError`` when ``config.json`` is missing or not a model config."""
    config = _read_config(folder / "config.json")
    tokenizer: Path | None = None
    if (folder / "tokenizer.json").is_file():
        tokenizer = folder / "tokenizer.json"
    elif (folder / "tokenizer_config.json").is_file():
        tokenizer = folder
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    vocab = config.get("vocab_size", text.get("vocab_size"))
    if vocab is not None and (isinstance(vocab, bool) or not isinstance(vocab, int)
                              or not 0 < vocab <= MAX_VOCAB):
        raise ConfigError(f"{folder / 'config.json'}: vocab_size must be an integer from 1 to "
                          f"{MAX_VOCAB:,}, got {vocab!r}")
    specials: dict[str, int | list[int]] = {}
    for key in SPECIAL_ID_KEYS:
        value = config.get(key, text.get(key))
        if _is_id(value) or (isinstance(value, list) and value and all(map(_is_id, value))):
            specials[key] = value
    return FolderFacts(tokenizer=tokenizer, vocab_size=vocab, special_ids=specials)


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path.parent} has no config.json; hf:DIR names a folder saved "
                          "with save_pretrained (model.save_pretrained(DIR))")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES // 2**20} MiB; is it a "
                          "model config?")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read {path}: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object (a model config)")
    return data
