"""A Hugging Face model folder as the smoke test's model: ``hf:DIR`` loads the weights saved
with ``save_pretrained``, ``hf-config:DIR`` builds the architecture from ``config.json`` with
random weights (shrunk to 2 layers and a small width unless ``smoke.shrink: false``).

The folder becomes what a user's ``build()`` returns — a model, a loss and a collate — so the
smoke loop, the control batch and the localisation run on it unchanged. The class follows the
task: ``AutoModelForCausalLM`` for lm and chat, ``AutoModelForSequenceClassification`` for
classification and regression. Its tokenizer is the folder's own (or ``model.tokenizer``),
chat template included.

Reading the folder offline, running none of its code, is ``hf_load``; shrinking
``hf-config:`` is ``hf_shrink``; refusing a model that cannot fit in the device's memory,
before anything is allocated, is ``hf_memory``; the model wrapper, losses and collate are
``hf_model``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from preflight.errors import ConfigError
from preflight.smoke.encode import Encoder
from preflight.smoke.hf_load import (
    Folder,
    from_config,
    load_config,
    load_model,
    parse,
    transformers_module,
)
from preflight.smoke.hf_memory import fit
from preflight.smoke.hf_model import LOSSES, HFCollate, HFModel
from preflight.smoke.hf_shrink import positions, shrunk
from preflight.tokenizer.counter import TokenCounter
from preflight.tokenizer.load import load_tokenizer

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt",
                   "tokenizer.model")


def check(spec: str, *, base: Path | None, task: str | None, device: torch.device,
          rows: int, max_length: int, shrink: bool, needs_tokenizer: bool) -> None:
    """Fail fast, before the gate reads data: the folder, ``transformers``, ``config.json``,
    its tokenizer (``needs_tokenizer``: the rules name none) and, when the task is known, the
    class for it and the memory it needs."""
    folder = parse(spec, base=base)
    config = load_config(folder, task=task, num_labels=2)
    if needs_tokenizer:
        _tokenizer_files(folder)
    if task is not None:
        fit(folder, config, task=task, device=device, rows=rows, max_length=max_length,
            shrink=shrink)


@dataclass
class Built:
    """What ``build`` makes of a folder: the smoke seam plus what the report should say."""

    model: nn.Module
    loss_fn: Any
    collate: Any
    spec: dict[str, Any]
    notes: list[tuple[str, str]] = field(default_factory=list)  # (code, detail), info


def build(folder: Folder, *, task: str, encoder: Encoder, shrink: bool, device: torch.device,
          rows: int, center: float = 0.0, scale: float = 1.0) -> Built:
    """The folder's model behind the smoke seam, its loss and its collate. Sets
    ``encoder.vocab_size`` to the model's embedding rows: a token id past them is a row's
    ``token_id_out_of_range``, found on the CPU before a GPU sees it."""
    num_labels = max(encoder.classes or 2, 2)
    config = load_config(folder, task=task, num_labels=num_labels)
    notes: list[tuple[str, str]] = []
    pad = _pad_id(config)
    if task in ("classification", "regression") and config.pad_token_id is None:
        config.pad_token_id = pad  # sequence classifiers find the last token by it
    config, note = shrunk(folder, config, shrink=shrink)
    if note:
        notes.append(("hf_shrunk", note))
    fit(folder, config, task=task, device=device, rows=rows, max_length=encoder.max_length,
        shrink=False)
    model, missing = load_model(folder, config, task)
    if missing:
        notes.append(("hf_weights_initialised",
                      f"{len(missing)} weight(s) not in the folder, initialised at random: "
                      f"{', '.join(sorted(missing)[:5])}{' …' if len(missing) > 5 else ''}"))
    wrapped = HFModel(model, task=task, center=center, scale=scale)
    encoder.vocab_size = wrapped.vocab_rows
    length = min(encoder.max_length, positions(config) or encoder.max_length)
    spec = {"num_labels": num_labels, "center": center, "scale": scale, "pad": pad}
    return Built(model=wrapped, loss_fn=LOSSES[task], collate=HFCollate(encoder, pad, length),
                 spec=spec, notes=notes)


def rebuild(spec: str, *, task: str, saved: dict[str, Any], shrink: bool,
            device: torch.device) -> tuple[nn.Module, Any]:
    """The model a replay file was written with, at random init (its initial weights are in
    the file): the same config, head and shrink."""
    folder = parse(spec)
    config = load_config(folder, task=task, num_labels=saved["num_labels"])
    if task in ("classification", "regression") and config.pad_token_id is None:
        config.pad_token_id = saved["pad"]
    config, _ = shrunk(folder, config, shrink=shrink)
    fit(folder, config, task=task, device=device, rows=1, max_length=1, shrink=False)
    model = from_config(transformers_module(), config, task)
    return HFModel(model, task=task, center=saved["center"], scale=saved["scale"]), LOSSES[task]


def folder_tokenizer(folder: Folder) -> TokenCounter:
    """The folder's own tokenizer (chat template included); a ``ConfigError`` when it has
    none."""
    _tokenizer_files(folder)
    return load_tokenizer(str(folder.path))


def _tokenizer_files(folder: Folder) -> None:
    if not any((folder.path / name).is_file() for name in TOKENIZER_FILES):
        raise ConfigError(f"--model {folder.spec!r}: {folder.path} holds no tokenizer; save it "
                          "there with tokenizer.save_pretrained(DIR), or name one in "
                          "model.tokenizer")


def _pad_id(config: Any) -> int:
    """The id padding uses: the config's pad, else its eos, else 0 (masked either way)."""
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, int) and 0 <= value < max(vocab, 1):
            return value
    return 0
