"""Scale a JSON Lines corpus to a target size by repeating it with small seeded edits.

Usage::

    python benchmarks/scale_corpus.py SRC.jsonl.gz OUT.jsonl --size-mb 1000 [--seed 0] [--no-plant]

The source (plain or gzip-compressed JSON Lines with ``id``, ``package``, ``section`` and
``text``) is read into memory once; the output is written incrementally, so memory does not grow
with the output size. Pass 0 is the source as is; every later pass is a copy in which each
record gets 1-3 word edits (swap two adjacent words, insert a word taken from another record,
delete a word), except about 5% of records that are copied unedited, so exact duplicates exist.
Ids are new, unique and consecutive from 0. Output stops after the record that brings the file
to at least ``--size-mb`` megabytes (1 MB = 1,000,000 bytes).

With ``--plant`` (the default), every pass also plants a fixed, known number of faults:
0.05% of records get a U+200B, 0.02% a mojibake substring ("Ã©"), 0.01% become a truncated
(malformed) JSON line, and 0.01% get a text that is not NFC ("e" + U+0301). The source itself
has a few natural zero-width spaces and soft hyphens, which are not counted as planted.

Everything is deterministic for a given source, size and ``--seed``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

MB = 1_000_000
UNEDITED_FRACTION = 0.05
MAX_EDITS = 3
FLUSH_BYTES = 4 * 1024 * 1024

# Planted fault kinds and the fraction of records per pass that get each one.
PLANT_RATES: dict[str, float] = {
    "zero_width_space": 0.0005,
    "mojibake": 0.0002,
    "malformed_line": 0.0001,
    "not_nfc": 0.0001,
}
ZWSP = "\u200b"
MOJIBAKE_WORD = "cafÃ©"  # "café" encoded as UTF-8 and decoded as Latin-1
NOT_NFC_WORD = "cafe\u0301"  # decomposed "café"

OP_SWAP, OP_INSERT, OP_DELETE = 0, 1, 2


@dataclass
class Source:
    """The source corpus, pre-encoded as JSON fragments for fast line assembly."""

    heads: list[str]  # ', "package": ..., "section": ..., "text": "' for each record
    texts: list[str]  # the JSON-escaped text (no surrounding quotes) for each record
    raw_texts: list[str]  # the original text, used to pick donor words


@dataclass
class Stats:
    """Counters for what has been written."""

    records: int = 0
    bytes: int = 0
    passes: int = 0
    unedited_copies: int = 0
    planted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PLANT_RATES, 0))


def load_source(path: Path) -> Source:
    """Read the source corpus into memory and pre-encode each record's JSON pieces."""
    opener = gzip.open if path.suffix == ".gz" else open
    heads: list[str] = []
    texts: list[str] = []
    raw_texts: list[str] = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            rec = json.loads(line)
            text = rec["text"]
            heads.append(
                ', "package": '
                + json.dumps(rec.get("package", ""), ensure_ascii=False)
                + ', "section": '
                + json.dumps(rec.get("section", ""), ensure_ascii=False)
                + ', "text": "'
            )
            texts.append(json.dumps(text, ensure_ascii=False)[1:-1])
            raw_texts.append(text)
    if not texts:
        raise SystemExit(f"error: no records in {path}")
    return Source(heads=heads, texts=texts, raw_texts=raw_texts)


def donor_word(raw: str, frac: float) -> str:
    """Return one word of ``raw`` near relative position ``frac``, JSON-escaped."""
    q = int(frac * len(raw))
    start = raw.rfind(" ", 0, q) + 1
    end = raw.find(" ", q)
    if end < 0:
        end = len(raw)
    parts = raw[start:end].split()
    if not parts:
        parts = raw.split(None, 1) or ["data"]
    return json.dumps(parts[0], ensure_ascii=False)[1:-1]


def space_near(t: str, frac: float) -> int:
    """Return the index of a space at or after relative position ``frac`` (or the last), or -1."""
    s = t.find(" ", int(frac * len(t)))
    return s if s >= 0 else t.rfind(" ")


def apply_edit(t: str, op: int, frac: float, word: str) -> str:
    """Apply one word-level edit to the JSON-escaped text ``t``.

    Escape sequences never contain a space, so splitting on spaces keeps the JSON valid.
    """
    s1 = space_near(t, frac)
    if s1 < 0:  # a single word: only an insertion is possible
        return t + " " + word if op == OP_INSERT else t
    if op == OP_INSERT:
        return t[: s1 + 1] + word + " " + t[s1 + 1 :]
    s2 = t.find(" ", s1 + 1)
    if s2 < 0:
        s2 = len(t)
    if op == OP_DELETE:  # drop the word after s1, with its leading space
        return t[:s1] + t[s2:]
    s0 = t.rfind(" ", 0, s1)  # OP_SWAP: exchange the words either side of s1
    return t[: s0 + 1] + t[s1 + 1 : s2] + " " + t[s0 + 1 : s1] + t[s2:]


