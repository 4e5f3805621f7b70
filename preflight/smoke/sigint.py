"""Whether a ``KeyboardInterrupt`` came from Ctrl-C or from code that raised it.

Python turns SIGINT into ``KeyboardInterrupt``, but any code can ``raise KeyboardInterrupt``
too (a model's forward that stops on a condition, a library's guard). While the user's code
runs, SIGINT is counted by a handler that then does what the one before it did; a
``KeyboardInterrupt`` with no SIGINT counted was raised by code, and ``where_raised`` names
the line that raised it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

_PACKAGE = str(Path(__file__).resolve().parents[1])
_seen = [0]  # SIGINTs received while a ``counting`` block ran


def _counted(previous: Any) -> Any:
    def handler(signum: int, frame: FrameType | None) -> None:
        _seen[0] += 1
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    return handler


@contextlib.contextmanager
def counting() -> Iterator[Callable[[], bool]]:
    """Count SIGINT while the block runs; the yielded function says whether one came
    (always True where no handler can be set, off the main thread: there a
    ``KeyboardInterrupt`` is taken for Ctrl-C, as before)."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: True
        return
    before = _seen[0]
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, _counted(previous))
    try:
        yield lambda: _seen[0] != before
    finally:
        signal.signal(signal.SIGINT, previous)


def where_raised(tb: TracebackType | None) -> str:
    """``file:line (in function)`` of the innermost frame outside preflight's own package
    (the user's code, or a library it called), or "" when there is none."""
    frames = [f for f in traceback.extract_tb(tb) if not f.filename.startswith(_PACKAGE)]
    if not frames:
        return ""
    f = frames[-1]
    return f"{f.filename}:{f.lineno} (in {f.name})"
