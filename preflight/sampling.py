"""Deterministic sampling by hash priority: the same seed picks the same records whatever
the batch boundaries, and a bounded "bottom k" keeps memory flat on any corpus size.

The smoke test's sample is drawn while the gate reads the corpus (``Sampler.offer`` per
batch): the lowest-priority records, plus the records the checks flagged in that batch. Rows
flagged only at the end (duplicates, outliers) are not in memory: the flagged part of the
sample takes the held ones first (by priority) and fills up with the *earliest* rows flagged
at the end, fetched by a second read that stops at the last of them (``Sampler.finish``), so
it reads a short prefix of the corpus, not all of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from preflight.batch import Batch, record_key

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def priority(keys: np.ndarray, seed: int) -> np.ndarray:
    """A pseudo-random uint64 per record key (splitmix64 of the key and the seed)."""
    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) + np.uint64(seed + 1) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class BottomK:
    """The ``k`` record keys of lowest priority seen so far (duplicates counted once)."""

    def __init__(self, k: int, seed: int) -> None:
        self.k = k
        self.seed = seed
        self._keys = np.zeros(0, dtype=np.int64)
        self._prio = np.zeros(0, dtype=np.uint64)

    def add(self, keys: np.ndarray) -> None:
        """Offer record keys."""
        if len(keys) == 0 or self.k == 0:
            return
        keys = np.concatenate([self._keys, np.asarray(keys, dtype=np.int64)])
        keys = np.unique(keys)
        prio = priority(keys, self.seed)
        if len(keys) > self.k:
            keep = np.argpartition(prio, self.k - 1)[: self.k]
            keys, prio = keys[keep], prio[keep]
        self._keys, self._prio = keys, prio

    def keys(self) -> np.ndarray:
        """The kept keys, sorted by priority."""
        return self._keys[np.argsort(self._prio, kind="stable")]

    def __len__(self) -> int:
        return len(self._keys)


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


class FlaggedKeys:
    """Flagged record keys, bounded: the ``k`` of lowest priority and the ``k`` first."""

    def __init__(self, k: int, seed: int) -> None:
        self.by_priority = BottomK(k, seed)
        self.k = k
        self._first = np.zeros(0, dtype=np.int64)

    def add(self, keys: np.ndarray) -> None:
        """Offer flagged record keys (the findings sink calls this)."""
        self.by_priority.add(keys)
        self._first = np.unique(np.concatenate([self._first, keys.astype(np.int64)]))[: self.k]

    def lowest(self) -> np.ndarray:
        """The lowest-priority keys, in priority order."""
        return self.by_priority.keys()

    def first(self) -> np.ndarray:
        """The smallest keys (the earliest records), in file order."""
        return self._first

    def watched(self) -> np.ndarray:
        """Every key worth holding the record of while reading."""
        return np.union1d(self.by_priority.keys(), self._first)


class Sampler:
    """Draws the smoke sample: ``k`` records, up to half of them flagged by the checks."""

    def __init__(self, k: int, seed: int, *, id_field: str | None = None) -> None:
        self.k, self.seed, self.id_field = k, seed, id_field
        self.flagged = FlaggedKeys(k, seed)  # the sink adds every flagged record key here
        self._pool: list[tuple[int, SampleRow]] = []  # (priority, row), sorted, at most k
        self._held: dict[int, SampleRow] = {}  # flagged records read so far

    def offer(self, batch: Batch) -> None:
        """Keep this batch's records that may end in the sample (call after its scans)."""
        keys = record_key(np.full(len(batch), batch.file_index), batch.rows)
        prio = priority(keys, self.seed)
        full = len(self._pool) >= self.k
        candidate = prio < np.uint64(self._pool[-1][0]) if full else np.ones(len(keys), bool)
        watched = self.flagged.watched()
        flagged = np.isin(keys, watched)
        take = np.flatnonzero(candidate | flagged)
        if len(take) > self.k + int(flagged.sum()):  # only the best of the batch can stay
            best = take[np.argsort(prio[take], kind="stable")][: self.k]
            take = np.union1d(best, np.flatnonzero(flagged))
        for i, sample in zip(take, _records(batch, take, self.id_field), strict=True):
            if flagged[i]:
                self._held[int(keys[i])] = sample
            if candidate[i]:
                self._pool.append((int(prio[i]), sample))
        self._pool.sort(key=lambda p: p[0])
        del self._pool[self.k :]
        keep = set(watched.tolist())
        self._held = {key: s for key, s in self._held.items() if key in keep}

    def candidates(self, batch: Batch, flagged: np.ndarray) -> list[SampleRow]:
        """For a worker that scans ``batch`` away from the driver: the records ``offer``
        could keep, whatever the other batches hold (``flagged``: the record keys the
        batch's scans found). ``take`` them on the driver in read order."""
        keys = record_key(np.full(len(batch), batch.file_index), batch.rows)
        prio = priority(keys, self.seed)
        best = np.argsort(prio, kind="stable")[: self.k]
        hit = np.flatnonzero(np.isin(keys, flagged))
        hit_best = hit[np.argsort(prio[hit], kind="stable")][: self.k]
        take = np.union1d(np.union1d(best, hit_best), hit[: self.k])
        return _records(batch, take, self.id_field)

    def take(self, rows: list[SampleRow]) -> None:
        """``offer`` for records a worker chose with ``candidates`` (one batch's; call for
        every batch, even one without records: its flags may retire held ones)."""
        keys = np.array([s.key for s in rows], dtype=np.int64)
        prio = priority(keys, self.seed)
        keep = set(self.flagged.watched().tolist())
        for key, p, sample in zip(keys.tolist(), prio.tolist(), rows, strict=True):
            if key in keep:
                self._held[key] = sample
            self._pool.append((p, sample))
        self._pool.sort(key=lambda p: p[0])
        del self._pool[self.k :]
        self._held = {key: s for key, s in self._held.items() if key in keep}

    def missing(self) -> set[int]:
        """Flagged records the sample wants that were not held while reading (found at
        the end: duplicates, outliers)."""
        return {key for key in self._wanted() if key not in self._held}

    def hold(self, rows: list[SampleRow]) -> None:
        """Records fetched for ``missing``."""
        self._held.update((s.key, s) for s in rows)

    def _wanted(self) -> list[int]:
        quota = max(self.k // 2, 1)
        held = np.array(sorted(self._held), dtype=np.int64)
        wanted = held[np.argsort(priority(held, self.seed), kind="stable")][:quota].tolist()
        taken = set(wanted)
        for key in self.flagged.first().tolist():
            if len(wanted) >= quota:
                break
            if key not in taken:
                wanted.append(key)
                taken.add(key)
        return wanted

    def finish(self, batches: Any, *, limit: int | None = None) -> list[SampleRow]:
        """The sample in file order. ``batches`` (an iterable of the source's batches) is
        read only when the flagged rows held are too few, and only up to the last of the
        earliest flagged rows that fill the gap."""
        wanted = self._wanted()
        missing = {key for key in wanted if key not in self._held}
        if missing:
            self._fetch(batches, missing, limit)
        chosen = [self._held[key] for key in wanted if key in self._held]
        taken = {s.key for s in chosen}
        rest = [s for _, s in self._pool if s.key not in taken][: self.k - len(chosen)]
        known = set(self.flagged.watched().tolist())  # random rows may be flagged too
        picked = [_as_flagged(s) for s in chosen] + [
            _as_flagged(s) if s.key in known else s for s in rest]
        return sorted(picked, key=lambda s: (s.file_index, s.row))

    def _fetch(self, batches: Any, missing: set[int], limit: int | None) -> None:
        last = max(missing)
        seen = 0
        for batch in batches:
            if limit is not None:
                if seen >= limit:
                    break
                batch = batch.head(limit - seen)
            seen += len(batch)
            self.hold(records_with(batch, missing, self.id_field))
            keys = record_key(np.full(len(batch), batch.file_index), batch.rows)
            if len(keys) and keys[-1] >= last:  # keys grow with file and row: none is left
                break


def draw(src: Any, *, k: int, seed: int, flagged: np.ndarray, id_field: str | None,
         limit: int | None = None) -> list[SampleRow]:
    """Draw a sample from a source in one read of its own: of the flagged record keys
    given, the ``k // 2`` of lowest priority that are readable records, and the
    lowest-priority others."""
    sampler = Sampler(k, seed, id_field=id_field)
    sampler.flagged = _Fixed(np.asarray(flagged, dtype=np.int64))  # type: ignore[assignment]
    seen = 0
    for batch in src.batches():
        if limit is not None:
            if seen >= limit:
                break
            batch = batch.head(limit - seen)
        seen += len(batch)
        sampler.offer(batch)
    return sampler.finish(iter(()), limit=limit)


def records_with(batch: Batch, keys: set[int], id_field: str | None) -> list[SampleRow]:
    """The records of ``batch`` whose record keys are in ``keys``."""
    batch_keys = record_key(np.full(len(batch), batch.file_index), batch.rows)
    return _records(batch, np.flatnonzero(np.isin(batch_keys, list(keys))), id_field)


class _Fixed:
    """A flagged-key list given up front, in the order to take them."""

    def __init__(self, keys: np.ndarray) -> None:
        self._keys = keys

    def lowest(self) -> np.ndarray:
        return self._keys

    def first(self) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)

    def watched(self) -> np.ndarray:
        return self._keys


def _as_flagged(sample: SampleRow) -> SampleRow:
    if sample.flagged:
        return sample
    return SampleRow(row=sample.row, file=sample.file, file_index=sample.file_index,
                     id=sample.id, record=sample.record, flagged=True)


def _records(batch: Batch, take: np.ndarray, id_field: str | None) -> list[SampleRow]:
    """The records at ``take`` as dicts (with the Python values of mixed-type fields)."""
    if len(take) == 0:
        return []
    from preflight.findings import batch_ids  # findings imports this module

    dicts = batch.frame[take.tolist()].to_dicts() if batch.frame.width else [{}] * len(take)
    ids = batch_ids(batch, id_field)
    out = []
    for j, i in enumerate(take.tolist()):
        record = dict(dicts[j])
        for name, values in batch.raw.items():
            record[name] = values[i]
        out.append(SampleRow(row=int(batch.rows[i]), file=batch.file,
                             file_index=batch.file_index,
                             id=ids[i] if ids is not None else None, record=record,
                             flagged=False))
    return out
