"""Benchmark the ``near_duplicate`` rule against the rensa MinHash LSH pipeline (issue 17).

Usage (the 250 MB numbers; rensa lives in its own virtual environment)::

    python3 -m venv /work/venvs/rensa && /work/venvs/rensa/bin/pip install rensa
    python benchmarks/scale_corpus.py ../shared/corpora/debian_descriptions.jsonl.gz \\
        /tmp/bench/corpus_250mb_seed0.jsonl --size-mb 250 --seed 0
    python benchmarks/bench_near_rensa.py /tmp/bench/corpus_250mb_seed0.jsonl \\
        --rensa-python /work/venvs/rensa/bin/python --preflight "python -m preflight" \\
        --bands default,16x8 --workers 1,2 --runs 3

Each tool is its own child process, run in the same session, interleaved ``--runs`` times
(the median is reported), after the page cache is warmed:

* **rensa** (run by ``--rensa-python``): timed from opening the file to the last query: read
  line by line, ``json.loads``, fold the text as preflight folds it and take word 5-gram
  shingles (``bench_near_dups.fold`` and ``shingle_set``), ``RMinHash(num_perm=128, seed=1)``
  updated with the shingles, then per document ``RMinHashLSH(threshold=0.8, num_perm=128,
  num_bands=16)`` query followed by insert: every candidate pair is reported once, by the later
  document. Candidates are not confirmed (the pipeline stops at LSH).
* **preflight** (``--preflight``): ``check FILE --rules RULES --no-smoke`` with only the
  ``near_duplicate`` rule, once per ``--bands`` setting (``default``: the rule's defaults;
  ``BxR``: ``bands: B, rows: R``), and once per ``--workers`` count when given (``1,2``).
  A first run on the corpus's first lines compiles the numba kernels into a cache kept for
  the timed runs.

**Truth** (``near_truth.exhaustive_truth``): every pair of documents at exact Jaccard >= 0.8 on
the word 5-gram shingle sets, computed once (checked against brute force on a sample) and
cached in ``WORKDIR/near_dups_truth`` by the file's SHA-256. **Precision**: the share of the
pairs a tool reports that are at >= 0.8 (rensa: its candidate pairs; preflight: each finding
with its ``partner``). **Docs recall**: of the documents with a partner at >= 0.8, the share
the tool puts in a true pair (rensa: an end of a candidate pair at >= 0.8; preflight: a
finding or a cluster's kept row, all confirmed).

The table gives wall seconds (around the child: interpreter start and imports included),
in-process seconds (rensa: its clock; preflight: ``timings.total``), CPU seconds (user and
system, workers included: the figure least moved by other load on a shared machine), the
ratio rensa wall / this wall, precision, docs recall and peak RSS (the child's process tree,
sampled). Results go to ``WORKDIR/near_rensa_results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_check import find_preflight, run_measured, warm_cache  # noqa: E402
from bench_near_dups import NUM_PERM, THRESHOLD, cf_table, fold, shingle_set  # noqa: E402

RULE_ID = "near-dupes"
LSH_BANDS = 16  # rensa's bands (the pipeline)
WARM_LINES = 2000


def rensa_child(path: Path, out: Path) -> int:
    """The rensa pipeline on ``path`` (in rensa's interpreter): pairs and seconds to ``out``."""
    from rensa import RMinHash, RMinHashLSH

    table = cf_table()  # setup, before the clock
    us, vs = array("q"), array("q")
    clock = time.perf_counter
    t0 = clock()
    lsh = RMinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, num_bands=LSH_BANDS)
    docs = 0
    with open(path, "rb") as fh:
        for row, line in enumerate(fh):
            try:
                text = json.loads(line).get("text")
            except (ValueError, AttributeError):
                continue
            if not isinstance(text, str) or not (folded := fold(text, table)):
                continue
            m = RMinHash(num_perm=NUM_PERM, seed=1)
            m.update(list(shingle_set(folded)))
            for other in lsh.query(m):
                us.append(other)
                vs.append(row)
            lsh.insert(row, m)
            docs += 1
    seconds = clock() - t0
    with open(out.with_suffix(".u"), "wb") as fu, open(out.with_suffix(".v"), "wb") as fv:
        us.tofile(fu)
        vs.tofile(fv)
    out.write_text(json.dumps({"docs": docs, "seconds": round(seconds, 3), "pairs": len(us)}))
    return 0


