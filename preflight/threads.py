"""Thread pools kept for the whole process (a reader's parse threads, the checks' scan
threads): made once on first use, ended together by ``close_pools`` before the command
leaves.

Idle pool threads still count as running threads: while one lives, ``cli.run`` cannot tell
them from a thread still at work and takes the interpreter's slow exit (0.3 s of module
teardown, a quarter of a small gate)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

_POOLS: dict[str, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()


def shared_pool(name: str, threads: Callable[[], int]) -> ThreadPoolExecutor:
    """The process's pool called ``name`` (its threads ``name_0``, ``name_1``...), made on
    first use with ``threads()`` threads (asked then only: callers ask per block or batch)."""
    with _LOCK:
        pool = _POOLS.get(name)
        if pool is None:
            pool = _POOLS[name] = ThreadPoolExecutor(max_workers=max(1, threads()),
                                                     thread_name_prefix=name)
        return pool


def close_pools() -> None:
    """End every shared pool, waiting for work already given to it (a later
    ``shared_pool`` makes a new one)."""
    with _LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.shutdown(wait=True)


# Non-daemon threads the user's code (a model named with --model) started and left running.
# The interpreter's normal exit would wait for them forever; the command leaves without them.
_LEFT_BY_USER: set[threading.Thread] = set()


def leave_behind(threads: Iterable[threading.Thread]) -> None:
    """Record threads the user's code left running, which the command does not wait for."""
    _LEFT_BY_USER.update(threads)


def left_by_user() -> list[threading.Thread]:
    """The user's threads recorded by ``leave_behind`` that still run."""
    return [t for t in _LEFT_BY_USER if t.is_alive()]
