"""One ``fix`` run at a time per output file.

Each run writes its outputs under temporary names and renames them into place one after the
other (clean, quarantine, manifest). Two runs writing the same ``--out`` at once interleaved
those renames: the clean output of one beside the quarantine and manifest of the other (a
manifest whose counts and hashes describe files it does not sit beside). A run therefore
claims its final paths first, with an empty temporary file beside each
(``.{name}.preflight-{pid}-claim{thread}.tmp``, the shape ``tempfiles`` sweeps when its
process is gone; the thread tells two runs of one process apart, which would otherwise write
the same temporary names), then looks for another run's temporary files of the same names;
when there are any, it withdraws its claims and stops, exit 2, rather than wait for an
unknown time. Two runs that start at the same instant may both see the other and both stop;
neither writes anything then, which is the point.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from preflight.errors import ConfigError
from preflight.tempfiles import is_alive, pid_of, temp_path, write_error


@contextlib.contextmanager
def claimed(finals: Iterable[Path]) -> Iterator[None]:
    """Hold a claim on each of ``finals`` while the block runs; a ``ConfigError`` when
    another live process is writing one of them right now."""
    paths = list(dict.fromkeys(finals))
    claims: list[Path] = []
    made: list[Path] = []  # folders made for the claims: removed again if the run fails
    try:
        for final in paths:
            claim = temp_path(final, f"claim{threading.get_ident()}")
            try:
                made += [p for p in (final.parent, *final.parent.parents) if not p.exists()]
                final.parent.mkdir(parents=True, exist_ok=True)
                claim.touch()
            except OSError as e:
                raise write_error(final, e) from e
            claims.append(claim)
        for final in paths:
            if (pid := _writer(final)) is not None:
                who = "another thread of this process" if pid == os.getpid() else f"process {pid}"
                raise ConfigError(
                    f"another preflight run ({who}) is writing {final} right now; two runs "
                    "into one output would mix their files: wait for it to finish, or give "
                    "this run its own --out and --quarantine"
                )
        yield
    except BaseException:
        _withdraw(claims)
        for folder in sorted(made, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if empty: nothing of anyone else's goes
        raise
    _withdraw(claims)


def _withdraw(claims: list[Path]) -> None:
    for claim in claims:
        with contextlib.suppress(OSError):
            claim.unlink(missing_ok=True)


def _writer(final: Path) -> int | None:
    """The id of another live process with a temporary file of ``final`` (or of this one,
    when another thread has claimed it: a library step run twice at once), or None."""
    prefix = f".{final.name}."
    try:
        names = [e.name for e in os.scandir(final.parent)]
    except OSError:
        return None
    mine = f"{prefix}preflight-{os.getpid()}-claim"
    for name in names:
        if name.startswith(mine) and name != temp_path(final, f"claim{threading.get_ident()}").name:
            return os.getpid()
        if not name.startswith(prefix):
            continue
        pid = pid_of(name)
        # the pid must follow the final name itself (not a longer name sharing its start)
        if (
            pid is not None
            and pid != os.getpid()
            and is_alive(pid)
            and name.startswith(f"{prefix}preflight-{pid}")
        ):
            return pid
    return None
