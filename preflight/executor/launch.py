"""How the pool's worker processes start: a fork server that imports preflight's checks once
(``PRELOAD``) and forks each worker from there, or, where there is none (Windows), spawned
interpreters; each with one thread per library (``WORKER_ENV``). Light to import (the
standard library only): the command line starts the server (``warm_for``) before it imports
polars and the rest itself, so that the server's imports and its own run side by side
(about 0.3 s sooner to the first piece on 2 cores).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.context
import os
import signal
import stat
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# One thread per library in each worker: a worker has one core (Ray gives it one CPU, the
# pool one process per core). PREFLIGHT_THREADS: preflight's own reader threads.
WORKER_ENV = {"POLARS_MAX_THREADS": "1", "NUMBA_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1",
              "OMP_NUM_THREADS": "1", "PREFLIGHT_THREADS": "1"}

# Inputs smaller than this run in this process: starting workers costs more than it saves.
POOL_MIN_BYTES = 16 << 20
# With no --workers, inputs from this size on this many cores get one worker per core. One
# process already keeps about 1.4 cores busy, so on the idle 2-core VM the pool of 2 lost at
# 100 MB (0.64x) and came out even from 250 MB (0.88-1.06x at 250 MB, 0.76-1.07x at 1 GB:
# no reliable win for twice the memory); with 4 cores or more, 2.6 or more of them idle,
# the pool's 1-2 CPU s of start are repaid (an estimate: no such machine was measured).
AUTO_POOL_BYTES = 250 * 10**6
AUTO_POOL_CORES = 4

# What the fork server imports once, before it forks the workers: the checks, and its own
# way out (skipped where one is not installed). Not pandas: the reader no longer makes
# pyarrow import it (test_startup), but for a block whose field types change (0.3 s then).
PRELOAD = ("preflight.executor.pool", "preflight.executor.served")
_SERVER_OURS = False  # this process started the fork server (with PRELOAD, WORKER_ENV)
_LOOK_AT_FILES = 10_000  # warm_for sizes a folder by this many files at most
# Checks whose MinHash kernels need numba (executor.pool._MINHASH_CHECKS), as a rules file
# names them; the rules found in the working directory when none are named (discover.py).
_NUMBA_CHECKS = (b"near_duplicate", b"overlap")
_FOUND_RULES = ("preflight.yaml", "preflight.yml", "pyproject.toml")
_RULES_READ = 1 << 20


@contextlib.contextmanager
def _worker_env() -> Iterator[None]:
    """While a worker (or the fork server) starts: one thread per library
    (``WORKER_ENV``), which must be set before it imports polars, numba or
    tokenizers, and a bare ``__main__``: a worker needs preflight only, and spawn (or a fork
    server's child) would run the caller's script again in every worker (a script without
    ``if __name__ == "__main__"`` would start the run again there). This process keeps its
    own. SIGINT is blocked meanwhile, and so in the new process until it ignores it (the fork
    server after its imports, a worker in ``_start``): a Ctrl-C at the terminal, which
    reaches every process of the group, would print the traceback of their imports."""
    saved = {k: os.environ.get(k) for k in WORKER_ENV}
    main = sys.modules["__main__"]
    os.environ.update(WORKER_ENV)
    sys.modules["__main__"] = types.ModuleType("__main__")
    mask = _block_sigint()
    try:
        yield
    finally:
        if mask is not None:  # a Ctrl-C that came meanwhile is this process's now
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        sys.modules["__main__"] = main
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _block_sigint() -> set[signal.Signals] | None:
    """Block SIGINT in this thread (inherited by the processes it starts); the mask before,
    or None where there are no signal masks."""
    if not hasattr(signal, "pthread_sigmask"):
        return None
    from multiprocessing import resource_tracker

    # Its first start unblocks SIGINT in this thread once it runs: let it start before.
    resource_tracker.ensure_running()
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


class _EnvStart:
    """A worker process started in ``_worker_env``."""

    def start(self) -> None:
        with _worker_env():
            super().start()  # type: ignore[misc]


class _Spawned(_EnvStart, multiprocessing.context.SpawnProcess):
    """A fresh interpreter that imports what it needs (where there is no fork server)."""

    def _bootstrap(self, parent_sentinel: Any = None) -> int:
        # In the worker, once its work is done: leave as a forked process does, without
        # tearing down every module (a third of a CPU second with polars, numba, pyarrow).
        code = super()._bootstrap(parent_sentinel)  # type: ignore[misc]
        os._exit(code)


class _Served(_EnvStart, multiprocessing.context.ForkServerProcess):
    """A fork of the fork server, which imported preflight's checks once for all workers."""


class Workers:
    """A start method that keeps the processes it starts, so that Ctrl-C can end each one,
    even one whose start it interrupted before the executor listed it."""

    process: type[_EnvStart]

    def __init__(self) -> None:
        super().__init__()
        self.started: list[Any] = []

    def Process(self, *args: Any, **kwargs: Any) -> Any:
        process = self.process(*args, **kwargs)  # type: ignore[call-arg]
        self.started.append(process)
        return process


class _SpawnWithEnv(Workers, multiprocessing.context.SpawnContext):
    process = _Spawned


class ForkServerWithEnv(Workers, multiprocessing.context.ForkServerContext):
    process = _Served

    def warm(self) -> None:
        """Start the fork server (its imports) without waiting for it."""
        import multiprocessing.forkserver as forkserver

        with _worker_env():
            forkserver.ensure_running()


def context(preload: tuple[str, ...] = ()) -> Workers:
    """Workers forked from a fork server that has imported the checks (one import for all
    workers, and no thread of this process copied), where there is one to start (POSIX)
    and no other code of this process started it with other modules or variables; else
    spawned. ``preload``: modules the server imports besides ``PRELOAD``, when it starts."""
    global _SERVER_OURS
    if "forkserver" in multiprocessing.get_all_start_methods():
        import multiprocessing.forkserver as forkserver

        server = forkserver._forkserver  # type: ignore[attr-defined]
        if _SERVER_OURS or server._forkserver_pid is None:
            if server._forkserver_pid is None:
                forkserver.set_forkserver_preload([*PRELOAD, *preload])
            _SERVER_OURS = True
            return ForkServerWithEnv()
    return _SpawnWithEnv()


def warm_for(data: str | Path | None, workers: int | None, executor: str, *,
             rules: tuple[Path | None, str | None, Path | None] = (None, None, None)) -> None:
    """Start the fork server now when this run will use a pool (``--workers N``, at most the
    usable cores, on an input of ``POOL_MIN_BYTES`` or more; with no ``--workers``,
    ``AUTO_POOL_BYTES`` or more on ``AUTO_POOL_CORES`` cores or more), so that its imports
    overlap this process's own. Nothing for standard input (its size is known once spooled),
    Ray, or a name that is not a local file or folder; the pool starts the server then, as it
    always may. ``rules``: the command's ``--rules``, ``--preset`` and ``--eval``, which tell
    whether the server imports numba too (``may_need_numba``)."""
    if executor != "local" or data is None or str(data) == "-" or workers == 1:
        return
    from preflight.cores import available_cores

    cores = available_cores()
    # The run clips --workers to the usable cores (schedule.worker_count): one left runs no
    # pool.
    if cores < (AUTO_POOL_CORES if workers is None else 2):
        return
    least = POOL_MIN_BYTES if workers is not None else AUTO_POOL_BYTES
    if _at_least(Path(data), least):
        warm(("numba",) if may_need_numba(*rules) else ())


def may_need_numba(rules_file: Path | None, preset: str | None, eval_path: Path | None
                   ) -> bool:
    """Whether the rules this run will read may name a MinHash check, before they are
    loaded (that takes the imports the fork server runs beside): ``--eval`` adds
    ``overlap``; else the text of the rules file, the preset's file, or the rules found in
    the working directory mentions one. A guess both ways: a miss only means each worker
    imports numba itself (half a CPU second), a false hit that the server did for nothing."""
    if eval_path is not None:
        return True
    if rules_file is not None:
        files = [Path(rules_file)]
    elif preset is not None:
        from preflight.paths import presets_dir

        files = [presets_dir() / f"{preset}.yaml"]
    else:
        files = [Path(name) for name in _FOUND_RULES]
    return any(any(check in _regular_head(path) for check in _NUMBA_CHECKS)
               for path in files)


def _regular_head(path: Path) -> bytes:
    """The first ``_RULES_READ`` bytes of ``path`` when it is a regular file, else nothing.
    A pipe (``--rules <(envsubst < r.yaml)``, a FIFO) is never opened here: reading it
    would take the rules the loader reads next, and opening a FIFO with no writer blocks
    for ever (the loader waits for one a bounded time and says so); a device may never end.
    Missing, a folder, unreadable: loading the rules will say."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return b""
        # Not blocking, and looked at again once open: a FIFO put there meanwhile is not read.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return b""
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read(_RULES_READ) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
        except OSError:
            return b""


def _at_least(path: Path, size: int) -> bool:
    """Whether the file at ``path``, or the files a folder's source reads (those directly
    inside it, hidden and ``_`` names skipped: ``source._folder``), hold ``size`` bytes (a
    folder of ``_LOOK_AT_FILES`` entries or more is taken to: this is a guess, the pool's own
    decision comes later)."""
    try:
        if path.is_file():
            return path.stat().st_size >= size
        total = 0
        with os.scandir(path) as entries:
            for seen, entry in enumerate(entries, 1):
                if not entry.name.startswith((".", "_")):
                    with contextlib.suppress(OSError):
                        if entry.is_file():
                            total += entry.stat().st_size
                if total >= size or seen >= _LOOK_AT_FILES:
                    return True
    except OSError:
        pass
    return False


def warm(preload: tuple[str, ...] = ()) -> None:
    """Start this process's fork server (its imports, and ``preload``'s) without waiting
    for it, unless one is running that other code of this process started."""
    ctx = context(preload)
    if isinstance(ctx, ForkServerWithEnv):
        ctx.warm()
