"""A second run into the same ``out``: the first run's fault is not left there as if it
were the second's."""

from __future__ import annotations

from pathlib import Path

import pytest

import preflight
from tests.watch import tiny


def test_a_clean_run_removes_an_earlier_runs_fault_and_replay(tmp_path: Path) -> None:
    """A CI step testing for watch/fault.json failed a clean rerun on the old fault."""
    out = tmp_path / "watch"
    bad = [*tiny.batches(tiny.make_rows(16)), tiny.collate(tiny.make_rows(8, nan_row=3))]
    model, opt = tiny.fresh()
    with pytest.raises(preflight.watch.TrainingFault), preflight.watch(
            model, opt, step_fn=tiny.step_fn, out=out, log_every=1) as w:
        tiny.train(w, model, opt, bad)
    assert (out / "fault.json").is_file() and (out / "replay.pt").is_file()
    (out / "fault-rank1.json").write_text("{}")  # a DDP rank's, from that run
    model, opt = tiny.fresh()
    with preflight.watch(model, opt, step_fn=tiny.step_fn, out=out, log_every=1) as w:
        tiny.train(w, model, opt, tiny.batches(tiny.make_rows(16)))
    assert w.fault is None
    assert sorted(p.name for p in out.iterdir()) == ["stats.jsonl"]  # its curves go on
