"""A tiny regression model, its rows and loop for the watch tests (also a model spec:
``tests/watch/tiny.py:build`` returns (model, step_fn, None) for ``--replay``)."""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

WIDTH = 4


class Net(nn.Module):
    """Two named layers, so a fault names ``body.0`` and a parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(WIDTH, 8), nn.ReLU())
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x)).squeeze(-1)


def step_fn(model: nn.Module, batch: Any) -> torch.Tensor:
    """Forward and loss of one batch (a dict of x and y)."""
    return F.mse_loss(model(batch["x"]), batch["y"])


def build() -> tuple[nn.Module, Any, None]:
    """The model spec a watch replay reruns with."""
    torch.manual_seed(0)
    return Net(), step_fn, None


Pair = namedtuple("Pair", "x y")


def pair_step_fn(model: nn.Module, batch: Any) -> torch.Tensor:
    """``step_fn`` of a namedtuple batch (``Pair(x, y)``): reads it by attribute."""
    return F.mse_loss(model(batch.x), batch.y)


def build_pair() -> tuple[nn.Module, Any, None]:
    """The model spec a namedtuple-batch replay reruns with."""
    torch.manual_seed(0)
    return Net(), pair_step_fn, None


@dataclass
class XY:
    """A dataclass batch."""

    x: torch.Tensor
    y: torch.Tensor


@dataclass(frozen=True)
class FrozenXY:
    """A frozen dataclass batch."""

    x: torch.Tensor
    y: torch.Tensor


@dataclass
class Features:
    """A dataclass batch whose inputs are a dict of tensors, with a field ``init=False``."""

    features: dict[str, torch.Tensor]
    y: torch.Tensor
    seen: int = field(default=0, init=False)


def as_kind(kind: type, batch: dict[str, torch.Tensor]) -> Any:
    """A dict batch as one of the dataclasses above."""
    if kind is Features:
        return Features({"x": batch["x"]}, batch["y"])
    return kind(batch["x"], batch["y"])


def attr_step_fn(model: nn.Module, batch: Any) -> torch.Tensor:
    """``step_fn`` of a dataclass batch: reads it by attribute."""
    x = batch.features["x"] if hasattr(batch, "features") else batch.x
    return F.mse_loss(model(x), batch.y)


def build_attr() -> tuple[nn.Module, Any, None]:
    """The model spec a dataclass-batch replay reruns with."""
    torch.manual_seed(0)
    return Net(), attr_step_fn, None


class NaNWhenTraining(nn.Module):
    """Identity in eval mode; NaN in train mode (a frozen part that cannot train)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.nan if self.training else x


def frozen_net() -> Net:
    """``Net`` with a ``NaNWhenTraining`` at ``body.2`` (every module in train mode)."""
    torch.manual_seed(0)
    model = Net()
    model.body.append(NaNWhenTraining())
    return model


def build_frozen() -> tuple[nn.Module, Any, None]:
    """The spec of ``frozen_net``: built in train mode, as a build usually is."""
    return frozen_net(), step_fn, None


def make_rows(n: int = 64, *, nan_row: int | None = None) -> list[dict[str, Any]]:
    rows = [{"id": f"r{i}", "x": [(i % 7) / 7, 1.0, -0.5, (i % 3) / 3], "y": float(i % 3)}
            for i in range(n)]
    if nan_row is not None:
        rows[nan_row]["x"][2] = math.nan
    return rows


def collate(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    return {"x": torch.tensor([r["x"] for r in rows], dtype=torch.float32),
            "y": torch.tensor([r["y"] for r in rows], dtype=torch.float32)}


def batches(rows: list[dict[str, Any]], size: int = 8) -> list[dict[str, torch.Tensor]]:
    """The rows collated in order, ``size`` per batch (no ids)."""
    return [collate(rows[i:i + size]) for i in range(0, len(rows), size)]


def fresh(lr: float = 1e-2) -> tuple[Net, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = Net()
    return model, torch.optim.AdamW(model.parameters(), lr=lr)


def train(w: Any, model: nn.Module, opt: torch.optim.Optimizer, loader: Any, *,
          clip: float | None = 1.0, loss_of: Any = None) -> list[bool]:
    """The plain loop: w.step after the loss, before backward; what w.step returned."""
    went = []
    for batch in loader:
        loss = (loss_of or step_fn)(model, batch)
        ok = w.step(loss, batch)
        went.append(ok)
        if not ok:
            opt.zero_grad()
            continue
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad()
    return went
