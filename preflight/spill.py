"""Values too many to hold in memory: appended to a temporary file, read back by slices.

Near-duplicate confirmation needs the shingle sets of every candidate document, which grow
with the documents' text, not with the number of rows; they are written to a temporary
file (in ``TMPDIR``) and mapped back in a chunk of pairs at a time. The file has no name (it is
unlinked as it is created), so even a killed run leaves nothing behind; a full ``TMPDIR``
is an ``OutputError`` (exit 3) that names it.
"""

from __future__ import annotations

import mmap
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from preflight.tempfiles import write_error

_READ = 1 << 22  # values per read when copying a file
T = TypeVar("T")


class Spilled:
    """A growing uint32 array in a temporary file."""

    dtype = np.dtype(np.uint32)

    def __init__(self) -> None:
        self._file: Any = None
        self._held: list[np.ndarray] = []  # unpickled from a worker, not written yet
        self.size = 0  # values in the file

    def __len__(self) -> int:
        return self.size + sum(len(part) for part in self._held)

    def append(self, values: np.ndarray) -> None:
        """Add values at the end."""
        if not len(values):
            return
        self._write_held()  # they come first
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="preflight-")  # noqa: SIM115 - kept open
            self._file.seek(0, 2)
            # file.write, not ndarray.tofile: a short write raises with its errno (ENOSPC)
            self._file.write(np.ascontiguousarray(values, dtype=self.dtype).data)
        except OSError as e:
            raise write_error(Path(tempfile.gettempdir()), e,
                              what="a temporary file in TMPDIR") from e
        self.size += len(values)

    def chunks(self) -> Iterator[np.ndarray]:
        """The values in order, a bounded chunk at a time."""
        yield from self._held
        if self._file is None:
            return
        self._file.flush()
        self._file.seek(0)
        while True:
            part = np.fromfile(self._file, dtype=self.dtype, count=_READ)
            if not len(part):
                return
            yield part

    def mapped(self, fn: Callable[[np.ndarray], T]) -> T:
        """``fn`` of all the values, as a read-only array mapped from the file (no copy); the
        mapping is released when ``fn`` returns, so only the pages it touched were read in
        and none stay resident. ``fn`` must not keep the array."""
        self._write_held()
        if self._file is None:
            return fn(np.zeros(0, self.dtype))
        self._file.flush()
        mapped = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return fn(np.frombuffer(mapped, dtype=self.dtype, count=self.size))
        finally:
            del mapped  # unmapped once the array fn saw is gone

    def _write_held(self) -> None:
        held, self._held = self._held, []
        for part in held:
            self.append(part)

    # -- as check state (``preflight.checks.state``) -----------------------------------

    def empty(self) -> Spilled:
        return Spilled()

    def merged_with(self, other: Spilled) -> Spilled:
        for part in other.chunks():
            self.append(part)
        return self

    def __getstate__(self) -> dict[str, Any]:
        # A worker's part travels as an array (it is one batch's worth).
        parts = list(self.chunks())
        return {"values": np.concatenate(parts) if parts else np.zeros(0, self.dtype)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]
        self._held = [state["values"]] if len(state["values"]) else []
