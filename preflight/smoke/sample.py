"""The smoke sample: flagged rows first (does a flagged row really break training?), the
rest at random by hash priority, so a seed picks the same rows on every run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from preflight.batch import Batch, record_key
from preflight.findings import batch_ids
from preflight.sampling import priority
from preflight.source import Source


@dataclass(frozen=True)
class SampleRow:
    """One sampled record with where it came from."""

    row: int
    file: str | None
    file_index: int
    id: str | None
    record: dict[str, Any]
    flagged: bool

    @property
    def key(self) -> int:
        return int(record_key(np.array([self.file_index]), np.array([self.row]))[0])


def draw(src: Source, *, k: int, seed: int, flagged: np.ndarray, id_field: str | None,
         limit: int | None = None) -> list[SampleRow]:
    """Read ``src`` once and return up to ``k`` records in file order: the first ``k // 2``
    of the flagged record keys (pass them in priority order, as ``BottomK.keys`` gives them)
    and the lowest-priority others."""
    wanted = np.sort(np.asarray(flagged, dtype=np.int64)[: max(k // 2, 1)])
    need = k  # flagged keys may be unreadable lines: hold enough others to fill in
    chosen: list[tuple[int, SampleRow]] = []  # flagged: priority -1 keeps them first
    pool: list[tuple[int, SampleRow]] = []
    seen = 0
    for batch in src.batches():
        if limit is not None:
            if seen >= limit:
                break
            batch = batch.head(limit - seen)
        seen += len(batch)
        keys = record_key(np.full(len(batch), batch.file_index), batch.rows)
        hit = np.isin(keys, wanted)
        prio = priority(keys, seed)
        if len(pool) >= need and pool:
            cut = pool[-1][0]
            candidate = ~hit & (prio < np.uint64(cut))
        else:
            candidate = ~hit
        take = np.flatnonzero(hit | candidate)
        if len(take) > need + hit.sum():  # only the best of this batch can make the cut
            order = take[np.argsort(np.where(hit[take], 0, prio[take]), kind="stable")]
            take = np.sort(order[: need + int(hit.sum())])
        rows = _records(batch, take, id_field, hit)
        for i, sample in zip(take, rows, strict=True):
            if hit[i]:
                chosen.append((-1, sample))
            else:
                pool.append((int(prio[i]), sample))
        pool.sort(key=lambda p: p[0])
        del pool[need:]
    picked = [s for _, s in chosen] + [s for _, s in pool][: k - len(chosen)]
    return sorted(picked, key=lambda s: (s.file_index, s.row))


def _records(batch: Batch, take: np.ndarray, id_field: str | None,
             hit: np.ndarray) -> list[SampleRow]:
    if len(take) == 0:
        return []
    dicts = batch.frame[take.tolist()].to_dicts() if batch.frame.width else [{}] * len(take)
    ids = batch_ids(batch, id_field)
    out = []
    for j, i in enumerate(take.tolist()):
        record = dict(dicts[j])
        for name, values in batch.raw.items():
            record[name] = values[i]
        rid = ids[i] if ids is not None else None
        out.append(SampleRow(row=int(batch.rows[i]), file=batch.file,
                             file_index=batch.file_index, id=rid, record=record,
                             flagged=bool(hit[i])))
    return out
