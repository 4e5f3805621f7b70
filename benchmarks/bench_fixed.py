"""Time preflight's fixed cost in one or two source trees, interleaved: ``--help``, ``import
preflight`` and a small ``check`` with the HTML report, each in a fresh process.

Usage::

    python benchmarks/bench_fixed.py [--old DIR] [--new DIR] [--runs 3] [--data FILE]

``DIR`` is a checkout of preflight (e.g. ``git archive <commit> | tar -x -C DIR``; default
``--new``: this tree). Each round runs every command once per tree, alternating trees, and
the best (smallest) wall time of the rounds is reported: the floor, which a shared machine
disturbs least. The floor of the interpreter itself is measured beside them (``python -c
pass``, and ``import click``: what a click command line costs before any of its own code).

``check`` is ``preflight check DATA --no-smoke --format json,html -q`` (default DATA:
``sample_data/pretrain.jsonl``, 300 rows, whose default rules include near-duplicates: the
numba kernels load from their cache, warmed by an untimed first run), and its line also
shows ``timings.report`` from the report.json it wrote; ``check 300 rows, json`` is the same
run without report.html, so the difference is what the HTML page costs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands(data: Path, out: Path) -> dict[str, list[str]]:
    return {
        "python -c pass": ["-c", "pass"],
        "import click": ["-c", "import click"],
        "preflight --help": ["-m", "preflight", "--help"],
        "preflight check --help": ["-m", "preflight", "check", "--help"],
        "import preflight": ["-c", "import preflight"],
        "check 300 rows, json": ["-m", "preflight", "check", str(data), "--no-smoke",
                                 "--format", "json", "-q", "--out", str(out / "json")],
        "check 300 rows + html": ["-m", "preflight", "check", str(data), "--no-smoke",
                                  "--format", "json,html", "-q", "--out", str(out)],
    }


def _wall(tree: Path, args: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1: the sample corpora fail their gate on purpose
        raise SystemExit(f"{args} in {tree} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, help="the tree before (optional)")
    parser.add_argument("--new", type=Path, default=ROOT, help="the tree after")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT / "sample_data" / "pretrain.jsonl")
    args = parser.parse_args()
    trees = {"old": args.old, "new": args.new}
    trees = {name: tree.resolve() for name, tree in trees.items() if tree is not None}
    best: dict[tuple[str, str], float] = {}
    report_s: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="bench-fixed-") as tmp:
        work = Path(tmp)
        for name, tree in trees.items():  # warm the disk cache and numba's kernel cache
            _wall(tree, _commands(args.data.resolve(), work / name)["check 300 rows + html"],
                  work)
        for _ in range(args.runs):
            for name, tree in trees.items():
                out = work / name
                for label, command in _commands(args.data.resolve(), out).items():
                    wall = _wall(tree, command, work)
                    best[name, label] = min(best.get((name, label), wall), wall)
                    if label == "check 300 rows + html":
                        timings = json.loads((out / "report.json").read_text())["timings"]
                        report_s[name].append(timings.get("report", float("nan")))
    labels = list(_commands(Path("x"), Path("x")))
    print(f"best of {args.runs} (seconds, wall, each in a fresh process; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f})")
    print(f"| command | {' | '.join(trees)} |" + (" new/old |" if len(trees) == 2 else ""))
    print("|---|" + "---|" * len(trees) + ("---|" if len(trees) == 2 else ""))
    for label in labels:
        cells = [f"{best[name, label]:.3f}" for name in trees]
        ratio = (f" {best['new', label] / best['old', label]:.2f} |" if len(trees) == 2
                 else "")
        print(f"| {label} | {' | '.join(cells)} |{ratio}")
    cells = [f"{min(v):.3f}" for v in report_s.values()]
    print(f"| timings.report (in report.json) | {' | '.join(cells)} |"
          + (" |" if len(trees) == 2 else ""))


if __name__ == "__main__":
    main()
