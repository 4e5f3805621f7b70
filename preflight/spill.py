"""Values too many to hold in memory: appended to a temporary file, read back by slices.

Near-duplicate confirmation needs the shingle sets of every candidate document, which grow
with the candidates' text, not with the number of rows; they are written to a temporary
file (in ``TMPDIR``) and read back a chunk of pairs at a time. The file has no name (it is
unlinked as it is created), so even a killed run leaves nothing behind; a full ``TMPDIR``
is an ``OutputError`` (exit 3) that names it.
"""

from __future__ import annotations

import mmap
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from preflight.tempfiles import write_error

_READ = 1 << 22  # values per read when copying a file


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

    def gather(self, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The slices ``[starts[k], stops[k])`` as one array and its offsets (CSR)."""
        self._write_held()
        lengths = (stops - starts).astype(np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if not offsets[-1]:
            return np.zeros(0, self.dtype), offsets
        index = np.repeat(starts.astype(np.int64) - offsets[:-1], lengths) + np.arange(
            offsets[-1], dtype=np.int64)
        self._file.flush()
        mapped = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            values = np.frombuffer(mapped, dtype=self.dtype, count=self.size)[index]
        finally:
            del mapped  # the buffer view is gone with ``values`` copied; unmapping frees
        return values, offsets

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
