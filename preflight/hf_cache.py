"""The local Hugging Face caches, read offline: where they are and what they hold.

preflight never downloads. A tokenizer named like a hub repository (``gpt2``,
``org/name``, ``org/name@revision``) is looked up in the hub cache the way ``transformers``
does with ``local_files_only=True``: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub`` (``$XDG_CACHE_HOME`` respected), in the layout
``models--org--name/refs/main`` → ``snapshots/<commit>/``. A dataset named ``org/name`` is
looked up in the ``datasets`` cache (``$HF_DATASETS_CACHE``, else ``$HF_HOME/datasets``) by
``preflight.source.hub``. The variables are read at each call, not at import.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# A hub repository id, optionally with a revision: "gpt2", "org/name", "org/name@v1.0".
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?(@[\w./-]+)?")


def _hf_home() -> Path:
    if home := os.environ.get("HF_HOME"):
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(xdg).expanduser() / "huggingface"


def hub_cache_dir() -> Path:
    """The hub cache ``transformers`` and ``huggingface_hub`` read (models, tokenizers)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if value := os.environ.get(var):
            return Path(value).expanduser()
    return _hf_home() / "hub"


def datasets_cache_dir() -> Path:
    """The cache ``datasets.load_dataset`` writes prepared datasets to."""
    if value := os.environ.get("HF_DATASETS_CACHE"):
        return Path(value).expanduser()
    return _hf_home() / "datasets"


def looks_like_repo_id(name: str) -> bool:
    """True when ``name`` has the shape of a hub repository id (and is not a file name
    such as ``tokenizer.json``)."""
    return bool(_REPO_ID.fullmatch(name)) and not name.lower().endswith(".json")


def cached_snapshot(repo_id: str, kind: str = "model") -> Path | None:
    """The folder of ``repo_id``'s cached snapshot (``org/name@revision``: that revision,
    default ``main``), or None when the cache does not hold it."""
    name, _, revision = repo_id.partition("@")
    repo = hub_cache_dir() / f"{kind}s--{name.replace('/', '--')}"
    revision = revision or "main"
    ref = repo / "refs" / revision
    try:
        commit = ref.read_text("utf-8").strip() if ref.is_file() else revision
    except OSError:
        return None
    snapshot = repo / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None


def not_cached_hint(repo_id: str) -> str:
    """What to run to put ``repo_id``'s tokenizer into the hub cache."""
    name = repo_id.partition("@")[0]
    return (f"{repo_id!r} is not in the Hugging Face cache ({hub_cache_dir()}), and preflight "
            f"never downloads: on a machine with network run `hf download {name}` (or "
            f"AutoTokenizer.from_pretrained({name!r})), then copy the cache here or point "
            "HF_HOME / HF_HUB_CACHE at it")
