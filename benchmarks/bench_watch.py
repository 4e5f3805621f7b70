"""Benchmark the overhead of ``preflight.watch`` on a plain PyTorch training loop.

Usage::

    python benchmarks/bench_watch.py [--rounds 7] [--steps 30] [--threads 1] [--no-clip]
                                     [--device cpu|cuda]

A small GPT-2-style model (pure torch: token and position embeddings, pre-LN blocks of
causal self-attention and a GELU MLP, tied output layer; by default 4 layers, width 128,
8 heads, vocabulary 4,096, context 128, batch 8: 1.3M parameters) trains with AdamW and
gradient clipping at 1.0 on random token ids (seeded; the same batches for both loops).
In one run, rounds alternate between the bare loop and the same loop under
``preflight.watch(model, optimizer, step_fn=...)`` with default settings (``w.step`` each
step, the optimizer pre-hook, stats every 100 steps), each round ``--steps`` steps after
one warm-up step; the figure is the median steps/s of each over the rounds, and their
ratio. Rounds interleave so that a busy machine slows both alike. ``--no-clip``: the loop
does not clip, so the watch computes the gradient norm itself. On a shared machine the
ratio is noisy, so the script also times the watch's own per-step work alone
(``watch_ms_per_step``, and its share of a bare step).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

import preflight


class Block(nn.Module):
    """A pre-LN transformer block: causal self-attention, then an MLP."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """GPT-2's shape at a small size."""

    def __init__(self, vocab: int, context: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def step_fn(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(batch["ids"][:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["ids"][:, 1:].reshape(-1))


def run(model: nn.Module, opt: torch.optim.Optimizer, batches: list, *, clip: bool,
        out: Path | None, sync: bool) -> float:
    """Steps per second of one round (after one warm-up step)."""
    def one(batch: dict, w: object | None) -> None:
        loss = step_fn(model, batch)
        if w is not None:
            w.step(loss, batch)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    def loop(w: object | None) -> float:
        one(batches[0], w)
        if sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for batch in batches[1:]:
            one(batch, w)
        if sync:
            torch.cuda.synchronize()
        return (len(batches) - 1) / (time.perf_counter() - t0)

    if out is None:
        return loop(None)
    with preflight.watch(model, opt, step_fn=step_fn, out=out) as w:
        return loop(w)


def watch_cost(model: nn.Module, opt: torch.optim.Optimizer, batches: list, out: Path, *,
               clip: bool, reps: int = 300) -> float:
    """Seconds the watch itself adds per step, timed alone (far less noisy than a ratio of
    two loops on a shared machine): ``w.step`` and the optimizer pre-hook on real
    gradients of this model, ``reps`` times; with ``clip``, the clip's norm handed over as
    the loop's clip would (its cost is the loop's, so it is subtracted); without, the
    watch computes the norm itself."""
    loss = step_fn(model, batches[0])
    loss.backward()
    loss = loss.detach()
    with preflight.watch(model, opt, step_fn=step_fn, out=out) as w:
        t0 = time.perf_counter()
        for i in range(reps):
            w.step(loss, batches[i % len(batches)])
            if clip:  # what the loop's clip hands over
                w.core.order.clipped(torch.nn.utils.get_total_norm(
                    [p.grad for p in model.parameters()]))
            w.core._pre_step(opt, (), {})
        spent = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(reps if clip else 0):  # the clip's norm: the loop pays it anyway
            torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        spent -= time.perf_counter() - t0
    opt.zero_grad(set_to_none=True)
    return max(spent, 0.0) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--no-clip", action="store_true")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    vocab, context = args.vocab, 128
    model = GPT(vocab, context, args.width, args.layers, heads=8).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(0)
    batches = [{"ids": torch.randint(0, vocab, (args.batch, context + 1), generator=g).to(device)}
               for _ in range(args.steps + 1)]
    bare, watched = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            for use in order:
                rate = run(model, opt, batches, clip=not args.no_clip,
                           out=Path(tmp) / f"w{r}" if use else None,
                           sync=device.type == "cuda")
                (watched if use else bare).append(rate)
        cost = watch_cost(model, opt, batches, Path(tmp) / "cost", clip=not args.no_clip)
    b, w = statistics.median(bare), statistics.median(watched)
    result = {
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "device": str(device)},
        "params": sum(p.numel() for p in model.parameters()),
        "settings": vars(args),
        "bare_steps_per_s": round(b, 3), "watched_steps_per_s": round(w, 3),
        "overhead_pct": round(100 * (b / w - 1), 2),
        "watch_ms_per_step": round(1000 * cost, 3),
        "watch_share_of_step_pct": round(100 * cost * b, 3),
        "rounds": {"bare": [round(x, 3) for x in bare],
                   "watched": [round(x, 3) for x in watched]},
    }
    assert math.isfinite(result["overhead_pct"])
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
