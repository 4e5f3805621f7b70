"""What the run happened on, for reproducing it: the command, versions, platform, the
working directory's git commit, the container and GPU when there are ones, and the model the
smoke test trained with a hash of its files. Fields that do not apply are left out."""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from preflight.source.tracked import hash_file


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """The git commit of the current directory, or None outside a repository."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def environment() -> dict[str, Any]:
    """The environment block of the report (torch's version is read without importing it)."""
    facts: dict[str, Any] = {
        "preflight": _version("dataset-preflight"),
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
        "command": shlex.join(["preflight", *sys.argv[1:]]) if _is_cli() else None,
        "polars": _version("polars"),
        "pyarrow": _version("pyarrow"),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "tokenizers": _version("tokenizers"),
        "datasets": _version("datasets"),
        "cuda": None,
        "gpu": None,
        "nvidia_driver": _nvidia_driver(),
        "git_commit": git_commit(),
        **_container(),
        "seed": None,
    }
    return facts


def model_facts(spec: str | None, checkpoint: str | None) -> dict[str, Any]:
    """The model the smoke test trained and an xxh3-128 of each file it came from (the
    user's module, an HF folder's weights and config, a checkpoint)."""
    if not spec:
        return {}
    files: list[Path] = []
    kind, _, rest = spec.partition(":")
    if kind in ("hf", "hf-config") and Path(rest).is_dir():
        folder = Path(rest)
        names = ("config.json",) if kind == "hf-config" else ("config.json", "*.safetensors",
                                                               "*.bin")
        files = sorted({p for pattern in names for p in folder.glob(pattern)})
    elif ":" in spec and spec.rsplit(":", 1)[0].endswith(".py"):
        files = [Path(spec.rsplit(":", 1)[0])]
    if checkpoint:
        files.append(Path(checkpoint))
    hashes = {p.name: hash_file(p) for p in files if p.is_file()}
    facts: dict[str, Any] = {"model": spec}
    if hashes:
        facts["model_files_xxh3"] = ", ".join(f"{n}={h}" for n, h in hashes.items())
    return facts


def _is_cli() -> bool:
    return Path(sys.argv[0]).name in ("preflight", "__main__.py") if sys.argv else False


def _nvidia_driver() -> str | None:
    """The NVIDIA kernel driver's version, read without CUDA (None on other machines)."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    m = re.search(r"Kernel Module\s+([\d.]+)", text)
    return m[1] if m else None


# Variables a container platform or a build sets to the image the job runs in.
_IMAGE_VARS = ("PREFLIGHT_IMAGE", "CONTAINER_IMAGE", "IMAGE_DIGEST", "DOCKER_IMAGE",
               "SINGULARITY_CONTAINER", "APPTAINER_CONTAINER")


def _container() -> dict[str, str]:
    """The container image (from the environment) and the container id (from /proc)."""
    facts = {}
    image = next((os.environ[v] for v in _IMAGE_VARS if os.environ.get(v)), None)
    if image:
        facts["container_image"] = image
    try:
        cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroup = ""
    if m := re.search(r"(?:docker|containerd|cri-o|libpod)[-/:]([0-9a-f]{64})", cgroup):
        facts["container_id"] = m[1][:12]
    return facts
