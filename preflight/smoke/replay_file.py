"""The replay file: the minimal batch (as tensors), the seed, the settings, the model spec
and the initial weights. It loads with ``torch.load(weights_only=True)``, so a replay file
from anywhere runs no code on its own: the model spec it records is imported only when the
user names a model too (``preflight smoke --replay FILE --model SPEC``)."""

from __future__ import annotations

import collections
import dataclasses
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
# A dataclass in the batch, stored as its fields under this key, rebuilt by ``batch``
DATACLASS = "__preflight_dataclass__"


def save(path: Path, *, task: str, model: str, spec: dict[str, Any], config: dict[str, Any],
         batch: tuple[Any, Any], initial: dict[str, torch.Tensor], rows: list[int],
         ids: list[str], files: list[str | None], failure: str | None,
         exempt: list[str], checkpoint: str | None = None,
         modes: list[tuple[str, bool]] | None = None) -> Path:
    """Write the replay file (to a temporary name carrying the pid, renamed when complete;
    deleted on an error or Ctrl-C). ``exempt``: the input paths that are non-finite by
    design (masks), which the rerun must not call faults. ``checkpoint``: for a model too
    large to keep (``initial`` empty), the checkpoint the rerun loads instead. ``modes``:
    each module's ``training`` flag at the failing step, by name (None: all training)."""
    with atomic_write(path) as tmp:
        torch.save({
            "format": FORMAT, "version": VERSION, "task": task, "model": model, "spec": spec,
            "config": config, "inputs": _plain(batch[0]), "targets": _plain(batch[1]),
            "initial": {k: v.detach().cpu() for k, v in initial.items()},
            "rows": rows, "ids": ids, "files": files, "failure": failure, "exempt": exempt,
            "checkpoint": checkpoint,
            "modes": None if modes is None else [[name, bool(on)] for name, on in modes],
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


def batch(data: dict[str, Any], *, homes: tuple[str, ...] = (),
          notes: list[str] | None = None) -> tuple[Any, Any]:
    """The replay's ``(inputs, targets)`` as the step got them: a namedtuple or a dataclass
    comes back as one (a step_fn reading ``batch.x`` got a list, or a file that would not
    load). Its class is the user's own when a module already imported holds it: the one it
    was defined in, or one of ``homes`` (the module ``--model`` loaded, which a file spec
    imports under another name); else a stand-in of that name and fields, said in
    ``notes``."""
    said = notes if notes is not None else []
    return (_rebuilt(data["inputs"], homes, said), _rebuilt(data["targets"], homes, said))


def modes(data: dict[str, Any], model: Any) -> tuple[bool, ...] | None:
    """Each of ``model``'s modules' ``training`` flags as the replay recorded them (by
    name, in ``modules()`` order; a module it does not name trains); None when it
    recorded none (a smoke test's replay: every module trained)."""
    saved = data.get("modes")
    if not saved:
        return None
    try:
        flags = {str(name): bool(on) for name, on in saved}
    except (TypeError, ValueError) as e:
        raise ConfigError("the replay file's modes are not (module name, training) pairs: "
                          "it was not written by preflight.watch") from e
    return tuple(flags.get(name, True) for name, _ in model.named_modules())


def _plain(obj: Any) -> Any:
    """Tensors in plain containers (a ``BatchEncoding`` becomes a dict, a namedtuple or a
    dataclass a dict that ``batch`` rebuilds it from), so the file loads with
    ``weights_only=True``."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        kind = type(obj)
        return {NAMEDTUPLE: [kind.__module__, kind.__qualname__],
                "fields": list(kind._fields), "values": [_plain(v) for v in obj]}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        kind = type(obj)
        frozen = bool(getattr(kind, "__dataclass_params__", None) and
                      kind.__dataclass_params__.frozen)
        return {DATACLASS: [kind.__module__, kind.__qualname__], "frozen": frozen,
                "fields": {f.name: _plain(getattr(obj, f.name))
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, list | tuple):
        return (tuple if isinstance(obj, tuple) else list)(_plain(v) for v in obj)
    return obj


def _rebuilt(obj: Any, homes: tuple[str, ...] = (), notes: list[str] | None = None) -> Any:
    notes = notes if notes is not None else []
    if isinstance(obj, Mapping) and NAMEDTUPLE in obj:
        module, qualname = obj[NAMEDTUPLE]
        values = [_rebuilt(v, homes, notes) for v in obj["values"]]
        return _namedtuple(module, qualname, obj["fields"], homes)(*values)
    if isinstance(obj, Mapping) and DATACLASS in obj:
        module, qualname = obj[DATACLASS]
        values = {k: _rebuilt(v, homes, notes) for k, v in obj["fields"].items()}
        return _dataclass(module, qualname, values, bool(obj.get("frozen")), homes, notes)
    if isinstance(obj, Mapping):
        return {k: _rebuilt(v, homes, notes) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_rebuilt(v, homes, notes) for v in obj)
    return obj


def _imported(module: str, qualname: str, homes: tuple[str, ...]) -> list[Any]:
    """What ``qualname`` names in ``module`` and in each of ``homes``, where already
    imported (the file never makes anything import)."""
    found = []
    for name in (module, *homes):
        obj: Any = sys.modules.get(name)
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, type):
            found.append(obj)
    return found


def _dataclass(module: str, qualname: str, values: dict[str, Any], frozen: bool,
               homes: tuple[str, ...], notes: list[str]) -> Any:
    """An instance of the user's own dataclass with these field values, set as pickle sets
    them (no ``__init__``: fields with ``init=False`` and a ``__post_init__`` that
    computes are kept as saved); a stand-in dataclass of that name, fields and frozenness
    when the class is not imported, said in ``notes``."""
    kind = next((k for k in _imported(module, qualname, homes) if dataclasses.is_dataclass(k)
                 and [f.name for f in dataclasses.fields(k)] == list(values)), None)
    if kind is None:
        name = qualname.rsplit(".", 1)[-1]
        kind = dataclasses.make_dataclass(name if name.isidentifier() else "Batch",
                                          list(values), frozen=frozen)
        note = (f"the batch's class {module}.{qualname} is not imported by the --model "
                "module, so it was replayed as a stand-in dataclass of the same name and "
                "fields (its methods and properties are missing)")
        if module == "__main__":
            note += ": it was defined in the training script; move it into a module the "\
                    "--model build imports"
        if note not in notes:
            notes.append(note)
    made = object.__new__(kind)
    for field, value in values.items():
        object.__setattr__(made, field, value)
    return made


def _namedtuple(module: str, qualname: str, fields: list[str],
                homes: tuple[str, ...] = ()) -> Any:
    """The user's own class when its module is already imported (the ``--model`` build
    imported it; the file never makes anything import), else a namedtuple of that name
    and those fields."""
    for found in _imported(module, qualname, homes):
        if issubclass(found, tuple) and list(getattr(found, "_fields", ())) == list(fields):
            return found
    name = qualname.rsplit(".", 1)[-1]
    # rename: a namedtuple made with rename=True has fields such as ``_1``, which a new
    # one refuses (they keep their names: each is its position's)
    return collections.namedtuple(name if name.isidentifier() else "Batch", fields,
                                  rename=True)
