"""Numba kernels that compile on first use, per module.

numba loads when a module's first kernel runs, not on import: a run that needs none of
them never pays for it (about 0.3 s). A module marks its kernels with its own ``Kernels``
and calls them as plain functions; the first call compiles them all and puts the compiled
dispatchers in the module's globals, because a kernel calls others by their global name.
The module's global ``numba`` is set at the same time (the kernels' bodies reach
``numba.prange`` only when numba compiles them).

Compiled code is cached where numba's locators say: ``NUMBA_CACHE_DIR`` if set, else
``__pycache__`` beside the module, else (a read-only install) the user's cache folder,
``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``; with none writable, the kernels compile in
every run (numba alone would refuse to start; ``tests/test_numba_cache.py``).
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

# One lock for every module: the rules set up in threads, and one of them imports numba.
_COMPILING = threading.Lock()


# 64-bit FNV-1a and the golden-ratio multiplier, for the kernels' hashes.
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def fmix64(h: np.uint64) -> np.uint64:
    """MurmurHash3's 64-bit finalizer (a helper every module's kernels may call)."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


# Compiled into each module that uses kernels, under these names.
HELPERS = (fmix64,)


class Kernels:
    """The kernels of one module: ``@kernels.kernel(**njit_options)`` marks a function,
    ``kernels.compiled()`` compiles them all (once), with ``HELPERS``, and returns them by
    name."""

    def __init__(self, module_globals: dict[str, Any]) -> None:
        self._globals = module_globals
        self._marked: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
            fn.__name__: (fn, {}) for fn in HELPERS}
        self._compiled: dict[str, Any] | None = None

    def kernel(self, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Mark a function as a kernel (``njit(cache=True, **options)``)."""

        def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._marked[fn.__name__] = (fn, options)

            @functools.wraps(fn)
            def first_use(*args: Any) -> Any:
                return self.compiled()[fn.__name__](*args)

            return first_use

        return mark

    def compiled(self) -> dict[str, Any]:
        """Import numba and compile every marked kernel, once."""
        with _COMPILING:
            if self._compiled is None:
                numba = importlib.import_module("numba")
                self._globals["numba"] = numba
                self._compiled = {name: _njit(numba, fn, options)
                                  for name, (fn, options) in self._marked.items()}
                self._globals.update(self._compiled)
        return self._compiled


def _njit(numba: Any, fn: Callable[..., Any], options: dict[str, Any]) -> Any:
    try:
        return numba.njit(cache=True, **options)(fn)
    except RuntimeError as e:  # no folder to cache in: compile in every run rather than fail
        if "cannot cache" not in str(e):
            raise
        return numba.njit(**options)(fn)
