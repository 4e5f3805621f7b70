"""The watch's periodic statistics: a ``stats.jsonl`` line every ``log_every`` steps (loss,
gradient norm, AMP scale, lr, the largest |gradient| per module). A log that cannot be
written is warned about once; the checks go on."""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from preflight.watch.core import Step, WatchCore


def grad_max(names: dict[int, str], optimizer: torch.optim.Optimizer) -> dict[str, float]:
    """The largest |gradient| per module (a parameter's name without its last part)."""
    named = [
        (names.get(id(p), "?"), p.grad)
        for g in optimizer.param_groups
        for p in g["params"]
        if p.grad is not None
    ]
    tops = torch.stack([torch.linalg.vector_norm(g, math.inf).float() for _, g in named])
    out: dict[str, float] = {}
    for (name, _), top in zip(named, tops.tolist(), strict=True):
        module = name.rpartition(".")[0] or name
        out[module] = max(out.get(module, 0.0), top)
    return out


def log(core: WatchCore, s: Step) -> None:
    """Append step ``s`` to ``stats.jsonl``."""
    line = {
        "step": s.step,
        "loss": num(s.loss),
        "grad_norm": num(s.norm),
        "scale": s.scale,
        "lr": s.lr,
        "skipped": s.skipped,
        "grad_max": s.grad_max or {},
    }
    try:
        with core.stats_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line, allow_nan=False) + "\n")
    except OSError as e:  # the log is lost, never the checks: say so once
        if not getattr(core, "stats_failed", False):
            core.stats_failed = True
            warnings.warn(
                f"preflight.watch cannot write {core.stats_path} ({e}); the "
                "statistics are not logged, the checks go on",
                RuntimeWarning,
                stacklevel=_user_level(),
            )


def num(x: Any) -> float | None:
    """A finite float as itself; anything else (a tensor not read, NaN) as None."""
    return x if isinstance(x, float) and math.isfinite(x) else None


def _user_level() -> int:
    """The ``stacklevel`` of the first frame outside preflight (the user's own line)."""
    root = str(Path(__file__).resolve().parents[1]) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frame, level = frame.f_back, level + 1
    return level
