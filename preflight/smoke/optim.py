"""The optimizer and learning-rate schedule of a smoke run, built from ``SmokeConfig``.

The schedules are transformers' (linear warm-up from 0, then constant, linear decay to 0,
or a half-cosine to 0), written as ``LambdaLR`` factors so transformers is not needed; the
scheduler steps once per optimizer step, after it, as the Trainer does.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable

import torch
from torch import nn

from preflight.config import SmokeConfig
from preflight.errors import ConfigError

HF_EXTRA = "pip install 'dataset-preflight[hf]' (or pip install transformers)"


def check_optimizer(cfg: SmokeConfig) -> None:
    """A ``ConfigError`` when the optimizer needs a package that is not installed."""
    if cfg.optimizer == "adafactor" and importlib.util.find_spec("transformers") is None:
        raise ConfigError(f"smoke.optimizer adafactor comes from transformers: {HF_EXTRA}; "
                          "or choose adamw or sgd")


def build_optimizer(model: nn.Module, cfg: SmokeConfig) -> torch.optim.Optimizer:
    """The optimizer over the model's trainable parameters. Weight decay skips biases and
    norm scales (parameters of one dimension), as the transformers Trainer does."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups: Iterable[torch.Tensor] | list[dict] = params
    if cfg.weight_decay:
        groups = [{"params": [p for p in params if p.ndim >= 2],
                   "weight_decay": cfg.weight_decay},
                  {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
        groups = [g for g in groups if g["params"]]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum,
                               weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adafactor":
        check_optimizer(cfg)
        from transformers.optimization import Adafactor

        # As the Trainer builds it for optim="adafactor": the given lr, no relative step.
        return Adafactor(groups, lr=cfg.lr, scale_parameter=False, relative_step=False,
                         warmup_init=False, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)


def lr_factor(step: int, *, total: int, warmup: int, kind: str) -> float:
    """The share of the peak rate at optimizer step ``step`` (0-based) of ``total``."""
    if step < warmup:
        return step / max(1, warmup)
    if kind == "constant":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    if kind == "linear":
        return max(0.0, 1.0 - progress)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))  # cosine


def build_scheduler(opt: torch.optim.Optimizer, cfg: SmokeConfig, *, total: int,
                    warmup: int) -> torch.optim.lr_scheduler.LambdaLR:
    """``cfg.scheduler`` over ``total`` optimizer steps, after ``warmup`` of them."""
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: lr_factor(step, total=total, warmup=warmup, kind=cfg.scheduler))


def run_warmup(warmup: int, *, steps: int, base_steps: int) -> int:
    """The warm-up of a run of ``steps`` when ``warmup`` was set for ``base_steps`` (runs
    over minibatches take more steps: the warm-up keeps its share)."""
    if steps == base_steps or not warmup:
        return warmup
    return math.ceil(warmup * steps / base_steps)
