"""Whether a model folder can train in the device's memory: a parameter count made on the
``meta`` device (nothing allocated), the bytes training needs, and the memory free on the
device and the host."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import torch

from preflight.errors import ConfigError
from preflight.smoke.hf_load import Folder, arch, from_config, transformers_module
from preflight.smoke.hf_shrink import shrunk

# fp32 weights, their gradients and AdamW's two moments; plus, on the host, the template
# and the initial state dict the runs start from.
DEVICE_COPIES = 4
HOST_COPIES = 2
# The logits of one step, kept in fp32 for the loss and its gradient (about three copies).
LOGIT_COPIES = 3


def free_memory(device: torch.device) -> int | None:
    """Bytes free for training on ``device``; None when it cannot be told."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return _host_free()


def _host_free() -> int | None:
    """Available RAM (``MemAvailable``, else free pages), capped by a cgroup v2 limit."""
    free: int | None = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    if free is None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit != "max":
            room = max(int(limit) - used, 0)
            free = room if free is None else min(free, room)
    return free


def fit(folder: Folder, config: Any, *, task: str, device: torch.device, rows: int,
        max_length: int, shrink: bool) -> None:
    """Refuse a model that cannot train in the device's memory, before allocating it."""
    config, _ = shrunk(folder, config, shrink=shrink)
    params = count_parameters(folder, config, task)
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    logits = rows * max_length * vocab * 4 * LOGIT_COPIES if task in ("lm", "chat") else 0
    need = params * 4 * DEVICE_COPIES + logits
    host = params * 4 * HOST_COPIES + (need if device.type == "cpu" else 0)
    needs = [(device.type, need)] if device.type != "cpu" else []
    for where, bytes_needed in [*needs, ("cpu", host)]:
        free = free_memory(torch.device(where))
        if free is not None and bytes_needed > free:
            raise ConfigError(
                f"--model {folder.spec!r}: {arch(config)} has {params:,} parameters; training "
                f"it needs about {_gib(bytes_needed)} on {where} (fp32 weights, gradients and "
                f"AdamW state{', and the logits of a step' if logits else ''}) but "
                f"{_gib(free)} is free. Use hf-config: with smoke.shrink: true, a smaller "
                "smoke.batch_size or smoke.max_length, or a machine with more memory")


def count_parameters(folder: Folder, config: Any, task: str) -> int:
    """Parameters of the model ``config`` makes, counted on the ``meta`` device (nothing
    allocated); a ``ConfigError`` when the class cannot be built for the task."""
    tf = transformers_module()
    with torch.device("meta"):
        model = from_config(tf, config, task, spec=folder.spec)
    return sum(p.numel() for p in model.parameters())


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"
