"""Write a tiny Hugging Face model folder for ``--model hf:DIR`` / ``hf-config:DIR``.

Usage::

    python benchmarks/make_hf_folder.py OUT_DIR --corpus FILE [--field text] [--vocab 2000]
        [--layers 2] [--width 64] [--heads 2] [--config-only] [--limit 5000]

A byte-level BPE is trained on the corpus's text (a JSON Lines file, .gz too: the ``--field``
of each record and the ``content`` of every ``messages`` turn), wrapped as a
``PreTrainedTokenizerFast`` with ``<s>``/``</s>`` (pad = eos) and a plain chat template, and
saved with a GPT-2 causal LM of that vocabulary (weights, or ``config.json`` only with
``--config-only``). Nothing is downloaded. Needs ``transformers`` (the ``[hf]`` extra).
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Iterator
from pathlib import Path

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}"
                 "\n{% endfor %}")


def texts(path: Path, field: str, limit: int) -> Iterator[str]:
    """Up to ``limit`` texts of the corpus (records that are not JSON objects are skipped)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f):
            if n >= limit:
                return
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if isinstance(record.get(field), str):
                yield record[field]
            for turn in record.get("messages") or []:
                if isinstance(turn, dict) and isinstance(turn.get("content"), str):
                    yield turn["content"]


def build(out: Path, *, corpus: Path, field: str = "text", vocab: int = 2000, layers: int = 2,
          width: int = 64, heads: int = 2, config_only: bool = False,
          limit: int = 5000) -> Path:
    """Write the folder; returns ``out``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    bpe.train_from_iterator(texts(corpus, field, limit), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>",
                                  pad_token="</s>")
    tok.chat_template = CHAT_TEMPLATE
    config = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, n_positions=1024,
                        vocab_size=len(tok), bos_token_id=tok.bos_token_id,
                        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    out.mkdir(parents=True, exist_ok=True)
    if config_only:
        config.save_pretrained(out)
    else:
        GPT2LMHeadModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--field", default="text")
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--config-only", action="store_true")
    ap.add_argument("--limit", type=int, default=5000, help="records to train the BPE on")
    a = ap.parse_args()
    build(a.out, corpus=a.corpus, field=a.field, vocab=a.vocab, layers=a.layers,
          width=a.width, heads=a.heads, config_only=a.config_only, limit=a.limit)
    print(a.out)


if __name__ == "__main__":
    main()
