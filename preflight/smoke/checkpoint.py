"""Scan a checkpoint for non-finite tensors before training starts from it, loading it
safely: safetensors, or a torch state dict with ``weights_only=True`` (never a pickle)."""

from __future__ import annotations

import re
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
                          f"containers load; no pickled code): {_why(e)}") from e
    if isinstance(state, dict) and not any(isinstance(v, torch.Tensor) for v in state.values()):
        # a training checkpoint: the weights one level down ({"model": ..., "step": 3})
        state = next((state[k] for k in NESTED if isinstance(state.get(k), dict)), state)
    if not isinstance(state, dict):
        raise ConfigError(f"{p}: expected a state dict (name -> tensor), "
                          f"got {type(state).__name__}")
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise ConfigError(f"{p}: holds no tensors (keys: {', '.join(map(str, list(state)[:8]))});"
                          " give the model's state_dict()")
    return tensors


# Where a training checkpoint keeps the weights (Lightning, common training scripts).
NESTED = ("state_dict", "model_state_dict", "model", "module")


def _why(e: Exception) -> str:
    """Why torch.load refused a file, in a line (torch's own message tells how to load it
    without weights_only, which preflight never does)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    code = re.search(r"Unsupported global: GLOBAL (\S+)", text)
    if code:
        return (f"it pickles code ({code.group(1)}): a whole object saved with torch.save? "
                "save its state_dict() (or a .safetensors file) instead")
    if isinstance(e, EOFError):
        return "the file is empty or cut short"
    if isinstance(e, KeyError) or "invalid load key" in text:
        return "not a file torch.save wrote"
    return f"{type(e).__name__}: {first_line(text)}"


def mismatch(e: RuntimeError) -> str:
    """``load_state_dict``'s refusal in a line: its missing and unexpected names and size
    mismatches (the first line alone only said it failed)."""
    details = [line.strip() for line in str(e).splitlines()[1:] if line.strip()]
    text = "; ".join(details) or first_line(e)
    return text if len(text) <= 600 else text[:600] + "…"


def scan(state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Tensor count and the names of tensors holding NaN or Inf (with how many values)."""
    bad = {}
    for name, t in state.items():
        if t.is_floating_point() or t.is_complex():
            n = int((~torch.isfinite(t)).sum())
            if n:
                bad[name] = n
    return {"tensors": len(state), "nonfinite": sorted(bad), "nonfinite_values": bad}
