"""The pool tests run a pool of two on any machine: a process that may use fewer cores
would otherwise run fewer workers (``schedule.worker_count`` caps them at the usable cores)."""

from __future__ import annotations

import pytest

from preflight import cores


@pytest.fixture(autouse=True)
def cores_for_two_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cores, "available_cores", lambda: 8)
