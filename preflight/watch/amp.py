"""The order of an AMP step: scale -> backward -> unscale_ -> clip -> step -> update.

Clipping before ``unscale_`` clips the *scaled* gradients: the threshold then means
nothing (with a scale of 65536 every step is clipped hard). The check wraps
``torch.nn.utils.clip_grad_norm_`` while the watch runs: a call while the GradScaler has
not unscaled the watched optimizer is warned about once. The wrapper also keeps the norm
the clip returned (the total norm before clipping), so the watch does not compute it
twice. A loop that imported ``clip_grad_norm_`` by name before the watch started is not
seen; the watch then computes the norm itself and cannot check the order.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from preflight.report.model import SmokeFinding

_ACTIVE: list[OrderCheck] = []
_PAUSED: list[bool] = []  # the watch's own re-runs clip too: not the loop's calls
_ORIGINAL = torch.nn.utils.clip_grad_norm_


class OrderCheck:
    """Watches ``clip_grad_norm_`` calls for one optimizer (and its GradScaler)."""

    def __init__(self, core: Any, optimizer: torch.optim.Optimizer, scaler: Any) -> None:
        self.core, self.optimizer, self.scaler = core, optimizer, scaler
        self.norm: torch.Tensor | None = None
        self.warned = False
        if not _ACTIVE:
            torch.nn.utils.clip_grad_norm_ = _clip  # type: ignore[assignment]
        _ACTIVE.append(self)

    def take_norm(self) -> torch.Tensor | None:
        """The norm the loop's clip returned since the last optimizer step, once."""
        norm, self.norm = self.norm, None
        return norm

    def clipped(self, norm: torch.Tensor) -> None:
        self.norm = norm
        if self.warned or self.scaler is None or not self.scaler.is_enabled():
            return
        from torch.amp.grad_scaler import OptState

        # The scaler forgets an optimizer after update(): no entry means not unscaled yet.
        state = getattr(self.scaler, "_per_optimizer_states", {}).get(id(self.optimizer))
        if state is not None and state.get("stage") is not OptState.READY:
            return
        self.warned = True
        detail = ("clip_grad_norm_ ran before scaler.unscale_(optimizer): it clipped the "
                  "scaled gradients; call scaler.unscale_(optimizer) first (scale -> "
                  "backward -> unscale_ -> clip -> step -> update)")
        self.core.findings.append(SmokeFinding(code="clip_before_unscale", detail=detail))
        warnings.warn(f"preflight.watch: {detail}", RuntimeWarning, stacklevel=4)

    def remove(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if not _ACTIVE:
            torch.nn.utils.clip_grad_norm_ = _ORIGINAL


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Clip calls inside the block (the watch's re-runs) are not the loop's."""
    _PAUSED.append(True)
    try:
        yield
    finally:
        _PAUSED.pop()


@functools.wraps(_ORIGINAL)
def _clip(*args: Any, **kwargs: Any) -> torch.Tensor:
    norm = _ORIGINAL(*args, **kwargs)
    if not _PAUSED:
        for check in list(_ACTIVE):
            check.clipped(norm)
    return norm
