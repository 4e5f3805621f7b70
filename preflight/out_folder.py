"""The report folder (``--out``): what may not be there, and one run at a time in it.

``check_out_dir`` refuses a folder that cannot work (a file, inside the input folder, one
whose report names are the data being read: the run removes them first). ``clear_unread``
clears the last run's report when the input cannot be read. ``locked_out_dir``, below.

A run clears the last run's report files from ``--out`` as it starts and writes its own
(``findings.parquet``, then the report files) as it ends. Two runs into one folder at once
interleaved those steps: ``report.json`` of one run beside ``findings.parquet`` of the other
(a report listing 600 findings over a findings file holding none), or the second run's
clearing removed what the first had just written. The folder is locked for the whole run
(an advisory ``flock`` on the folder itself, so nothing is left in it); a second run into a
locked folder stops at once, exit 2, rather than wait for an unknown time. ``preflight fix``
holds a shared lock on each of its outputs' folders (``shared_lock``) for its whole run: a
check and a fix into one folder do not run at once either (fix runs with distinct output
names may share a folder). A killed run's lock goes with its process: nothing stale stays.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from preflight.choices import OUT_NAMES
from preflight.errors import ConfigError
from preflight.report.model import utf8_safe
from preflight.report.writer import clear_stale
from preflight.source import Source
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


@contextlib.contextmanager
def shared_lock(folder: Path) -> Iterator[None]:
    """Hold a shared lock on ``folder`` (which exists) while the block runs: ``fix``'s
    outputs there; a ``ConfigError`` while a ``check`` writes its report there."""
    fd = _lock(folder, shared=True)
    try:
        yield
    finally:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _lock(out_dir: Path, *, shared: bool = False) -> int | None:
    """The locked folder's descriptor; None where no lock can be taken (no ``flock``, a
    folder that cannot be opened, a file system without locks): the run goes on unlocked."""
    if fcntl is None:
        return None
    try:
        fd = os.open(out_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) and shared:
            raise ConfigError(
                f"a preflight check is writing its report into {out_dir} right now; "
                "fix writes its outputs there: wait for it to finish, or write the "
                "outputs elsewhere"
            ) from e
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise ConfigError(
                f"another preflight run is writing into {out_dir} right now (a check's report, "
                "or a fix's outputs); "
                "two runs into one folder would mix their files: wait for it to finish, "
                "or give this run its own --out"
            ) from e
        return None
    return fd


def clear_unread(out_dir: Path, source: Any) -> None:
    """The last run's report files out of ``out_dir`` when the input cannot be read (exit
    3): a missing or unreadable file must not leave the earlier verdict to be read as this
    run's. Not where ``out_dir`` is the input or inside it (its files are data there)."""
    given = Path(source).resolve()
    target = out_dir.resolve()
    if target != given and given not in target.parents and out_dir.is_dir():
        clear_stale(out_dir, keep=given)  # an unreadable out/report.md input stays


def check_out_dir(
    out: Path, src: Source, *, eval_path: str | None = None, checkpoint: Path | None = None
) -> None:
    """A ``ConfigError`` (exit 2, before any work) when ``out`` cannot be the report
    folder: it is a file (the input, say), or it lies in a folder being read, where the
    next run would read the reports as data, or the input (or eval file) is one of the
    files the run writes there (``out/report.json``): the run removes those first, so it
    deleted the data it was asked to check. A path that is not UTF-8 too: Arrow cannot
    write ``findings.parquet`` there (it was an internal error after the whole scan)."""
    try:
        str(out).encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"--out {utf8_safe(str(out))}: the folder's name is not valid UTF-8, and Arrow "
            "cannot write findings.parquet there; choose a UTF-8 name"
        ) from None
    for probe in (out, *out.parents):
        if probe.is_dir():
            break
        if probe.exists():
            is_input = any(probe.resolve() == f.resolve() for f in src.files)
            what = "the input" if is_input else "a file"
            where = "is " + what if probe == out else f"lies under {probe}, which is {what}"
            raise ConfigError(
                f"--out {out} {where}; --out names the folder for the report "
                "(e.g. --out preflight-report)"
            )
    root = Path(src.path)
    if src.files and root.is_dir():
        root, target = root.resolve(), out.resolve()
        if target == root or root in target.parents:
            where = "is" if target == root else "is inside"
            raise ConfigError(
                f"--out {out} {where} the input folder {src.path}, whose files "
                "are being read; write the report elsewhere"
            )
    if out.is_dir():
        inputs = {f.resolve(): "the input" for f in src.files}
        if eval_path:
            inputs.setdefault(Path(eval_path).resolve(), "the eval file")
        if checkpoint is not None:
            inputs.setdefault(checkpoint.resolve(), "the checkpoint")
        for name in OUT_NAMES:
            what = inputs.get((out / name).resolve())
            if what is not None:
                raise ConfigError(
                    f"{out / name} is {what}, and --out {out} is where the "
                    f"report's {name} is written (an earlier one removed "
                    "first): write the report elsewhere, or rename that file"
                )
