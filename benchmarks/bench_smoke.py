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

A faulty variant follows: the regression file with the target of one sampled row set to
1e30, so the real run fails (the squared error overflows float32), localisation narrows the
sample to that row and the replay file is written.

It prints one row per task (smoke seconds, baseline seconds, the ratio smoke / baseline: the
price of the checks, the control run, the repeat and localisation) and PASS/FAIL against the
target "smoke stage under 30 s per task including the control run and localisation"; the
exit status is 1 when any task (the faulty variant included) misses it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
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
from preflight.pipeline import rules_tokenizer
from preflight.pipeline import run as run_pipeline
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


def time_smoke(path: Path, rules: RuleSet, out: Path, repeat: int) -> tuple[float, Any]:
    """Best ``report.timings["smoke"]`` of ``repeat`` pipeline runs, and that run's report."""
    best: tuple[float, Any] | None = None
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        report = run_pipeline(path, rules, out=out, smoke=True)
        seconds = report.timings["smoke"]
        if best is None or seconds < best[0]:
            best = (seconds, report)
    assert best is not None
    return best


def time_cli(path: Path, rules_path: Path, out: Path, repeat: int) -> tuple[float, int]:
    """Best wall clock of ``preflight smoke`` in a subprocess, and its exit status."""
    exe = shutil.which("preflight", path=str(Path(sys.executable).parent)) or "preflight"
    best, code = math.inf, 0
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        done = subprocess.run([exe, "smoke", str(path), "--rules", str(rules_path),
                               "--out", str(out), "-q"], check=False)
        best, code = min(best, time.perf_counter() - t0), done.returncode
        if code not in (0, 1):
            raise SystemExit(f"preflight smoke exited with {code} on {path}")
    return best, code


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


def time_baseline(path: Path, rows_wanted: list[int], task: str, rules: RuleSet,
                  repeat: int) -> tuple[float, float, list[float]]:
    runs = [baseline(path, rows_wanted, task, rules) for _ in range(repeat)]
    return min(runs, key=lambda r: r[0])


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
          f"{args.corpus.name}, seed {args.seed}, best of {args.repeat}; torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads")
    print(f"  classes: {', '.join(f'{n}={i}' for n, i in top.items())}, other={TOP_SECTIONS}")

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_smoke_") as tmp:
        work = Path(tmp)
        cases: list[tuple[str, str, list[dict[str, Any]]]] = [
            (task, task, make_rows(corpus, task, picked, top, args.seed)) for task in TASKS]
        regression_rows = cases[-1][2]
        cases.append(("regression+1e30", "regression", []))  # rows once the sample is known
        sample_rows: list[int] = []
        for name, task, rows in cases:
            if not rows:  # the faulty variant: one sampled row's target is 1e30
                rows = [dict(r) for r in regression_rows]
                bad = sample_rows[len(sample_rows) // 2]
                rows[bad]["target"] = FAULT
            data = work / f"{name}.jsonl"
            write_jsonl(data, rows)
            rules_path = work / f"{name}.rules.json"  # JSON is YAML
            rules_path.write_text(json.dumps(rules_for(task)))
            rules = load_rules(rules_path)
            seconds, report = time_smoke(data, rules, work / f"{name}.out", args.repeat)
            smoke = report.smoke
            if task == "regression" and name == task:
                sample_rows = list(smoke.sample_rows)
            cli, code = time_cli(data, rules_path, work / f"{name}.cli", args.repeat)
            base, read, losses = time_baseline(data, list(smoke.sample_rows), task, rules,
                                               args.repeat)
            matched = smoke.real is not None and same_curve(losses, smoke.real.loss)
            results.append({
                "name": name, "smoke": seconds, "stage": smoke.timings.get("total", 0.0),
                "phases": smoke.timings, "cli": cli, "code": code, "base": base,
                "read": read, "verdict": smoke.verdict, "matched": matched,
                "minimal": smoke.minimal_rows, "gate": report.timings.get("total", 0.0),
                "replay": bool(smoke.replay), "loss": losses,
            })

    print()
    print(f"{'task':<16} {'smoke s':>8} {'baseline s':>10} {'ratio':>7} {'cli wall s':>10} "
          f"{'verdict':>10}  target  phases (s)")
    failed = False
    for r in results:
        ok = r["smoke"] < TARGET_SECONDS
        failed |= not ok
        print(f"{r['name']:<16} {r['smoke']:8.2f} {r['base']:10.3f} "
              f"{r['smoke'] / r['base']:6.1f}x {r['cli']:10.2f} {r['verdict']:>10}  "
              f"{'PASS' if ok else 'FAIL':<6}  {phases(r['phases'])}")
    print()
    for r in results:
        curve = f"loss {r['loss'][0]:.4g} -> {r['loss'][-1]:.4g}" if r["loss"] else "no loss"
        same = ("same loss curve as the smoke stage's real run" if r["matched"]
                else "loss curve DIFFERS from the smoke stage's real run")
        extra = ""
        if r["verdict"] != "pass":
            extra = f"; minimal rows {r['minimal']}, replay file {'written' if r['replay'] else 'NOT written'}"
        print(f"  {r['name']}: baseline {curve} ({same}; reading {r['read']:.3f} s); "
              f"whole gate {r['gate']:.2f} s; cli exit {r['code']}{extra}")
    print(f"\ntarget: smoke stage under {TARGET_SECONDS:g} s per task (control run and "
          f"localisation included): {'FAIL' if failed else 'PASS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
