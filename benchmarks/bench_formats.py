"""The whole gate on one corpus in every input format, beside polars reading each file, in
one run; optionally beside an older source tree.

Usage::

    python benchmarks/bench_formats.py [SRC] [--cache DIR] [--size-mb 250] [--seed N]
        [--repeat 2] [--old DIR] [--formats jsonl,json,csv,parquet,arrow] [--timeout S]

The scaled corpus (``scale_corpus.py``, cached like the other benchmarks), without its
planted malformed lines (``bench_workers.clean_copy``: polars refuses them), is written once
as a JSON array (one line), CSV, Parquet and Arrow IPC next to it (``fmt_<size>mb_seed<N>.*``),
and the CSV again with 100 bad rows inserted (``csv-faults``: short and long rows, stray
quotes; polars is not run on it, and its rule counts are compared between trees only).
Per format and repeat, children run interleaved on a warm page cache:

    preflight check FILE --no-smoke --format json -q --no-progress --workers 1 --out DIR
    (with --old DIR: the same with PYTHONPATH=DIR, python -m preflight)
    polars read_ndjson / read_json / read_csv / read_parquet / read_ipc of FILE (call only)

It prints the median wall seconds, MB/s of the file, the gate against polars' read of the
same file (``polars s / gate s``), ``old / new`` when an old tree ran, and whether every format
(and the old tree) found the same rule counts. Results go to ``CACHE/formats_results.json``.
Read the ratios, not the seconds, on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_check import ensure_corpus, find_preflight, machine, run_measured, warm_cache  # noqa: E402
from bench_workers import clean_copy  # noqa: E402

FORMATS = ("jsonl", "json", "csv", "parquet", "arrow", "csv-faults")
_POLARS = {"jsonl": "read_ndjson", "json": "read_json", "csv": "read_csv",
           "parquet": "read_parquet", "arrow": "read_ipc"}
# Rows planted in ``csv-faults`` (the CSV with 100 of them inserted at line starts, seed 0):
# a short row, a stray quote, a long row.
_BAD_ROWS = (b"1,2\n", b'7,pkg,"sec"x,text\n', b"8,a,b,c,d\n")
_READ = """
import sys, time, polars as pl
t0 = time.perf_counter()
frame = getattr(pl, sys.argv[1])(sys.argv[2])
print(time.perf_counter() - t0, frame.height)
"""


def write_formats(clean: Path, wanted: list[str]) -> dict[str, Path]:
    """The clean corpus in each wanted format (written once, cached beside it)."""
    import polars as pl

    stem = clean.name.removesuffix(".clean.jsonl").replace("corpus_", "fmt_")
    paths = {"jsonl": clean}
    frame = None
    for fmt in wanted:
        if fmt in ("jsonl", "csv-faults"):
            continue
        path = clean.with_name(f"{stem}.{fmt}")
        paths[fmt] = path
        if path.is_file() and path.stat().st_mtime >= clean.stat().st_mtime:
            continue
        if frame is None:
            frame = pl.read_ndjson(clean, infer_schema_length=None)
        partial = path.with_name(path.name + ".partial")
        {"json": frame.write_json, "csv": frame.write_csv, "parquet": frame.write_parquet,
         "arrow": frame.write_ipc}[fmt](partial)
        partial.replace(path)
    if "csv-faults" in wanted:
        paths["csv-faults"] = _with_faults(paths.get("csv") or clean.with_name(f"{stem}.csv"))
    return paths


def _with_faults(csv_path: Path, count: int = 100) -> Path:
    """A copy of ``csv_path`` with ``count`` bad rows inserted after line ends followed by a
    digit (mostly record starts; one inside a quoted field makes a stray quote there)."""
    import random

    path = csv_path.with_name(csv_path.stem + "_faults.csv")
    if path.is_file() and path.stat().st_mtime >= csv_path.stat().st_mtime:
        return path
    data, rng, out, pos = csv_path.read_bytes(), random.Random(0), [], 0
    for at in sorted(rng.sample(range(1000, len(data) - 1000), count)):
        j = data.find(b"\n", max(at, pos))
        while j != -1 and not data[j + 1:j + 2].isdigit():
            j = data.find(b"\n", j + 1)
        if j == -1:
            break
        out += [data[pos:j + 1], rng.choice(_BAD_ROWS)]
        pos = j + 1
    path.write_bytes(b"".join([*out, data[pos:]]))
    return path


def gate(cmd: list[str], path: Path, scratch: Path, env: dict[str, str] | None,
         timeout: float) -> dict[str, object]:
    """One measured gate run: wall and CPU seconds, peak RSS, total and rule counts."""
    out = scratch / "report"
    full = [*cmd, "check", str(path), "--no-smoke", "--format", "json", "-q", "--no-progress",
            "--workers", "1", "--out", str(out)]
    saved, here = dict(os.environ), os.getcwd()
    if env:
        os.environ.update(env)
    os.chdir(scratch)  # ``python -m`` puts the working folder before PYTHONPATH
    try:
        m = run_measured(full, scratch / "out", scratch / "err", timeout)
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)
    if m.timed_out or m.exit_code not in (0, 1):
        raise SystemExit(f"gate failed on {path} (exit {m.exit_code}): "
                         f"{(scratch / 'err').read_text()[-1500:]}")
    report = json.loads((out / "report.json").read_text())
    return {"seconds": m.seconds, "cpu": m.cpu_seconds, "rss_mb": m.peak_rss_mb,
            "total": report["timings"]["total"],
            "counts": {r["id"]: r.get("violations") for r in report["rules"]}}


def polars_read(fmt: str, path: Path, timeout: float) -> float:
    """Seconds of polars' reader on ``path`` (the call alone)."""
    done = subprocess.run([sys.executable, "-c", _READ, _POLARS[fmt], str(path)],
                          capture_output=True, text=True, timeout=timeout, check=True)
    return float(done.stdout.split()[0])


