"""A model config's size, read generically (``num_hidden_layers``/``n_layer``,
``hidden_size``/``n_embd``, ...), and ``hf-config:`` shrunk to a few layers and a small width
for the smoke test (``smoke.shrink``)."""

from __future__ import annotations

import copy
from typing import Any

from preflight.smoke.hf_load import Folder, arch

# What ``smoke.shrink`` keeps of an architecture: this many layers, at most this width.
SHRINK_LAYERS = 2
SHRINK_WIDTH = 64
SHRINK_HEADS = 4

_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_WIDTH = ("hidden_size", "n_embd", "d_model", "dim")
_HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
_INNER = ("intermediate_size", "n_inner", "d_ff", "ffn_dim", "hidden_dim",
          "moe_intermediate_size")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")
_POSITIONS = ("max_position_embeddings", "n_positions", "n_ctx")


def shrunk(folder: Folder, config: Any, *, shrink: bool) -> tuple[Any, str | None]:
    """``config`` shrunk when ``hf-config:`` and ``smoke.shrink`` (else itself), and a note
    saying from what to what."""
    if folder.weights or not shrink:
        return config, None
    small = shrink_config(config)
    before, after = _size(config), _size(small)
    if before == after:
        return small, None
    return small, (f"hf-config: {arch(config)} shrunk to {after} (from {before}); same "
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


def positions(config: Any) -> int | None:
    """The longest sequence the architecture takes (``max_position_embeddings``, ...)."""
    name = _first(config, _POSITIONS)
    return getattr(config, name) if name else None

