"""Benchmark token counting: one text at a time, the batch API, and the token_length check.

Usage::

    python benchmarks/bench_tokens.py CORPUS.jsonl[.gz] [--limit-records N] [--context 4096]
    python benchmarks/bench_tokens.py CORPUS.jsonl --gate 256,1024,4096 [--workers 1,2]

A byte-level BPE (vocabulary 8,000) is trained on the first 5,000 texts of the corpus, in the
run (nothing is downloaded). Then, on the same texts, in the same run:

* ``one-at-a-time``: ``Tokenizer.encode(text)`` per text, the usual hand-written loop;
* ``batch API``: ``encode_batch_fast`` over batches of 8,192 texts (all cores);
* ``token_length check``: preflight's check, which encodes only the texts its exact byte bound
  cannot settle against the context window.

Prints seconds, tokens/s (the real token total divided by the time) and the ratio to the
one-at-a-time loop.

With ``--gate WINDOWS`` (issue 17, item 5) it times instead, in one run: plain
``encode_batch_fast`` over every text (all cores: the tokenizer's own threads), then for each
window the whole gate (``run_preflight``, reading and report included) with only a
``token_length`` rule, once per ``--workers`` count, and prints each gate's ratio to plain
``encode_batch`` with what it counted (texts counted, texts the byte bounds skipped; the
gate's too_long must equal the texts plain ``encode_batch`` counts too long), and CPU
seconds beside wall seconds (this process and its finished workers: on a shared machine the
CPU ratio is the steadier one). The gate reads the whole file (no ``--limit-records``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from preflight.batch import Batch
from preflight.checks.base import Context
from preflight.checks.tokens import TokenLength
from preflight.config import Fields, ModelFacts
from preflight.tokenizer import load_tokenizer

BATCH = 8192


def read_texts(path: Path, limit: int | None) -> list[str]:
    """The ``text`` field of each record of a JSON Lines file (plain or gzip); malformed
    lines (``scale_corpus.py`` plants a few) are skipped, as the gate skips them."""
    opener = gzip.open if path.suffix == ".gz" else open
    texts = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            try:
                texts.append(json.loads(line)["text"])
            except ValueError:
                continue
            if limit and len(texts) >= limit:
                break
    return texts


def train(texts: list[str], out: Path) -> Path:
    """Train a small byte-level BPE with <s> ... </s> specials; return its tokenizer.json."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=8000, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts[:5000], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 1)]
    )
    path = out / "tokenizer.json"
    tok.save(str(path))
    return path


def _cpu() -> float:
    """CPU seconds of this process, of its children that have ended, and of the pool
    workers its fork server has reaped (Linux: the server's ``/proc`` times)."""
    own, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime + _served_cpu()


def _served_cpu() -> float:
    """The fork server's CPU seconds and its ended children's (0 without one, or /proc)."""
    import multiprocessing.forkserver as forkserver

    pid = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat(5), in clock ticks.
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def gate(corpus: Path, texts: list[str], windows: list[int], workers: list[int]) -> None:
    """Plain ``encode_batch`` against the token_length gate per window and worker count."""
    from preflight import run_preflight
    from preflight.cores import available_cores

    nbytes = sum(len(t.encode()) for t in texts)
    with tempfile.TemporaryDirectory() as tmp:
        path = train(texts, Path(tmp))
        tok = Tokenizer.from_file(str(path))
        t0, c0 = time.perf_counter(), _cpu()
        real: list[int] = []
        for k in range(0, len(texts), BATCH):
            real += [len(e) for e in tok.encode_batch_fast(texts[k : k + BATCH])]
        t_batch, c_batch = time.perf_counter() - t0, _cpu() - c0
        real_counts = np.asarray(real)
        print(f"{len(texts):,} texts, {nbytes / 1e6:.1f} MB, {available_cores()} cores; "
              f"plain encode_batch {t_batch:.2f} s ({nbytes / 1e6 / t_batch:.1f} MB/s), "
              f"{c_batch:.2f} CPU s")
        print(f"{'window':>7}{'workers':>8}{'gate s':>9}{'vs batch':>10}{'CPU s':>8}"
              f"{'vs batch':>10}{'counted':>10}{'skipped':>10}{'too long':>10}")
        for window in windows:
            rules = {"fields": {"text": "text"},
                     "model": {"context_window": window, "tokenizer": str(path)},
                     "rules": [{"id": "tok", "check": "token_length"}]}
            found = None
            for n in workers:
                t0, c0 = time.perf_counter(), _cpu()
                report = run_preflight(corpus, rules, Path(tmp) / f"out{window}_{n}",
                                       workers=n, smoke=False, formats=["json"])
                seconds, cpu = time.perf_counter() - t0, _cpu() - c0
                stats = report.rule("tok").stats
                codes = report.rule("tok").codes
                assert found in (None, codes), "the worker counts must find the same"
                assert codes.get("too_long", 0) == int((real_counts > window).sum()), \
                    "the gate's too_long must be the texts encode_batch counts too long"
                found = codes
                print(f"{window:>7}{n:>8}{seconds:>9.2f}{t_batch / seconds:>9.2f}x"
                      f"{cpu:>8.2f}{c_batch / cpu:>9.2f}x"
                      f"{stats['encoded']:>10,}{stats['skipped_by_bound']:>10,}"
                      f"{codes.get('too_long', 0):>10,}")