def run_rensa(args: argparse.Namespace, data: Path, scratch: Path) -> dict[str, Any]:
    """One measured rensa run; its pairs as numpy arrays."""
    import numpy as np

    out = scratch / "rensa.json"
    cmd = [args.rensa_python, str(Path(__file__).resolve()), "--rensa-child", str(data),
           "--rensa-out", str(out)]
    m = run_measured(cmd, scratch / "rensa.stdout", scratch / "rensa.stderr", args.timeout)
    if m.timed_out or m.exit_code != 0:
        err = (scratch / "rensa.stderr").read_text(errors="replace")[-2000:]
        raise SystemExit(f"rensa failed (exit {m.exit_code}): {err}")
    got = json.loads(out.read_text())
    got |= {"wall_seconds": round(m.seconds, 3), "cpu_seconds": round(m.cpu_seconds, 3),
            "peak_rss_mb": peak(m)}
    u = np.fromfile(out.with_suffix(".u"), dtype=np.int64)
    v = np.fromfile(out.with_suffix(".v"), dtype=np.int64)
    return got | {"u": u, "v": v}


def peak(m: Any) -> float:
    """The child's peak RSS in MB, summed over its process tree (sampled from /proc): its own
    ``ru_maxrss`` would count this process's memory at the fork."""
    return round(m.peak_tree_rss_mb or 0.0, 1)


def rules_for(setting: str) -> str:
    """The rules file of one ``--bands`` setting."""
    extra = ""
    if setting != "default":
        bands, rows = (int(x) for x in setting.split("x"))
        extra = f", bands: {bands}, rows: {rows}"
    return (f"version: 1\nfields: {{text: text, id: id}}\nrules:\n"
            f"  - {{id: {RULE_ID}, check: near_duplicate{extra}}}\n")


def run_preflight(args: argparse.Namespace, data: Path, scratch: Path, run: str
                  ) -> dict[str, Any]:
    """One measured preflight run (``BANDS`` or ``BANDS@WORKERS``); its timings, stats and
    (row, cluster, partner) arrays."""
    import polars as pl

    setting, _, workers = run.partition("@")
    rules = scratch / f"rules_{setting}.yaml"
    rules.write_text(rules_for(setting))
    out_dir = scratch / f"report_{setting}"
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [*args.cmd, "check", str(data), "--rules", str(rules), "--out", str(out_dir),
           "--quiet", "--no-progress", "--no-smoke", "--format", "json"]
    if workers:
        cmd += ["--workers", workers]
    m = run_measured(cmd, scratch / "pf.stdout", scratch / "pf.stderr", args.timeout)
    if m.timed_out or m.exit_code not in (0, 1):
        err = (scratch / "pf.stderr").read_text(errors="replace")[-2000:]
        raise SystemExit(f"preflight failed (exit {m.exit_code}): {err}")
    report = json.loads((out_dir / "report.json").read_text())
    rule = next(r for r in report["rules"] if r["id"] == RULE_ID)
    f = pl.read_parquet(out_dir / "findings.parquet").filter(pl.col("rule") == RULE_ID)
    stats = rule.get("stats", {})
    return {
        "wall_seconds": round(m.seconds, 3), "cpu_seconds": round(m.cpu_seconds, 3),
        "peak_rss_mb": peak(m),
        "seconds": report["timings"]["total"],
        "rule_seconds": report["timings"][f"rule:{RULE_ID}"],
        "timings": {k: v for k, v in report["timings"].items() if k.startswith(("pool", "read"))},
        "stats": {k: stats.get(k) for k in ("bands", "rows", "candidate_pairs",
                                             "confirmed_pairs", "clusters")},
        "row": f["row"].to_numpy(), "cluster": f["cluster"].to_numpy(),
        "partner": f["partner"].to_numpy(),
    }


def score(truth: Any, u: Any, v: Any, docs: Any) -> dict[str, Any]:
    """Precision of the pairs ``(u, v)`` and docs recall of ``docs`` against ``truth``."""
    import numpy as np

    want = truth.docs()
    ok = truth.similar(u, v) if len(u) else np.zeros(0, dtype=bool)
    found = np.intersect1d(np.unique(docs), want)
    return {"pairs": len(u), "precision": round(float(ok.mean()), 4) if len(u) else None,
            "docs_recall": round(len(found) / len(want), 4) if len(want) else None,
            "docs_found": len(found), "truth_docs": len(want)}


