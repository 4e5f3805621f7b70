"""Benchmark the smoke stage against a plain PyTorch training loop on the same sampled rows.

Usage::

    python benchmarks/bench_smoke.py [CORPUS] [--rows 5000] [--repeat 3] [--seed 0]

From the shared Debian corpus (``debian_descriptions.jsonl.gz``: id, package, section, text;
no faults planted) it writes one JSON Lines file of ``--rows`` records (a seeded random
choice of records) per built-in task into a temporary folder:

* ``lm``: ``{"id", "text"}``, the description;
* ``chat``: ``{"id", "messages"}``, the user asks what the package is for and the assistant
  answers with the description;
* ``classification``: ``{"id", "text", "label"}``, the label a section bucket: the five most
  common sections of the whole corpus are 0..4, every other section is 5 (``num_classes: 6``);
* ``regression``: ``{"id", "features", "target"}``: six features of the text (log characters,
  log words, log lines, digit share, upper-case share, mean word length), z-scored over the
  file, and a target that is a fixed linear function of them plus N(0, 0.5) noise.

Then, per task, in the same run, on the same data:

* **smoke**: ``preflight.pipeline.run(path, rules, smoke=True)`` with one rule (``schema``)
  and the task's fields; the smoke stage's time is ``report.timings["smoke"]`` (sample,
  encode, the control run, the real run and its repeat, localisation when it fails), with
  the phases from ``report.smoke.timings``. Best of ``--repeat`` runs in this process.
* **cli**: the wall clock of ``preflight smoke DATA --rules R --out D -q`` in a subprocess
  (interpreter start, imports including torch, the schema check and the smoke stage); best
  of ``--repeat``.
* **baseline**: what a team writes by hand: read the file, keep the same 100 rows the smoke
  stage sampled, encode them with ``preflight.smoke``'s ``Encoder``/``Collate``, build the
  same built-in model with the same seed (``build_builtin``) and train 30 steps of AdamW
  (same learning rate, gradient clipping) on the whole sample; no checks, no control run, no
  repeat run. Best of ``--repeat``. Its loss curve must equal the smoke stage's real run
  (same data, same initial weights), or the script says so.

The three are interleaved (smoke, baseline, CLI, then again) so that a burst of load from
another process hits both sides; the ``others`` column says how many cores other processes
kept busy meanwhile (from ``/proc/stat``): the numbers are only worth recording near 0.

A faulty variant follows: the regression file with the target of one sampled row set to
1e30, so the real run fails (the squared error overflows float32), localisation narrows the
sample to that row and the replay file is written.

It prints one row per task (smoke seconds, baseline seconds, the ratio smoke / baseline: the
price of the checks, the control run, the repeat and localisation) and PASS/FAIL against the
target "smoke stage under 30 s per task including the control run and localisation"; the
exit status is 1 when any task (the faulty variant included) misses it, or when a verdict is
not the expected one (``pass`` on the clean files; ``data_fault`` narrowed to exactly the
planted row on the faulty one).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from preflight.config import RuleSet, load_rules
from preflight.pipeline import run as run_pipeline
from preflight.resolve import rules_tokenizer
from preflight.smoke.encode import Collate, Encoder, compact_vocab
from preflight.smoke.models import build_builtin

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared/corpora/debian_descriptions.jsonl.gz"
TARGET_SECONDS = 30.0
TASKS = ("lm", "chat", "classification", "regression")
TOP_SECTIONS = 5
FIELDS = {
    "lm": {"text": "text", "id": "id"},
    "chat": {"messages": "messages", "id": "id"},
    "classification": {"text": "text", "label": "label", "id": "id"},
    "regression": {"features": "features", "target": "target", "id": "id"},
}
WEIGHTS = (1.5, -1.0, 0.5, 2.0, -0.75, 1.0)  # regression target = 10 + WEIGHTS . features
FAULT = 1e30
FAULTY = "regression+1e30"


def read_corpus(path: Path) -> list[dict[str, Any]]:
    """Every record of the shared corpus."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def make_rows(corpus: list[dict[str, Any]], task: str, picked: list[int],
              top: dict[str, int], seed: int) -> list[dict[str, Any]]:
    """The records of one task's file, built from the corpus records ``picked``."""
    records = [corpus[i] for i in picked]
    if task == "lm":
        return [{"id": r["id"], "text": r["text"]} for r in records]
    if task == "chat":
        return [{"id": r["id"], "messages": [
            {"role": "user", "content": f"What is the Debian package {r['package']} for?"},
            {"role": "assistant", "content": r["text"]}]} for r in records]
    if task == "classification":
        return [{"id": r["id"], "text": r["text"], "label": top.get(r["section"], TOP_SECTIONS)}
                for r in records]
    raw = np.array([_text_features(r["text"]) for r in records])
    feats = (raw - raw.mean(0)) / np.where(raw.std(0) > 0, raw.std(0), 1.0)
    rng = np.random.default_rng(seed)
    target = 10.0 + feats @ np.array(WEIGHTS) + rng.normal(0.0, 0.5, len(records))
    return [{"id": r["id"], "features": [round(float(x), 4) for x in f], "target": round(y, 4)}
            for r, f, y in zip(records, feats, target.tolist(), strict=True)]


