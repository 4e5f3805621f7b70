"""Temporary files and folders that name their writer, and sweeping what dead runs left.

Every output is written to a temporary name beside its final path (the same folder, so the
rename into place is atomic), and work that needs a folder gets one under ``TMPDIR``. A run
that is killed cannot clean up after itself, so each temporary name carries the writing
process's id, and the next run deletes the ones whose process is gone::

    .{final.name}.preflight-{pid}.tmp           temp_path(final)
    .{final.name}.preflight-{pid}-{tag}.tmp     temp_path(final, tag)   (tag: [A-Za-z0-9_])
    .{final.name}.preflight-{pid}.tmp.jsonl     temp_path(final, suffix=".jsonl"): a
                                                temporary that is read back (fix's rounds)
                                                ends in the suffix that names its format
    $TMPDIR/preflight-{kind}-{pid}-{random}/    temp_dir(kind)          (kind: [a-z]+)

``sweep(folder)`` and ``sweep_temp_dirs()`` delete only names of that shape whose pid is not
a live process (``os.kill(pid, 0)``); a live run's file, or any other file, is never touched.
The names older releases used (``.findings.parquet.{pid}.tmp``, ``.report.json.{pid}.tmp``,
fix's ``.{stem}.{pid}.{n}.part{suffix}`` and ``.{name}.{pid}.part``) are swept the same way.

``atomic_write(final)`` ties it together: it yields the temporary path, renames it into place
when the block succeeds and deletes it when anything (Ctrl-C included) goes wrong; an
``OSError`` becomes an ``OutputError`` (exit 3) naming the path and the cause.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from preflight.errors import OutputError

_MARK = "preflight"
_TAG = re.compile(r"[A-Za-z0-9_]*")
_KIND = re.compile(r"[a-z]+")
# What a temporary name looks like; group "pid" is the writer's process id.
_FILE_NAMES = (
    re.compile(rf"^\..+\.{_MARK}-(?P<pid>\d+)(?:-[A-Za-z0-9_]+)?\.tmp(?:\.[A-Za-z0-9]+)?$"),
    # earlier releases
    re.compile(r"^\.(?:findings\.parquet|report\.(?:json|html|junit\.xml|md))\.(?P<pid>\d+)\.tmp$"),
    re.compile(r"^\..+\.(?P<pid>\d+)\.\d+\.part(?:\.[A-Za-z0-9]+)?$"),
    re.compile(r"^\..+\.(?P<pid>\d+)\.part$"),
)
_DIR_NAME = re.compile(rf"^{_MARK}-[a-z]+-(?P<pid>\d+)-[A-Za-z0-9_]+$")


def temp_path(final: Path, tag: str = "", *, suffix: str = "") -> Path:
    """A temporary name beside ``final`` that carries this process's id (and ``tag``, to
    tell apart several temporaries of one final path); ``suffix`` (``.parquet``) ends it so
    a reader can tell its format. Nothing is created."""
    if not _TAG.fullmatch(tag):
        raise ValueError(f"tag must be letters, digits or '_', got {tag!r}")
    if suffix and not re.fullmatch(r"\.[A-Za-z0-9]+", suffix):
        raise ValueError(f"suffix must be like '.jsonl', got {suffix!r}")
    tagged = f"-{tag}" if tag else ""
    return final.with_name(f".{final.name}.{_MARK}-{os.getpid()}{tagged}.tmp{suffix}")


def pid_of(name: str) -> int | None:
    """The writer's process id in a temporary file name, or None for any other name."""
    for pattern in _FILE_NAMES:
        if m := pattern.match(name):
            return int(m["pid"])
    return None


def is_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts as alive)."""
    if pid <= 0:
        return True  # never a writer's id; os.kill(0) would mean the process group
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def sweep(folder: Path) -> list[Path]:
    """Delete the temporary files of dead processes in ``folder`` (not below it); return
    what was deleted. A missing or unreadable folder, or a file that cannot be deleted,
    is left as it is: sweeping is tidying, never a reason to fail."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        pid = pid_of(entry.name)
        if pid is None or pid == os.getpid() or is_alive(pid):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                continue
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def temp_dir(kind: str) -> Path:
    """A new folder under ``TMPDIR`` named ``preflight-{kind}-{pid}-{random}``; the caller
    removes it (``shutil.rmtree``) when done."""
    if not _KIND.fullmatch(kind):
        raise ValueError(f"kind must be lowercase letters, got {kind!r}")
    parent = tempfile.gettempdir()
    try:
        return Path(tempfile.mkdtemp(prefix=f"{_MARK}-{kind}-{os.getpid()}-", dir=parent))
    except OSError as e:
        raise OutputError(f"cannot create a temporary folder in {parent}: "
                          f"{e.strerror or e} (set TMPDIR to a writable folder)") from e


def sweep_temp_dirs(parent: Path | None = None) -> list[Path]:
    """Delete the ``temp_dir`` folders of dead processes under ``parent`` (default
    ``TMPDIR``); return what was deleted."""
    removed = []
    root = parent if parent is not None else Path(tempfile.gettempdir())
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        m = _DIR_NAME.match(entry.name)
        if m is None or int(m["pid"]) == os.getpid() or is_alive(int(m["pid"])):
            continue
        with contextlib.suppress(OSError):
            if not entry.is_dir(follow_symlinks=False):
                continue
            shutil.rmtree(entry.path)
            removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def atomic_write(final: Path, tag: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``final``; when the block ends normally it is renamed
    to ``final``, otherwise (an error, Ctrl-C) it is deleted. An ``OSError`` while writing
    or renaming becomes an ``OutputError`` naming the path and the cause."""
    tmp = temp_path(final, tag)
    try:
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            yield tmp
            os.replace(tmp, final)
        except OSError as e:
            raise write_error(final, e) from e
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_error(path: Path, e: OSError, *, what: str | None = None) -> OutputError:
    """An ``OutputError`` for a failed write: the path, the cause, and what to do."""
    cause = e.strerror or str(e) or type(e).__name__
    advice = {
        errno.ENOSPC: "free some space or write elsewhere",
        errno.EDQUOT: "free some space or write elsewhere",
        errno.EROFS: "the file system is read-only; write elsewhere",
        errno.EACCES: "check the folder's permissions or write elsewhere",
        errno.EPERM: "check the folder's permissions or write elsewhere",
    }.get(e.errno or 0, "check the folder or write elsewhere")
    where = f"{what} {path}" if what else str(path)
    return OutputError(f"cannot write {where}: {cause} ({advice})")
