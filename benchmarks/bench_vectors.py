"""Time the ``numeric`` check on a fixed-length float vector field (an embedding column).

Usage::

    python benchmarks/bench_vectors.py [--rows 20000] [--dims 768] [--batch 2048] [--nan]
                                       [--short K]

A seeded (rows × dims) matrix of normal values, one position shifted per dimension (so
positions differ), is cut into batches of ``--batch`` records as a reader hands them over
(a polars List column), and the ``numeric`` check runs ``scan`` over them and ``finish``
(median, MAD and outliers). ``--nan`` puts one NaN element in every 100th record, so the
check cannot reshape the values into a matrix and groups them by position instead.
``--short K`` cuts every K-th record's vector to ``dims - 1`` values: ``wrong_length``
findings, and those records' values left out of the positions at the end. Building
the batches is not timed. Prints the seconds of scan and finish, the outliers found and the
peak of Python's traced allocations during finish.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
import polars as pl

from preflight.batch import Batch
from preflight.checks.base import Context
from preflight.checks.numeric import Numeric, NumericParams
from preflight.config import Fields, ModelFacts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--dims", type=int, default=768)
    ap.add_argument("--batch", type=int, default=2_048)
    ap.add_argument("--nan", action="store_true")
    ap.add_argument("--short", type=int, default=0, metavar="K")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    m = rng.normal(0.0, 1.0, (args.rows, args.dims)) * rng.uniform(0.5, 50, args.dims) \
        + rng.uniform(-100, 100, args.dims)
    if args.nan:
        m[::100, 3] = np.nan
    vectors = list(m)
    if args.short:
        vectors[::args.short] = [v[:-1] for v in vectors[::args.short]]
    batches = [
        Batch(frame=pl.DataFrame({"f": pl.Series(vectors[s:s + args.batch],
                                                 dtype=pl.List(pl.Float64))}),
              rows=np.arange(s, min(s + args.batch, args.rows), dtype=np.int64))
        for s in range(0, args.rows, args.batch)
    ]
    check = Numeric(NumericParams(outlier_z=8.0),
                    Context(fields=Fields(features="f"), model=ModelFacts()))
    t0 = time.perf_counter()
    for b in batches:
        check.scan(b)
    t1 = time.perf_counter()
    tracemalloc.start()
    found = check.finish()
    t2 = time.perf_counter()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    codes = found.get_column("code") if found is not None else pl.Series([], dtype=pl.String)
    n, wrong = int((codes == "outlier").sum()), int((codes == "wrong_length").sum())
    what = (" (NaN every 100th record)" if args.nan else "") + (
        f" (every {args.short}th record {args.dims - 1} long)" if args.short else "")
    print(f"{args.rows} x {args.dims}{what}: "
          f"scan {t1 - t0:.2f} s, finish {t2 - t1:.2f} s, outlier findings {n}, "
          f"wrong_length {wrong}, "
          f"finish peak {peak / 2**20:.0f} MiB (values {m.size * 8 / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()
