"""Rows, not just tensors: carry each batch's corpus ids and row numbers to the watch, and
slice a batch along its first dimension to narrow a fault to rows.

``with_ids(dataset)`` wraps a map-style dataset whose items are dicts; its
``collate(user_collate)`` is the collate to give the ``DataLoader``. The user's collate sees
the rows as before; the batch it returns comes back as an ``IdDict`` / ``IdTuple`` /
``IdList`` (subclasses of what it returned) with ``.rows`` and ``.ids`` attributes. They
pickle with the attributes, so ``DataLoader(num_workers=N)`` keeps them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from preflight.errors import ConfigError
from preflight.smoke.spy import same_kind, with_fields


class _Carries:
    """The ids and row numbers of a batch's rows (None when the dataset has no id field)."""

    rows: list[int]
    ids: list[str | None]

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """The batch with its tensors moved (``Tensor.to``'s arguments), still carrying its
        ids: accelerate's and Lightning's device transfer rebuild a plain dict/tuple/list
        (dropping the attributes) unless the batch has its own ``to``, as ``BatchEncoding``
        does."""
        return carry(_to(self, args, kwargs), self.rows, self.ids)


class IdDict(dict, _Carries):
    """A dict batch that carries ``rows`` and ``ids``."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (dict, dict(self), self.rows, self.ids))


class IdTuple(tuple, _Carries):
    """A tuple batch that carries ``rows`` and ``ids``."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (tuple, tuple(self), self.rows, self.ids))


class IdList(list, _Carries):
    """A list batch that carries ``rows`` and ``ids``."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (list, list(self), self.rows, self.ids))


class _Row(dict):
    """A dataset item as the user's collate sees it (a dict), with its row number."""

    row: int

    def __reduce__(self) -> tuple[Any, ...]:
        return (_row, (dict(self), self.row))


_WRAP: dict[type, type] = {dict: IdDict, tuple: IdTuple, list: IdList}


def _rebuild(base: type, value: Any, rows: list[int], ids: list[str | None]) -> Any:
    return carry(base(value), rows, ids)


def _row(value: dict[str, Any], row: int) -> _Row:
    made = _Row(value)
    made.row = row
    return made


def carry(batch: Any, rows: list[int], ids: list[str | None]) -> Any:
    """``batch`` as an ``IdDict``/``IdTuple``/``IdList`` carrying ``rows`` and ``ids``."""
    base = dict if isinstance(batch, Mapping) else tuple if isinstance(batch, tuple) else (
        list if isinstance(batch, list) else None)
    if base is None:
        raise ConfigError(f"with_ids: your collate returned a {type(batch).__name__}; the "
                          "ids ride on a dict, tuple or list batch: return one of those")
    made = _WRAP[base](batch if base is not dict else dict(batch))
    made.rows, made.ids = list(rows), list(ids)
    return made


class with_ids:  # used as a function: preflight.watch.with_ids(dataset)
    """Wrap a map-style dataset (a list of dicts, a ``datasets.Dataset``, any
    ``__getitem__`` returning a dict) so that its batches carry ids and row numbers."""

    def __init__(self, dataset: Any, id_field: str | None = "id") -> None:
        if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            raise ConfigError(f"with_ids needs a map-style dataset (__getitem__ and __len__), "
                              f"got {type(dataset).__name__}")
        self.dataset, self.id_field = dataset, id_field

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> _Row:
        item = self.dataset[index]
        if not isinstance(item, Mapping):
            raise ConfigError(f"with_ids: item {index} is a {type(item).__name__}; the "
                              "dataset's items must be dicts (rows with fields)")
        return _row(dict(item), int(index))

    def collate(self, user_collate: Callable[[list[Any]], Any] | None = None) -> _Collate:
        """The collate for the ``DataLoader``: ``user_collate(rows)`` (default: torch's
        ``default_collate``) whose batch carries the rows' ids and row numbers."""
        return _Collate(user_collate, self.id_field)