def main() -> None:
    """Run the three ways of counting and print the table (or the gate's, ``--gate``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--limit-records", type=int, default=None)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--gate", default=None, help="windows, comma-separated")
    parser.add_argument("--workers", default="1,2", help="worker counts for --gate")
    args = parser.parse_args()
    texts = read_texts(args.corpus, args.limit_records)
    if args.gate:
        if args.limit_records:
            parser.error("--gate reads the whole corpus: leave out --limit-records")
        gate(args.corpus, texts, [int(w) for w in args.gate.split(",")],
             [int(n) for n in args.workers.split(",")])
        return
    nbytes = sum(len(t.encode()) for t in texts)
    with tempfile.TemporaryDirectory() as tmp:
        path = train(texts, Path(tmp))
        tok = Tokenizer.from_file(str(path))

        t0 = time.perf_counter()
        single = [len(tok.encode(t).ids) for t in texts]
        t_single = time.perf_counter() - t0

        t0 = time.perf_counter()
        batched: list[int] = []
        for k in range(0, len(texts), BATCH):
            batched += [len(e.ids) for e in tok.encode_batch_fast(texts[k : k + BATCH])]
        t_batch = time.perf_counter() - t0
        assert batched == single, "the batch API must give the same counts"

        counter = load_tokenizer(str(path))
        ctx = Context(fields=Fields(text="text"), model=ModelFacts(context_window=args.context),
                      tokenizer=counter)
        check = TokenLength(TokenLength.Params(), ctx)
        t0 = time.perf_counter()
        found = 0
        for k in range(0, len(texts), BATCH):
            chunk = texts[k : k + BATCH]
            batch = Batch(frame=pl.DataFrame({"text": chunk}), rows=np.arange(k, k + len(chunk)))
            frame = check.scan(batch)
            found += 0 if frame is None else frame.height
        stats = check.summary()
        t_check = time.perf_counter() - t0
        expected = sum(1 for n in single if n > args.context)
        assert found == expected, f"check found {found} too_long, real counts say {expected}"

    tokens = sum(single)
    print(f"{len(texts):,} texts, {nbytes / 1e6:.1f} MB, {tokens:,} tokens; "
          f"context {args.context}: {expected} too long")
    print(f"{'method':<22}{'seconds':>9}{'tokens/s':>14}{'MB/s':>8}{'vs one-at-a-time':>18}")
    for name, seconds in (("one-at-a-time", t_single), ("batch API", t_batch),
                          ("token_length check", t_check)):
        print(f"{name:<22}{seconds:>9.2f}{tokens / seconds:>14,.0f}{nbytes / 1e6 / seconds:>8.1f}"
              f"{t_single / seconds:>17.1f}x")
    print(f"check encoded {stats['encoded']:,} texts, skipped {stats['skipped_by_bound']:,} "
          "by the byte bound")


if __name__ == "__main__":
    main()
