"""The cores a process may use: affinity, cgroup quotas, physical cores, idle cores, and the
thread count the smoke test takes from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflight import cores


def test_cgroup_v2_quota_in_cores(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cores.cgroup_quota(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cores.cgroup_quota(tmp_path) is None


def test_cgroup_v1_quota_in_cores(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cores.cgroup_quota(tmp_path) == 3.0
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")  # no limit
    assert cores.cgroup_quota(tmp_path) is None


def test_no_cgroup_files_means_no_quota(tmp_path: Path) -> None:
    assert cores.cgroup_quota(tmp_path) is None


def test_available_cores_are_capped_by_the_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(cores, "cgroup_quota", lambda: 1.5)
    assert cores.available_cores() == 2  # a 1.5-core quota still runs two threads part-time
    monkeypatch.setattr(cores, "cgroup_quota", lambda: None)
    assert cores.available_cores() == 64


def test_physical_cores_count_hyperthread_siblings_once(tmp_path: Path) -> None:
    block = "processor\t: {n}\nphysical id\t: {s}\ncore id\t\t: {c}\n\n"
    info = "".join(block.format(n=n, s=s, c=c)
                   for n, (s, c) in enumerate([(0, 0), (0, 1), (0, 0), (0, 1),
                                               (1, 0), (1, 0)]))
    (tmp_path / "cpuinfo").write_text(info)
    assert cores.physical_cores(tmp_path / "cpuinfo") == 3  # (0,0) (0,1) (1,0)
    (tmp_path / "bare").write_text("processor\t: 0\n")
    assert cores.physical_cores(tmp_path / "bare") is None


def test_idle_cores_from_two_samples_of_proc_stat(monkeypatch: pytest.MonkeyPatch) -> None:
    # Over the sample 400 jiffies passed on 4 cores; 100 of them busy: 3 cores idle.
    samples = iter([(1000.0, 5000.0, 4), (1100.0, 5400.0, 4)])
    monkeypatch.setattr(cores, "_jiffies", lambda stat: next(samples))
    assert cores.idle_cores(seconds=0) == pytest.approx(3.0)


def test_idle_cores_reads_a_real_stat_layout(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 50 0 50 350 50 0 0 0 0 0\n"
                    "cpu1 50 0 50 350 50 0 0 0 0 0\nintr 1\n")
    assert cores._jiffies(stat) == (200.0, 1000.0, 2)
    assert cores.idle_cores(seconds=0, stat=tmp_path / "missing") is None


@pytest.mark.parametrize(("available", "physical", "idle", "threads"), [
    (2, 2, 2.0, 2),     # an idle 2-core machine: both
    (2, 2, 1.1, 1),     # a neighbour holds a core: one thread, not two that wait
    (2, 2, 0.0, 1),     # everything busy: still one
    (16, 8, 16.0, 4),   # capped at 4 for tiny models
    (16, 2, 16.0, 2),   # never past the physical cores
    (3, None, None, 3),  # nothing readable: the cores the process may use
])
def test_compute_threads(monkeypatch: pytest.MonkeyPatch, available: int,
                         physical: int | None, idle: float | None, threads: int) -> None:
    monkeypatch.setattr(cores, "available_cores", lambda: available)
    monkeypatch.setattr(cores, "physical_cores", lambda: physical)
    monkeypatch.setattr(cores, "idle_cores", lambda: idle)
    assert cores.compute_threads() == threads
