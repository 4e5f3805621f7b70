"""A user model for `preflight smoke --model examples/smoke_model.py:build`.

A text classifier over hashed byte bigrams, with its own collate. preflight calls
``build()`` once, trains the model with its own seeded AdamW loop on a sample of your rows
and on a control batch, and reports whether a failure is the data's fault or the code's.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

BUCKETS = 512
CLASSES = 4


class BigramClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(BUCKETS, 64)
        self.out = nn.Linear(64, CLASSES)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.out(F.relu(self.hidden(inputs)))


def collate(rows: list[dict[str, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows (dicts as read from the corpus) -> (inputs, targets), one row per index of dim 0."""
    x = torch.zeros(len(rows), BUCKETS)
    for i, row in enumerate(rows):
        data = str(row.get("text") or "").encode()
        for a, b in itertools.pairwise(data):
            x[i, (a * 31 + b) % BUCKETS] += 1.0
        x[i] /= max(len(data), 1)
    label = [row.get("label") for row in rows]
    # No cleaning here: a bad label reaches the loss as it is, as in real training.
    return x, torch.tensor([v if isinstance(v, int) else -1 for v in label])


def build() -> tuple[nn.Module, Any, Any]:
    """No arguments; returns (model, loss_fn, collate). collate=None: the built-in one."""
    return BigramClassifier(), F.cross_entropy, collate
