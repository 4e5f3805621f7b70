"""Benchmark the ``numeric`` check against a plain-Python baseline on one numeric column.

Usage::

    python benchmarks/bench_numeric.py [--rows 10000000] [--seed 0] [--batch 65536]

A seeded column of normal values (mean 50, sd 10) gets a few planted faults: NaN, +Inf, -Inf,
values below ``min``/above ``max``, fp16 overflows and outliers. In the same run, on the same
values:

* preflight: the ``numeric`` check's ``scan`` over batches of ``--batch`` rows built as
  preflight ``Batch``es (as a reader would hand them over), then ``finish`` (median, MAD and
  outliers over the whole column); rules: ``min``, ``max``, ``dtype: fp16``, ``outlier_z: 8``;
* baseline: one loop over Python floats (``math.isnan``/``math.isinf``, bounds, the fp16
  limit), then ``statistics.median`` for the median and the MAD and a loop for the z-scores.

Building the batches (preflight) and the list of Python floats (baseline) is not timed. Both
must find the same number of findings per code, or the script exits with status 1. It prints
rows/s for both and the ratio.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections import Counter

import numpy as np
import polars as pl

from preflight.batch import Batch
from preflight.checks.base import Context
from preflight.checks.numeric import Numeric, NumericParams, overflow_limit
from preflight.config import Fields, ModelFacts

MIN, MAX, Z = -1000.0, 1000.0, 8.0


def make_column(rows: int, seed: int) -> np.ndarray:
    """Normal values with a few planted faults at seeded positions."""
    rng = np.random.default_rng(seed)
    values = rng.normal(50.0, 10.0, rows)
    planted = {
        np.nan: 7, np.inf: 3, -np.inf: 3,  # non-finite
        -5000.0: 4, 5000.0: 4,  # out of bounds (and outliers)
        70000.0: 2, -65520.0: 2,  # fp16 overflow (and out of bounds, and outliers)
        400.0: 5,  # outliers only
    }
    where = rng.choice(rows, size=sum(planted.values()), replace=False)
    k = 0
    for value, n in planted.items():
        values[where[k:k + n]] = value
        k += n
    return values


def run_preflight_check(values: np.ndarray, batch_rows: int
                        ) -> tuple[float, float, Counter[str]]:
    """Seconds for scan over all batches and for finish, and findings per code."""
    batches = [
        Batch(frame=pl.DataFrame({"x": values[s:s + batch_rows]}),
              rows=np.arange(s, min(s + batch_rows, len(values)), dtype=np.int64))
        for s in range(0, len(values), batch_rows)
    ]
    params = NumericParams(min=MIN, max=MAX, dtype="fp16", outlier_z=Z)
    check = Numeric(params, Context(fields=Fields(numeric="x"), model=ModelFacts()))
    codes: Counter[str] = Counter()
    t0 = time.perf_counter()
    for batch in batches:
        found = check.scan(batch)
        if found is not None:
            codes.update(found.get_column("code").to_list())
    t1 = time.perf_counter()
    found = check.finish()
    t2 = time.perf_counter()
    if found is not None:
        codes.update(found.get_column("code").to_list())
    return t1 - t0, t2 - t1, codes


def run_baseline(values: list[float]) -> tuple[float, Counter[str]]:
    """The same checks as a plain-Python loop; seconds and findings per code."""
    limit = overflow_limit("fp16")
    t0 = time.perf_counter()
    codes: Counter[str] = Counter()
    finite: list[float] = []
    for x in values:
        if math.isnan(x):
            codes["nan"] += 1
            continue
        if math.isinf(x):
            codes["pos_inf" if x > 0 else "neg_inf"] += 1
            continue
        if x < MIN:
            codes["below_min"] += 1
        if x > MAX:
            codes["above_max"] += 1
        if abs(x) >= limit:
            codes["dtype_overflow"] += 1
        finite.append(x)
    median = statistics.median(finite)
    mad = statistics.median([abs(x - median) for x in finite])
    sigma = 1.4826 * mad
    for x in finite:
        if abs(x - median) / sigma > Z:
            codes["outlier"] += 1
    return time.perf_counter() - t0, codes


def main(argv: list[str] | None = None) -> int:
    """Run both on the same column; print rows/s and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows in the column")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--batch", type=int, default=65_536, help="rows per preflight batch")
    args = parser.parse_args(argv)

    values = make_column(args.rows, args.seed)
    scan_seconds, finish_seconds, pf_codes = run_preflight_check(values, args.batch)
    pf_seconds = scan_seconds + finish_seconds
    base_seconds, base_codes = run_baseline(values.tolist())

    print(f"numeric check on {args.rows:,} rows (batches of {args.batch:,}), seed {args.seed}")
    print(f"  findings per code: {dict(sorted(pf_codes.items()))}")
    print(f"  preflight: {pf_seconds:8.3f} s  {args.rows / pf_seconds:14,.0f} rows/s"
          f"  (scan {scan_seconds:.3f} s, finish {finish_seconds:.3f} s)")
    print(f"  baseline:  {base_seconds:8.3f} s  {args.rows / base_seconds:14,.0f} rows/s")
    print(f"  ratio (preflight rows/s / baseline rows/s): {base_seconds / pf_seconds:.1f}x")
    if pf_codes != base_codes:
        print(f"  MISMATCH: baseline found {dict(sorted(base_codes.items()))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
