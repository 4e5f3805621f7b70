"""One ``fix`` run at a time per output file, and no ``check`` writing a report into an
output's folder meanwhile.

Each run writes its outputs under temporary names and puts them in place together at the
end (``commit``). Two runs writing the same ``--out`` at once interleaved that: the clean
output of one beside the quarantine and manifest of the other (a manifest whose counts and
hashes describe files it does not sit beside). A run therefore claims its final paths
first, with a temporary file beside each (``.{name}.preflight-{pid}-claim{thread}.tmp``;
the thread tells two runs of one process apart) that it holds an exclusive ``flock`` on
for the whole run, then looks at the other runs' claims of the same names: a claim whose
lock is held is a live run, and this run withdraws its claims and stops, exit 2, rather
than wait for an unknown time. A claim whose lock is free was left by a run that was
killed (the kernel drops a dead process's locks, whatever became of its process id): it is
removed, the run goes on and says so. Two runs that start at the same instant may both see
the other and both stop; neither writes anything then, which is the point. Where the file
system has no ``flock``, a claim counts as live while its process id does.

A run also holds a shared lock on each output's folder (``out_folder.shared_lock``):
``preflight check --out`` into that folder holds it exclusively while it clears and writes
its report there, so a check and a fix into one folder do not run at once, while fix runs
into one folder with distinct file names still can.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from preflight.errors import ConfigError
from preflight.tempfiles import is_alive, pid_of, temp_path, write_error

try:
    import fcntl
except ImportError:  # Windows: no flock; a claim counts while its process is alive
    fcntl = None  # type: ignore[assignment]

_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


@contextlib.contextmanager
def claimed(finals: Iterable[Path], notes: list[str] | None = None) -> Iterator[None]:
    """Hold a claim on each of ``finals`` while the block runs; a ``ConfigError`` when
    another live run is writing one of them right now. A dead run's claim is removed and
    a line saying so added to ``notes``."""
    from preflight.out_folder import shared_lock

    paths = list(dict.fromkeys(finals))
    held: list[tuple[Path, int]] = []
    made: list[Path] = []  # folders made for the claims: removed again if the run fails
    notes = notes if notes is not None else []
    with contextlib.ExitStack() as stack:
        try:
            for final in paths:
                claim = temp_path(final, f"claim{threading.get_ident()}")
                try:
                    made += [p for p in (final.parent, *final.parent.parents)
                             if not p.exists()]
                    final.parent.mkdir(parents=True, exist_ok=True)
                    fd = os.open(claim, os.O_RDWR | os.O_CREAT, 0o644)
                except OSError as e:
                    raise write_error(final, e) from e
                held.append((claim, fd))
                _try_lock(fd, shared=False)  # a new file of ours: free
            for folder in dict.fromkeys(p.parent for p in paths):
                stack.enter_context(shared_lock(folder))
            mine = {claim.name for claim, _ in held}
            for final in paths:
                if (pid := _writer(final, mine, notes)) is not None:
                    who = ("another thread of this process" if pid == os.getpid()
                           else f"process {pid}")
                    raise ConfigError(
                        f"another preflight run ({who}) is writing {final} right now; two "
                        "runs into one output would mix their files: wait for it to finish, "
                        "or give this run its own --out and --quarantine"
                    )
            yield
        except BaseException:
            _withdraw(held)
            for folder in sorted(made, key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only if empty: nothing of anyone else's goes
            raise
        _withdraw(held)


def _try_lock(fd: int, *, shared: bool) -> bool | None:
    """Lock ``fd`` without waiting: True when locked, False when another holds it, None
    where the file system has no locks."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        if e.errno in _NO_LOCKS:
            return None
        raise
    return True


def _withdraw(held: list[tuple[Path, int]]) -> None:
    for claim, fd in held:
        with contextlib.suppress(OSError):
            claim.unlink(missing_ok=True)  # before the lock goes: no one sees it free
        with contextlib.suppress(OSError):
            os.close(fd)


def _writer(final: Path, mine: set[str], notes: list[str]) -> int | None:
    """The id of another live run's process with a claim on ``final`` (this process's,
    when another thread has claimed it: a library step run twice at once), or None. A
    dead run's claim is removed (``notes`` says so)."""
    prefix = f".{final.name}."
    try:
        names = [e.name for e in os.scandir(final.parent)]
    except OSError:
        return None
    for name in names:
        if name in mine or not name.startswith(prefix) or "-claim" not in name:
            continue
        pid = pid_of(name)
        # the pid must follow the final name itself (not a longer name sharing its start)
        if pid is None or not name.startswith(f"{prefix}preflight-{pid}-claim"):
            continue
        if _live(final.parent / name, pid):
            return pid
        with contextlib.suppress(OSError):
            os.unlink(final.parent / name)
            notes.append(f"{final}: a claim left by process {pid}, which was killed or "
                         "crashed, was removed; this run goes on")
    return None


def _live(claim: Path, pid: int) -> bool:
    """Whether the run that made ``claim`` still holds it."""
    try:
        fd = os.open(claim, os.O_RDONLY)
    except FileNotFoundError:
        return False  # withdrawn meanwhile
    except OSError:
        return pid == os.getpid() or is_alive(pid)
    try:
        locked = _try_lock(fd, shared=True)
    finally:
        os.close(fd)  # also drops the shared lock just taken
    if locked is None:
        return is_alive(pid)
    return not locked
