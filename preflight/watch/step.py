"""One training step as the watch saw it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

MICRO_LIMIT = 64  # micro-batches kept for one optimizer step (gradient accumulation)


@dataclass
class Step:
    """One training step as the core saw it (tensors until checked, then floats)."""

    step: int
    batch: Any
    loss: Any = None
    norm: Any = None
    scale: float | None = None
    lr: float | None = None
    grad_max: dict[str, float] | None = None
    skipped: bool = False
    checked: bool = False
    # the (step, batch) of each step whose gradients this optimizer step applies (more
    # than one with gradient accumulation), kept until it is judged
    micro: list[tuple[int, Any]] = field(default_factory=list)
    micro_seen: int = 0  # how many there were (more than ``micro`` keeps past the limit)
    notes: list[str] = field(default_factory=list)
    # each module's ``training`` flag when its batch came (``model.modules()`` order): the
    # re-runs run in the mode the step ran in; dropped once the step is judged
    modes: tuple[bool, ...] | None = None
    started: float = field(default_factory=time.monotonic)  # when its batch came (step time)


class MicroBatches(list[tuple[int, Any]]):
    """The (step, batch) of each step since the last optimizer step: the first
    ``MICRO_LIMIT - 1`` and the latest are kept (memory stays bounded while the first of a
    long accumulation can still be blamed), ``seen`` counts them all."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def append(self, item: tuple[int, Any]) -> None:
        self.seen += 1
        if len(self) < MICRO_LIMIT:
            super().append(item)
        else:
            self[-1] = item

    def clear(self) -> None:
        super().clear()
        self.seen = 0
