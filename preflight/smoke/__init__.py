"""The smoke test: a seeded micro-training on ~100 sampled rows that tells a data fault
from a code fault. torch is imported here and nowhere else in preflight."""

from __future__ import annotations

from preflight.smoke.rerun import replay
from preflight.smoke.stage import check_setup, run_smoke

__all__ = ["check_setup", "replay", "run_smoke"]
