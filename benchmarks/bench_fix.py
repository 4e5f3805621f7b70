"""Benchmark ``preflight fix`` beside ``preflight check`` on the same scaled corpora.

Usage::

    python benchmarks/bench_fix.py CORPUS_SRC [--sizes 250,1000] [--workdir DIR] [--seed N]
        [--repeat N] [--timeout S] [--preflight "CMD"] [--keep]

For each size (MB, 1 MB = 1,000,000 bytes) the scaled corpus is reused from the work directory
(``corpus_<size>mb_seed<seed>.jsonl``, the same cache as ``bench_check.py``) or generated with
``scale_corpus.py``. In the same run, each as its own child process, the corpus is then run
through

* ``preflight check FILE --out DIR --quiet --no-progress`` (exit codes 0 and 1 both count: the
  gate is expected to fail on the planted faults), and
* ``preflight fix FILE --out OUT.jsonl --quarantine REJ.jsonl --manifest M.json --quiet``
  (exit code 0), default rules for both.

Wall time is measured around the child, peak RSS is the child's own ``ru_maxrss`` and the tree
peak is sampled from /proc (``bench_check.run_measured``); the page cache is warmed first. With
``--repeat N`` each command runs N times and the fastest run is reported (peak RSS: the largest
over the runs). ``fix / check`` is the ratio of their wall times.

From fix's manifest the script reports the records read, clean, changed and quarantined and the
verification rounds, and it verifies that ``clean + quarantined == input`` (and the manifest's
own ``balanced``), that fix read as many records as check, and, by counting the lines of the
two output files, that every input line landed in exactly one of them. The outputs (about the
size of the input) are deleted after each run unless ``--keep`` is given. The table is
printed and the results are written to ``WORKDIR/fix_results.json``.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_check import (  # noqa: E402
    MB,
    ensure_corpus,
    find_preflight,
    machine,
    run_measured,
    run_options,
    tail,
    warm_cache,
)

OK_EXIT_CODES = {"check": (0, 1), "fix": (0,)}


@dataclass
class Run:
    """One measured command (the fastest of its repeats)."""

    size_mb: float
    tool: str
    status: str  # "ok", "error" or "timeout"
    exit_code: int | None = None
    seconds: float | None = None
    mb_per_s: float | None = None
    peak_rss_mb: float | None = None
    peak_tree_rss_mb: float | None = None
    runs_seconds: list[float] = field(default_factory=list)
    detail: str = ""


def measure(
    tool: str,
    cmd: list[str],
    size_mb: float,
    corpus: Path,
    logs: Path,
    timeout: float,
    repeat: int,
    cleanup: list[Path],
) -> Run:
    """Run ``cmd`` ``repeat`` times; return the fastest run with the largest peak RSS.

    ``cleanup`` paths are removed before every run (and left after the last one, for the
    caller to read)."""
    stdout, stderr = logs / f"{tool}.stdout", logs / f"{tool}.stderr"
    nbytes = corpus.stat().st_size
    best: Run | None = None
    for i in range(repeat):
        for path in cleanup:
            remove(path)
        print(f"[{size_mb:g} MB] running {tool} ({i + 1}/{repeat}): {shlex.join(cmd)}", flush=True)
        m = run_measured(cmd, stdout, stderr, timeout)
        run = Run(
            size_mb,
            tool,
            "ok",
            exit_code=m.exit_code,
            seconds=round(m.seconds, 3),
            mb_per_s=round(nbytes / MB / m.seconds, 2),
            peak_rss_mb=round(m.peak_rss_mb, 1),
            peak_tree_rss_mb=None if m.peak_tree_rss_mb is None else round(m.peak_tree_rss_mb, 1),
        )
        if m.timed_out:
            run.status, run.detail = "timeout", f"killed after {timeout:g} s"
        elif m.exit_code not in OK_EXIT_CODES[tool]:
            run.status, run.detail = "error", f"exit code {m.exit_code}: {tail(stderr)}"
        if run.status != "ok":
            run.mb_per_s = None
            return run
        print(
            f"[{size_mb:g} MB]   {tool}: {m.seconds:.2f} s, peak RSS {m.peak_rss_mb:.0f} MB",
            flush=True,
        )
        if best is None:
            best = run
            best.runs_seconds = [run.seconds or 0.0]
            continue
        times = [*best.runs_seconds, run.seconds or 0.0]
        peak = max(best.peak_rss_mb or 0.0, run.peak_rss_mb or 0.0)
        tree = max(best.peak_tree_rss_mb or 0.0, run.peak_tree_rss_mb or 0.0)
        if (run.seconds or 0.0) < (best.seconds or 0.0):
            best = run
        best.runs_seconds, best.peak_rss_mb, best.peak_tree_rss_mb = times, peak, tree or None
    assert best is not None
    return best


def remove(path: Path) -> None:
    """Remove a file or a directory tree if it exists."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def count_lines(path: Path) -> int:
    """Count newline-terminated lines (plus a final unterminated one)."""
    n, last = 0, b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(16 * 1024 * 1024):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


