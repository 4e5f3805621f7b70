"""Profile the default gate (``preflight check FILE --no-smoke``) under cProfile.

Usage::

    python benchmarks/profile_gate.py FILE [--top 30] [--out DIR] [--pstats FILE.prof]
        [-- EXTRA CHECK ARGS ...]

Runs the real CLI in this process (``preflight check FILE --out DIR --no-smoke --quiet
--no-progress`` plus any arguments after ``--``, e.g. ``-- --preset pretraining``), then prints
the top functions by cumulative time and by own time, and each stage's and rule's seconds from
``report.json``'s ``timings``. ``--pstats`` keeps the raw profile for ``snakeviz`` or
``python -m pstats``.

The checks' scans and the reader run in thread pools, which cProfile alone does not see: every
thread started during the run gets its own profiler, and the tables merge all threads (so
cumulative times of work that ran side by side add up past the wall time; idle threads'
waits on their queue and locks are left out of the tables). Profiling slows
Python-heavy code more than native code: compare profiles with profiles and wall times with
wall times.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path, help="The corpus to check.")
    ap.add_argument("--top", type=int, default=30, help="Functions shown per table.")
    ap.add_argument("--out", type=Path, help="Report folder (default: a temporary one).")
    ap.add_argument("--pstats", type=Path, help="Also save the raw profile here.")
    return ap.parse_args(argv), extra


# Idle pool threads waiting for work: hours of "own time" that are no work at all.
_IDLE = {"<method 'get' of '_queue.SimpleQueue' objects>",
         "<method 'acquire' of '_thread.lock' objects>"}


def _table(profiles: list[cProfile.Profile], key: str, top: int) -> str:
    buf = io.StringIO()
    stats = pstats.Stats(profiles[0], stream=buf)
    for other in profiles[1:]:
        stats.add(other)
    for func in [f for f in stats.stats if f[2] in _IDLE]:  # type: ignore[attr-defined]
        del stats.stats[func]  # type: ignore[attr-defined]
    stats.strip_dirs().sort_stats(key).print_stats(top)
    # Drop pstats' preamble (totals are printed once, by main).
    text = buf.getvalue()
    return text[text.find("   ncalls"):] if "   ncalls" in text else text


def profile_gate(file: Path, out: Path,
                 extra: list[str]) -> tuple[list[cProfile.Profile], float, int]:
    """Run ``preflight check`` on ``file`` under cProfile (every thread); return the
    profiles (main thread first), wall seconds and the exit code."""
    from preflight.cli import main  # imported outside the profile: import time is not the gate

    args = ["check", str(file), "--out", str(out), "--no-smoke", "--quiet", "--no-progress",
            *extra]
    profiles = [cProfile.Profile()]

    def per_thread(*_: object) -> None:
        # Called once in each new thread: swap this hook for the thread's own profiler.
        sys.setprofile(None)
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()

    threading.setprofile(per_thread)
    started = time.perf_counter()
    profiles[0].enable()
    try:
        main.main(args=args, standalone_mode=False)
        code = 0
    except SystemExit as e:  # the CLI exits 1 on a failed gate
        code = e.code if isinstance(e.code, int) else 1
    finally:
        profiles[0].disable()
        threading.setprofile(None)
    return profiles, time.perf_counter() - started, code


def main(argv: list[str] | None = None) -> int:
    """Profile one gate run and print the tables."""
    args, extra = _parse(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="profile_gate_") as tmp:
        out = args.out or Path(tmp) / "report"
        profiles, wall, code = profile_gate(args.file, out, extra)
        report_path = out / "report.json"
        timings = json.loads(report_path.read_text())["timings"] if report_path.exists() else {}
    if args.pstats:
        merged = pstats.Stats(profiles[0])
        for other in profiles[1:]:
            merged.add(other)
        merged.dump_stats(args.pstats)
    print(f"# {args.file}: exit {code}, {wall:.2f} s wall under cProfile, "
          f"{len(profiles)} threads profiled")
    print(f"\n## top {args.top} by cumulative time\n")
    print(_table(profiles, "cumulative", args.top))
    print(f"\n## top {args.top} by own time\n")
    print(_table(profiles, "tottime", args.top))
    print("\n## report.json timings (s)\n")
    for name, seconds in sorted(timings.items(), key=lambda kv: -kv[1]):
        print(f"{seconds:9.3f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