def _text_features(text: str) -> list[float]:
    words = text.split()
    chars = max(len(text), 1)
    return [math.log1p(len(text)), math.log1p(len(words)), math.log1p(text.count("\n") + 1),
            sum(c.isdigit() for c in text) / chars, sum(c.isupper() for c in text) / chars,
            sum(map(len, words)) / max(len(words), 1)]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def rules_for(task: str) -> dict[str, Any]:
    """The minimal rules: the task, its fields and one schema rule."""
    rules: dict[str, Any] = {"version": 1, "task": task, "fields": FIELDS[task],
                             "rules": [{"id": "schema", "check": "schema"}]}
    if task == "classification":
        rules["model"] = {"num_classes": TOP_SECTIONS + 1}
    return rules


def smoke_once(path: Path, rules: RuleSet, out: Path) -> tuple[float, Any]:
    """One pipeline run with the smoke stage: ``report.timings["smoke"]`` and the report."""
    shutil.rmtree(out, ignore_errors=True)
    report = run_pipeline(path, rules, out=out, smoke=True)
    return report.timings["smoke"], report


def cli_once(path: Path, rules_path: Path, out: Path) -> tuple[float, int]:
    """Wall clock of ``preflight smoke`` in a subprocess, and its exit status."""
    exe = shutil.which("preflight", path=str(Path(sys.executable).parent)) or "preflight"
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    done = subprocess.run([exe, "smoke", str(path), "--rules", str(rules_path),
                           "--out", str(out), "-q"], check=False)
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        raise SystemExit(f"preflight smoke exited with {done.returncode} on {path}")
    return seconds, done.returncode


def baseline(path: Path, rows_wanted: list[int], task: str, rules: RuleSet
             ) -> tuple[float, float, list[float]]:
    """A plain PyTorch loop on the same rows: seconds in all, seconds reading, the losses."""
    cfg = rules.smoke
    tokenizer = rules_tokenizer(rules)
    t0 = time.perf_counter()
    wanted = set(rows_wanted)
    with path.open(encoding="utf-8") as f:
        rows = [json.loads(line) for i, line in enumerate(f) if i in wanted]
    read = time.perf_counter() - t0
    encoder = Encoder(task, rules.fields, rules.model, tokenizer, max_length=cfg.max_length)
    encoded = encoder.encode(rows)
    if task == "classification":
        encoder.set_classes(encoded)
    spec: dict[str, Any] = {"classes": encoder.classes}
    vocab = None
    if encoder.uses_text:
        vocab = compact_vocab(encoded, encoder.vocab_size)
        spec["vocab"] = len(vocab) + 1
    if any(e.features is not None for e in encoded):
        spec["features"] = max(len(e.features or []) for e in encoded)
    if task == "regression":
        spec["bias"] = statistics.median(e.target for e in encoded if e.target is not None)
    torch.manual_seed(cfg.seed)
    model, loss_fn = build_builtin(task, spec)
    inputs, targets = Collate(encoder, vocab)(rows)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(cfg.steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        if cfg.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=cfg.clip)
        opt.step()
        losses.append(float(loss.detach()))
    return time.perf_counter() - t0, read, losses


