"""A Hugging Face model folder as the smoke test's model: ``hf:DIR`` loads the weights saved
with ``save_pretrained``, ``hf-config:DIR`` builds the architecture from ``config.json`` with
random weights (shrunk to 2 layers and a small width unless ``smoke.shrink: false``).

The folder becomes what a user's ``build()`` returns — a model, a loss and a collate — so the
smoke loop, the control batch and the localisation run on it unchanged. The class follows the
task: ``AutoModelForCausalLM`` for lm and chat, ``AutoModelForSequenceClassification`` for
classification and regression. Its tokenizer is the folder's own (or ``model.tokenizer``),
chat template included.

Loading runs no code from the folder and reaches no network: ``trust_remote_code=False``,
``local_files_only=True`` with ``HF_HUB_OFFLINE`` set, safetensors first and a pickled
``.bin`` only through ``torch.load(weights_only=True)``. A model that cannot fit in the
device's memory is refused, from a parameter count made on the ``meta`` device, before
anything is allocated. ``transformers`` is imported here only (the ``[hf]`` extra).
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from preflight.errors import ConfigError
from preflight.hf_folder import folder_of
from preflight.smoke.encode import IGNORE, NOT_A_CLASS, Encoded, Encoder, _window
from preflight.smoke.models import classification_loss, lm_loss, regression_loss
from preflight.text import first_line
from preflight.tokenizer.counter import TokenCounter
from preflight.tokenizer.load import load_tokenizer

EXTRA = "pip install 'dataset-preflight[hf]'"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt",
                   "tokenizer.model")
# What ``smoke.shrink`` keeps of an architecture: this many layers, at most this width.
SHRINK_LAYERS = 2
SHRINK_WIDTH = 64
SHRINK_HEADS = 4
# fp32 weights, their gradients and AdamW's two moments; plus, on the host, the template
# and the initial state dict the runs start from.
DEVICE_COPIES = 4
HOST_COPIES = 2
# The logits of one step, kept in fp32 for the loss and its gradient (about three copies).
LOGIT_COPIES = 3

_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_WIDTH = ("hidden_size", "n_embd", "d_model", "dim")
_HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
_INNER = ("intermediate_size", "n_inner", "d_ff", "ffn_dim", "hidden_dim",
          "moe_intermediate_size")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")
_POSITIONS = ("max_position_embeddings", "n_positions", "n_ctx")


@dataclass(frozen=True)
class Folder:
    """A parsed ``hf:``/``hf-config:`` spec: the folder and whether its weights load."""

    spec: str
    path: Path
    weights: bool

    @property
    def resolved(self) -> str:
        """The spec with the folder made absolute (what a replay file records)."""
        return f"{'hf:' if self.weights else 'hf-config:'}{self.path}"


def parse(spec: str, *, base: Path | None = None) -> Folder:
    """The folder ``spec`` names, checked: a folder, with ``config.json``, and for ``hf:``
    with a weights file. Each problem is a ``ConfigError`` that says what to do."""
    weights = spec.startswith("hf:")
    raw = spec.split(":", 1)[1]
    path = folder_of(spec, base=base)
    if not (path / "config.json").is_file():
        raise ConfigError(f"--model {spec!r}: {path} has no config.json; save the model with "
                          "model.save_pretrained(DIR) (or config.save_pretrained(DIR) for "
                          "hf-config:)")
    if weights and not any((path / name).is_file() for name in WEIGHT_FILES):
        raise ConfigError(f"--model {spec!r}: {path} has no weights ({', '.join(WEIGHT_FILES)}); "
                          f"use hf-config:{raw} to test the architecture with random weights")
    return Folder(spec=spec, path=path.resolve(), weights=weights)


def transformers_module() -> Any:
    """``transformers``, or a ``ConfigError`` naming the extra that installs it."""
    try:
        import transformers
    except ImportError as e:
        raise ConfigError(f"--model hf:/hf-config: needs transformers, which is not "
                          f"installed: {EXTRA}") from e
    return transformers


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
        _fit(folder, config, task=task, device=device, rows=rows, max_length=max_length,
             shrink=shrink)


def load_config(folder: Folder, *, task: str | None, num_labels: int) -> Any:
    """The folder's config, offline, with the head the task needs."""
    tf = transformers_module()
    with _quiet(tf):
        try:
            config = tf.AutoConfig.from_pretrained(str(folder.path), local_files_only=True,
                                                   trust_remote_code=False)
        except Exception as e:
            raise ConfigError(
                f"--model {folder.spec!r}: cannot read {folder.path / 'config.json'}: "
                f"{first_line(e)} (an unknown model_type, or one that needs the folder's own "
                "code, which preflight never runs: trust_remote_code is off)") from e
    if task in ("classification", "regression"):
        config.num_labels = 1 if task == "regression" else num_labels
        config.problem_type = ("regression" if task == "regression"
                               else "single_label_classification")
    return config


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
    config, shrunk = _shrunk(folder, config, shrink=shrink)
    if shrunk:
        notes.append(("hf_shrunk", shrunk))
    _fit(folder, config, task=task, device=device, rows=rows, max_length=encoder.max_length,
         shrink=False)
    model, missing = _load(folder, config, task)
    if missing:
        notes.append(("hf_weights_initialised",
                      f"{len(missing)} weight(s) not in the folder, initialised at random: "
                      f"{', '.join(sorted(missing)[:5])}{' …' if len(missing) > 5 else ''}"))
    wrapped = HFModel(model, task=task, center=center, scale=scale)
    encoder.vocab_size = wrapped.vocab_rows
    length = min(encoder.max_length, _positions(config) or encoder.max_length)
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
    config, _ = _shrunk(folder, config, shrink=shrink)
    _fit(folder, config, task=task, device=device, rows=1, max_length=1, shrink=False)
    model = _from_config(transformers_module(), config, task)
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


