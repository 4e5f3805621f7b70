"""The smoke stage with torch's thread choice left to preflight against one thread, on an idle
machine and beside busy neighbours (issue 16, item 14).

Usage::

    python benchmarks/bench_threads.py [CORPUS] [--repeat 3] [--busy 2]

Runs ``preflight smoke CORPUS --rules R`` (the built-in LM on the text field, one ``schema``
rule; default smoke settings) in a subprocess, interleaving two environments: **default**
(``OMP_NUM_THREADS`` unset: preflight picks the threads from the cores this process may use
and finds idle) and **one thread** (``OMP_NUM_THREADS=1``). Then the same with ``--busy``
processes spinning beside it (a shared machine). It prints, per condition, the median smoke
stage (``report.timings["smoke"]``), the median wall clock, the threads the default run used
(``report.smoke.threads``), the ratio default / one thread (target ≤ 1.2) and the cores other
processes kept busy meanwhile (``others``, from ``/proc/stat``, the spinners included).
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

CORPUS = Path(__file__).resolve().parents[2] / "shared/corpora/debian_descriptions.jsonl.gz"
RULES = "task: lm\nfields: {text: text, id: id}\nrules:\n  - {id: schema, check: schema}\n"


def busy() -> tuple[float, float]:
    """(busy, total) jiffies of all cores."""
    parts = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts) - idle, sum(parts)


def one_run(corpus: Path, rules: Path, out: Path, threads: int | None) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    b0, t0j = busy()
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "preflight", "smoke", str(corpus), "--rules", str(rules),
         "--out", str(out), "--format", "json", "-q", "--no-progress"],
        env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    b1, t1j = busy()
    if not (out / "report.json").is_file():
        sys.exit(f"preflight failed:\n{proc.stderr[-2000:]}")
    report = json.loads((out / "report.json").read_text())
    cores = len(os.sched_getaffinity(0))
    return {"smoke": report["timings"]["smoke"], "wall": wall,
            "threads": report["smoke"].get("threads") or 0,
            "verdict": report["smoke"]["verdict"],
            # cores busy meanwhile, minus the one this run mostly keeps busy
            "others": max(0.0, (b1 - b0) / max(t1j - t0j, 1) * cores - 1)}


def condition(name: str, corpus: Path, rules: Path, tmp: Path, repeat: int) -> None:
    runs: dict[str, list[dict[str, float]]] = {"default": [], "one": []}
    for i in range(repeat):
        for label, threads in (("default", None), ("one", 1)):
            runs[label].append(one_run(corpus, rules, tmp / f"{name}-{label}-{i}", threads))
    med = {k: statistics.median(r["smoke"] for r in v) for k, v in runs.items()}
    wall = {k: statistics.median(r["wall"] for r in v) for k, v in runs.items()}
    used = sorted({int(r["threads"]) for r in runs["default"]})
    others = statistics.median(r["others"] for v in runs.values() for r in v)
    verdicts = sorted({str(r["verdict"]) for v in runs.values() for r in v})
    print(f"{name:<8} {med['default']:>9.2f} {med['one']:>9.2f} {med['default'] / med['one']:>6.2f}"
          f" {wall['default']:>8.1f} {wall['one']:>8.1f} {','.join(map(str, used)):>8}"
          f" {others:>7.1f}  {','.join(verdicts)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", type=Path, nargs="?", default=CORPUS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--busy", type=int, default=2, help="spinning neighbour processes")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        rules = tmp / "rules.yaml"
        rules.write_text(RULES)
        print(f"{a.corpus.name}; {len(os.sched_getaffinity(0))} cores; median of {a.repeat}, "
              "default and one thread interleaved")
        print(f"{'machine':<8} {'default s':>9} {'1-thr s':>9} {'ratio':>6} {'wall d':>8}"
              f" {'wall 1':>8} {'threads':>8} {'others':>7}  verdict")
        condition("idle", a.corpus, rules, tmp, a.repeat)
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(a.busy)]
        try:
            time.sleep(1.0)
            condition(f"busy×{a.busy}", a.corpus, rules, tmp, a.repeat)
        finally:
            for p in spinners:
                p.kill()


if __name__ == "__main__":
    main()