def main(argv: list[str] | None = None) -> int:
    """Truth, then rensa and preflight interleaved ``--runs`` times; print and save."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, nargs="?", help="JSON Lines with id and text")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench"))
    parser.add_argument("--rensa-python", default="/work/venvs/rensa/bin/python",
                        help="an interpreter with rensa installed")
    parser.add_argument("--preflight", default=None, help="command that runs the CLI")
    parser.add_argument("--bands", default="default,16x8",
                        help="preflight settings, comma-separated: default or BxR")
    parser.add_argument("--workers", default="", help="preflight --workers, comma-separated")
    parser.add_argument("--runs", type=int, default=1, help="interleaved runs (median)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per child")
    parser.add_argument("--rensa-child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rensa-out", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--truth-child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--truth-cache", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rensa_child is not None:
        return rensa_child(args.rensa_child, args.rensa_out)
    if args.truth_child is not None:
        from near_truth import exhaustive_truth

        exhaustive_truth(args.truth_child, args.truth_cache)
        return 0
    if args.corpus is None:
        parser.error("CORPUS is required")
    import numpy as np
    from near_truth import exhaustive_truth

    args.cmd = find_preflight(args.preflight)
    if args.cmd is None:
        raise SystemExit("error: preflight not found (give --preflight)")
    scratch = args.workdir / "near_rensa"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    os.environ["NUMBA_CACHE_DIR"] = str(scratch / "numba_cache")
    counts = [f"@{w}" for w in args.workers.split(",") if w] or [""]
    settings = [b + w for b in args.bands.split(",") for w in counts]
    data = args.corpus
    nbytes = data.stat().st_size
    print(f"{data}: {nbytes / 1e6:,.1f} MB; truth ...", flush=True)
    # In a child, so that this process stays small: a child's peak RSS counts its parent's
    # memory at the fork.
    cache = args.workdir / "near_dups_truth"
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--truth-child", str(data),
                    "--truth-cache", str(cache)], check=True)
    truth = exhaustive_truth(data, cache)
    print(f"truth: {truth.stats}", flush=True)

    warm = scratch / "warm.jsonl"  # numba compiles here, not in a timed run
    with open(data, "rb") as src, open(warm, "wb") as dst:
        for _, line in zip(range(WARM_LINES), src, strict=False):
            dst.write(line)
    for setting in args.bands.split(","):
        run_preflight(args, warm, scratch, setting)
    warm_cache(data)

    runs: dict[str, list[dict[str, Any]]] = {"rensa": [], **{s: [] for s in settings}}
    for i in range(args.runs):
        got = run_rensa(args, data, scratch)
        runs["rensa"].append(got)
        print(f"run {i + 1}: rensa {got['wall_seconds']:.2f} s", flush=True)
        for setting in settings:
            got = run_preflight(args, data, scratch, setting)
            runs[setting].append(got)
            print(f"run {i + 1}: preflight {setting} {got['wall_seconds']:.2f} s "
                  f"{got['stats']}", flush=True)

    def median(tool: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[tool])

    last = runs["rensa"][-1]
    rensa_wall = median("rensa", "wall_seconds")
    table = [{"tool": f"rensa LSH pairs ({LSH_BANDS} bands)", "wall_seconds": rensa_wall,
              "seconds": median("rensa", "seconds"), "ratio": 1.0,
              "cpu_seconds": median("rensa", "cpu_seconds"),
              "peak_rss_mb": max(r["peak_rss_mb"] for r in runs["rensa"]),
              **score(truth, last["u"], last["v"], np.concatenate([last["u"], last["v"]])[
                  np.tile(truth.similar(last["u"], last["v"]), 2)])}]
    for setting in settings:
        r = runs[setting][-1]
        wall = median(setting, "wall_seconds")
        name = setting.replace("@", ", workers ")
        table.append({"tool": f"preflight {name} ({r['stats']['bands']}x{r['stats']['rows']})",
                      "wall_seconds": wall, "seconds": median(setting, "seconds"),
                      "cpu_seconds": median(setting, "cpu_seconds"),
                      "ratio": round(rensa_wall / wall, 2),
                      "peak_rss_mb": max(x["peak_rss_mb"] for x in runs[setting]),
                      "stats": r["stats"], "timings": r["timings"],
                      **score(truth, r["row"], r["partner"],
                              np.concatenate([r["row"], r["cluster"]]))})
    print_table(table, nbytes, args.runs)
    results = {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "corpus": str(data),
               "bytes": nbytes, "runs": args.runs, "workers": args.workers,
               "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                           "load_average": os.getloadavg()},
               "truth": truth.stats, "table": table}
    out = args.workdir / "near_rensa_results.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results written to {out}")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


def print_table(table: list[dict[str, Any]], nbytes: int, runs: int) -> None:
    """The comparison table."""
    head = (f"{'tool':<34} {'wall s':>7} {'in-proc s':>9} {'CPU s':>6} {'MB/s':>6} "
            f"{'rensa/this':>10} "
            f"{'pairs':>10} {'precision':>9} {'docs recall':>11} {'RSS MB':>7}")
    print(f"\nmedian of {runs} run(s); precision and docs recall against the exhaustive truth")
    print(head)
    print("-" * len(head))
    for r in table:
        print(f"{r['tool']:<34} {r['wall_seconds']:>7.2f} {r['seconds']:>9.2f} "
              f"{r['cpu_seconds']:>6.1f} "
              f"{nbytes / 1e6 / r['wall_seconds']:>6.1f} {r['ratio']:>9.2f}x "
              f"{r['pairs']:>10,} {r['precision'] or 0:>9.4f} {r['docs_recall'] or 0:>11.4f} "
              f"{r['peak_rss_mb']:>7.0f}")


if __name__ == "__main__":
    sys.exit(main())
