"""Scan a checkpoint for non-finite tensors before training starts from it, loading it
safely: safetensors, or a torch state dict with ``weights_only=True`` (never a pickle)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from preflight.errors import ConfigError
from preflight.text import first_line


def load_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """The state dict in ``path``; a ``ConfigError`` when it cannot be loaded safely."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"checkpoint {p} is a folder: give the weights file in it (a "
                          ".safetensors file or a torch state dict), or a Hugging Face model "
                          "folder as --model hf:FOLDER")
    if not p.is_file():
        raise ConfigError(f"checkpoint not found: {p}")
    if p.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return load_file(str(p))
        except Exception as e:
            raise ConfigError(f"cannot read safetensors checkpoint {p}: {e}") from e
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # an unpickling error means it is not a plain state dict
        raise ConfigError(f"cannot load {p} with weights_only=True (only tensors and plain "
                          f"containers load; no pickled code): {first_line(e)}") from e
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ConfigError(f"{p}: expected a state dict (name -> tensor), "
                          f"got {type(state).__name__}")
    return {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}


def scan(state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Tensor count and the names of tensors holding NaN or Inf (with how many values)."""
    bad = {}
    for name, t in state.items():
        if t.is_floating_point() or t.is_complex():
            n = int((~torch.isfinite(t)).sum())
            if n:
                bad[name] = n
    return {"tensors": len(state), "nonfinite": sorted(bad), "nonfinite_values": bad}
