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
        self.update: Any = None  # our wrapper of scaler.update, while it is in place
        self._wrap_update()
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

    def _wrap_update(self) -> None:
        """``scaler.update()`` ends an optimizer step, applied or skipped: a step the
        scaler skipped (inf gradients in fp16) never calls ``optimizer.step()``, so the
        optimizer's pre-hook never cleared its micro-batches, and they sat in the next
        step's search for the batch to blame (an earlier, never applied step named)."""
        original = getattr(self.scaler, "update", None)
        if self.scaler is None or not callable(original):
            return
        core = self.core

        def update(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            finally:
                if self.update is update:  # this watch still runs
                    with core.lock:
                        core.micro.clear()
                        self.take_norm()  # a clip of the skipped step's gradients

        try:
            self.scaler.update = update
        except (AttributeError, TypeError):  # a scaler that takes no attributes
            return
        self.update, self.original_update = update, original

    def remove(self) -> None:
        update, self.update = self.update, None
        if update is not None and getattr(self.scaler, "__dict__", {}).get("update") is update:
            if getattr(self.original_update, "__self__", None) is self.scaler and \
                    getattr(self.original_update, "__func__", None) is getattr(
                        type(self.scaler), "update", None):
                del self.scaler.update  # the class's own method again
            else:
                self.scaler.update = self.original_update
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
