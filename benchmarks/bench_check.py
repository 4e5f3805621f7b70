"""Benchmark ``preflight check`` against the plain-Python baseline on scaled corpora.

Usage::

    python benchmarks/bench_check.py CORPUS_SRC [--sizes 250,1000] [--workdir DIR] [--keep]
        [--repeat N] [--seed N] [--timeout S] [--preflight "CMD"]

For each size (MB, 1 MB = 1,000,000 bytes) the scaled corpus is generated with
``scale_corpus.py`` and cached in the work directory as ``corpus_<size>mb_seed<seed>.jsonl``, so
reruns reuse it (delete the files to regenerate). In the same run, each size is then checked by

* ``preflight check FILE --out DIR --quiet --no-progress`` (exit codes 0 and 1 both count as a
  successful run: the gate is expected to fail on planted faults; anything else is an error), and
* ``baseline_check.py FILE``,

each as its own child process. Wall time is measured around the child; peak RSS is the child's
own ``ru_maxrss`` from ``os.wait4`` (the largest single process: it includes descendants the
child waited for, as a maximum, not a sum), and ``peak_tree_rss_mb`` is the largest sum of RSS
over the child and all its descendants, sampled from /proc every 50 ms (Linux only; short
spikes between samples can be missed). The page cache is warmed by reading the corpus once
before timing. With ``--repeat N`` each tool runs N times per size and the fastest run is
reported (peak RSS is the largest over the runs). A table is printed and the results are
written to ``WORKDIR/results.json``. Report directories written by preflight are removed after
each run unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCALE_SCRIPT = HERE / "scale_corpus.py"
BASELINE_SCRIPT = HERE / "baseline_check.py"
MB = 1_000_000
SAMPLE_INTERVAL_S = 0.05
OK_EXIT_CODES = {"preflight": (0, 1), "baseline": (0,)}


@dataclass
class RunResult:
    """One measured child process."""

    size_mb: float
    tool: str
    status: str  # "ok", "error", "not available" or "timeout"
    exit_code: int | None = None
    seconds: float | None = None
    mb_per_s: float | None = None
    peak_rss_mb: float | None = None
    peak_tree_rss_mb: float | None = None
    ratio_vs_baseline: float | None = None
    runs_seconds: list[float] = field(default_factory=list)
    detail: str = ""


@dataclass
class Measured:
    """Exit status, wall time and memory of a finished child process."""

    exit_code: int
    seconds: float
    peak_rss_mb: float
    peak_tree_rss_mb: float | None
    timed_out: bool
    cpu_seconds: float | None = None  # user + system, the child and its descendants (Linux)



def machine() -> dict[str, object]:
    """What a results file records about the machine it ran on."""
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count()}

def tree_rss_bytes(root: int, page: int) -> int | None:
    """Return the summed RSS of ``root`` and its descendants, or None without /proc."""
    if not Path("/proc").is_dir():
        return None
    total = 0
    stack = [root]
    seen: set[int] = set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * page
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    stack.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


def run_measured(cmd: list[str], stdout: Path, stderr: Path, timeout: float) -> Measured:
    """Run ``cmd`` as a child and measure its wall time, own peak RSS and tree peak RSS."""
    page = os.sysconf("SC_PAGE_SIZE")
    _adopt_orphans()
    done = threading.Event()
    peak_tree: list[int | None] = [None]
    timed_out = [False]

    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
        )

        def monitor() -> None:
            """Sample the process tree's RSS and enforce the timeout until the child exits."""
            deadline = t0 + timeout
            while not done.is_set():
                rss = tree_rss_bytes(proc.pid, page)
                if rss is not None and (peak_tree[0] is None or rss > peak_tree[0]):
                    peak_tree[0] = rss
                if time.perf_counter() > deadline and not timed_out[0]:
                    timed_out[0] = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)  # the child and its descendants
                done.wait(SAMPLE_INTERVAL_S)

        sampler = threading.Thread(target=monitor, daemon=True)
        sampler.start()
        _, status, rusage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        cpu = rusage.ru_utime + rusage.ru_stime + _orphans_cpu(proc.pid)
        done.set()
        sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen

    # ru_maxrss is in KiB on Linux and in bytes on macOS.
    maxrss_bytes = rusage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    tree = peak_tree[0]
    return Measured(
        exit_code=proc.returncode,
        seconds=seconds,
        peak_rss_mb=maxrss_bytes / MB,
        peak_tree_rss_mb=None if tree is None else max(tree, maxrss_bytes) / MB,
        timed_out=timed_out[0],
        cpu_seconds=cpu,
    )


