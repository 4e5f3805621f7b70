"""Spilled values: appended to disk, read back by slices, merged and pickled as check state."""

from __future__ import annotations

import pickle

import numpy as np

from preflight.checks.state import empty_like, merge
from preflight.spill import Spilled


def test_gather_reads_back_the_slices_asked() -> None:
    s = Spilled()
    s.append(np.arange(10, dtype=np.uint32))
    s.append(np.array([], dtype=np.uint32))
    s.append(np.arange(100, 105, dtype=np.uint32))
    assert len(s) == 15
    values, offsets = s.gather(np.array([12, 0, 5]), np.array([15, 2, 5]))
    assert offsets.tolist() == [0, 3, 5, 5]
    assert values.tolist() == [102, 103, 104, 0, 1]


def test_a_workers_part_travels_by_pickle_and_merges_in_order() -> None:
    driver, worker = Spilled(), Spilled()
    driver.append(np.array([1, 2], dtype=np.uint32))
    worker.append(np.array([3, 4, 5], dtype=np.uint32))
    part = pickle.loads(pickle.dumps(worker))
    assert len(part) == 3
    merged = merge(driver, part)
    assert np.concatenate(list(merged.chunks())).tolist() == [1, 2, 3, 4, 5]
    assert merged.gather(np.array([1]), np.array([4]))[0].tolist() == [2, 3, 4]
    fresh = empty_like(merged)
    assert isinstance(fresh, Spilled) and len(fresh) == 0


def test_an_unpickled_part_reads_back_in_order_after_more_values() -> None:
    worker = Spilled()
    worker.append(np.array([7, 8], dtype=np.uint32))
    part = pickle.loads(pickle.dumps(worker))
    part.append(np.array([9], dtype=np.uint32))
    assert len(part) == 3
    assert part.gather(np.array([0]), np.array([3]))[0].tolist() == [7, 8, 9]
    assert np.concatenate(list(part.chunks())).tolist() == [7, 8, 9]
