"""Builders of tiny Hugging Face model folders for the ``hf:``/``hf-config:`` tests: a
byte-level BPE trained here (``tests/tokenizers.py``) wrapped as a fast tokenizer, and
GPT-2 / BERT models from small configs, saved with ``save_pretrained``. Nothing downloads."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from tests.tokenizers import CHAT_TEMPLATE, _byte_level_bpe


def tokenizer(*, added: list[str] | None = None) -> Any:
    """The test BPE as a ``PreTrainedTokenizerFast`` with bos/eos/pad set (pad = eos), the
    chat template of ``tests/tokenizers.py``, and ``added`` special tokens."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=_byte_level_bpe(), bos_token="<s>",
                                  eos_token="</s>", pad_token="</s>")
    tok.chat_template = CHAT_TEMPLATE
    if added:
        tok.add_special_tokens({"additional_special_tokens": added})
    return tok


def gpt2_folder(folder: Path, *, layers: int = 2, width: int = 32, heads: int = 2,
                weights: bool = True, vocab: int | None = None,
                added: list[str] | None = None) -> Path:
    """A GPT-2 causal LM folder (weights unless ``weights=False``: config only) with its
    tokenizer; ``vocab`` overrides the embedding rows (default: the tokenizer's size)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = tokenizer(added=added)
    config = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, n_positions=128,
                        vocab_size=vocab or len(tok), bos_token_id=tok.bos_token_id,
                        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    _save(GPT2LMHeadModel(config), config, folder, weights=weights)
    tok.save_pretrained(folder)
    return folder


def bert_folder(folder: Path, *, num_labels: int = 4, weights: bool = True) -> Path:
    """A BERT sequence classifier folder with the test tokenizer."""
    from transformers import BertConfig, BertForSequenceClassification

    tok = tokenizer()
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=128, pad_token_id=tok.pad_token_id,
                        num_labels=num_labels)
    _save(BertForSequenceClassification(config), config, folder, weights=weights)
    tok.save_pretrained(folder)
    return folder


def _save(model: Any, config: Any, folder: Path, *, weights: bool) -> None:
    if weights:
        model.save_pretrained(folder)
    else:
        config.save_pretrained(folder)


class _Marker:
    """Unpickled unsafely, creates ``path``: the proof a pickle ran code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, ...]]:
        return (open, (str(self.path), "w"))


def malicious_bin(folder: Path, marker: Path) -> Path:
    """A folder whose ``pytorch_model.bin`` creates ``marker`` when unpickled unsafely."""
    from transformers import GPT2Config

    tok = tokenizer()
    GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=len(tok), bos_token_id=0,
               eos_token_id=1).save_pretrained(folder)
    tok.save_pretrained(folder)
    with (folder / "pytorch_model.bin").open("wb") as f:
        pickle.dump({"transformer.wte.weight": _Marker(marker)}, f)
    return folder


def unknown_architecture(folder: Path) -> Path:
    """A folder whose config.json names a model_type transformers does not know."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "no-such-model", "architectures": ["NoSuchModel"]}), encoding="utf-8")
    return folder