class HFModel(nn.Module):
    """A ``transformers`` model behind the smoke seam: ``model(inputs) -> logits`` from the
    collate's ``{"input_ids", "attention_mask"}``. A regressor's output is put on the
    targets' scale (``center + scale * output``, as the built-in regressor does), so an
    un-normalised target does not look like a model that cannot learn, and a target of 1e30
    still overflows the loss."""

    def __init__(self, model: nn.Module, *, task: str, center: float = 0.0,
                 scale: float = 1.0) -> None:
        super().__init__()
        self.model = model
        self.causal = task in ("lm", "chat")
        self.regression = task == "regression"
        self.register_buffer("center", torch.tensor(center, dtype=torch.float32))
        self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))

    @property
    def vocab_rows(self) -> int:
        """Rows of the input embedding: the token ids the model can take."""
        return int(self.model.get_input_embeddings().weight.shape[0])

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        extra = {"use_cache": False} if self.causal else {}
        out = self.model(input_ids=inputs["input_ids"],
                         attention_mask=inputs["attention_mask"], **extra)
        if self.regression:
            return self.center + self.scale * out.logits.squeeze(-1).float()
        return out.logits


def causal_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy over the labels as a causal LM takes them (unshifted, -100
    ignored): the mean over every counted token, as ``transformers`` computes it. The
    labels are shifted, not the logits: slicing the (batch, length, vocabulary) logits
    would copy them forward and backward, the costliest tensor of a small model's step."""
    shifted = torch.full_like(labels, IGNORE)
    shifted[:, :-1] = labels[:, 1:]
    return lm_loss(logits, shifted)


LOSSES = {"lm": causal_loss, "chat": causal_loss, "classification": classification_loss,
          "regression": regression_loss}


class HFCollate:
    """Rows -> ``({"input_ids", "attention_mask"}, targets)`` as a ``transformers`` model
    trains on them: padded with the pad id (attention 0), cut to ``max_length``; for lm and
    chat the targets are the labels (the ids, -100 on padding and, for chat, on every token
    the assistant does not say), for classification the class ids, for regression floats."""

    def __init__(self, encoder: Encoder, pad: int, max_length: int) -> None:
        self.encoder, self.pad, self.max_length = encoder, pad, max_length

    def __call__(self, rows: list[dict[str, Any]]) -> tuple[dict[str, torch.Tensor],
                                                            torch.Tensor]:
        enc = self.encoder.encode(rows)
        task, n = self.encoder.task, self.max_length
        causal = task in ("lm", "chat")
        xs, ys = [], []
        for e in enc:
            ids = e.ids or []
            if causal:
                labels = self._labels(e)
                start = _window([*labels[1:], IGNORE], n)  # where a label is, past a long prompt
                xs.append(ids[start : start + n])
                ys.append(labels[start : start + n])
            else:
                xs.append(ids[:n])
        width = max([len(x) for x in xs] + [1])
        input_ids = torch.full((len(enc), width), self.pad, dtype=torch.long)
        mask = torch.zeros(len(enc), width, dtype=torch.long)
        for i, x in enumerate(xs):
            input_ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
            mask[i, : len(x)] = 1
        inputs = {"input_ids": input_ids, "attention_mask": mask}
        if causal:
            targets = torch.full((len(enc), width), IGNORE, dtype=torch.long)
            for i, y in enumerate(ys):
                targets[i, : len(y)] = torch.tensor(y, dtype=torch.long)
            return inputs, targets
        if task == "classification":
            return inputs, torch.tensor(
                [e.label if e.label is not None and -2**63 <= e.label < 2**63 else NOT_A_CLASS
                 for e in enc], dtype=torch.long)
        return inputs, torch.tensor([e.target for e in enc], dtype=torch.float64).float()

    def _labels(self, e: Encoded) -> list[int]:
        ids = e.ids or []
        if e.labels is None:
            return list(ids)
        if self.encoder.task == "chat":  # labels is the assistant mask
            return [t if m else IGNORE for t, m in zip(ids, e.labels, strict=False)]
        return list(e.labels)


