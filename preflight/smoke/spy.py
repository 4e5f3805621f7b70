"""Hooks and tensor helpers shared by the smoke test and the in-flight watch.

``Spy`` arms forward hooks (the first module whose output is non-finite, in call order;
activation ranges) and gradient hooks (the first parameter whose gradient is non-finite) on
a model; an ``Embedding`` guard raises ``IndexFault`` for an index outside its table before
the lookup (on CUDA the lookup itself would be a device-side assert). The hooks cost about
as much as the step, so both callers arm them only on a re-run after a failure (and the
smoke test for the first steps' activation ranges).
"""

from __future__ import annotations

import copy as _copy
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import torch
from torch import nn

FP16_TINY = 2.0**-24  # the smallest fp16 subnormal; smaller magnitudes flush to zero


class IndexFault(Exception):
    """An index tensor holds a value its embedding or loss cannot take."""

    def __init__(self, rows: list[int], detail: str) -> None:
        super().__init__(detail)
        self.rows, self.detail = rows, detail


class Found(Protocol):
    """Where a ``Spy`` writes what it saw."""

    first_bad_module: str | None
    first_bad_param: str | None
    activations: dict[str, list[float]]


class Spy:
    """Forward hooks (first module whose output is non-finite, in call order; activation
    ranges) and gradient hooks (first parameter whose gradient is non-finite)."""

    def __init__(self, model: nn.Module, out: Found) -> None:
        self.out = out
        self.record = False  # activation ranges (the first steps)
        self.diagnosing = False  # first non-finite module and gradient (after a failure)
        self.handles = []
        for name, module in model.named_modules():
            label = name or type(module).__name__
            self.handles.append(module.register_forward_hook(self._forward(label)))
            if isinstance(module, nn.Embedding | nn.EmbeddingBag):
                self.handles.append(module.register_forward_pre_hook(_guard(label, module)))
        for name, p in model.named_parameters():
            if p.requires_grad:
                self.handles.append(p.register_post_accumulate_grad_hook(self._grad(name)))

    def _forward(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if not (self.record or self.diagnosing):
                return
            for t in tensors(output):
                if not t.is_floating_point() or t.numel() == 0:
                    continue
                t = t.detach()
                if (self.diagnosing and self.out.first_bad_module is None
                        and not torch.isfinite(t).all()):
                    self.out.first_bad_module = name
                if self.record:
                    self._ranges(name, t)
        return hook

    def _ranges(self, name: str, t: torch.Tensor) -> None:
        """Fold a tensor's largest and smallest nonzero magnitude, and the share of its
        nonzero values fp16 would flush to zero, into ``activations[name]``."""
        a = t.float().abs()
        top = a.amax()
        if not torch.isfinite(top):
            a = torch.where(torch.isfinite(a), a, 0.0)  # a fault, not a range
            top = a.amax()
        nonzero_mask = a > 0
        nonzero = int(nonzero_mask.sum())
        low = float(torch.where(nonzero_mask, a, math.inf).amin()) if nonzero else math.inf
        # below fp16's smallest value, zeros excluded
        tiny = int((a < FP16_TINY).sum()) - (a.numel() - nonzero)
        seen = self.out.activations.setdefault(name, [0.0, math.inf, 0.0])
        seen[0] = max(seen[0], float(top))
        seen[1] = min(seen[1], low)
        seen[2] = max(seen[2], tiny / nonzero if nonzero else 0.0)

    def _grad(self, name: str) -> Callable[[torch.Tensor], None]:
        def hook(p: torch.Tensor) -> None:
            if (self.diagnosing and self.out.first_bad_param is None and p.grad is not None
                    and not torch.isfinite(p.grad).all()):
                self.out.first_bad_param = name
        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def bad_param(model: nn.Module, module: str | None, seen: str | None = None) -> str | None:
    """The parameter to name for a non-finite gradient: the first bad module's own (a NaN
    that entered there poisons every gradient), else the first in forward (registration)
    order; ``seen`` (the first the backward reached, i.e. the last layer) only when no
    gradient is non-finite any more."""
    bad = [n for n, p in model.named_parameters()
           if p.grad is not None and not bool(torch.isfinite(p.grad).all())]
    own = [n for n in bad if module and n.startswith(f"{module}.")]
    return (own or bad or [seen])[0]


def _guard(name: str, module: nn.Embedding | nn.EmbeddingBag) -> Callable[..., None]:
    def hook(mod: nn.Module, args: Any) -> None:
        if not args or not isinstance(args[0], torch.Tensor) or args[0].is_floating_point():
            return
        x = args[0]
        bad = (x < 0) | (x >= module.num_embeddings)
        if bool(bad.any()):
            rows = rows_of(bad)
            value = int(x[bad].flatten()[0])
            raise IndexFault(rows,
                             f"index {value} outside [0, {module.num_embeddings}) in {name}")
    return hook



def rows_of(bad: torch.Tensor) -> list[int]:
    if bad.ndim == 0:
        return [0]
    return torch.nonzero(bad.reshape(bad.shape[0], -1).any(1)).flatten().tolist()



def to_device(obj: Any, device: torch.device, *, copy: bool = False) -> Any:
    """``obj`` with its tensors on ``device``, in containers of its own kinds (a dataclass
    too); ``copy``: new tensors and containers even where nothing moves."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True, copy=copy)
    if isinstance(obj, Mapping):  # dict, or e.g. transformers' BatchEncoding
        moved = {k: to_device(v, device, copy=copy) for k, v in obj.items()}
        try:
            return type(obj)(moved)
        except Exception:
            return moved
    if isinstance(obj, list | tuple):
        return same_kind(obj, [to_device(v, device, copy=copy) for v in obj])
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return with_fields(obj, {f.name: to_device(getattr(obj, f.name), device, copy=copy)
                                 for f in dataclasses.fields(obj)})
    return obj


def with_fields(obj: Any, values: dict[str, Any]) -> Any:
    """A shallow copy of dataclass ``obj`` with these field values, set as pickle sets
    them (``replace`` calls ``__init__``, which a field with ``init=False`` refuses)."""
    made = _copy.copy(obj)
    for name, value in values.items():
        object.__setattr__(made, name, value)
    return made


def same_kind(obj: list[Any] | tuple[Any, ...], items: list[Any]) -> Any:
    """``items`` as a list or tuple of ``obj``'s own type: a namedtuple takes them as
    arguments (it failed as one iterable, so a namedtuple batch was never re-run); a
    subclass that cannot be rebuilt so gives a plain list or tuple."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*items)
    try:
        return type(obj)(items)
    except Exception:
        return tuple(items) if isinstance(obj, tuple) else items


def tensors(obj: Any) -> Iterator[torch.Tensor]:
    for _, t in named(("", obj)):
        yield t


def named(*pairs: tuple[str, Any]) -> Iterator[tuple[str, torch.Tensor]]:
    for path, obj in pairs:
        if isinstance(obj, torch.Tensor):
            yield path, obj
        elif isinstance(obj, Mapping):
            yield from named(*((f"{path}.{k}" if path else str(k), v) for k, v in obj.items()))
        elif isinstance(obj, list | tuple):
            yield from named(*((f"{path}[{i}]", v) for i, v in enumerate(obj)))
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            yield from named(*((f"{path}.{f.name}" if path else f.name, getattr(obj, f.name))
                               for f in dataclasses.fields(obj)))