def fix_counts(
    manifest: dict[str, Any], check_total: int | None, corpus: Path, clean: Path, quarantine: Path
) -> dict[str, Any]:
    """Counts from fix's manifest, and the invariants checked against them."""
    counts = {
        "input": manifest["input"]["records"],
        "blank_lines": manifest["input"]["blank_lines"],
        "clean": manifest["clean"]["records"],
        "changed": manifest["clean"]["changed"],
        "quarantined": manifest["quarantine"]["records"],
        "rounds": manifest["rounds"],
        "check_records": check_total,
        "findings_per_rule_and_action": manifest["findings_per_rule_and_action"],
    }
    input_lines = count_lines(corpus)
    clean_lines, quarantine_lines = count_lines(clean), count_lines(quarantine)
    counts["lines"] = {"input": input_lines, "clean": clean_lines, "quarantine": quarantine_lines}
    problems = []
    if counts["clean"] + counts["quarantined"] != counts["input"]:
        problems.append(
            f"clean {counts['clean']:,} + quarantined {counts['quarantined']:,} "
            f"!= input {counts['input']:,}"
        )
    if not manifest.get("balanced"):
        problems.append("manifest says balanced: false")
    if check_total is not None and check_total != counts["input"]:
        problems.append(f"fix read {counts['input']:,} records, check {check_total:,}")
    # Blank lines are copied to the clean output; every other line is one record.
    if clean_lines + quarantine_lines != input_lines:
        problems.append(
            f"output lines {clean_lines:,} + {quarantine_lines:,} != input lines {input_lines:,}"
        )
    if clean_lines != counts["clean"] + counts["blank_lines"]:
        problems.append(
            f"clean file has {clean_lines:,} lines, manifest "
            f"{counts['clean']:,} records + {counts['blank_lines']:,} blank"
        )
    if quarantine_lines != counts["quarantined"]:
        problems.append(
            f"quarantine file has {quarantine_lines:,} lines, manifest {counts['quarantined']:,}"
        )
    counts["verified"] = not problems
    counts["problems"] = problems
    return counts


