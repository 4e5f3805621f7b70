"""The model's buffers as they were before the current step's forward.

A forward writes some buffers (BatchNorm's running statistics, ``num_batches_tracked``):
by the time a non-finite loss is seen, the failing batch has already put NaN into them.
The re-runs and the state-fault scan must start from the buffers *before* that forward,
so the watch keeps a copy, refreshed after every step that checked finite (at the
optimizer step, when that step's forward is done and the next one has not begun). With
``sync_every > 1`` the refresh is masked on the device by the step's own finite flag and
stops at the first non-finite step (no host sync). Only persistent buffers (those in the
``state_dict``) are kept; models without any cost nothing.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class BufferSnapshot:
    """A copy of a model's persistent buffers, taken before each step's forward."""

    def __init__(self, model: nn.Module) -> None:
        keys = set(model.state_dict(keep_vars=True))
        self.live = {n: b for n, b in model.named_buffers() if n in keys}
        self.kept = {n: b.detach().clone() for n, b in self.live.items()}
        self.good: torch.Tensor | None = None  # sync_every > 1: no non-finite step yet

    def keep(self, *values: object) -> None:
        """The step's forward is done: keep its buffers if its loss and norm are finite
        (floats: checked already; tensors: not yet, the copy is masked on the device)."""
        if not self.live or any(isinstance(v, float) and not math.isfinite(v) for v in values):
            return
        flags = [torch.isfinite(v).all() for v in values if isinstance(v, torch.Tensor)]
        try:
            with torch.no_grad():
                if flags:
                    finite = torch.stack([f.to(flags[0].device) for f in flags]).all()
                    self.good = finite if self.good is None else self.good & finite
                for n, b in self.live.items():
                    kept = self.kept[n]
                    if kept.shape != b.shape or kept.dtype != b.dtype:
                        self.kept[n] = kept = b.detach().clone()
                    if self.good is None:
                        kept.copy_(b)
                    else:
                        kept.copy_(torch.where(self.good.to(b.device), b, kept))
        except Exception:  # never the user's step: the last copy stays
            self.live = {}

    def restore(self, state: dict[str, torch.Tensor]) -> None:
        """Put the kept buffers into a copy of the model's ``state_dict``."""
        for n, b in self.kept.items():
            if n in state and state[n].shape == b.shape:
                state[n] = b.detach().clone()
