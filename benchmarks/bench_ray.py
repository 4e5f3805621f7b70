"""The Ray executor against the local executor on the same slice, in one run.

Usage::

    python benchmarks/bench_ray.py [SRC] [--cache DIR] [--size-mb 250] [--seed N]
        [--rules rules/pretrain-text.yaml] [--cpus 2] [--timeout S]

The scaled corpus (``scale_corpus.py``, cached as ``corpus_<size>mb_seed<seed>.jsonl`` like
the other benchmarks) is checked twice, each in a child process with a warm page cache:

    preflight check FILE --rules R --no-smoke --format json -q --no-progress --out DIR
    ... the same with --executor ray (a local Ray started by preflight, --cpus workers)

The run needs the ``[ray]`` extra in the environment of this Python. It prints wall time,
MB/s and MB/s per core, the peak RSS of each process tree (Ray's raylet and workers are
children of the driver), the per-stage timings from report.json (``ray:count``, ``ray:scan``,
``ray:merge``, ``ray:group``, ``ray:revisit``), whether both runs found the same (rule counts
and findings.parquet as a set), and the ratio local/ray of wall times. Results go to
``CACHE/ray_results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_check import ensure_corpus, find_preflight, run_measured, tail, warm_cache  # noqa: E402
from bench_scale import DEFAULT_SRC  # noqa: E402

MB = 1_000_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", type=Path, default=DEFAULT_SRC)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "bench")
    parser.add_argument("--size-mb", type=float, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rules", type=Path, default=HERE.parent / "rules" / "pretrain-text.yaml")
    parser.add_argument("--cpus", type=int, default=2, help="Ray workers (local Ray).")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args(argv)
    preflight = find_preflight(None)
    if preflight is None:
        print("preflight is not installed in this environment", file=sys.stderr)
        return 2
    args.cache.mkdir(parents=True, exist_ok=True)
    corpus, _ = ensure_corpus(args.src, args.cache, args.size_mb, args.seed)
    size = corpus.stat().st_size
    runs = {}
    for executor in ("local", "ray"):
        out = args.cache / f"ray_bench_{executor}"
        cmd = [*preflight, "check", str(corpus), "--rules", str(args.rules), "--no-smoke",
               "--format", "json", "-q", "--no-progress", "--out", str(out),
               "--executor", executor]
        env_note = ""
        if executor == "ray":
            # preflight starts a local Ray with the CPUs it sees: pin the run to --cpus.
            cpus = os.cpu_count() or 1
            if args.cpus < cpus:
                cmd = ["taskset", "-c", f"0-{args.cpus - 1}", *cmd]
                env_note = f" (taskset 0-{args.cpus - 1})"
        warm_cache(corpus)
        print(f"[{executor}] {' '.join(cmd)}{env_note}", flush=True)
        m = run_measured(cmd, out.with_suffix(".out"), out.with_suffix(".err"), args.timeout)
        if m.exit_code not in (0, 1):
            print(f"[{executor}] failed ({m.exit_code}): {tail(out.with_suffix('.err'))}")
            return 1
        report = json.loads((out / "report.json").read_text())
        runs[executor] = {
            "seconds": round(m.seconds, 2),
            "mb_per_s": round(size / MB / m.seconds, 2),
            "peak_tree_rss_mb": round(m.peak_tree_rss_mb or m.peak_rss_mb, 1),
            "records": report["source"]["records"],
            "timings": report["timings"],
            "violations": {r["id"]: r["violations"] for r in report["rules"]},
            "findings": str(out / "findings.parquet"),
        }
    key = ["rule", "file", "row", "code", "detail"]
    same = (runs["local"]["violations"] == runs["ray"]["violations"]
            and pl.read_parquet(runs["local"]["findings"]).sort(key, nulls_last=True).equals(
                pl.read_parquet(runs["ray"]["findings"]).sort(key, nulls_last=True)))
    cores = {"local": os.cpu_count() or 1, "ray": args.cpus}
    print(f"\n{size / MB:,.0f} MB, {runs['local']['records']:,} records, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(f"{'executor':9} {'wall s':>8} {'MB/s':>7} {'MB/s/core':>9} {'peak RSS MB':>12}")
    for name, r in runs.items():
        print(f"{name:9} {r['seconds']:8.1f} {r['mb_per_s']:7.1f} "
              f"{r['mb_per_s'] / cores[name]:9.1f} {r['peak_tree_rss_mb']:12.0f}")
    stages = {k: v for k, v in runs["ray"]["timings"].items() if k.startswith("ray:")}
    print("ray stages (s):", ", ".join(f"{k[4:]} {v:.1f}" for k, v in stages.items()))
    ratio = runs["local"]["seconds"] / runs["ray"]["seconds"]
    print(f"same findings: {same}; ratio local/ray wall time: {ratio:.2f}x")
    result = {"corpus": str(corpus), "bytes": size, "cores": os.cpu_count(), "ray_cpus": args.cpus,
              "runs": runs, "same_findings": same,
              "ratio_local_over_ray": round(ratio, 3)}
    (args.cache / "ray_results.json").write_text(json.dumps(result, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
