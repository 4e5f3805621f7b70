"""Spilled values: appended to disk, mapped back, merged and pickled as check state; a full
TMPDIR is an OutputError."""

from __future__ import annotations

import errno
import os
import pickle

import numpy as np
import pytest

from preflight.checks.state import empty_like, merge
from preflight.errors import OutputError
from preflight.spill import Spilled


def _values(s: Spilled) -> list[int]:
    return s.mapped(lambda view: view.tolist())


def test_mapped_sees_every_value_in_order_read_only() -> None:
    s = Spilled()
    assert _values(s) == []
    s.append(np.arange(10, dtype=np.uint32))
    s.append(np.array([], dtype=np.uint32))
    s.append(np.arange(100, 105, dtype=np.uint32))
    assert len(s) == 15
    assert _values(s) == [*range(10), *range(100, 105)]
    assert s.mapped(lambda view: view.flags.writeable) is False
    s.append(np.array([7], dtype=np.uint32))  # appending after a mapping still works
    assert _values(s)[-2:] == [104, 7]


def test_a_full_tmpdir_is_an_output_error_naming_it(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR

    class Full:
        def seek(self, *args: object) -> None:
            pass

        def write(self, data: object) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "TemporaryFile", lambda **kw: Full())
    s = Spilled()
    with pytest.raises(OutputError) as e:
        s.append(np.arange(3, dtype=np.uint32))
    assert str(tmp_path) in str(e.value) and e.value.exit_code == 3


def test_a_workers_part_travels_by_pickle_and_merges_in_order() -> None:
    driver, worker = Spilled(), Spilled()
    driver.append(np.array([1, 2], dtype=np.uint32))
    worker.append(np.array([3, 4, 5], dtype=np.uint32))
    part = pickle.loads(pickle.dumps(worker))
    assert len(part) == 3
    merged = merge(driver, part)
    assert np.concatenate(list(merged.chunks())).tolist() == [1, 2, 3, 4, 5]
    assert _values(merged) == [1, 2, 3, 4, 5]
    fresh = empty_like(merged)
    assert isinstance(fresh, Spilled) and len(fresh) == 0


def test_an_unpickled_part_reads_back_in_order_after_more_values() -> None:
    worker = Spilled()
    worker.append(np.array([7, 8], dtype=np.uint32))
    part = pickle.loads(pickle.dumps(worker))
    part.append(np.array([9], dtype=np.uint32))
    assert len(part) == 3
    assert _values(part) == [7, 8, 9]
    assert np.concatenate(list(part.chunks())).tolist() == [7, 8, 9]