class _Collate:
    """Picklable (worker processes get a copy): the user's collate plus the ids."""

    def __init__(self, user_collate: Callable[[list[Any]], Any] | None,
                 id_field: str | None) -> None:
        self.user_collate, self.id_field = user_collate, id_field

    def __call__(self, rows: list[Any]) -> Any:
        numbers = [getattr(r, "row", None) for r in rows]
        if any(n is None for n in numbers):
            raise ConfigError("with_ids(...).collate got rows that did not come from the "
                              "with_ids dataset: give the DataLoader the wrapped dataset")
        ids = [_id(r.get(self.id_field)) if self.id_field else None for r in rows]
        if self.user_collate is None:
            from torch.utils.data import default_collate

            batch = default_collate([dict(r) for r in rows])
        else:
            batch = self.user_collate(rows)
        return carry(batch, numbers, ids)


def _id(value: Any) -> str | None:
    return None if value is None else str(value)


def batch_rows(batch: Any) -> tuple[list[int], list[str | None]]:
    """The rows and ids a batch carries (empty lists when it carries none)."""
    rows = getattr(batch, "rows", None)
    ids = getattr(batch, "ids", None)
    if not isinstance(rows, list):
        return [], []
    return list(rows), list(ids) if isinstance(ids, list) else [None] * len(rows)


def batch_size(batch: Any) -> int:
    """Rows in a batch: the first dimension its tensors share; a ``ConfigError`` saying why
    when it has none (no tensor, a scalar, or tensors of different lengths)."""
    sizes = {t.shape[0] for t in _leaves(batch) if t.ndim > 0}
    if len(sizes) != 1:
        why = ("it holds no tensor with a first dimension" if not sizes else
               f"its tensors differ in their first dimension ({sorted(sizes)})")
        raise ConfigError(f"the batch cannot be sliced into rows: {why}")
    size = sizes.pop()
    carried = len(batch_rows(batch)[0])
    if carried and size != carried:  # sliced, it blamed time steps as rows (wrong ids)
        raise ConfigError(f"the batch cannot be sliced into rows: it carries {carried} rows "
                          f"but its tensors' first dimension is {size} (the rows must come "
                          "first, not a sequence-first layout)")
    return size


def take(batch: Any, index: Sequence[int]) -> Any:
    """The rows ``index`` of a batch (tensors, and dicts/lists/tuples of them, sliced along
    dimension 0; other values kept as they are); carried ids follow the rows."""
    idx = list(index)
    sliced = _take(batch, idx, batch_size(batch))
    rows, ids = batch_rows(batch)
    if rows:
        return carry(sliced, [rows[i] for i in idx], [ids[i] for i in idx])
    return sliced


def _take(obj: Any, idx: list[int], size: int) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj[idx] if obj.ndim > 0 and obj.shape[0] == size else obj
    if isinstance(obj, Mapping):
        return {k: _take(v, idx, size) for k, v in obj.items()}
    if isinstance(obj, list) and len(obj) == size and all(
            isinstance(v, str | int | float | None) for v in obj):
        return [obj[i] for i in idx]  # one plain value per row (texts, say)
    if isinstance(obj, list | tuple):
        items = [_take(v, idx, size) for v in obj]
        named_tuple = isinstance(obj, tuple) and hasattr(obj, "_fields")
        return same_kind(obj, items) if type(obj) in (list, tuple) or named_tuple else items
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # kept a dataclass
        return with_fields(obj, {f.name: _take(getattr(obj, f.name), idx, size)
                                 for f in dataclasses.fields(obj)})
    return obj


def _to(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(*args, **kwargs)
    if isinstance(obj, Mapping):
        return {k: _to(v, args, kwargs) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return (list if isinstance(obj, list) else tuple)(_to(v, args, kwargs) for v in obj)
    return obj


def _leaves(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, Mapping):
        return [t for v in obj.values() for t in _leaves(v)]
    if isinstance(obj, list | tuple):
        return [t for v in obj for t in _leaves(v)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [t for f in dataclasses.fields(obj) for t in _leaves(getattr(obj, f.name))]
    return []
