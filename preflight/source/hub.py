"""A hub dataset name (``org/name``, ``org/name:split``, ``org/name:config:split``) read from
the local ``datasets`` cache, offline, as ``load_dataset(name)`` does with
``HF_DATASETS_OFFLINE=1``.

The cache layout is ``datasets``' own: ``<cache>/<org>___<name>/<config>/<version>/<hash>/``
holding ``dataset_info.json`` and the Arrow shards ``<name>-<split>.arrow`` (or
``…-<split>-00000-of-00002.arrow``). The most recently written ``<version>/<hash>`` of the
config wins, as in ``datasets``. The split is ``train`` unless named (or the only one). Rows
are numbered from 0 across the split's shards, as for a ``save_to_disk`` folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from preflight.errors import InputError
from preflight.hf_cache import datasets_cache_dir
from preflight.source import Source, format_of, shard_source

_NAME = re.compile(r"([A-Za-z0-9][\w.-]*)/([A-Za-z0-9][\w.-]*)(?::([\w.-]+))?(?::([\w.-]+))?")
_SNAKE = (re.compile(r"([A-Z]+)([A-Z][a-z])"), re.compile(r"([a-z\d])([A-Z])"))


def hub_dataset(name: str) -> Source | None:
    """The cached dataset ``name`` names, or None when ``name`` does not look like a hub
    dataset name; an ``InputError`` saying how to cache it when it looks like one but the
    cache does not hold it."""
    m = _NAME.fullmatch(name)
    if m is None or format_of(Path(m[2])) is not None:
        return None
    org, repo, first, second = m.groups()
    config, split = (first, second) if second else (None, first)
    cache = datasets_cache_dir()
    root = cache / f"{org}___{_snake(repo)}"
    folder = _latest(root, config, name)
    if folder is None:
        raise InputError(
            f"{name}: no such file or folder, and no dataset of that name in the datasets "
            f"cache ({cache}); preflight never downloads: on a machine with network run "
            f"python -c \"import datasets; datasets.load_dataset('{org}/{repo}')\", then copy "
            "the cache here or point HF_HOME / HF_DATASETS_CACHE at it (or give a path)")
    files = _split_files(folder, split, name)
    return shard_source(files, path=name)


def _snake(name: str) -> str:
    # datasets' camelcase_to_snakecase: the cache folder's name for the repository
    for pattern in _SNAKE:
        name = pattern.sub(r"\1_\2", name)
    return name.lower()


def _latest(root: Path, config: str | None, name: str) -> Path | None:
    """The most recent ``<config>/<version>/<hash>`` folder under ``root``."""
    found = [p for p in root.glob(f"{config or '*'}/*/*")
             if (p / "dataset_info.json").is_file()]
    if not found:
        return None
    configs = sorted({p.parts[-3] for p in found})
    if config is None and len(configs) > 1:
        raise InputError(f"the datasets cache holds {len(configs)} configurations of "
                         f"{name} ({', '.join(configs)}); name one: {name}:{configs[0]}:train")
    return max(found, key=lambda p: p.stat().st_mtime)


def _split_files(folder: Path, split: str | None, name: str) -> list[Path]:
    try:
        info = json.loads((folder / "dataset_info.json").read_bytes())
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read {folder / 'dataset_info.json'} ({e}); the cached "
                         f"dataset {name} is damaged: load it again where it was cached") from e
    splits = sorted((info.get("splits") or {}) if isinstance(info, dict) else {})
    if split is None:
        split = "train" if "train" in splits or not splits else (
            splits[0] if len(splits) == 1 else None)
        if split is None:
            raise InputError(f"the cached dataset {name} has the splits {', '.join(splits)} "
                             f"and none is 'train'; name one: {name}:{splits[0]}")
    elif splits and split not in splits:
        raise InputError(f"the cached dataset {name} has no split {split!r}; it has "
                         f"{', '.join(splits)}")
    files = sorted(folder.glob(f"*-{split}.arrow")) + sorted(
        folder.glob(f"*-{split}-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].arrow"))
    if not files:
        raise InputError(f"the cached dataset {name} lists the split {split!r} but {folder} "
                         "holds none of its .arrow files; load it again where it was cached")
    return files