def _adopt_orphans() -> None:
    """Linux: become the parent of what a child leaves behind (its pool's fork server,
    whose workers it reaps), so that their CPU time can be counted."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _orphans_cpu(group: int) -> float:
    """CPU seconds of the ended child's descendants still running (its process group, now
    ours through ``_adopt_orphans``: a fork server exits when its driver has), waited for."""
    total = 0.0
    while True:
        try:
            _, _, usage = os.wait4(-group, 0)
        except ChildProcessError:
            return total
        total += usage.ru_utime + usage.ru_stime


def find_preflight(override: str | None) -> list[str] | None:
    """Return the command that runs the preflight CLI, or None when it is not installed."""
    if override:
        return shlex.split(override)
    beside = Path(sys.executable).parent / "preflight"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("preflight")
    return [found] if found else None


def ensure_corpus(src: Path, workdir: Path, size_mb: float, seed: int) -> tuple[Path, float]:
    """Return the cached scaled corpus for ``size_mb``, generating it if needed."""
    corpus = workdir / f"corpus_{size_mb:g}mb_seed{seed}.jsonl"
    if corpus.is_file() and corpus.stat().st_size >= size_mb * MB:
        print(f"[{size_mb:g} MB] reusing {corpus}", flush=True)
        return corpus, 0.0
    partial = corpus.with_suffix(".partial")
    cmd = [
        sys.executable,
        str(SCALE_SCRIPT),
        str(src),
        str(partial),
        "--size-mb",
        f"{size_mb:g}",
        "--seed",
        str(seed),
    ]
    print(f"[{size_mb:g} MB] generating {corpus} ...", flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    partial.replace(corpus)
    print(f"[{size_mb:g} MB] generated in {seconds:.1f} s", flush=True)
    return corpus, seconds


def warm_cache(path: Path) -> None:
    """Read ``path`` once so both tools start from a warm page cache."""
    with open(path, "rb") as fh:
        while fh.read(16 * 1024 * 1024):
            pass


def tail(path: Path, n: int = 600) -> str:
    """Return the last ``n`` characters of a text file, or an empty string."""
    try:
        return path.read_text(errors="replace")[-n:].strip()
    except OSError:
        return ""


def measure_tool(
    tool: str,
    cmd: list[str] | None,
    size_mb: float,
    corpus: Path,
    logs: Path,
    timeout: float,
    repeat: int = 1,
    fresh_dir: Path | None = None,
) -> tuple[RunResult, str]:
    """Run one tool on ``corpus`` ``repeat`` times; return the fastest run and its stdout.

    Peak RSS is the largest over the runs; ``fresh_dir`` is removed before every run.
    """
    if cmd is None:
        return RunResult(size_mb, tool, "not available", detail=f"{tool} not available"), ""
    stdout, stderr = logs / f"{tool}.stdout", logs / f"{tool}.stderr"
    nbytes = corpus.stat().st_size
    best: RunResult | None = None
    best_out = ""
    times: list[float] = []
    for i in range(repeat):
        print(f"[{size_mb:g} MB] running {tool} ({i + 1}/{repeat}): {shlex.join(cmd)}", flush=True)
        if fresh_dir is not None:
            shutil.rmtree(fresh_dir, ignore_errors=True)
        try:
            m = run_measured(cmd, stdout, stderr, timeout)
        except FileNotFoundError as exc:
            detail = f"{tool} not available: {exc}"
            return RunResult(size_mb, tool, "not available", detail=detail), ""
        result = RunResult(
            size_mb=size_mb,
            tool=tool,
            status="ok",
            exit_code=m.exit_code,
            seconds=round(m.seconds, 3),
            mb_per_s=round(nbytes / MB / m.seconds, 2),
            peak_rss_mb=round(m.peak_rss_mb, 1),
            peak_tree_rss_mb=None if m.peak_tree_rss_mb is None else round(m.peak_tree_rss_mb, 1),
        )
        if m.timed_out:
            result.status, result.detail = "timeout", f"killed after {timeout:g} s"
        elif m.exit_code not in OK_EXIT_CODES[tool]:
            result.status = "error"
            result.detail = f"exit code {m.exit_code}: {tail(stderr)}"
        if result.status != "ok":
            result.mb_per_s = None
            return result, tail(stdout, 100_000)
        times.append(result.seconds or 0.0)
        if best is None:
            best, best_out = result, tail(stdout, 100_000)
        else:
            peak = max(best.peak_rss_mb or 0.0, result.peak_rss_mb or 0.0)
            tree = max(best.peak_tree_rss_mb or 0.0, result.peak_tree_rss_mb or 0.0)
            if (result.seconds or 0.0) < (best.seconds or 0.0):
                best, best_out = result, tail(stdout, 100_000)
            best.peak_rss_mb, best.peak_tree_rss_mb = peak, tree or None
    assert best is not None
    best.runs_seconds = times
    return best, best_out


def print_table(results: list[RunResult]) -> None:
    """Print the results as a plain-text table."""

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    header = (
        f"{'size MB':>8}  {'tool':<10} {'status':<13} {'seconds':>9} {'MB/s':>8} "
        f"{'peak RSS MB':>11} {'tree RSS MB':>11} {'vs baseline':>11}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        ratio = "-" if r.ratio_vs_baseline is None else f"{r.ratio_vs_baseline:.2f}x"
        print(
            f"{r.size_mb:>8g}  {r.tool:<10} {r.status:<13} {fmt(r.seconds, '.2f'):>9} "
            f"{fmt(r.mb_per_s, '.1f'):>8} {fmt(r.peak_rss_mb, '.1f'):>11} "
            f"{fmt(r.peak_tree_rss_mb, '.1f'):>11} {ratio:>11}"
        )
    for r in results:
        if r.detail:
            print(f"note: {r.size_mb:g} MB {r.tool}: {r.detail}")


def parse_sizes(text: str) -> list[float]:
    """Parse a comma-separated list of positive sizes in MB."""
    try:
        sizes = [float(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"bad --sizes {text!r}") from exc
    if not sizes or any(s <= 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"bad --sizes {text!r}")
    return sizes


def run_options(description: str, *, workdir: str, keep: str) -> argparse.ArgumentParser:
    """The options every scaled-corpus benchmark takes (sizes, workdir, seed, repeats...)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("src", type=Path, help="source corpus (.jsonl or .jsonl.gz)")
    parser.add_argument("--sizes", type=parse_sizes, default=[250.0, 1000.0], help="MB list")
    parser.add_argument("--workdir", type=Path, default=Path(workdir))
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
    parser.add_argument("--keep", action="store_true", help=keep)
    parser.add_argument(
        "--preflight", default=None, help="command that runs the CLI (default: find `preflight`)"
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per tool and size; the fastest is reported"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Generate corpora, run both tools per size, print the table and write results.json."""
    parser = run_options(__doc__.splitlines()[0], workdir="/tmp/preflight-bench",
                         keep="keep preflight report directories")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    workdir: Path = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    preflight_cmd = find_preflight(args.preflight)
    if preflight_cmd is None:
        print("preflight not available: only the baseline will be measured", flush=True)

    results: list[RunResult] = []
    generation: dict[str, float] = {}
    baseline_summaries: dict[str, object] = {}
    for size in args.sizes:
        corpus, gen_seconds = ensure_corpus(args.src, workdir, size, args.seed)
        if gen_seconds:
            generation[f"{size:g}"] = round(gen_seconds, 3)
        logs = workdir / f"logs_{size:g}mb"
        logs.mkdir(exist_ok=True)
        warm_cache(corpus)

        out_dir = workdir / f"report_{size:g}mb"
        tool_cmd = None
        if preflight_cmd is not None:
            tool_cmd = [
                *preflight_cmd,
                "check",
                str(corpus),
                "--out",
                str(out_dir),
                "--quiet",
                "--no-progress",
                "--no-smoke",
            ]
        tool, _ = measure_tool(
            "preflight", tool_cmd, size, corpus, logs, args.timeout, args.repeat, out_dir
        )
        if not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)

        base_cmd = [sys.executable, str(BASELINE_SCRIPT), str(corpus)]
        base, base_out = measure_tool(
            "baseline", base_cmd, size, corpus, logs, args.timeout, args.repeat
        )
        if base.status == "ok" and base_out:
            with contextlib.suppress(json.JSONDecodeError):
                baseline_summaries[f"{size:g}"] = json.loads(base_out.splitlines()[-1])
        if tool.mb_per_s and base.mb_per_s:
            tool.ratio_vs_baseline = round(tool.mb_per_s / base.mb_per_s, 2)
        results += [tool, base]

    print_table(results)
    report = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "source": str(args.src),
        "seed": args.seed,
        "machine": machine(),
        "preflight_command": preflight_cmd,
        "generation_seconds": generation,
        "results": [asdict(r) for r in results],
        "baseline_summaries": baseline_summaries,
    }
    out = workdir / "results.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nresults written to {out}")
    print(f"cached corpora in {workdir} (delete corpus_*.jsonl to regenerate or free space)")
    failed = any(r.status in ("error", "timeout") for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
