"""One run at a time per report folder.

A run clears the last run's report files from ``--out`` as it starts and writes its own
(``findings.parquet``, then the report files) as it ends. Two runs into one folder at once
interleaved those steps: ``report.json`` of one run beside ``findings.parquet`` of the other
(a report listing 600 findings over a findings file holding none), or the second run's
clearing removed what the first had just written. The folder is locked for the whole run
(an advisory ``flock`` on the folder itself, so nothing is left in it); a second run into a
locked folder stops at once, exit 2, rather than wait for an unknown time.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from preflight.errors import ConfigError
from preflight.tempfiles import write_error

try:
    import fcntl
except ImportError:  # Windows: no flock; runs are not serialised there
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def locked_out_dir(out_dir: Path) -> Iterator[None]:
    """Create ``out_dir`` if needed and hold an exclusive lock on it while the block runs;
    a ``ConfigError`` when another run (another process, or another thread of this one)
    holds it."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(out_dir, e, what="the report folder") from e
    fd = _lock(out_dir)
    try:
        yield
    finally:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)  # also for worker processes that inherited fd
            os.close(fd)


def _lock(out_dir: Path) -> int | None:
    """The locked folder's descriptor; None where no lock can be taken (no ``flock``, a
    folder that cannot be opened, a file system without locks): the run goes on unlocked."""
    if fcntl is None:
        return None
    try:
        fd = os.open(out_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise ConfigError(
                f"another preflight run is writing its report into {out_dir} right now; "
                "two runs into one folder would mix their files: wait for it to finish, "
                "or give this run its own --out"
            ) from e
        return None
    return fd
