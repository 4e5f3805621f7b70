"""Time the default gate's hot spots in two source trees, interleaved, in the same run.

Usage::

    python benchmarks/bench_hotspots.py FILE --old DIR --new DIR [--runs 5]

``DIR`` is a checkout of preflight (e.g. ``git archive <commit> | tar -x -C DIR``). Each run
starts one child per tree, alternating old/new, and the child runs ``run_preflight(FILE,
smoke=False)`` (the default rules) with timers around:

* ``fold``: every call of the duplicate fold (``preflight.batch.fold``) during the gate, where
  it competes with the other checks and the reader for the cores; and ``fold_alone``: the same
  inputs folded again after the gate with nothing else running (median of 3 passes);
* ``add``: every ``FindingsSink.add`` call (scan and finish findings);
* ``encoding`` and ``encoding_alone``: ``Encoding.scan`` in the gate, and again on the same
  batches after it (median of 3 passes);
* ``read_alone`` and ``read_alone_cpu``: the source read again after the gate, batches only
  (``open_source(FILE).batches()``, median of 3 passes): wall seconds, and CPU seconds of
  the process (the reader parses pieces on several threads);
* ``gate``: the whole ``run_preflight`` call.

Medians over the runs are printed as a table (seconds) with new/old ratios. On a shared
machine these numbers are noisy: compare medians, and repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KEYS = ("fold", "fold_alone", "add", "encoding", "encoding_alone", "read_alone",
        "read_alone_cpu", "gate")


def child(data: str) -> dict[str, float]:
    """One gate run in this process with timers around the hot spots (the tree on
    PYTHONPATH decides which implementation runs)."""
    import preflight.batch
    import preflight.checks.encoding as encoding
    import preflight.findings as findings
    from preflight import run_preflight

    spent = dict.fromkeys(KEYS, 0.0)
    folded: list[Any] = []
    scanned: list[tuple[Any, Any]] = []

    def timed(key: str, fn: Any, keep: list[Any] | None = None) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - t0
                if keep is not None:
                    keep.append(args)
        return wrapper

    fold = preflight.batch.fold
    scan = encoding.Encoding.scan
    preflight.batch.fold = timed("fold", fold, folded)
    findings.FindingsSink.add = timed("add", findings.FindingsSink.add)
    encoding.Encoding.scan = timed("encoding", scan, scanned)
    with tempfile.TemporaryDirectory(prefix="bench_hotspots_") as tmp:
        t0 = time.perf_counter()
        run_preflight(data, out=Path(tmp) / "report", smoke=False)
        spent["gate"] = time.perf_counter() - t0
    spent["fold_alone"] = _median_pass(lambda: [fold(texts) for (texts,) in folded])
    spent["encoding_alone"] = _median_pass(lambda: [scan(c, b) for c, b in scanned])
    spent["read_alone"] = _median_pass(lambda: _read(data))
    spent["read_alone_cpu"] = _median_pass(lambda: _read(data), clock=time.process_time)
    return spent


def _read(data: str) -> None:
    """Every batch of the source, read and dropped."""
    from preflight.source import open_source

    for _ in open_source(Path(data)).batches():
        pass


def _median_pass(work: Any, passes: int = 3, clock: Any = time.perf_counter) -> float:
    """Median seconds of ``passes`` runs of ``work`` (the first one warms caches up), on
    ``clock`` (wall time, or ``time.process_time`` for the CPU time of all threads)."""
    seconds = []
    for _ in range(passes):
        t0 = clock()
        work()
        seconds.append(clock() - t0)
    return statistics.median(seconds)


def main() -> int:
    """Run the interleaved comparison and print the medians."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--old", type=Path, required=True, help="Source tree of the baseline.")
    ap.add_argument("--new", type=Path, required=True, help="Source tree to compare.")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    results: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for run in range(args.runs):
        for name in ("old", "new") if run % 2 == 0 else ("new", "old"):
            tree = getattr(args, name).resolve()
            env = {**os.environ, "PYTHONPATH": str(tree)}
            out = subprocess.run(
                [sys.executable, __file__, str(args.file), "--old", ".", "--new", ".",
                 "--child", str(args.file.resolve())],
                env=env, cwd=tree, check=True, capture_output=True, text=True)
            results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"# {args.file} ({args.file.stat().st_size / 1e6:.0f} MB), {args.runs} interleaved "
          f"runs per tree, medians in seconds, {os.cpu_count()} CPUs")
    print(f"{'':16}{'old':>9}{'new':>9}{'new/old':>9}")
    for key in KEYS:
        old = statistics.median(r[key] for r in results["old"])
        new = statistics.median(r[key] for r in results["new"])
        print(f"{key:16}{old:9.3f}{new:9.3f}{new / old if old else float('nan'):9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
