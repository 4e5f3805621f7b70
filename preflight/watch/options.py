"""The watch's options: ``WatchConfig`` (``preflight.watch``'s keyword arguments, which a
framework adapter takes as ``**options``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from preflight.errors import ConfigError

OnFault = Literal["stop", "skip", "warn"]
Snapshot = Literal["memory", "none"]
CheckpointSource = str | Path | Callable[[], str | Path | None]
# rerun_time_limit's automatic value: at least 5 minutes, else 100 mean training steps. An
# investigation re-runs the batch, its control, its rows one by one and parts of them: on
# tests/watch/tiny.py with one NaN row, about 7 batches' worth of rows in (batch size + 8)
# forwards on 6 fresh copies of the model, for batches of 8, 32 and 128 rows.
RERUN_FLOOR = 300.0
RERUN_STEPS = 100
MAX_LIMIT = 604_800  # a week, smoke.time_limit's bound too


@dataclass
class WatchConfig:
    """What the watch does and where it writes (``preflight.watch``'s keyword arguments)."""

    out: Path = Path("watch")
    on_fault: OnFault = "stop"
    grad_norm_alarm: float = 100.0
    skipped_steps_alarm: int = 20
    min_scale: float = 1e-4
    log_every: int = 100
    sync_every: int | None = None  # None: 1 on CPU, 10 on CUDA
    grad_every: int = 1  # compute the gradient norm every N steps when the loop does not clip
    history: int = 200
    # "none" (large models): re-runs never copy the model; they load ``checkpoint`` (a path,
    # or a callable returning the latest one) into it, else use its current weights.
    snapshot: Snapshot = "memory"
    checkpoint: CheckpointSource | None = None
    model_spec: str | None = None
    gate_report: str | Path | None = None
    # Seconds the investigation of a fault (its re-runs of the user's step_fn) may take;
    # None: RERUN_FLOOR or RERUN_STEPS mean steps, whichever is longer (rerun_limit).
    rerun_time_limit: float | None = None

    def __post_init__(self) -> None:
        if self.on_fault not in ("stop", "skip", "warn"):
            raise ConfigError(f"on_fault must be one of stop, skip, warn; got {self.on_fault!r}")
        if self.snapshot not in ("memory", "none"):
            raise ConfigError(f"snapshot must be 'memory' or 'none', got {self.snapshot!r}")
        if self.checkpoint is not None and not (isinstance(self.checkpoint, str | Path)
                                                or callable(self.checkpoint)):
            raise ConfigError("checkpoint must be a path or a callable returning the latest "
                              f"checkpoint's path, got {type(self.checkpoint).__name__}")
        for name in ("skipped_steps_alarm", "log_every", "history", "grad_every"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.sync_every is not None and (not isinstance(self.sync_every, int)
                                            or self.sync_every < 1):
            raise ConfigError(f"sync_every must be a positive integer, got {self.sync_every!r}")
        limit = self.rerun_time_limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float)
                                  or not 1 <= limit <= MAX_LIMIT):  # NaN fails the range too
            raise ConfigError("rerun_time_limit must be None (automatic) or seconds from 1 to "
                              f"{MAX_LIMIT:,}, got {limit!r}")
        for name, low in (("grad_norm_alarm", "above 0 (inf: never)"),
                          ("min_scale", "0 or more, finite")):
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not (value > 0 if name == "grad_norm_alarm" else 0 <= value < math.inf)):
                # a string failed every step's comparison and turned the watch off, unseen
                raise ConfigError(f"{name} must be a number {low}, got {value!r}")
        if self.model_spec is not None and not (isinstance(self.model_spec, str)
                                                and self.model_spec.strip()):
            raise ConfigError("model_spec must be package.module:build or file.py:build (or "
                              f"None), got {self.model_spec!r}")
        if not isinstance(self.out, str | Path) or not str(self.out).strip():
            # "" is the working directory: fault.json among the user's files
            raise ConfigError(f"watch out must name a folder, got {self.out!r}")
        self.out = Path(self.out)
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f"watch out={str(self.out)!r} is a file; give a folder "
                              "(fault.json, stats.jsonl and the replay file go there)")
        if self.gate_report is not None:  # refused now, not at a fault 30,000 steps on
            from preflight.watch.gate import check_gate

            check_gate(self.gate_report)


    def rerun_limit(self, started: list[float]) -> float:
        """The investigation's time limit, given when the steps kept started (their mean
        time per step, for the automatic limit)."""
        if self.rerun_time_limit is not None:
            return float(self.rerun_time_limit)
        step = (started[-1] - started[0]) / (len(started) - 1) if len(started) > 1 else 0.0
        return min(MAX_LIMIT, max(RERUN_FLOOR, RERUN_STEPS * step))


def config(out: str | Path, options: dict[str, Any]) -> WatchConfig:
    """``WatchConfig(out=out, **options)``; an unknown option is a ``ConfigError`` naming
    the known ones."""
    try:
        return WatchConfig(out=out, **options)
    except TypeError as e:
        known = ", ".join(f for f in WatchConfig.__dataclass_fields__ if f != "out")
        raise ConfigError(f"PreflightCallback: {e}; the watch options are {known}") from e
