"""The built-in tiny models, one per task, and their losses: small enough that 100 rows
times a few dozen steps take seconds on two CPU cores, big enough to overfit 100 rows."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from preflight.smoke.encode import IGNORE

WIDTH = 64


class TinyLM(nn.Module):
    """A causal LM: each position sees its token and the one before (enough to learn the
    next token of a fixed pattern), then a small MLP and the output layer."""

    def __init__(self, vocab: int, width: int = WIDTH) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.prev = nn.Linear(width, width, bias=False)
        self.mlp = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width * 2), nn.GELU(),
                                 nn.Linear(width * 2, width))
        self.head = nn.Linear(width, vocab)

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        h = self.embed(inputs["ids"])
        before = F.pad(h, (0, 0, 1, 0))[:, :-1]  # causal: position t sees t-1, never t+1
        h = h + self.prev(before)
        return self.head(h + self.mlp(h))


class TinyNet(nn.Module):
    """A classifier or regressor over mean-pooled token embeddings and/or features. A
    regressor predicts ``center + scale * head(...)``: on the targets' own scale (so a target
    of 1e30 still overflows the loss) with steps sized to it (so 2000 ± 5 trains as well as
    0 ± 1)."""

    def __init__(self, *, vocab: int | None, features: int | None, outputs: int,
                 width: int = WIDTH, center: float = 0.0, scale: float = 1.0) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width) if vocab else None
        self.project = nn.Linear(features, width) if features else None
        trunk = width * (bool(vocab) + bool(features))
        self.mlp = nn.Sequential(nn.Linear(trunk, width), nn.GELU())
        self.head = nn.Linear(width, outputs)
        self.regression = outputs == 1
        self.register_buffer("center", torch.tensor(center, dtype=torch.float32))
        self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        parts = []
        if self.embed is not None:
            mask = inputs["mask"].unsqueeze(-1).to(self.embed.weight.dtype)
            summed = (self.embed(inputs["ids"]) * mask).sum(1)
            parts.append(summed / mask.sum(1).clamp(min=1))
        if self.project is not None:
            parts.append(self.project(inputs["features"]))
        out = self.head(self.mlp(torch.cat(parts, dim=-1)))
        if not self.regression:
            return out
        return self.center + self.scale * out.squeeze(-1).float()


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean token loss over every counted token of the batch (-100 ignored). A row with no
    target at all adds nothing here; the encoder reports rows whose labels are all ignored,
    which trainers that average per sequence would turn into 0/0. The logits are flattened
    to (tokens, vocabulary): a softmax along contiguous memory, a quarter faster than over
    the transposed layout."""
    flat = logits.reshape(-1, logits.shape[-1]).float()
    per_token = F.cross_entropy(flat, targets.reshape(-1), ignore_index=IGNORE,
                                reduction="sum")
    return per_token / (targets != IGNORE).sum().clamp(min=1)


def classification_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over classes."""
    return F.cross_entropy(logits.float(), targets)


def regression_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean squared error (a target of 1e30 squares past float32: inf)."""
    return F.mse_loss(outputs.float(), targets.float())


LOSSES = {"lm": lm_loss, "chat": lm_loss, "classification": classification_loss,
          "regression": regression_loss}


def build_builtin(task: str, spec: dict[str, Any]) -> tuple[nn.Module, Any]:
    """A fresh built-in model for ``task`` from its spec (kept in the replay file)."""
    if task in ("lm", "chat"):
        return TinyLM(spec["vocab"]), LOSSES[task]
    if task == "classification":
        model = TinyNet(vocab=spec.get("vocab"), features=spec.get("features"),
                        outputs=max(spec["classes"], 2))
    else:
        model = TinyNet(vocab=spec.get("vocab"), features=spec.get("features"), outputs=1,
                        center=spec.get("center", 0.0), scale=spec.get("scale", 1.0))
    return model, LOSSES[task]
