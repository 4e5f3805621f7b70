"""Time ``preflight check`` on a wide CSV (a feature matrix: thousands of columns, few
rows) beside polars ``read_csv`` of the same file, in one run, and print the ratio.

Usage::

    python benchmarks/bench_wide.py [--columns 1000,4000] [--rows 3] [--tree DIR ...]

Each width gets a file of ``--rows`` rows whose columns alternate words and integers. Every
``--tree`` (a checkout of preflight, e.g. ``git archive <commit> | tar -x -C DIR``; default:
this tree) runs ``check FILE --no-smoke --format json -q`` in a fresh process; the baseline
is ``polars.read_csv`` with schema inference in a fresh process too, so both pay their
imports. Before 2026-12-03 the cost grew with the square of the width (polars builds
``DataFrame.schema`` anew on every access and it was read once per column).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _write(path: Path, columns: int, rows: int) -> None:
    header = ",".join(f"c{i}" for i in range(columns))
    row = ",".join("7" if i % 2 else f"word{i}" for i in range(columns))
    path.write_text(header + "\n" + "\n".join(row for _ in range(rows)) + "\n")


def _wall(args: list[str], tree: Path, cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{args} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--columns", default="1000,4000")
    parser.add_argument("--rows", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append")
    args = parser.parse_args()
    trees = args.tree or [ROOT]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        print(f"{'columns':>8} {'tree':<24} {'preflight s':>12} {'polars s':>9} {'ratio':>7}")
        for columns in (int(c) for c in args.columns.split(",")):
            data = work / f"wide{columns}.csv"
            _write(data, columns, args.rows)
            read = _wall(["-c", f"import polars; polars.read_csv({str(data)!r})"], ROOT, work)
            for tree in trees:
                wall = _wall(["-m", "preflight", "check", str(data), "--no-smoke",
                              "--format", "json", "-q", "--out", str(work / "out")], tree, work)
                print(f"{columns:>8} {str(tree)[-24:]:<24} {wall:>12.2f} {read:>9.2f} "
                      f"{read / wall:>7.3f}")


if __name__ == "__main__":
    main()
