"""Benchmark ``preflight fix`` beside ``preflight check`` on one large top-level JSON array.

Usage::

    python benchmarks/bench_fix_array.py [CORPUS_SRC] [--size-mb 500] [--workdir DIR]
        [--seed N] [--pretty-every K] [--repeat N] [--timeout S] [--preflight "CMD"] [--keep]

The array is built from the scaled JSON Lines corpus of the same size (``scale_corpus.py``,
cached as ``corpus_<size>mb_seed<seed>.jsonl`` in the work directory like the other
benchmarks) and cached beside it as ``array_<size>mb_seed<seed>_pretty<K>.json``: ``[``, one
element per line of the corpus, ``,`` and a newline between elements, ``]``. Every K-th
element (default 10) is pretty-printed (``json.dumps(record, indent=2)``, nested one level in),
the others are the corpus line as written, as real exports mix them. The corpus's planted
malformed (truncated) lines would swallow the rest of an array, so each becomes one
structurally balanced but invalid element (``{"broken": "<the line>" "missing comma"}``): one
malformed unit each, the same count as in the JSON Lines corpus. Elements are written until
the file reaches ``--size-mb`` MB (1 MB = 1,000,000 bytes); delete the file to rebuild it.

In the same run, each as its own child process, with a warm page cache and the default rules
(no rules file), the array goes through

* ``preflight check FILE --no-smoke --out DIR --quiet --no-progress`` (exit 0 or 1), and
* ``preflight fix FILE --out clean.jsonl --quarantine q.jsonl --manifest M.json --quiet``
  (exit 0).

Wall time is measured around the child; peak RSS is the child's own ``ru_maxrss`` from
``os.wait4`` (one fresh process per run, so each run's peak is its own), and the tree peak is
sampled from /proc every 50 ms (``bench_check.run_measured``). The own peak is the one to
compare: preflight's only child is ``git rev-parse HEAD`` (``preflight/environment.py``), and
a sample taken just after its fork counts the parent's pages twice, so the tree column can
jump to about twice the real figure. With ``--repeat N`` each command runs N times, the
fastest is reported and the peak RSS is the largest over the runs. The script prints both
runs, the ratios fix / check of peak RSS and of wall time, and ``others``: the cores other
processes kept busy meanwhile (``/proc/stat``; the times are only worth recording near 0).

It then verifies fix against check: fix read as many records (elements) as check and as the
file holds, ``clean + quarantined == input`` (and the manifest's ``balanced``), the output
files have one line per record, and fix's findings per rule (summed over actions) equal check's
per rule. Outputs are deleted unless ``--keep`` is given; results go to
``WORKDIR/fix_array_results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_check import MB, ensure_corpus, find_preflight, machine, warm_cache  # noqa: E402
from bench_fix import count_lines, measure, remove  # noqa: E402
from bench_scale import DEFAULT_SRC  # noqa: E402
from bench_smoke import OtherLoad  # noqa: E402

FLUSH_BYTES = 4 * 1024 * 1024
BROKEN_TAIL = ' "missing comma"}'


def build_array(
    src: Path, workdir: Path, size_mb: float, seed: int, pretty_every: int
) -> tuple[Path, dict[str, Any]]:
    """Return the cached JSON array for ``size_mb`` and what it holds, building it if needed."""
    path = workdir / f"array_{size_mb:g}mb_seed{seed}_pretty{pretty_every}.json"
    meta_path = path.with_suffix(".meta.json")
    if path.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("bytes") == path.stat().st_size:
            print(f"[{size_mb:g} MB] reusing {path}", flush=True)
            return path, meta
    corpus, _ = ensure_corpus(src, workdir, size_mb, seed)
    print(f"[{size_mb:g} MB] building {path} from {corpus.name} ...", flush=True)
    t0 = time.perf_counter()
    target = int(size_mb * MB)
    partial = path.with_suffix(".partial")
    elements = pretty = broken = 0
    written = 0
    buf: list[bytes] = []
    buf_bytes = 0
    with open(corpus, encoding="utf-8") as lines, open(partial, "wb") as out:
        out.write(b"[\n")
        written += 2
        for line in lines:
            body = line.rstrip("\n")
            if not body.strip():
                continue
            try:
                record = json.loads(body)
            except json.JSONDecodeError:
                text = '{"broken": ' + json.dumps(body, ensure_ascii=False) + BROKEN_TAIL
                broken += 1
            else:
                if pretty_every and elements % pretty_every == 0:
                    text = json.dumps(record, ensure_ascii=False, indent=2).replace("\n", "\n  ")
                    pretty += 1
                else:
                    text = body
            data = (("  " if elements == 0 else ",\n  ") + text).encode("utf-8")
            buf.append(data)
            buf_bytes += len(data)
            elements += 1
            if written + buf_bytes + 3 >= target:
                break
            if buf_bytes >= FLUSH_BYTES:
                out.write(b"".join(buf))
                written += buf_bytes
                buf.clear()
                buf_bytes = 0
        buf.append(b"\n]\n")
        out.write(b"".join(buf))
    partial.replace(path)
    seconds = time.perf_counter() - t0
    meta = {
        "path": str(path),
        "bytes": path.stat().st_size,
        "elements": elements,
        "pretty_printed": pretty,
        "malformed": broken,
        "from": str(corpus),
        "seconds": round(seconds, 2),
    }
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(
        f"[{size_mb:g} MB] built {meta['bytes'] / MB:,.1f} MB, {elements:,} elements "
        f"({pretty:,} pretty-printed, {broken:,} malformed) in {seconds:.1f} s",
        flush=True,
    )
    return path, meta


def verify(
    meta: dict[str, Any], report: dict[str, Any] | None, manifest: dict[str, Any],
    clean: Path, quarantine: Path,
) -> dict[str, Any]:
    """Fix's counts, compared with check's report and with the file itself."""
    counts: dict[str, Any] = {
        "elements": meta["elements"],
        "check_total": None if report is None else report["source"]["total"],
        "input": manifest["input"]["records"],
        "clean": manifest["clean"]["records"],
        "changed": manifest["clean"]["changed"],
        "quarantined": manifest["quarantine"]["records"],
        "rounds": manifest["rounds"],
        "lines": {"clean": count_lines(clean), "quarantine": count_lines(quarantine)},
    }
    fix_rules = {
        rule: sum(by.values()) for rule, by in manifest["findings_per_rule_and_action"].items()
    }
    check_rules = {} if report is None else {
        r["id"]: r["findings"] for r in report["rules"] if r["findings"]
    }
    counts["findings"] = {"check": check_rules, "fix": fix_rules}
    counts["findings_per_rule_and_action"] = manifest["findings_per_rule_and_action"]
    problems = []
    if counts["input"] != meta["elements"]:
        problems.append(f"fix read {counts['input']:,} records, the file has "
                        f"{meta['elements']:,} elements")
    if counts["check_total"] is not None and counts["check_total"] != counts["input"]:
        problems.append(f"fix read {counts['input']:,} records, check {counts['check_total']:,}")
    if counts["clean"] + counts["quarantined"] != counts["input"]:
        problems.append(f"clean {counts['clean']:,} + quarantined {counts['quarantined']:,} "
                        f"!= input {counts['input']:,}")
    if not manifest.get("balanced"):
        problems.append("manifest says balanced: false")
    if counts["lines"]["clean"] != counts["clean"]:
        problems.append(f"clean file has {counts['lines']['clean']:,} lines, manifest "
                        f"{counts['clean']:,}")
    if counts["lines"]["quarantine"] != counts["quarantined"]:
        problems.append(f"quarantine file has {counts['lines']['quarantine']:,} lines, "
                        f"manifest {counts['quarantined']:,}")
    if report is not None and check_rules != fix_rules:
        problems.append(f"findings per rule differ: check {check_rules}, fix {fix_rules}")
    counts["verified"] = not problems
    counts["problems"] = problems
    return counts


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` rounded, or None when either is missing."""
    return None if not a or not b else round(a / b, 2)


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the array, run check and fix on it, print and save the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, nargs="?", default=DEFAULT_SRC,
                        help=f"source corpus (.jsonl or .jsonl.gz; default {DEFAULT_SRC})")
    parser.add_argument("--size-mb", type=float, default=500.0, help="array size (default 500)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench"))
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
    parser.add_argument("--pretty-every", type=int, default=10,
                        help="pretty-print every K-th element (0: none; default 10)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per command; the fastest is reported")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    parser.add_argument("--preflight", default=None,
                        help="command that runs the CLI (default: find `preflight`)")
    parser.add_argument("--keep", action="store_true", help="keep the report and fix outputs")
    args = parser.parse_args(argv)
    if args.size_mb <= 0 or args.repeat < 1 or args.pretty_every < 0:
        parser.error("--size-mb must be positive, --repeat at least 1, --pretty-every >= 0")
    preflight_cmd = find_preflight(args.preflight)
    if preflight_cmd is None:
        parser.error("preflight is not installed (or pass --preflight CMD)")

    workdir: Path = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    size = args.size_mb
    array, meta = build_array(args.src, workdir, size, args.seed, args.pretty_every)
    logs = workdir / f"logs_array_{size:g}mb"
    logs.mkdir(exist_ok=True)

    report_dir = workdir / f"report_array_{size:g}mb"
    check_cmd = [*preflight_cmd, "check", str(array), "--no-smoke", "--out", str(report_dir),
                 "--quiet", "--no-progress"]
    warm_cache(array)
    meter = OtherLoad()
    check = measure("check", check_cmd, size, array, logs, args.timeout, args.repeat,
                    [report_dir])
    others = {"check": meter.cores()}
    report = None
    if check.status == "ok":
        report = json.loads((report_dir / "report.json").read_text())
    if not args.keep:
        remove(report_dir)

    fix_dir = workdir / f"fix_array_{size:g}mb"
    clean, quarantine = fix_dir / "clean.jsonl", fix_dir / "q.jsonl"
    manifest_path = fix_dir / "fix-manifest.json"
    fix_cmd = [*preflight_cmd, "fix", str(array), "--out", str(clean), "--quarantine",
               str(quarantine), "--manifest", str(manifest_path), "--quiet"]
    warm_cache(array)
    meter = OtherLoad()
    fix = measure("fix", fix_cmd, size, array, logs, args.timeout, args.repeat, [fix_dir])
    others["fix"] = meter.cores()
    counts: dict[str, Any] | None = None
    try:
        if fix.status == "ok":
            manifest = json.loads(manifest_path.read_text())
            counts = verify(meta, report, manifest, clean, quarantine)
    finally:
        if not args.keep:
            remove(fix_dir)

    ratios = {
        "peak_rss": ratio(fix.peak_rss_mb, check.peak_rss_mb),
        "peak_tree_rss": ratio(fix.peak_tree_rss_mb, check.peak_tree_rss_mb),
        "seconds": ratio(fix.seconds, check.seconds),
    }
    print(f"\n{meta['bytes'] / MB:,.1f} MB JSON array, {meta['elements']:,} elements "
          f"({meta['pretty_printed']:,} pretty-printed, {meta['malformed']:,} malformed); "
          f"default rules; {os.cpu_count()} cores")
    header = (f"{'tool':<6} {'status':<8} {'seconds':>9} {'MB/s':>7} {'peak RSS MB':>12} "
              f"{'tree RSS MB':>12} {'others':>7}")
    print(header)
    print("-" * len(header))
    for r in (check, fix):
        print(f"{r.tool:<6} {r.status:<8} {r.seconds or 0:>9.2f} {r.mb_per_s or 0:>7.1f} "
              f"{r.peak_rss_mb or 0:>12.1f} {r.peak_tree_rss_mb or 0:>12.1f} "
              f"{others[r.tool]:>7.2f}")
        if r.detail:
            print(f"note: {r.tool}: {r.detail}")
    for name, value in ratios.items():
        print(f"fix / check {name}: {'-' if value is None else format(value, '.2f') + 'x'}")
    print("others: cores kept busy by other processes during that tool's runs (0 when idle; "
          "times are only comparable near 0)")
    if counts is not None:
        verdict = "yes" if counts["verified"] else "NO: " + "; ".join(counts["problems"])
        print(f"\nfix: {counts['input']:,} read (check {counts['check_total']}), "
              f"{counts['clean']:,} clean ({counts['changed']:,} changed), "
              f"{counts['quarantined']:,} quarantined, {counts['rounds']} round(s); "
              f"verified: {verdict}")
        print("findings by rule and action: " + ", ".join(
            f"{rule} {action} {n:,}"
            for rule, by in counts["findings_per_rule_and_action"].items()
            for action, n in by.items()))

    results = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "source": str(args.src),
        "array": meta,
        "seed": args.seed,
        "repeat": args.repeat,
        "machine": machine(),
        "preflight_command": preflight_cmd,
        "results": [asdict(check), asdict(fix)],
        "fix_over_check": ratios,
        "other_load_cores": others,
        "fix_counts": counts,
    }
    out = workdir / "fix_array_results.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nresults written to {out}")
    failed = check.status != "ok" or fix.status != "ok" or not (counts and counts["verified"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