def print_table(runs: list[Run], ratios: dict[float, float]) -> None:
    """Print the timings as a plain-text table."""

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    header = (
        f"{'size MB':>8}  {'tool':<6} {'status':<8} {'seconds':>9} {'MB/s':>8} "
        f"{'peak RSS MB':>11} {'tree RSS MB':>11} {'fix/check':>9}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in runs:
        ratio = ratios.get(r.size_mb) if r.tool == "fix" else None
        print(
            f"{r.size_mb:>8g}  {r.tool:<6} {r.status:<8} {fmt(r.seconds, '.2f'):>9} "
            f"{fmt(r.mb_per_s, '.1f'):>8} {fmt(r.peak_rss_mb, '.1f'):>11} "
            f"{fmt(r.peak_tree_rss_mb, '.1f'):>11} "
            f"{'-' if ratio is None else format(ratio, '.2f') + 'x':>9}"
        )
    for r in runs:
        if r.detail:
            print(f"note: {r.size_mb:g} MB {r.tool}: {r.detail}")


def print_counts(counts: dict[float, dict[str, Any]]) -> None:
    """Print fix's manifest counts per size."""
    if not counts:
        return
    header = (
        f"{'size MB':>8}  {'input':>10} {'clean':>10} {'changed':>8} "
        f"{'quarantined':>11} {'rounds':>6}  verified"
    )
    print()
    print(header)
    print("-" * len(header))
    for size, c in counts.items():
        print(
            f"{size:>8g}  {c['input']:>10,} {c['clean']:>10,} {c['changed']:>8,} "
            f"{c['quarantined']:>11,} {c['rounds']:>6}  "
            f"{'yes' if c['verified'] else 'NO: ' + '; '.join(c['problems'])}"
        )
    for size, c in counts.items():
        actions = ", ".join(
            f"{rule} {action} {n:,}"
            for rule, by in c["findings_per_rule_and_action"].items()
            for action, n in by.items()
        )
        print(f"{size:g} MB findings by rule and action: {actions}")


def main(argv: list[str] | None = None) -> int:
    """Run check and fix per size, print the tables and write fix_results.json."""
    parser = run_options(__doc__.splitlines()[0], workdir="/tmp/bench",
                         keep="keep the reports and fix outputs")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    preflight_cmd = find_preflight(args.preflight)
    if preflight_cmd is None:
        parser.error("preflight is not installed (or pass --preflight CMD)")

    workdir: Path = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    runs: list[Run] = []
    ratios: dict[float, float] = {}
    counts: dict[float, dict[str, Any]] = {}
    for size in args.sizes:
        corpus, _ = ensure_corpus(args.src, workdir, size, args.seed)
        logs = workdir / f"logs_{size:g}mb"
        logs.mkdir(exist_ok=True)
        warm_cache(corpus)

        report_dir = workdir / f"report_{size:g}mb"
        check_cmd = [
            *preflight_cmd,
            "check",
            str(corpus),
            "--out",
            str(report_dir),
            "--quiet",
            "--no-progress",
            "--no-smoke",
        ]
        check = measure(
            "check", check_cmd, size, corpus, logs, args.timeout, args.repeat, [report_dir]
        )
        check_total = None
        if check.status == "ok":
            report = json.loads((report_dir / "report.json").read_text())
            check_total = report["source"]["total"]
        if not args.keep:
            remove(report_dir)

        fix_dir = workdir / f"fix_{size:g}mb"
        clean, quarantine = fix_dir / "clean.jsonl", fix_dir / "quarantine.jsonl"
        manifest_path = fix_dir / "fix-manifest.json"
        fix_cmd = [
            *preflight_cmd,
            "fix",
            str(corpus),
            "--out",
            str(clean),
            "--quarantine",
            str(quarantine),
            "--manifest",
            str(manifest_path),
            "--quiet",
        ]
        warm_cache(corpus)
        fix = measure("fix", fix_cmd, size, corpus, logs, args.timeout, args.repeat, [fix_dir])
        try:
            if fix.status == "ok":
                manifest = json.loads(manifest_path.read_text())
                counts[size] = fix_counts(manifest, check_total, corpus, clean, quarantine)
        finally:
            if not args.keep:
                remove(fix_dir)
        if check.seconds and fix.seconds and check.status == fix.status == "ok":
            ratios[size] = round(fix.seconds / check.seconds, 2)
        runs += [check, fix]

    print_table(runs, ratios)
    print_counts(counts)
    results = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "source": str(args.src),
        "seed": args.seed,
        "repeat": args.repeat,
        "machine": machine(),
        "preflight_command": preflight_cmd,
        "results": [asdict(r) for r in runs],
        "fix_over_check": {f"{s:g}": r for s, r in ratios.items()},
        "fix_counts": {f"{s:g}": c for s, c in counts.items()},
    }
    out = workdir / "fix_results.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nresults written to {out}")
    failed = any(r.status != "ok" for r in runs) or any(not c["verified"] for c in counts.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
