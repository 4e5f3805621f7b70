"""``--workers 1`` (the default) against a pool of one worker per available core, and both
against polars ``read_ndjson`` of the same file, in one run.

Usage::

    python benchmarks/bench_workers.py [SRC] [--cache DIR] [--size-mb 100] [--seed N]
        [--rules rules/default.yaml] [--repeat 2] [--timeout S] [--no-polars]

The scaled corpus (``scale_corpus.py``, cached as ``corpus_<size>mb_seed<seed>.jsonl`` like
the other benchmarks) is checked, each run a child process with a warm page cache, the two
settings interleaved ``--repeat`` times:

    /usr/bin/time -v preflight check FILE --rules R --no-smoke --format json -q --no-progress
        --out DIR --workers 1
    ... the same without --workers (the default: one worker per available core)

It prints the median wall time of each, MB/s, the median CPU seconds of the whole process
tree (driver, fork server, workers: steadier than wall on a shared machine), the largest
single process's peak RSS (``Maximum resident set size`` of ``/usr/bin/time -v``: the driver
or a process it waited for; a fork server's workers are in the tree figure only), the peak
RSS of the whole process tree (sampled from /proc), the pool's stage timings from
report.json, whether both found the same (rule counts and findings.parquet as a set) and
the ratio of wall times.

The read limit: each repeat also runs a child that reads the file with polars
``pl.read_ndjson`` (all cores) and prints the seconds of that call alone (imports not
counted). Polars refuses a file with a malformed line, so it reads a copy without the planted
malformed lines (``*.clean.jsonl``, made once next to the corpus: a few lines fewer). The
ratio printed is ``polars read seconds / gate wall seconds`` for each setting (issue 17's
target: >= 0.5). Results go to ``CACHE/workers_results.json``. On a shared machine
the numbers are noisy: run it when the machine is otherwise idle, and read the ratio, not
the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

from preflight.cores import available_cores

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_check import (  # noqa: E402
    ensure_corpus,
    find_preflight,
    machine,
    run_measured,
    tail,
    warm_cache,
)
from bench_scale import DEFAULT_SRC  # noqa: E402

MB = 1_000_000
TIME_V = Path("/usr/bin/time")
_POLARS_READ = ("import sys, time\nimport polars as pl\nt = time.perf_counter()\n"
                "pl.read_ndjson(sys.argv[1])\nprint(time.perf_counter() - t)\n")


def clean_copy(corpus: Path) -> Path:
    """The corpus without the lines polars refuses (not a JSON object), made once."""
    import orjson

    clean = corpus.with_suffix(".clean.jsonl")
    if clean.is_file() and clean.stat().st_mtime >= corpus.stat().st_mtime:
        return clean
    partial = clean.with_suffix(".partial")
    with open(corpus, "rb") as src, open(partial, "wb") as out:
        for line in src:
            try:
                if isinstance(orjson.loads(line), dict):
                    out.write(line)
            except orjson.JSONDecodeError:
                continue
    partial.replace(clean)
    return clean


def polars_read_seconds(path: Path, timeout: float) -> float:
    """Seconds of ``pl.read_ndjson(path)`` in a fresh child (imports not counted)."""
    done = subprocess.run([sys.executable, "-c", _POLARS_READ, str(path)], check=True,
                          capture_output=True, text=True, timeout=timeout)
    return float(done.stdout.strip().splitlines()[-1])


def _time_v_rss_mb(stderr: Path) -> float | None:
    """``Maximum resident set size`` (KiB) from ``/usr/bin/time -v``'s output, in MB."""
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr.read_text())
    return int(found.group(1)) * 1024 / MB if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", type=Path, default=DEFAULT_SRC)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "bench")
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rules", type=Path, default=HERE.parent / "rules" / "default.yaml")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--no-polars", action="store_true",
                        help="Skip the polars read_ndjson reference.")
    args = parser.parse_args(argv)
    preflight = find_preflight(None)
    if preflight is None:
        print("preflight is not installed in this environment", file=sys.stderr)
        return 2
    args.cache.mkdir(parents=True, exist_ok=True)
    corpus, _ = ensure_corpus(args.src, args.cache, args.size_mb, args.seed)
    size = corpus.stat().st_size
    cores = available_cores()
    settings = {"workers 1": ["--workers", "1"], "pool": ["--workers", str(cores)]}
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in settings}
    clean = None if args.no_polars else clean_copy(corpus)
    polars_s: list[float] = []
    for k in range(args.repeat):
        if clean is not None:
            warm_cache(clean)
            polars_s.append(polars_read_seconds(clean, args.timeout))
            print(f"[polars read_ndjson #{k + 1}] {polars_s[-1]:.2f} s", flush=True)
        for name, extra in settings.items():
            out = args.cache / f"workers_bench_{name.replace(' ', '')}"
            cmd = [*preflight, "check", str(corpus), "--rules", str(args.rules), "--no-smoke",
                   "--format", "json", "-q", "--no-progress", "--out", str(out), *extra]
            if TIME_V.exists():
                cmd = [str(TIME_V), "-v", *cmd]
            warm_cache(corpus)
            print(f"[{name} #{k + 1}] {' '.join(cmd)}", flush=True)
            err = out.with_suffix(".err")
            m = run_measured(cmd, out.with_suffix(".out"), err, args.timeout)
            if m.exit_code not in (0, 1):
                print(f"[{name}] failed ({m.exit_code}): {tail(err)}")
                return 1
            report = json.loads((out / "report.json").read_text())
            runs[name].append({
                "seconds": round(m.seconds, 2),
                "cpu_seconds": round(m.cpu_seconds or 0.0, 2),
                "largest_process_rss_mb": round(_time_v_rss_mb(err) or m.peak_rss_mb, 1),
                "peak_tree_rss_mb": round(m.peak_tree_rss_mb or m.peak_rss_mb, 1),
                "workers": report["environment"].get("workers"),
                "records": report["source"]["records"],
                "timings": {k: v for k, v in report["timings"].items()
                            if not k.startswith("rule:")},
                "violations": {r["id"]: r["violations"] for r in report["rules"]},
                "findings": str(out / "findings.parquet"),
            })
    key = ["rule", "file", "row", "code", "detail"]
    one, many = runs["workers 1"][-1], runs["pool"][-1]
    same = (one["violations"] == many["violations"]
            and pl.read_parquet(one["findings"]).sort(key, nulls_last=True).equals(
                pl.read_parquet(many["findings"]).sort(key, nulls_last=True)))
    median = {name: statistics.median(r["seconds"] for r in rs) for name, rs in runs.items()}
    print(f"\n{size / MB:,.0f} MB, {one['records']:,} records, {os.cpu_count()} CPUs, "
          f"pool of {many['workers']} workers, median of {args.repeat}")
    print(f"{'setting':10} {'wall s':>8} {'CPU s':>7} {'MB/s':>7} {'largest proc MB':>16} "
          f"{'tree MB':>8}")
    for name, rs in runs.items():
        cpu = statistics.median(r["cpu_seconds"] for r in rs)
        print(f"{name:10} {median[name]:8.1f} {cpu:7.1f} {size / MB / median[name]:7.1f} "
              f"{max(r['largest_process_rss_mb'] for r in rs):16.0f} "
              f"{max(r['peak_tree_rss_mb'] for r in rs):8.0f}")
    print("pool stages (s):", ", ".join(f"{k} {v:.1f}" for k, v in many["timings"].items()))
    ratio = median["workers 1"] / median["pool"]
    print(f"same findings: {same}; speed-up of the pool over --workers 1: {ratio:.2f}x")
    read_limit = {}
    if polars_s:
        polars = statistics.median(polars_s)
        read_limit = {name: round(polars / median[name], 3) for name in median}
        print(f"polars read_ndjson: {polars:.2f} s ({size / MB / polars:,.0f} MB/s); whole "
              "gate vs the read limit (polars s / gate s): "
              + ", ".join(f"{name} {r:.2f}" for name, r in read_limit.items()))
    result = {"corpus": str(corpus), "bytes": size, "machine": machine(), "runs": runs,
              "same_findings": same, "ratio": round(ratio, 3),
              "polars_read_s": polars_s, "vs_polars_read": read_limit,
              "load_average": os.getloadavg()}
    (args.cache / "workers_results.json").write_text(json.dumps(result, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
