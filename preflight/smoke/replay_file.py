"""The replay file: the minimal batch (as tensors), the seed, the settings, the model spec
and the initial weights. It loads with ``torch.load(weights_only=True)``, so a replay file
from anywhere runs no code on its own: the model spec it records is imported only when the
user names a model too (``preflight smoke --replay FILE --model SPEC``)."""

from __future__ import annotations

import collections
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from preflight.errors import ConfigError
from preflight.tempfiles import atomic_write

FORMAT = "preflight-smoke-replay"
VERSION = 1
WATCH_TASK = "watch"  # a replay written by preflight.watch: its batch goes to step_fn
# A namedtuple in the batch, stored as a dict under this key (weights_only loads no class)
NAMEDTUPLE = "__preflight_namedtuple__"


def save(path: Path, *, task: str, model: str, spec: dict[str, Any], config: dict[str, Any],
         batch: tuple[Any, Any], initial: dict[str, torch.Tensor], rows: list[int],
         ids: list[str], files: list[str | None], failure: str | None,
         exempt: list[str], checkpoint: str | None = None) -> Path:
    """Write the replay file (to a temporary name carrying the pid, renamed when complete;
    deleted on an error or Ctrl-C). ``exempt``: the input paths that are non-finite by
    design (masks), which the rerun must not call faults. ``checkpoint``: for a model too
    large to keep (``initial`` empty), the checkpoint the rerun loads instead."""
    with atomic_write(path) as tmp:
        torch.save({
            "format": FORMAT, "version": VERSION, "task": task, "model": model, "spec": spec,
            "config": config, "inputs": _plain(batch[0]), "targets": _plain(batch[1]),
            "initial": {k: v.detach().cpu() for k, v in initial.items()},
            "rows": rows, "ids": ids, "files": files, "failure": failure, "exempt": exempt,
            "checkpoint": checkpoint,
        }, tmp)
    return path


def load(path: str | Path) -> dict[str, Any]:
    """A replay file's contents; a ``ConfigError`` when it is not one."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"replay file {p} is a folder: give the smoke-replay.pt file in it")
    if not p.is_file():
        raise ConfigError(f"replay file not found: {p}")
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ConfigError(f"{p} is not a preflight replay file (written by `preflight smoke` "
                          f"as smoke-replay.pt; it cannot be loaded safely: {_reason(e)})"
                          ) from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"{p} is not a preflight replay file (written by `preflight smoke`)")
    if data.get("version") != VERSION:
        raise ConfigError(f"{p}: replay format version {data.get('version')} is not supported")
    return data


def _reason(error: Exception) -> str:
    """The line of torch.load's error that says what failed: its weights-only message runs
    to a dozen lines that advise ``weights_only=False`` (running the file's code) and filing
    a PyTorch issue, neither of which a replay needs."""
    text = str(error)
    _, marker, rest = text.partition("WeightsUnpickler error:")
    lines = [line.strip() for line in (rest if marker else text).splitlines() if line.strip()]
    reason = lines[0] if lines else type(error).__name__
    return reason if len(reason) <= 200 else reason[:200] + "…"


def weights(data: dict[str, Any], path: str | Path) -> dict[str, torch.Tensor]:
    """The weights a replay starts from: its own, else its checkpoint's (empty when it
    has neither: the model runs as built). A ``ConfigError`` when the checkpoint is gone."""
    if data["initial"] or not data.get("checkpoint"):
        return data["initial"]
    from preflight.smoke.checkpoint import load_checkpoint

    checkpoint = Path(data["checkpoint"])
    if not checkpoint.is_file():
        raise ConfigError(f"{path} keeps no weights, only the checkpoint it was taken from "
                          f"({checkpoint}), which no longer exists: restore that checkpoint "
                          "to rerun it")
    return load_checkpoint(checkpoint)


def batch(data: dict[str, Any]) -> tuple[Any, Any]:
    """The replay's ``(inputs, targets)`` as the step got them: a namedtuple comes back as
    one (a step_fn reading ``batch.x`` got a list)."""
    return _rebuilt(data["inputs"]), _rebuilt(data["targets"])


def _plain(obj: Any) -> Any:
    """Tensors in plain containers (a ``BatchEncoding`` becomes a dict, a namedtuple a
    dict that ``batch`` rebuilds it from), so the file loads with ``weights_only=True``."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        kind = type(obj)
        return {NAMEDTUPLE: [kind.__module__, kind.__qualname__],
                "fields": list(kind._fields), "values": [_plain(v) for v in obj]}
    if isinstance(obj, list | tuple):
        return (tuple if isinstance(obj, tuple) else list)(_plain(v) for v in obj)
    return obj


def _rebuilt(obj: Any) -> Any:
    if isinstance(obj, Mapping) and NAMEDTUPLE in obj:
        module, qualname = obj[NAMEDTUPLE]
        values = [_rebuilt(v) for v in obj["values"]]
        return _namedtuple(module, qualname, obj["fields"])(*values)
    if isinstance(obj, Mapping):
        return {k: _rebuilt(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_rebuilt(v) for v in obj)
    return obj


def _namedtuple(module: str, qualname: str, fields: list[str]) -> Any:
    """The user's own class when its module is already imported (the ``--model`` build
    imported it; the file never makes anything import), else a namedtuple of that name
    and those fields."""
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, tuple) and \
            list(getattr(found, "_fields", ())) == list(fields):
        return found
    name = qualname.rsplit(".", 1)[-1]
    # rename: a namedtuple made with rename=True has fields such as ``_1``, which a new
    # one refuses (they keep their names: each is its position's)
    return collections.namedtuple(name if name.isidentifier() else "Batch", fields,
                                  rename=True)