class OtherLoad:
    """Cores kept busy by other processes since it was made: the machine's busy CPU time
    (``/proc/stat``) less this process's and its children's, over the wall clock. The
    timings are only comparable to other runs when this stays near 0."""

    def __init__(self) -> None:
        self.start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        mine = sum(os.times()[:4])
        try:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
            busy = (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            busy = math.nan
        return time.perf_counter(), busy, mine

    def cores(self) -> float:
        (t0, busy0, mine0), (t1, busy1, mine1) = self.start, self._sample()
        return max(0.0, ((busy1 - busy0) - (mine1 - mine0)) / max(t1 - t0, 1e-9))


def measure(name: str, task: str, data: Path, rules_path: Path, work: Path,
            repeat: int) -> dict[str, Any]:
    """Smoke stage, baseline and CLI, interleaved ``repeat`` times; the best of each."""
    rules = load_rules(rules_path)
    meter = OtherLoad()
    smoke_runs: list[tuple[float, Any]] = []
    base_runs: list[tuple[float, float, list[float]]] = []
    cli_runs: list[tuple[float, int]] = []
    for _ in range(repeat):
        smoke_runs.append(smoke_once(data, rules, work / f"{name}.out"))
        sampled = list(smoke_runs[0][1].smoke.sample_rows)
        base_runs.append(baseline(data, sampled, task, rules))
        cli_runs.append(cli_once(data, rules_path, work / f"{name}.cli"))
    others = meter.cores()
    seconds, report = min(smoke_runs, key=lambda r: r[0])
    base, read, losses = min(base_runs, key=lambda r: r[0])
    smoke = report.smoke
    return {
        "name": name, "smoke": seconds, "smoke_max": max(r[0] for r in smoke_runs),
        "phases": smoke.timings, "gate": report.timings.get("total", 0.0),
        "cli": min(r[0] for r in cli_runs), "code": cli_runs[-1][1],
        "base": base, "base_max": max(r[0] for r in base_runs), "read": read, "loss": losses,
        "verdict": smoke.verdict, "sample_rows": list(smoke.sample_rows),
        "minimal": list(smoke.minimal_rows), "replay": bool(smoke.replay),
        "matched": smoke.real is not None and same_curve(losses, smoke.real.loss),
        "others": others,
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def same_curve(a: list[float], b: list[float | None]) -> bool:
    return len(a) == len(b) and all(
        y is not None and math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6)
        for x, y in zip(a, b, strict=True))


def phases(timings: dict[str, float]) -> str:
    names = ("sample", "encode", "control", "real", "localise")
    return " ".join(f"{n[:3]} {timings[n]:.2f}" for n in names if n in timings)


def main(argv: list[str] | None = None) -> int:
    """Build the four corpora, time smoke, CLI and baseline on each; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS,
                        help="the shared Debian corpus (JSON lines, gzip)")
    parser.add_argument("--rows", type=int, default=5_000, help="records per task file")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (best)")
    parser.add_argument("--seed", type=int, default=0, help="seed for records and noise")
    args = parser.parse_args(argv)

    corpus = read_corpus(args.corpus)
    sections = Counter(r["section"] for r in corpus)
    top = {name: i for i, (name, _) in enumerate(sections.most_common(TOP_SECTIONS))}
    picked = sorted(np.random.default_rng(args.seed).choice(
        len(corpus), size=min(args.rows, len(corpus)), replace=False).tolist())
    print(f"smoke stage vs a plain PyTorch loop: {len(picked):,} records per task from "
          f"{args.corpus.name}, seed {args.seed}, best of {args.repeat}")
    print(f"  {cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"  classes: {', '.join(f'{n}={i}' for n, i in top.items())}, other={TOP_SECTIONS}")

    results: list[dict[str, Any]] = []
    planted = -1
    with tempfile.TemporaryDirectory(prefix="bench_smoke_") as tmp:
        work = Path(tmp)
        for name in (*TASKS, FAULTY):
            task = "regression" if name == FAULTY else name
            rows = make_rows(corpus, task, picked, top, args.seed)
            if name == FAULTY:  # one row the clean regression run sampled gets a 1e30 target
                sampled = next(r["sample_rows"] for r in results if r["name"] == "regression")
                planted = sampled[len(sampled) // 2]
                rows[planted]["target"] = FAULT
            data = work / f"{name}.jsonl"
            write_jsonl(data, rows)
            rules_path = work / f"{name}.rules.json"  # JSON is YAML
            rules_path.write_text(json.dumps(rules_for(task)))
            results.append(measure(name, task, data, rules_path, work, args.repeat))

    print()
    print(f"{'task':<16} {'smoke s':>8} {'(worst)':>8} {'baseline s':>10} {'(worst)':>8} "
          f"{'ratio':>7} {'cli wall s':>10} {'verdict':>10}  target  others  smoke phases (s)")
    failed = False
    for r in results:
        ok = r["smoke"] < TARGET_SECONDS
        failed |= not ok
        print(f"{r['name']:<16} {r['smoke']:8.2f} {r['smoke_max']:8.2f} {r['base']:10.3f} "
              f"{r['base_max']:8.3f} {r['smoke'] / r['base']:6.1f}x {r['cli']:10.2f} "
              f"{r['verdict']:>10}  {'PASS' if ok else 'FAIL':<6}  {r['others']:6.2f}  "
              f"{phases(r['phases'])}")
    print()
    wrong = False
    for r in results:
        curve = f"loss {r['loss'][0]:.4g} -> {r['loss'][-1]:.4g}" if r["loss"] else "no loss"
        if r["name"] == FAULTY:
            found = r["verdict"] == "data_fault" and r["minimal"] == [planted]
            wrong |= not found
            print(f"  {r['name']}: planted row {planted}; smoke {r['verdict']}, minimal rows "
                  f"{r['minimal']}, replay file {'written' if r['replay'] else 'NOT written'}"
                  f"{'' if found else ' (WRONG)'}; the baseline's {curve} says nothing; "
                  f"whole gate {r['gate']:.2f} s; cli exit {r['code']}")
            continue
        same = ("the same curve as the smoke stage's real run" if r["matched"]
                else "DIFFERS from the smoke stage's real run")
        wrong |= r["verdict"] != "pass"
        print(f"  {r['name']}: smoke {r['verdict']}; baseline {curve}, {same} (reading "
              f"{r['read']:.3f} s of it); whole gate {r['gate']:.2f} s; cli exit {r['code']}")
    print(f"\ntarget: smoke stage under {TARGET_SECONDS:g} s per task (control run and "
          f"localisation included): {'FAIL' if failed else 'PASS'}")
    print("others: cores kept busy by other processes during the task's runs (0 on an idle "
          "machine; above ~0.2 the timings are inflated)")
    if wrong:
        print("unexpected verdicts: see above", file=sys.stderr)
    return 1 if failed or wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
