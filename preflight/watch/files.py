"""The watch's files in ``out``: ``fault.json`` (``fault-rank{N}.json`` for a later DDP
rank) and ``replay.pt``; an earlier run's are removed when a watch starts."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from preflight.report.model import SmokeResult
from preflight.tempfiles import atomic_write

if TYPE_CHECKING:
    from preflight.watch.core import WatchCore

REPLAY_NAME = "replay.pt"


def write(core: WatchCore, result: SmokeResult) -> Path | None:
    """Write ``fault.json`` (or ``fault-rank{N}.json``); None when it cannot be written."""
    try:  # claiming (DDP) touches out= too, which may be gone
        path = claim(core.cfg.out, core.rank)
        with atomic_write(path) as tmp:
            tmp.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    except Exception:
        return None
    return path


def clear_stale(out: Path) -> None:
    """A watch starting in ``out``: an earlier run's ``fault.json`` (and its ranks'),
    ``replay.pt`` and claim go, so a clean run never leaves another run's fault there to
    be read as its own (``stats.jsonl`` goes on: a resumed run continues its curves)."""
    for path in (out / ".fault-claim", out / "fault.json", out / REPLAY_NAME,
                 *out.glob("fault-rank*.json")):
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def claim(out: Path, rank: int | None) -> Path:
    """Where this rank's fault goes: ``fault.json`` for the first rank to claim it."""
    if rank is None:
        return out / "fault.json"
    try:
        os.close(os.open(out / ".fault-claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return out / "fault.json"
    except FileExistsError:
        return out / f"fault-rank{rank}.json"