def plant_plan(rng: np.random.Generator, n: int) -> dict[int, str]:
    """Choose disjoint record indices of one pass for each planted fault kind."""
    counts = {kind: max(1, round(rate * n)) for kind, rate in PLANT_RATES.items()}
    total = sum(counts.values())
    if total > n:
        return {}
    chosen = rng.choice(n, size=total, replace=False).tolist()
    plan: dict[int, str] = {}
    at = 0
    for kind, k in counts.items():
        for idx in chosen[at : at + k]:
            plan[idx] = kind
        at += k
    return plan


def plant(kind: str, t: str, frac: float) -> str:
    """Insert the planted fault ``kind`` into the JSON-escaped text ``t``."""
    s = space_near(t, frac)
    if s < 0:
        s = len(t)
    if kind == "zero_width_space":  # glued to the end of a word
        return t[:s] + ZWSP + t[s:]
    word = MOJIBAKE_WORD if kind == "mojibake" else NOT_NFC_WORD
    return t[:s] + " " + word + t[s:]


def write_pass(
    src: Source,
    pass_no: int,
    seed: int,
    do_plant: bool,
    out: BinaryIO,
    target: int,
    stats: Stats,
) -> bool:
    """Write one pass over the source; return True once ``target`` bytes have been written."""
    n = len(src.texts)
    rng = np.random.default_rng([seed, pass_no])
    edited = pass_no > 0
    if edited:
        unedited = (rng.random(n) < UNEDITED_FRACTION).tolist()
        n_edits = rng.integers(1, MAX_EDITS + 1, n).tolist()
        ops = rng.integers(0, 3, (n, MAX_EDITS)).tolist()
        fracs = rng.random((n, MAX_EDITS)).tolist()
        donors = rng.integers(0, n, (n, MAX_EDITS)).tolist()
        donor_fracs = rng.random((n, MAX_EDITS)).tolist()
    plan = plant_plan(rng, n) if do_plant else {}
    plant_fracs = rng.random(n).tolist() if plan else []

    heads, texts, raw_texts = src.heads, src.texts, src.raw_texts
    planted = stats.planted
    next_id = stats.records
    written = stats.bytes
    buf: list[bytes] = []
    buf_bytes = 0
    done = False
    for i in range(n):
        t = texts[i]
        if edited:
            if unedited[i]:
                stats.unedited_copies += 1
            else:
                row_ops, row_fracs = ops[i], fracs[i]
                for e in range(n_edits[i]):
                    op = row_ops[e]
                    word = ""
                    if op == OP_INSERT:
                        j = donors[i][e]
                        if j == i:
                            j = (j + 1) % n
                        word = donor_word(raw_texts[j], donor_fracs[i][e])
                    t = apply_edit(t, op, row_fracs[e], word)
        kind = plan.get(i) if plan else None
        if kind is None:
            line = '{"id": ' + str(next_id) + heads[i] + t + '"}\n'
        else:
            planted[kind] += 1
            if kind == "malformed_line":
                full = '{"id": ' + str(next_id) + heads[i] + t + '"}'
                line = full[: max(1, int(len(full) * (0.25 + 0.5 * plant_fracs[i])))] + "\n"
            else:
                t = plant(kind, t, plant_fracs[i])
                line = '{"id": ' + str(next_id) + heads[i] + t + '"}\n'
        data = line.encode("utf-8")
        buf.append(data)
        buf_bytes += len(data)
        next_id += 1
        if written + buf_bytes >= target:
            done = True
            break
        if buf_bytes >= FLUSH_BYTES:
            out.write(b"".join(buf))
            written += buf_bytes
            buf.clear()
            buf_bytes = 0
    out.write(b"".join(buf))
    stats.bytes = written + buf_bytes
    stats.records = next_id
    stats.passes += 1
    return done


def scale(src_path: Path, out_path: Path, size_mb: float, seed: int, do_plant: bool) -> Stats:
    """Write the scaled corpus to ``out_path`` and return what was written."""
    src = load_source(src_path)
    target = max(1, int(size_mb * MB))
    stats = Stats()
    with open(out_path, "wb") as out:
        pass_no = 0
        while not write_pass(src, pass_no, seed, do_plant, out, target, stats):
            pass_no += 1
    return stats


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, write the corpus and print what was written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, help="source corpus (.jsonl or .jsonl.gz)")
    parser.add_argument("out", type=Path, help="output .jsonl path")
    parser.add_argument("--size-mb", type=float, required=True, help="minimum output size (MB)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--plant",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="plant a known number of faults per pass (default: on)",
    )
    args = parser.parse_args(argv)
    if args.size_mb <= 0:
        parser.error("--size-mb must be positive")

    t0 = time.perf_counter()
    stats = scale(args.src, args.out, args.size_mb, args.seed, args.plant)
    seconds = time.perf_counter() - t0
    mb = stats.bytes / MB
    print(
        f"wrote {args.out}: {mb:,.1f} MB, {stats.records:,} records, "
        f"{stats.passes} passes, {seconds:.1f} s ({mb / seconds:,.1f} MB/s)"
    )
    summary = {
        "path": str(args.out),
        "bytes": stats.bytes,
        "records": stats.records,
        "passes": stats.passes,
        "seed": args.seed,
        "unedited_copies": stats.unedited_copies,
        "planted": stats.planted if args.plant else {},
        "seconds": round(seconds, 3),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
