"""How many cores this process may really use: the CPU affinity mask, a cgroup CPU quota
(containers, Kubernetes limits), the physical cores behind them, and, for work that is
hurt by a busy neighbour (torch's OpenMP threads wait for each other at every op), the
cores other processes leave idle right now.

``os.cpu_count()`` answers none of these: in a container limited to 2 CPUs on a 64-core host
it says 64, and two threads on a machine whose other core is busy run slower than one."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def available_cores() -> int:
    """The cores this process may run on: its affinity mask, capped by a cgroup quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    quota = cgroup_quota()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def cgroup_quota(root: Path = CGROUP) -> float | None:
    """The CPU quota in cores (cgroup v2 ``cpu.max``, else v1 ``cpu.cfs_quota_us``), or
    None when there is none."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        if quota != "max":
            return int(quota) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def physical_cores(cpuinfo: Path = Path("/proc/cpuinfo")) -> int | None:
    """Distinct (socket, core) pairs in ``/proc/cpuinfo``: hyper-threads share a core's
    arithmetic units, so compute threads beyond the physical cores only contend."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    pairs, socket = set(), "0"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            socket = value.strip()
        elif key == "core id":
            pairs.add((socket, value.strip()))
    return len(pairs) or None


def idle_cores(*, seconds: float = 0.1, stat: Path = Path("/proc/stat")) -> float | None:
    """How many of the machine's cores were idle over a short sample of ``/proc/stat``
    (None where it cannot be read)."""
    first = _jiffies(stat)
    if first is None:
        return None
    time.sleep(seconds)
    second = _jiffies(stat)
    if second is None:
        return None
    busy = second[0] - first[0]
    total = second[1] - first[1]
    if total <= 0:
        return None
    return (1 - busy / total) * second[2]


def _jiffies(stat: Path) -> tuple[float, float, int] | None:
    """(busy, total) jiffies over all cores, and the number of cores listed."""
    try:
        lines = stat.read_text().splitlines()
        parts = [float(x) for x in lines[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0.0)  # idle + iowait
    return sum(parts) - idle, sum(parts), max(1, cpus)


def compute_threads(*, cap: int = 4) -> int:
    """Threads for a small compute-bound job (the smoke test's tiny models): the cores this
    process may use, no more than the physical cores or ``cap``, and no more than the cores
    idle right now, at least one. A thread that has to wait for a core a neighbour holds
    stalls every other thread at the next barrier: on a 2-core machine with one busy
    neighbour, two threads ran 3-4 times slower than one."""
    threads = min(available_cores(), cap)
    physical = physical_cores()
    if physical is not None:
        threads = min(threads, physical)
    idle = idle_cores()
    if idle is not None:
        threads = min(threads, max(1, math.floor(idle + 0.5)))
    return max(1, threads)
