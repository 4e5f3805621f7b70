"""A ``transformers`` model behind the smoke seam: the model wrapper, its losses and its
collate."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from preflight.smoke.encode import IGNORE, NOT_A_CLASS, Encoded, Encoder, target_window
from preflight.smoke.models import classification_loss, lm_loss, regression_loss


class HFModel(nn.Module):
    """A ``transformers`` model behind the smoke seam: ``model(inputs) -> logits`` from the
    collate's ``{"input_ids", "attention_mask"}``. A regressor's output is put on the
    targets' scale (``center + scale * output``, as the built-in regressor does), so an
    un-normalised target does not look like a model that cannot learn, and a target of 1e30
    still overflows the loss."""

    def __init__(self, model: nn.Module, *, task: str, center: float = 0.0,
                 scale: float = 1.0) -> None:
        super().__init__()
        self.model = model
        self.causal = task in ("lm", "chat")
        self.regression = task == "regression"
        self.register_buffer("center", torch.tensor(center, dtype=torch.float32))
        self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))

    @property
    def vocab_rows(self) -> int:
        """Rows of the input embedding: the token ids the model can take."""
        return int(self.model.get_input_embeddings().weight.shape[0])

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        extra = {"use_cache": False} if self.causal else {}
        out = self.model(input_ids=inputs["input_ids"],
                         attention_mask=inputs["attention_mask"], **extra)
        if self.regression:
            return self.center + self.scale * out.logits.squeeze(-1).float()
        return out.logits


def causal_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy over the labels as a causal LM takes them (unshifted, -100
    ignored): the mean over every counted token, as ``transformers`` computes it. The
    labels are shifted, not the logits: slicing the (batch, length, vocabulary) logits
    would copy them forward and backward, the costliest tensor of a small model's step."""
    shifted = torch.full_like(labels, IGNORE)
    shifted[:, :-1] = labels[:, 1:]
    return lm_loss(logits, shifted)


LOSSES = {"lm": causal_loss, "chat": causal_loss, "classification": classification_loss,
          "regression": regression_loss}


class HFCollate:
    """Rows -> ``({"input_ids", "attention_mask"}, targets)`` as a ``transformers`` model
    trains on them: padded with the pad id (attention 0), cut to ``max_length``; for lm and
    chat the targets are the labels (the ids, -100 on padding and, for chat, on every token
    the assistant does not say), for classification the class ids, for regression floats."""

    def __init__(self, encoder: Encoder, pad: int, max_length: int) -> None:
        self.encoder, self.pad, self.max_length = encoder, pad, max_length

    def __call__(self, rows: list[dict[str, Any]]) -> tuple[dict[str, torch.Tensor],
                                                            torch.Tensor]:
        enc = self.encoder.encode(rows)
        task, n = self.encoder.task, self.max_length
        causal = task in ("lm", "chat")
        xs, ys = [], []
        for e in enc:
            ids = e.ids or []
            if causal:
                labels = self._labels(e)
                # Where a label is, past a long prompt.
                start = target_window([*labels[1:], IGNORE], n)
                xs.append(ids[start : start + n])
                ys.append(labels[start : start + n])
            else:
                xs.append(ids[:n])
        width = max([len(x) for x in xs] + [1])
        input_ids = torch.full((len(enc), width), self.pad, dtype=torch.long)
        mask = torch.zeros(len(enc), width, dtype=torch.long)
        for i, x in enumerate(xs):
            input_ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
            mask[i, : len(x)] = 1
        inputs = {"input_ids": input_ids, "attention_mask": mask}
        if causal:
            targets = torch.full((len(enc), width), IGNORE, dtype=torch.long)
            for i, y in enumerate(ys):
                targets[i, : len(y)] = torch.tensor(y, dtype=torch.long)
            return inputs, targets
        if task == "classification":
            return inputs, torch.tensor(
                [e.label if e.label is not None and -2**63 <= e.label < 2**63 else NOT_A_CLASS
                 for e in enc], dtype=torch.long)
        return inputs, torch.tensor([e.target for e in enc], dtype=torch.float64).float()

    def _labels(self, e: Encoded) -> list[int]:
        ids = e.ids or []
        if e.labels is None:
            return list(ids)
        if self.encoder.task == "chat":  # labels is the assistant mask
            return [t if m else IGNORE for t, m in zip(ids, e.labels, strict=False)]
        return list(e.labels)
