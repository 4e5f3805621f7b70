"""Time the smoke test on a Hugging Face ``hf-config:`` folder (a 2-layer GPT-2) on CPU.

Usage::

    python benchmarks/bench_hf.py [CORPUS] [--rows 2000] [--repeat 3] [--threads N]

Writes the first ``--rows`` records of the corpus (default: the shared Debian descriptions)
to a temporary ``.jsonl``, builds a GPT-2 folder with ``make_hf_folder.py`` (2 layers, width
64, a 2,000-token BPE trained on the slice, ``config.json`` only), then times
``preflight smoke SLICE --model hf-config:DIR`` in a subprocess: the wall clock (interpreter
start, imports, the gate's checks, model load and the smoke stage), the smoke stage
(``report.timings["smoke"]``) and its phases. Best of ``--repeat``. ``--threads`` sets
``OMP_NUM_THREADS`` for the subprocess (default: unset, torch's own choice). The ``others``
column is how many cores other processes kept busy meanwhile (from ``/proc/stat``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_hf_folder import build

CORPUS = Path("/work/shared/corpora/debian_descriptions.jsonl.gz")


def busy() -> tuple[float, float]:
    """(busy, total) jiffies of all cores."""
    parts = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts) - idle, sum(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", type=Path, nargs="?", default=CORPUS)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        data = tmp / "slice.jsonl"
        opener = gzip.open if a.corpus.suffix == ".gz" else open
        with opener(a.corpus, "rt", encoding="utf-8") as f, data.open("w") as out:
            for n, line in enumerate(f):
                if n >= a.rows:
                    break
                out.write(line)
        t0 = time.perf_counter()
        folder = build(tmp / "gpt2", corpus=data, config_only=True)
        print(f"folder: {time.perf_counter() - t0:.1f} s (2-layer GPT-2, width 64, "
              f"BPE on the slice, config only)")
        env = dict(os.environ)
        if a.threads:
            env["OMP_NUM_THREADS"] = str(a.threads)
        cores = len(os.sched_getaffinity(0))
        print(f"{a.rows} rows of {a.corpus.name}; {cores} cores; OMP_NUM_THREADS="
              f"{env.get('OMP_NUM_THREADS', 'unset')}")
        print(f"{'run':>4} {'wall s':>7} {'smoke s':>8} {'others':>7}  verdict  phases")
        for i in range(a.repeat):
            out = tmp / f"out{i}"
            b0, t0j = busy()
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "preflight", "smoke", str(data), "--model",
                 f"hf-config:{folder}", "--out", str(out), "--format", "json", "-q",
                 "--no-progress"], env=env, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            b1, t1j = busy()
            if not (out / "report.json").is_file():
                print(proc.stderr[-2000:])
                sys.exit(1)
            report = json.loads((out / "report.json").read_text())
            smoke = report["smoke"]
            # Cores busy meanwhile, minus the one this run mostly keeps busy.
            others = max(0.0, (b1 - b0) / max(t1j - t0j, 1) * cores - 1)
            phases = ", ".join(f"{k} {v:.2f}" for k, v in smoke["timings"].items())
            print(f"{i + 1:>4} {wall:>7.1f} {report['timings']['smoke']:>8.1f} {others:>7.1f}"
                  f"  {smoke['verdict']:<8} {phases}")


if __name__ == "__main__":
    main()
