"""Where the smoke runs go: the device and precision, the facts the report records about
a GPU, and the torch threads the runs use on the CPU."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from preflight.config import SmokeConfig
from preflight.cores import compute_threads
from preflight.errors import ConfigError


def resolve_device(cfg: SmokeConfig) -> tuple[torch.device, str]:
    """The device and the precision the runs use (fp32 on CPU; on CUDA, ``auto`` means bf16
    where the GPU supports it, else fp16 with a GradScaler)."""
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("smoke.device is cuda but torch sees no CUDA device; "
                          "use device: auto or cpu")
    use_cuda = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    if not use_cuda:
        return torch.device("cpu"), "fp32"
    if cfg.precision == "auto":
        return torch.device("cuda"), "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return torch.device("cuda"), cfg.precision


@contextlib.contextmanager
def torch_threads() -> Iterator[int]:
    """Torch threads for the runs: the cores this process may use and that are idle now, at
    most the physical cores and 4, never more than the caller set (``OMP_NUM_THREADS``,
    ``torch.set_num_threads``); the caller's setting is restored after. The tiny models gain
    nothing from more, and a thread that waits for a busy core stalls the others."""
    before = torch.get_num_threads()
    threads = max(1, min(compute_threads(), before))
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def device_facts(device: torch.device) -> dict[str, str | None]:
    """CUDA, the GPU's name and cuDNN, for the report (nothing on the CPU)."""
    if device.type != "cuda":
        return {}
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(device),
            "cudnn": str(cudnn) if cudnn else None}