def main(argv: list[str] | None = None) -> int:
    """Write the formats, run the gates and polars interleaved, print and save."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path, nargs="?",
                    default=HERE.parent.parent / "shared/corpora/debian_descriptions.jsonl.gz")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/bench"))
    ap.add_argument("--size-mb", type=float, default=250)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--old", type=Path, help="an older source tree to run beside")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args(argv)
    wanted = [f for f in args.formats.split(",") if f]
    unknown = set(wanted) - set(FORMATS)
    if unknown:
        ap.error(f"unknown formats: {sorted(unknown)} (choose from {', '.join(FORMATS)})")
    cmd = find_preflight(None)
    if cmd is None:
        raise SystemExit("preflight is not installed in this environment")
    args.cache.mkdir(parents=True, exist_ok=True)
    corpus, _ = ensure_corpus(args.src, args.cache, args.size_mb, args.seed)
    paths = write_formats(clean_copy(corpus), wanted)
    old_cmd = [sys.executable, "-m", "preflight"]
    old_env = {"PYTHONPATH": str(args.old.resolve())} if args.old else None
    runs: dict[str, dict[str, list]] = {f: {"new": [], "old": [], "polars": []} for f in wanted}
    with tempfile.TemporaryDirectory(prefix="bench_formats_") as tmp:
        scratch = Path(tmp)
        for rep in range(args.repeat):
            for fmt in wanted:
                warm_cache(paths[fmt])
                if fmt in _POLARS:  # (polars refuses the planted faults)
                    runs[fmt]["polars"].append(polars_read(fmt, paths[fmt], args.timeout))
                order = ["new", "old"] if rep % 2 == 0 else ["old", "new"]
                for tree in order:
                    if tree == "old" and args.old is None:
                        continue
                    result = gate(cmd if tree == "new" else old_cmd, paths[fmt], scratch,
                                  old_env if tree == "old" else None, args.timeout)
                    runs[fmt][tree].append(result)
                    print(f"[{fmt} #{rep + 1}] {tree} {result['seconds']:.2f} s", flush=True)
    rows, counts = [], set()
    print(f"\n{args.size_mb:g} MB corpus, {machine()}, median of {args.repeat}")
    print(f"{'format':8} {'file MB':>8} {'polars s':>9} {'gate s':>7} {'MB/s':>7} "
          f"{'polars/gate':>11} {'old s':>7} {'old/new':>8}")
    for fmt in wanted:
        size = paths[fmt].stat().st_size / 1e6
        new = statistics.median(r["seconds"] for r in runs[fmt]["new"])
        pol = statistics.median(runs[fmt]["polars"]) if runs[fmt]["polars"] else math.nan
        old = (statistics.median(r["seconds"] for r in runs[fmt]["old"])
               if runs[fmt]["old"] else None)
        for tree in ("new", "old"):
            if fmt != "csv-faults":  # (its planted rows are findings of their own)
                counts.update(json.dumps(r["counts"], sort_keys=True) for r in runs[fmt][tree])
        row = {"format": fmt, "file_mb": round(size, 1), "polars_s": round(pol, 3),
               "gate_s": round(new, 3), "mb_s": round(size / new, 1),
               "polars_over_gate": round(pol / new, 3),
               "old_s": None if old is None else round(old, 3),
               "old_over_new": None if old is None else round(old / new, 2)}
        rows.append(row)
        print(f"{fmt:8} {size:8.1f} {pol:9.2f} {new:7.2f} {size / new:7.1f} "
              f"{pol / new:11.3f} {'' if old is None else f'{old:7.2f}':>7} "
              f"{'' if old is None else f'{old / new:7.2f}x':>8}")
    print(f"same rule counts in every format and tree: {len(counts) == 1}")
    if "csv-faults" in runs:
        faulty = {json.dumps(r["counts"], sort_keys=True)
                  for tree in ("new", "old") for r in runs["csv-faults"][tree]}
        print(f"csv-faults: same rule counts in both trees: {len(faulty) == 1}")
    out = args.cache / "formats_results.json"
    out.write_text(json.dumps({"machine": machine(), "size_mb": args.size_mb, "rows": rows,
                               "same_counts": len(counts) == 1, "runs": runs}, indent=1,
                              default=str))
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
