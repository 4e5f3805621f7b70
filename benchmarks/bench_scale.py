"""Memory and throughput of the full ``check`` at scale (local executor).

Usage::

    python benchmarks/bench_scale.py [SRC] [--cache DIR] [--sizes 250,1000,2000] [--seed N]
        [--rules rules/pretrain-text.yaml] [--long-factor 4] [--no-baseline] [--timeout S]

For each size (MB, 1 MB = 1,000,000 bytes) the scaled corpus is generated with
``scale_corpus.py`` (or reused from ``--cache`` as ``corpus_<size>mb_seed<seed>.jsonl``, the
same names as ``bench_check.py``) and checked by

    preflight check FILE --rules R --no-smoke --format json -q --no-progress --out DIR

in a child process (exit codes 0 and 1 both count as a run: the planted faults fail the gate).
Wall time and the child's peak RSS (``ru_maxrss`` from ``os.wait4``, plus the summed RSS of its
process tree sampled every 50 ms) are measured around it; the per-stage breakdown and the record
count come from ``report.json``. The default rules are all the text rules of the
``pretrain-text`` preset (malformed, empty, invisible_unicode, encoding, token_length,
exact_duplicate, near_duplicate).

Peak RSS is fitted by least squares as ``a + b x rows`` over the sizes. To show that it follows
rows and not bytes of text, a "long" corpus is derived from the smallest size with the same
number of rows and about ``--long-factor`` times the bytes: the text of each record is joined
with the texts of the next ``factor - 1`` records (a sliding window, so the near-copies of later
passes stay near-copies; malformed lines are kept as they are), and its peak is compared with
``a + b x rows``. The plain-Python baseline (``baseline_check.py``: ``json.loads`` + regex per
line, the default rules only, no near-duplicates) runs on the largest corpus for a ratio.

The page cache is warmed before each timed run. A table is printed and everything is written to
``CACHE/scale_results.json``, including an "on paper" projection for 100 GB and 10 TB built from
the measured numbers (it is an extrapolation, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_check import (  # noqa: E402
    BASELINE_SCRIPT,
    ensure_corpus,
    find_preflight,
    run_measured,
    tail,
    warm_cache,
)

MB = 1_000_000
DEFAULT_SRC = Path("/work/shared/corpora/debian_descriptions.jsonl.gz")
DEFAULT_RULES = HERE.parent / "rules" / "pretrain-text.yaml"
NEAR_DUP_BANDS = 16  # choose_bands(0.8, 128) in preflight/minhash.py, the rule's default
BAND_KEY_BYTES = 8  # uint64 per band (preflight.minhash.band_keys)
RECORD_KEY_BYTES = 8  # int64 record key (file index, row) that travels with each band key


def machine() -> dict[str, object]:
    """CPU model, cores and RAM of this machine."""
    cpu = platform.processor() or "unknown"
    ram = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram = int(line.split()[1]) * 1024
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": None if ram is None else round(ram / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def make_long(short: Path, factor: int) -> Path:
    """Same rows as ``short``, about ``factor`` times the text: a sliding window of texts."""
    out = short.with_name(f"{short.stem}_long{factor}.jsonl")
    if out.is_file():
        print(f"[long] reusing {out}", flush=True)
        return out
    print(f"[long] writing {out} ...", flush=True)
    t0 = time.perf_counter()
    partial = out.with_suffix(".partial")
    with open(short, "rb") as src:
        lines = src.read().splitlines()
    texts: list[str | None] = []
    for line in lines:
        try:
            rec = json.loads(line)
            texts.append(rec["text"] if isinstance(rec.get("text"), str) else None)
        except (ValueError, AttributeError, KeyError):
            texts.append(None)
    window: deque[str] = deque()
    good = [t for t in texts if t is not None]
    with open(partial, "wb") as dst:
        g = 0
        for line, text in zip(lines, texts, strict=True):
            if text is None:
                dst.write(line + b"\n")
                continue
            window.clear()
            for k in range(factor):
                window.append(good[(g + k) % len(good)])
            g += 1
            rec = json.loads(line)
            rec["text"] = " ".join(window)
            dst.write(json.dumps(rec, ensure_ascii=False).encode() + b"\n")
    partial.replace(out)
    print(f"[long] written in {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def run_check(cmd: list[str], corpus: Path, rules: Path, workdir: Path, label: str,
              timeout: float) -> dict[str, object]:
    """Run the full check on ``corpus``; return wall time, peak RSS and report.json numbers."""
    out = workdir / f"scale_report_{label}"
    shutil.rmtree(out, ignore_errors=True)
    argv = [*cmd, "check", str(corpus), "--rules", str(rules), "--no-smoke", "--format", "json",
            "-q", "--no-progress", "--out", str(out)]
    warm_cache(corpus)
    print(f"[{label}] preflight check ...", flush=True)
    m = run_measured(argv, workdir / f"scale_{label}.stdout", workdir / f"scale_{label}.stderr",
                     timeout)
    result: dict[str, object] = {
        "label": label, "path": str(corpus), "bytes": corpus.stat().st_size,
        "exit_code": m.exit_code, "seconds": round(m.seconds, 2),
        "peak_rss_mb": round(m.peak_rss_mb, 1),
        "peak_tree_rss_mb": None if m.peak_tree_rss_mb is None else round(m.peak_tree_rss_mb, 1),
        "status": "ok" if m.exit_code in (0, 1) and not m.timed_out else "error",
    }
    if result["status"] != "ok":
        result["detail"] = tail(workdir / f"scale_{label}.stderr")
        print(f"[{label}] FAILED: {result['detail']}", flush=True)
        return result
    report = json.loads((out / "report.json").read_text())
    result["rows"] = report["source"]["total"]
    result["records"] = report["source"]["records"]
    result["timings"] = report["timings"]
    near = next((r for r in report["rules"] if r["check"] == "near_duplicate"), None)
    if near:
        result["near_dup"] = {k: near["stats"].get(k) for k in
                              ("candidate_pairs", "confirmed_pairs", "clusters")}
    shutil.rmtree(out, ignore_errors=True)
    print(f"[{label}] {m.seconds:.1f} s, peak {m.peak_rss_mb:,.0f} MB, "
          f"{result['rows']:,} rows", flush=True)
    return result


def run_baseline(corpus: Path, workdir: Path, timeout: float) -> dict[str, object]:
    """Run ``baseline_check.py`` on ``corpus`` (default rules only, no near-duplicates)."""
    warm_cache(corpus)
    print("[baseline] baseline_check.py ...", flush=True)
    m = run_measured([sys.executable, str(BASELINE_SCRIPT), str(corpus)],
                     workdir / "scale_baseline.stdout", workdir / "scale_baseline.stderr",
                     timeout)
    ok = m.exit_code == 0 and not m.timed_out
    print(f"[baseline] {m.seconds:.1f} s, peak {m.peak_rss_mb:,.0f} MB", flush=True)
    return {"status": "ok" if ok else "error", "seconds": round(m.seconds, 2),
            "peak_rss_mb": round(m.peak_rss_mb, 1), "bytes": corpus.stat().st_size}


def fit(results: list[dict[str, object]]) -> tuple[float, float]:
    """Least-squares ``peak RSS bytes = a + b x rows``; returns (a, b) in bytes."""
    rows = np.array([r["rows"] for r in results], dtype=float)
    peak = np.array([r["peak_rss_mb"] for r in results], dtype=float) * MB
    b, a = np.polyfit(rows, peak, 1)
    return float(a), float(b)


def stages(timings: dict[str, float], n: int = 3) -> str:
    """The ``n`` largest stages of a report's timings (total left out)."""
    items = sorted(((v, k) for k, v in timings.items() if k != "total"), reverse=True)[:n]
    return ", ".join(f"{k.removeprefix('rule:')} {v:.1f}" for v, k in items)


