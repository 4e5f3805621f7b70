"""What the watch's re-runs start from when the model is too large to copy.

``snapshot="memory"`` (the default) copies the weights at the failing step and every re-run
trains a fresh copy. ``snapshot="none"`` never copies the model: each re-run loads the last
saved ``checkpoint`` into the user's model itself (a path, or a callable returning the
latest one), or, without one, runs on its current weights with the gradients zeroed. The
re-runs then train with SGD at a vanishing learning rate (no optimizer state to allocate, the
weights left as they were), and only under ``on_fault="stop"``: the run does not go on from
weights the re-runs touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torch import nn

from preflight.smoke.checkpoint import load_checkpoint
from preflight.smoke.loop import Setup

if TYPE_CHECKING:
    from preflight.watch.core import WatchCore

LIVE_LR = 1e-30  # a step of the re-runs moves no weight (float32 keeps ~7 digits)
NOT_STOPPING = ("not re-run: with snapshot='none' the re-runs use the model itself, which "
                "training goes on with under on_fault={!r} (use on_fault='stop')")


def checkpoint_path(core: WatchCore) -> Path | None:
    """The checkpoint to re-run from (the callable's answer when it is one), or None."""
    source = core.cfg.checkpoint
    found = source() if callable(source) else source
    return None if found is None else Path(found)


@dataclass
class LiveSetup(Setup):
    """A ``Setup`` whose fresh model is the user's own: loaded from the checkpoint, if any,
    with its gradients zeroed."""

    checkpoint: Path | None = None

    def fresh(self) -> nn.Module:
        """The user's model, at the checkpoint's weights when there is one."""
        model = self.template
        if self.checkpoint is not None:
            model.load_state_dict(load_checkpoint(self.checkpoint))
        model.zero_grad(set_to_none=True)
        return model