def free_memory(device: torch.device) -> int | None:
    """Bytes free for training on ``device``; None when it cannot be told."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return _host_free()


def _host_free() -> int | None:
    """Available RAM (``MemAvailable``, else free pages), capped by a cgroup v2 limit."""
    free: int | None = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    if free is None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit != "max":
            room = max(int(limit) - used, 0)
            free = room if free is None else min(free, room)
    return free


def _fit(folder: Folder, config: Any, *, task: str, device: torch.device, rows: int,
         max_length: int, shrink: bool) -> None:
    """Refuse a model that cannot train in the device's memory, before allocating it."""
    config, _ = _shrunk(folder, config, shrink=shrink)
    params = count_parameters(folder, config, task)
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    logits = rows * max_length * vocab * 4 * LOGIT_COPIES if task in ("lm", "chat") else 0
    need = params * 4 * DEVICE_COPIES + logits
    host = params * 4 * HOST_COPIES + (need if device.type == "cpu" else 0)
    needs = [(device.type, need)] if device.type != "cpu" else []
    for where, bytes_needed in [*needs, ("cpu", host)]:
        free = free_memory(torch.device(where))
        if free is not None and bytes_needed > free:
            raise ConfigError(
                f"--model {folder.spec!r}: {_arch(config)} has {params:,} parameters; training "
                f"it needs about {_gib(bytes_needed)} on {where} (fp32 weights, gradients and "
                f"AdamW state{', and the logits of a step' if logits else ''}) but "
                f"{_gib(free)} is free. Use hf-config: with smoke.shrink: true, a smaller "
                "smoke.batch_size or smoke.max_length, or a machine with more memory")


def count_parameters(folder: Folder, config: Any, task: str) -> int:
    """Parameters of the model ``config`` makes, counted on the ``meta`` device (nothing
    allocated); a ``ConfigError`` when the class cannot be built for the task."""
    tf = transformers_module()
    with torch.device("meta"):
        model = _from_config(tf, config, task, spec=folder.spec)
    return sum(p.numel() for p in model.parameters())


def _from_config(tf: Any, config: Any, task: str, *, spec: str = "") -> nn.Module:
    cls = _class(tf, task)
    with _quiet(tf):
        try:
            return cls.from_config(config, trust_remote_code=False, dtype=torch.float32)
        except Exception as e:
            raise ConfigError(_no_class(spec, config, cls, task, e)) from e


def _load(folder: Folder, config: Any, task: str) -> tuple[nn.Module, set[str]]:
    """The model: its weights from the folder (``hf:``) or random init (``hf-config:``);
    with the names of the weights the folder did not hold (a new head)."""
    tf = transformers_module()
    if not folder.weights:
        return _from_config(tf, config, task, spec=folder.spec), set()
    cls = _class(tf, task)
    with _quiet(tf):
        try:
            model, info = cls.from_pretrained(
                str(folder.path), config=config, local_files_only=True,
                trust_remote_code=False, use_safetensors=None, weights_only=True,
                dtype=torch.float32, ignore_mismatched_sizes=True, output_loading_info=True)
        except ValueError as e:
            if "Unrecognized configuration class" in str(e):
                raise ConfigError(_no_class(folder.spec, config, cls, task, e)) from e
            raise ConfigError(_unloadable(folder, e)) from e
        except Exception as e:  # an UnpicklingError: a .bin that is more than tensors
            raise ConfigError(_unloadable(folder, e)) from e
    missing = set(info.get("missing_keys") or ()) | {
        str(k[0]) if isinstance(k, tuple) else str(k) for k in info.get("mismatched_keys") or ()}
    return model, missing


