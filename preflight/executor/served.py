"""Imported by the pool's fork server alone, after the rest of ``pool.PRELOAD``: what it
imported moves to the garbage collector's permanent generation, so that a worker's
collections do not write to (and so copy) every page it shares with the server; and when
the driver is gone, the server leaves at once instead of tearing its modules down (a third
of a CPU second with polars, numba and pyarrow loaded). The workers leave that way already."""

from __future__ import annotations

import atexit
import gc
import os
import sys


def _leave() -> None:
    """Flush what was written, then exit without the interpreter's teardown."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(0)


gc.freeze()
atexit.register(_leave)