def project(bytes_per_row_text: float, b: float, a: float, mb_s_core: float
            ) -> list[dict[str, object]]:
    """On paper: rows, state memory, time on N cores and band-key shuffle for big corpora."""
    out = []
    for name, size in (("100 GB", 100e9), ("10 TB", 10e12)):
        rows = size / bytes_per_row_text
        out.append({
            "corpus": name,
            "rows": rows,
            "state_gb": b * rows / 1e9,
            "peak_gb": (a + b * rows) / 1e9,
            "hours_on": {n: size / MB / (mb_s_core * n) / 3600 for n in (2, 16, 64, 512)},
            "band_keys_gb": NEAR_DUP_BANDS * BAND_KEY_BYTES * rows / 1e9,
            "band_keys_with_ids_gb":
                NEAR_DUP_BANDS * (BAND_KEY_BYTES + RECORD_KEY_BYTES) * rows / 1e9,
        })
    return out


def main(argv: list[str] | None = None) -> int:
    """Generate or reuse the corpora, run and measure, print the table and projection."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", type=Path, nargs="?", default=DEFAULT_SRC, help="source corpus")
    p.add_argument("--cache", type=Path, default=Path("/tmp/bench"), help="corpus cache dir")
    p.add_argument("--sizes", default="250,1000,2000", help="sizes in MB (default 250,1000,2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rules", type=Path, default=DEFAULT_RULES)
    p.add_argument("--long-factor", type=int, default=4,
                   help="texts per record in the long corpus (0: skip it)")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per child")
    p.add_argument("--preflight", default=None, help="command that runs the preflight CLI")
    args = p.parse_args(argv)

    cmd = find_preflight(args.preflight)
    if cmd is None:
        p.error("preflight CLI not found")
    args.cache.mkdir(parents=True, exist_ok=True)
    sizes = sorted(float(s) for s in args.sizes.split(","))
    cores = os.cpu_count() or 1

    results = []
    for size in sizes:
        corpus, _ = ensure_corpus(args.src, args.cache, size, args.seed)
        results.append(run_check(cmd, corpus, args.rules, args.cache, f"{size:g}mb",
                                 args.timeout))
    ok = [r for r in results if r["status"] == "ok"]
    long = None
    if args.long_factor > 1:
        short = Path(results[0]["path"])
        long = run_check(cmd, make_long(short, args.long_factor), args.rules, args.cache,
                         f"{sizes[0]:g}mb_long{args.long_factor}", args.timeout)
    base = None
    if not args.no_baseline:
        base = run_baseline(Path(results[-1]["path"]), args.cache, args.timeout)

    a, b = fit(ok) if len(ok) >= 2 else (float("nan"), float("nan"))
    print(f"\nfit over {len(ok)} sizes: peak RSS = {a / MB:,.0f} MB + {b:,.0f} bytes x rows\n")
    head = (f"{'corpus':>14} {'rows':>11} {'wall s':>7} {'MB/s':>6} {'MB/s/core':>9} "
            f"{'peak RSS':>9} {'B/row':>6} {'(peak-a)/row':>12} {'fit':>7}  largest stages (s)")
    print(head)
    for r in [*ok, *([long] if long and long["status"] == "ok" else [])]:
        mb = r["bytes"] / MB
        r["mb_per_s"] = round(mb / r["seconds"], 2)
        r["mb_per_s_per_core"] = round(mb / r["seconds"] / cores, 2)
        r["text_bytes_per_row"] = round(r["bytes"] / r["rows"], 1)
        r["peak_bytes_per_row"] = round(r["peak_rss_mb"] * MB / r["rows"], 1)
        r["above_base_bytes_per_row"] = round((r["peak_rss_mb"] * MB - a) / r["rows"], 1)
        r["fit_mb"] = round((a + b * r["rows"]) / MB, 1)
        print(f"{r['label']:>14} {r['rows']:>11,} {r['seconds']:>7.1f} {r['mb_per_s']:>6.1f} "
              f"{r['mb_per_s_per_core']:>9.1f} {r['peak_rss_mb']:>7,.0f}MB "
              f"{r['peak_bytes_per_row']:>6,.0f} {r['above_base_bytes_per_row']:>12,.0f} "
              f"{r['fit_mb']:>5,.0f}MB  {stages(r['timings'])}")
    biggest = ok[-1] if ok else None
    if base and base["status"] == "ok" and biggest:
        base["mb_per_s"] = round(base["bytes"] / MB / base["seconds"], 2)
        ratio = base["seconds"] / biggest["seconds"]
        base["ratio"] = round(ratio, 2)
        print(f"\nbaseline on {biggest['label']} (default rules only, no near-duplicates): "
              f"{base['seconds']:.1f} s, {base['mb_per_s']:.1f} MB/s, "
              f"peak {base['peak_rss_mb']:,.0f} MB; preflight (all 7 rules) is {ratio:.2f}x")

    proj = []
    if biggest:
        proj = project(biggest["text_bytes_per_row"], b, a, biggest["mb_per_s_per_core"])
        print("\non paper (extrapolated from the largest run; not measured):")
        for q in proj:
            hours = ", ".join(f"{n} cores {h:,.1f} h" for n, h in q["hours_on"].items())
            print(f"  {q['corpus']}: {q['rows']:,.0f} rows, state {q['state_gb']:,.1f} GB "
                  f"(peak {q['peak_gb']:,.1f} GB), {hours}; band keys "
                  f"{q['band_keys_gb']:,.1f} GB ({q['band_keys_with_ids_gb']:,.1f} GB with ids)")

    (args.cache / "scale_results.json").write_text(json.dumps({
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
        "rules": str(args.rules), "fit": {"a_bytes": a, "b_bytes_per_row": b},
        "results": results, "long": long, "baseline": base, "projection": proj,
    }, indent=2, default=str))
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