def _unloadable(folder: Folder, e: Exception) -> str:
    return (f"--model {folder.spec!r}: cannot load the weights in {folder.path}: "
            f"{type(e).__name__}: {first_line(e)} (preflight loads safetensors, or a .bin "
            "only with torch.load(weights_only=True), which refuses pickled code; convert "
            "it with model.save_pretrained(DIR, safe_serialization=True))")


def _no_class(spec: str, config: Any, cls: Any, task: str, e: Exception) -> str:
    return (f"--model {spec!r}: {_arch(config)} cannot be built as {cls.__name__} "
            f"(the {task} task): {first_line(e)}")


def _class(tf: Any, task: str) -> Any:
    if task in ("lm", "chat"):
        return tf.AutoModelForCausalLM
    return tf.AutoModelForSequenceClassification


def _shrunk(folder: Folder, config: Any, *, shrink: bool) -> tuple[Any, str | None]:
    """``config`` shrunk when ``hf-config:`` and ``smoke.shrink`` (else itself), and a note
    saying from what to what."""
    if folder.weights or not shrink:
        return config, None
    small = shrink_config(config)
    before, after = _size(config), _size(small)
    if before == after:
        return small, None
    return small, (f"hf-config: {_arch(config)} shrunk to {after} (from {before}); same "
                   "class, vocabulary and special tokens (smoke.shrink: false for the real "
                   "size)")


def shrink_config(config: Any) -> Any:
    """A copy of ``config`` with the same architecture, vocabulary and special tokens but
    ``SHRINK_LAYERS`` layers and a small width (the head count dividing it); the attribute
    names are found generically (``num_hidden_layers``/``n_layer``, ``hidden_size``/``n_embd``,
    ``intermediate_size``/``n_inner``, heads, key-value heads, head_dim, experts)."""
    small = copy.deepcopy(config)
    for name in _LAYERS:
        value = getattr(small, name, None)
        if isinstance(value, int) and value > SHRINK_LAYERS:
            setattr(small, name, SHRINK_LAYERS)
    layers = _first(small, _LAYERS)
    types = getattr(small, "layer_types", None)
    if isinstance(types, list) and layers is not None:
        small.layer_types = types[: getattr(small, layers)]
    width_name, heads_name = _first(small, _WIDTH), _first(small, _HEADS)
    if width_name is None:
        return small
    width = getattr(small, width_name)
    heads = getattr(small, heads_name) if heads_name else 1
    new_heads = min(heads, SHRINK_HEADS)
    new_width = new_heads * max(8, min(width, SHRINK_WIDTH) // new_heads)
    if new_width >= width:
        return small
    setattr(small, width_name, new_width)
    if heads_name:
        setattr(small, heads_name, new_heads)
    kv = getattr(small, "num_key_value_heads", None)
    if isinstance(kv, int) and heads_name:
        new_kv = max(1, new_heads * kv // heads)
        while new_heads % new_kv:
            new_kv -= 1
        small.num_key_value_heads = new_kv
    if isinstance(getattr(small, "head_dim", None), int):
        small.head_dim = new_width // new_heads
    for name in _INNER:
        value = getattr(small, name, None)
        if isinstance(value, int) and value > 4 * new_width:
            setattr(small, name, 4 * new_width)
    experts = _first(small, _EXPERTS)
    if experts is not None:
        setattr(small, experts, min(getattr(small, experts), 4))
        per = getattr(small, "num_experts_per_tok", None)
        if isinstance(per, int):
            small.num_experts_per_tok = min(per, getattr(small, experts))
    return small


def _first(config: Any, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if isinstance(getattr(config, n, None), int)), None)


def _size(config: Any) -> str:
    layers, width = _first(config, _LAYERS), _first(config, _WIDTH)
    parts = []
    if layers:
        parts.append(f"{getattr(config, layers)} layers")
    if width:
        parts.append(f"width {getattr(config, width)}")
    return ", ".join(parts) or "its size"


def _positions(config: Any) -> int | None:
    name = _first(config, _POSITIONS)
    return getattr(config, name) if name else None


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


def _arch(config: Any) -> str:
    names = getattr(config, "architectures", None) or [type(config).__name__]
    return str(names[0])


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


@contextlib.contextmanager
def _quiet(tf: Any) -> Iterator[None]:
    """Offline (``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE``) with transformers' progress
    bars and info logs off (only the CLI writes to the console); all restored after."""
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update(dict.fromkeys(saved, "1"))
    logging = tf.utils.logging
    verbosity = logging.get_verbosity()
    bars = logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
