"""Benchmark the ``near_duplicate`` rule against a plain datasketch MinHash LSH pipeline.

Usage::

    python benchmarks/bench_near_dups.py CORPUS [--workdir /tmp/bench] [--planted 2000]
        [--seed 0] [--big PATH_TO_1GB_JSONL] [--sample 2000] [--keep] [--timeout S]

**Test corpus.** Every record of CORPUS (JSON Lines with ``id`` and ``text``, plain or gzip)
verbatim, then ``--planted`` near-copies of records chosen at random (seeded), appended with new
ids. Each copy gets one kind of edit, a third each: 1-3 word substitutions (words taken from
other records), a swapped pair of adjacent words, or a U+200B injected at a random character.
The (copy row, original row) pairs are kept; the corpus is written to
``WORKDIR/near_dups_corpus.jsonl`` (one record per line, so a record's row is its line).

**datasketch** (``--baseline FILE``, run as its own child process): the usual hand-written
pipeline, timed from opening the file to the last query: read line by line, ``json.loads``,
fold the text, word 5-gram shingles (a text shorter than 5 words is one shingle: the whole
folded text), ``MinHash(num_perm=128, seed=1)`` with ``update_batch([s.encode() for s in
shingles])`` (datasketch's default SHA-1 hash, affine32 scheme), then per document
``MinHashLSH(num_perm=128, params=(16, 8))`` query followed by insert (so every candidate pair is
reported once, by the later document's query). For fairness the text is folded as preflight
folds it: ASCII texts lowercased; others NFC-normalised, format (Cf) characters deleted,
casefolded; whitespace runs collapsed to one space, ends trimmed (``" ".join(t.split())``).
Candidates are not confirmed (the plain pipeline stops at LSH).

**preflight** (its own child process): ``preflight check FILE --rules RULES --out DIR --quiet
--no-progress`` with only ``{id: near-dupes, check: near_duplicate, num_perm: 128, bands: 16,
rows: 8}`` (threshold 0.8, candidates confirmed by exact Jaccard on a second read). It runs
twice with a fresh ``NUMBA_CACHE_DIR``: the first run compiles the numba kernels (its times are
printed), the second is reported. ``timings["rule:near-dupes"]`` (fold, shingle, sign, band
keys, candidates, second-read confirmation, clusters; reading excluded) and ``timings["total"]``
(everything inside the process, reading and writing the report included) come from report.json.

Wall times are around the child (interpreter start and imports included); peak RSS is the
child's own ``ru_maxrss`` (``bench_check.run_measured``). The page cache is warmed first.

**Recall of planted copies.** preflight: a copy is found when it is a finding whose ``cluster``
is its original's cluster (the original's own row when the original is kept, its ``cluster``
when the original is itself a finding). datasketch: a copy is found when its query returned its
original ("direct"); "clustered" also counts copy and original joined through a chain of
candidate pairs. Both are also given over the planted pairs whose exact Jaccard (the shingle
sets above) is at least the threshold, since preflight's answer is confirmed at 0.8 and a
3-word substitution in a short text can fall below it.

**--big PATH** (e.g. ``corpus_1000mb_seed0.jsonl`` from ``scale_corpus.py``): the file is
copied into the work directory with ``--planted`` near-copies appended (as above), and
preflight alone runs on it once (numba already compiled): docs/s, MB/s, peak RSS, rule time,
recall of the planted copies. Then, against exact Jaccard on samples:

* precision: ``--sample`` random findings; each one's Jaccard with its cluster's kept row, and
  its best Jaccard with any member of its cluster (clusters are connected components, so a
  member can be far from the kept row and near another member; clusters larger than 100 are
  sampled to 100 members, a lower bound on the best);
* recall of natural pairs, when PATH is a ``scale_corpus.py`` output of CORPUS (checked per
  row: its id equals its row and its package that of source record ``row % n``): ``--sample``
  random records of later passes paired with their pass-0 original; among the pairs at or
  above the threshold, the share preflight put in one cluster.

**Docs recall against an exhaustive search** (the main corpus; ``--big`` too with
``--exhaustive-big``): every document with a partner at Jaccard >= 0.8 on the shingle sets
above, found by an exact all-pairs join (``near_truth.exhaustive_truth``: identical sets
grouped, prefix and length filtering, every candidate verified, checked against brute force on
a sample), cached in ``WORKDIR/near_dups_truth`` by the file's SHA-256. preflight's documents
are its findings and their kept rows; reported: docs recall, documents found with no partner
in the truth (0 when every pair is confirmed), and the
share of findings below 0.8 with their ``partner`` and with their kept row (``cluster``).

The planted copy of PATH and the report directories are deleted at the end (``--keep`` keeps
the reports). Results go to ``WORKDIR/near_dups_results.json``.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import platform
import random
import re
import shutil
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_check import find_preflight, run_measured, warm_cache  # noqa: E402

MB = 1_000_000
NUM_PERM, BANDS, ROWS, NGRAM, THRESHOLD = 128, 16, 8, 5, 0.8
RULE_ID = "near-dupes"
ZWSP = "\u200b"
CLUSTER_CAP = 100
RULES_YAML = f"""version: 1
fields: {{text: text, id: id}}
rules:
  - {{id: {RULE_ID}, check: near_duplicate, num_perm: {NUM_PERM}, bands: {BANDS}, rows: {ROWS}}}
"""


# -- folding and shingles (the baseline's, also used for exact Jaccard) ----------------------

def cf_table() -> dict[int, None]:
    """``str.translate`` table deleting every format (Cf) character."""
    return {cp: None for cp in range(0x110000) if unicodedata.category(chr(cp)) == "Cf"}


def fold(text: str, table: dict[int, None]) -> str:
    """preflight's folded view in plain Python: NFC, Cf deleted, casefold, whitespace collapsed
    (ASCII texts need only the lowercasing and the collapsing)."""
    if text.isascii():
        text = text.lower()
    else:
        text = unicodedata.normalize("NFC", text).translate(table).casefold()
    return " ".join(text.split())


def shingle_set(folded: str) -> set[str]:
    """Word 5-grams of a folded text; a text shorter than 5 words is one shingle."""
    words = folded.split(" ")
    if len(words) < NGRAM:
        return {folded}
    return {" ".join(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    """Exact Jaccard of two shingle sets (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


# -- the datasketch pipeline (child process) --------------------------------------------------

def baseline(path: Path, out: Path) -> int:
    """Run the plain datasketch pipeline on ``path``; write counts, times and pairs to ``out``."""
    from datasketch import MinHash, MinHashLSH

    table = cf_table()  # setup, before the clock (about 0.5 s)
    t_fold = t_sign = t_lsh = 0.0
    records = malformed = docs = 0
    pairs_u: list[int] = []
    pairs_v: list[int] = []
    clock = time.perf_counter
    t0 = clock()
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(BANDS, ROWS))
    with open(path, "rb") as fh:
        for row, line in enumerate(fh):
            t1 = clock()
            try:
                rec = json.loads(line)
                text = rec.get("text")
            except (ValueError, AttributeError):
                malformed += 1
                continue
            records += 1
            if not isinstance(text, str):
                continue
            folded = fold(text, table)
            if not folded:
                continue
            sh = shingle_set(folded)
            t2 = clock()
            m = MinHash(num_perm=NUM_PERM, seed=1)
            m.update_batch([s.encode() for s in sh])
            t3 = clock()
            for other in lsh.query(m):
                pairs_u.append(other)
                pairs_v.append(row)
            lsh.insert(row, m)
            t4 = clock()
            docs += 1
            t_fold += t2 - t1
            t_sign += t3 - t2
            t_lsh += t4 - t3
    seconds = clock() - t0
    result = {
        "records": records,
        "malformed": malformed,
        "docs": docs,
        "seconds": round(seconds, 3),
        "breakdown_seconds": {
            "read_parse_fold_shingle": round(t_fold, 3),
            "minhash": round(t_sign, 3),
            "lsh_query_insert": round(t_lsh, 3),
        },
        "candidate_pairs": len(pairs_u),
        "pairs_u": pairs_u,
        "pairs_v": pairs_v,
    }
    out.write_text(json.dumps(result))
    return 0


# -- test corpora ------------------------------------------------------------------------------

_SPLIT = re.compile(r"(\s+)")


def edit_copy(text: str, rng: random.Random, donors: list[str]) -> tuple[str, str]:
    """A near-copy of ``text``: 1-3 substitutions, an adjacent swap or an injected U+200B."""
    parts = _SPLIT.split(text)
    words = [k for k, p in enumerate(parts) if p and not p.isspace()]
    kind = rng.choice(("substitute", "swap", "zwsp"))
    if kind == "swap" and len(words) < 2:
        kind = "substitute"
    if kind == "zwsp" or not words:
        at = rng.randrange(len(text) + 1)
        return text[:at] + ZWSP + text[at:], "zwsp"
    if kind == "swap":
        j = rng.randrange(len(words) - 1)
        a, b = words[j], words[j + 1]
        parts[a], parts[b] = parts[b], parts[a]
        return "".join(parts), "swap"
    count = rng.randint(1, 3)
    for k in rng.sample(words, min(count, len(words))):
        new = parts[k]
        while new == parts[k]:
            donor = rng.choice(donors).split()
            new = rng.choice(donor) if donor else "word"
        parts[k] = new
    return "".join(parts), f"substitute{min(count, len(words))}"


def plant(
    lines: dict[int, bytes], rng: random.Random, want: int, next_id: int, out
) -> list[dict[str, Any]]:
    """Append ``want`` near-copies of the candidate ``lines`` (row -> raw line) to ``out``."""
    candidates = []
    for row, line in sorted(lines.items()):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("text"), str) and rec["text"].split():
            candidates.append((row, rec))
    if len(candidates) < want:
        raise SystemExit(f"error: only {len(candidates)} usable records to copy")
    chosen = rng.sample(candidates, want)
    donors = [rec["text"] for _, rec in candidates]
    planted = []
    for row, rec in chosen:
        text, kind = edit_copy(rec["text"], rng, donors)
        copy = dict(rec, id=next_id, text=text)
        out.write((json.dumps(copy, ensure_ascii=False) + "\n").encode("utf-8"))
        planted.append({"original": row, "kind": kind, "original_text": rec["text"],
                        "text": text})
        next_id += 1
    return planted


def build_main_corpus(src: Path, dest: Path, n: int, seed: int) -> dict[str, Any]:
    """CORPUS verbatim plus ``n`` planted near-copies; return rows and the planted pairs."""
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as fh:
        lines = [line if line.endswith(b"\n") else line + b"\n" for line in fh]
    rows = len(lines)
    rng = random.Random(seed)
    with open(dest, "wb") as out:
        out.write(b"".join(lines))
        planted = plant(dict(enumerate(lines)), rng, n, next_free_id(lines), out)
    for k, p in enumerate(planted):
        p["copy"] = rows + k
    return {"source_rows": rows, "rows": rows + len(planted), "planted": planted}


def next_free_id(lines: list[bytes]) -> int:
    """One more than the largest integer id among ``lines`` (0 when none)."""
    best = -1
    for line in lines:
        try:
            rid = json.loads(line).get("id")
        except (ValueError, AttributeError):
            continue
        if isinstance(rid, int):
            best = max(best, rid)
    return best + 1


def build_big_corpus(src: Path, dest: Path, n: int, seed: int) -> dict[str, Any]:
    """A copy of ``src`` with ``n`` planted near-copies of random records appended."""
    t0 = time.perf_counter()
    shutil.copyfile(src, dest)
    rows = 0
    with open(src, "rb") as fh:
        while chunk := fh.read(64 * 1024 * 1024):
            rows += chunk.count(b"\n")
    rng = random.Random(seed)
    wanted = set(rng.sample(range(rows), min(rows, 3 * n)))
    lines: dict[int, bytes] = {}
    with open(src, "rb") as fh:
        for row, line in enumerate(fh):
            if row in wanted:
                lines[row] = line
    with open(dest, "ab") as out:
        planted = plant(lines, rng, n, rows, out)  # scale_corpus ids are the rows
    for k, p in enumerate(planted):
        p["copy"] = rows + k
    return {"source_rows": rows, "rows": rows + len(planted), "planted": planted,
            "build_seconds": round(time.perf_counter() - t0, 1)}


# -- running and scoring -----------------------------------------------------------------------

def run_preflight(cmd: list[str], data: Path, rules: Path, out_dir: Path, logs: Path,
                  timeout: float, env_cache: Path) -> dict[str, Any]:
    """One measured ``preflight check`` run; its report's timings and stats."""
    shutil.rmtree(out_dir, ignore_errors=True)
    full = [*cmd, "check", str(data), "--rules", str(rules), "--out", str(out_dir), "--quiet",
            "--no-progress", "--no-smoke"]
    os.environ["NUMBA_CACHE_DIR"] = str(env_cache)
    m = run_measured(full, logs / "preflight.stdout", logs / "preflight.stderr", timeout)
    if m.timed_out or m.exit_code not in (0, 1):
        err = (logs / "preflight.stderr").read_text(errors="replace")[-2000:]
        raise SystemExit(f"preflight failed (exit {m.exit_code}, timeout {m.timed_out}): {err}")
    report = json.loads((out_dir / "report.json").read_text())
    rule = next(r for r in report["rules"] if r["id"] == RULE_ID)
    return {
        "wall_seconds": round(m.seconds, 3),
        "peak_rss_mb": round(m.peak_rss_mb, 1),
        "peak_tree_rss_mb": None if m.peak_tree_rss_mb is None else round(m.peak_tree_rss_mb, 1),
        "rule_seconds": report["timings"][f"rule:{RULE_ID}"],
        "total_seconds": report["timings"]["total"],
        "read_seconds": report["timings"].get("read"),
        "records": report["source"]["records"],
        "exit_code": m.exit_code,
        "stats": {k: v for k, v in rule.get("stats", {}).items() if k != "largest_clusters"},
        "violations": rule.get("violations"),
    }


def load_findings(out_dir: Path):
    """The rule's findings: ``row``, ``cluster``, ``partner``, ``detail`` (a polars frame) and a
    row -> cluster map."""
    import polars as pl

    f = pl.read_parquet(out_dir / "findings.parquet").filter(pl.col("rule") == RULE_ID)
    if "partner" not in f.columns:  # a preflight from before the column (to compare)
        f = f.with_columns(partner=pl.lit(None, dtype=pl.Int64))
    f = f.select("row", "cluster", "partner", "detail")
    return f, dict(zip(f["row"].to_list(), f["cluster"].to_list(), strict=True))


# -- docs recall against an exhaustive search ---------------------------------------------------

def exhaustive_scores(path: Path, findings, table: dict[int, None],
                      cache_dir: Path) -> dict[str, Any]:
    """preflight's documents (findings and their kept rows) against the exhaustive truth:
    docs recall, documents found that have no partner at the threshold, and the share of
    findings below the threshold with their ``partner`` and with their kept row (``cluster``)."""
    from near_truth import exhaustive_truth  # (it imports this module)

    truth = exhaustive_truth(path, cache_dir, table=table)
    rows, clusters = findings["row"].to_list(), findings["cluster"].to_list()
    partners = findings["partner"].to_list()
    found = set(rows) | set(clusters)
    want = set(truth.docs().tolist())
    texts = collect_texts(path, found)
    sets = {r: shingle_set(fold(t, table)) for r, t in texts.items() if t is not None}

    def below(others: list[int]) -> float | None:
        js = [jaccard(sets[r], sets[o]) for r, o in zip(rows, others, strict=True)
              if r in sets and o in sets]  # (none without a partner column)
        return round(sum(j < THRESHOLD for j in js) / len(js), 4) if js else None

    return {
        "truth_docs": len(want),
        "truth_pairs": truth.stats["distinct_pairs"],
        "truth_seconds": truth.stats["seconds"],
        "truth_cached": truth.stats["cached"],
        "docs_found": len(found & want),
        "docs_recall": round(len(found & want) / len(want), 4) if want else None,
        "docs_found_without_partner_in_truth": len(found - want),
        "share_partner_below_threshold": below(partners),
        "share_kept_row_below_threshold": below(clusters),
    }


def print_exhaustive(scores: dict[str, Any]) -> None:
    """One summary line of ``exhaustive_scores``."""
    how = "cached" if scores["truth_cached"] else f"computed in {scores['truth_seconds']} s"
    print(f"exhaustive truth ({scores['truth_docs']:,} docs in {scores['truth_pairs']:,} pairs "
          f"of distinct sets at J >= {THRESHOLD}; {how}): docs recall {scores['docs_recall']}, "
          f"found without a partner {scores['docs_found_without_partner_in_truth']}; findings "
          f"below {THRESHOLD} with their partner {scores['share_partner_below_threshold']}, "
          f"with their kept row {scores['share_kept_row_below_threshold']}")


def preflight_recall(planted: list[dict[str, Any]], cluster_of: dict[int, int]) -> list[bool]:
    """Per planted copy: is it a finding in its original's cluster?"""
    found = []
    for p in planted:
        orig = p["original"]
        want = cluster_of.get(orig, orig)
        found.append(cluster_of.get(p["copy"]) == want)
    return found


def union_find(pairs_u: list[int], pairs_v: list[int]) -> dict[int, int]:
    """Component root of every node in the candidate pairs."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v in zip(pairs_u, pairs_v, strict=True):
        ru, rv = root(u), root(v)
        if ru != rv:
            parent[max(ru, rv)] = min(ru, rv)
    return {x: root(x) for x in list(parent)}


def recall_summary(found: list[bool], eligible: list[bool]) -> dict[str, Any]:
    """Recall over all planted copies and over those at or above the threshold."""
    n_all, n_el = len(found), sum(eligible)
    hit_el = sum(f for f, e in zip(found, eligible, strict=True) if e)
    return {
        "found": sum(found),
        "planted": n_all,
        "recall": round(sum(found) / n_all, 4) if n_all else None,
        "found_at_threshold": hit_el,
        "planted_at_threshold": n_el,
        "recall_at_threshold": round(hit_el / n_el, 4) if n_el else None,
    }


def by_kind(planted: list[dict[str, Any]], found: list[bool]) -> dict[str, str]:
    """Found / planted per edit kind."""
    out: dict[str, list[int]] = {}
    for p, f in zip(planted, found, strict=True):
        c = out.setdefault(p["kind"], [0, 0])
        c[0] += f
        c[1] += 1
    return {k: f"{v[0]}/{v[1]}" for k, v in sorted(out.items())}


def planted_jaccard(planted: list[dict[str, Any]], table: dict[int, None]) -> None:
    """Store each planted pair's exact Jaccard (shingles of the folded texts)."""
    for p in planted:
        p["jaccard"] = jaccard(shingle_set(fold(p["original_text"], table)),
                               shingle_set(fold(p["text"], table)))


def collect_texts(path: Path, rows: set[int]) -> dict[int, str | None]:
    """The ``text`` of each wanted row of a JSON Lines file (None for a broken line)."""
    texts: dict[int, str | None] = {}
    with open(path, "rb") as fh:
        for row, line in enumerate(fh):
            if row in rows:
                try:
                    t = json.loads(line).get("text")
                    texts[row] = t if isinstance(t, str) else None
                except (ValueError, AttributeError):
                    texts[row] = None
    return texts


def quantiles(values: list[float]) -> dict[str, float]:
    """A few order statistics of ``values``."""
    if not values:
        return {}
    s = sorted(values)

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, int(p * len(s)))], 4)

    return {"min": round(s[0], 4), "p1": q(0.01), "p5": q(0.05), "p25": q(0.25),
            "median": q(0.5), "max": round(s[-1], 4)}


def share(values: list[float]) -> float | None:
    """Share of ``values`` at or above the threshold (None when empty)."""
    return round(sum(v >= THRESHOLD for v in values) / len(values), 4) if values else None


def histogram(values: list[float]) -> dict[str, int]:
    """Counts per Jaccard bin."""
    edges = [0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    out = {}
    for lo, hi in itertools.pairwise(edges):
        label = f"[{lo:.1f},{hi:.1f}" + ("]" if hi == 1.0 else ")")
        out[label] = sum(lo <= v < hi or (hi == 1.0 and v == 1.0) for v in values)
    return out


_DETAIL_J = re.compile(r"Jaccard ([0-9.]+)")


def big_quality(path: Path, findings, cluster_of: dict[int, int], src: Path, sample: int,
                seed: int, table: dict[int, None]) -> dict[str, Any]:
    """Precision and natural-pair recall of preflight's clusters against exact Jaccard."""
    rng = random.Random(seed + 1)
    rows = findings["row"].to_list()
    clusters = findings["cluster"].to_list()
    details = findings["detail"].to_list()
    members: dict[int, list[int]] = {}
    for r, c in zip(rows, clusters, strict=True):
        members.setdefault(c, [c]).append(r)
    picks = rng.sample(range(len(rows)), min(sample, len(rows)))
    needed: set[int] = set()
    groups = []
    for k in picks:
        r, c = rows[k], clusters[k]
        others = [m for m in members[c] if m != r]
        capped = len(others) > CLUSTER_CAP
        if capped:
            others = [c, *rng.sample([m for m in others if m != c], CLUSTER_CAP - 1)]
        groups.append((r, c, others, capped, details[k]))
        needed.update(others)
        needed.add(r)

    # Natural pairs of a scale_corpus.py output: row r of pass >= 1 is an edited copy of row
    # r % n (pass 0 is the source itself). Checked per row below.
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", encoding="utf-8") as fh:
        packages = [json.loads(line).get("package") for line in fh if line.strip()]
    n_src = len(packages)
    total_rows = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(64 * 1024 * 1024):
            total_rows += chunk.count(b"\n")
    natural = rng.sample(range(n_src, total_rows), min(sample, max(0, total_rows - n_src)))
    needed.update(natural)
    needed.update(r % n_src for r in natural)

    t0 = time.perf_counter()
    raw = {}
    with open(path, "rb") as fh:
        for row, line in enumerate(fh):
            if row in needed:
                raw[row] = line
    texts: dict[int, str | None] = {}
    meta: dict[int, tuple[Any, Any]] = {}
    for row, line in raw.items():
        try:
            rec = json.loads(line)
            t = rec.get("text")
            texts[row] = t if isinstance(t, str) else None
            meta[row] = (rec.get("id"), rec.get("package"))
        except (ValueError, AttributeError):
            texts[row] = None
    del raw
    sets: dict[int, set[str]] = {}

    def shingles_of(row: int) -> set[str] | None:
        if row not in sets:
            t = texts.get(row)
            if t is None:
                return None
            sets[row] = shingle_set(fold(t, table))
        return sets[row]

    with_kept, best, was_capped, detail_j, undercut = [], [], [], [], 0
    for r, c, others, capped, detail in groups:
        mine = shingles_of(r)
        kept = shingles_of(c)
        if mine is None or kept is None:
            continue
        with_kept.append(jaccard(mine, kept))
        b = max((jaccard(mine, s) for m in others if (s := shingles_of(m)) is not None),
                default=0.0)
        best.append(b)
        was_capped.append(capped)
        hit = _DETAIL_J.search(detail or "")
        if hit:
            d = float(hit.group(1))
            detail_j.append(d)
            if not capped and b < d - 0.01:
                undercut += 1
    precision = {
        "sampled_findings": len(with_kept),
        "share_jaccard_with_kept_row_at_threshold": round(
            sum(j >= THRESHOLD for j in with_kept) / len(with_kept), 4) if with_kept else None,
        "share_best_jaccard_in_cluster_at_threshold": round(
            sum(j >= THRESHOLD for j in best) / len(best), 4) if best else None,
        "jaccard_with_kept_row": quantiles(with_kept),
        "jaccard_with_kept_row_histogram": histogram(with_kept),
        "best_jaccard_in_cluster": quantiles(best),
        "in_clusters_over_cap": sum(was_capped),
        "share_best_at_threshold_in_full_clusters": share(
            [j for j, c in zip(best, was_capped, strict=True) if not c]),
        "share_best_at_threshold_in_capped_clusters": share(
            [j for j, c in zip(best, was_capped, strict=True) if c]),
        "detail_jaccard": quantiles(detail_j),
        "best_below_detail": undercut,
        "clusters_capped_at": CLUSTER_CAP,
    }

    pair_j, same, skipped = [], [], 0
    for r in natural:
        o = r % n_src
        rid, pkg = meta.get(r, (None, None))
        a, b = shingles_of(r), shingles_of(o)
        if rid != r or pkg != packages[o] or a is None or b is None:
            skipped += 1
            continue
        pair_j.append(jaccard(a, b))
        same.append(cluster_of.get(r, r) == cluster_of.get(o, o))
    at = [s for j, s in zip(pair_j, same, strict=True) if j >= THRESHOLD]
    below = [s for j, s in zip(pair_j, same, strict=True) if j < THRESHOLD]
    natural_recall = {
        "sampled_pairs": len(pair_j),
        "skipped_not_aligned_or_malformed": skipped,
        "pairs_at_threshold": len(at),
        "clustered_at_threshold": sum(at),
        "recall_at_threshold": round(sum(at) / len(at), 4) if at else None,
        "pairs_below_threshold": len(below),
        "clustered_below_threshold": sum(below),
        "jaccard": quantiles(pair_j),
        "jaccard_histogram": histogram(pair_j),
    }
    return {"precision": precision, "natural_pair_recall": natural_recall,
            "seconds": round(time.perf_counter() - t0, 1)}


# -- output ------------------------------------------------------------------------------------

def fmt(v: float | None, spec: str) -> str:
    """Format a number, '-' for None."""
    return "-" if v is None else format(v, spec)


def print_main_table(rows: list[dict[str, Any]]) -> None:
    """The comparison table."""
    head = (f"{'tool':<30} {'docs':>8} {'seconds':>8} {'docs/s':>9} {'MB/s':>7} "
            f"{'peak RSS MB':>11} {'recall':>7} {'recall@0.8':>10} {'datasketch / this':>17}")
    print()
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['tool']:<30} {r['docs']:>8,} {fmt(r['seconds'], '.2f'):>8} "
              f"{fmt(r['docs_per_s'], ',.0f'):>9} {fmt(r['mb_per_s'], '.2f'):>7} "
              f"{fmt(r['peak_rss_mb'], '.0f'):>11} {fmt(r.get('recall'), '.4f'):>7} "
              f"{fmt(r.get('recall_at_threshold'), '.4f'):>10} "
              f"{(fmt(r.get('ratio'), '.1f') + 'x') if r.get('ratio') else '-':>17}")


def row(tool: str, docs: int, seconds: float, nbytes: int, rss: float | None,
        recall: dict[str, Any] | None = None, ratio: float | None = None) -> dict[str, Any]:
    """One table row."""
    return {
        "tool": tool, "docs": docs, "seconds": round(seconds, 3),
        "docs_per_s": round(docs / seconds) if seconds else None,
        "mb_per_s": round(nbytes / MB / seconds, 2) if seconds else None,
        "peak_rss_mb": rss,
        "recall": recall and recall["recall"],
        "recall_at_threshold": recall and recall["recall_at_threshold"],
        "ratio": ratio and round(ratio, 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Build the corpora, run both tools, score recall and precision, print and save."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, nargs="?", help="source corpus (.jsonl or .jsonl.gz)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench"))
    parser.add_argument("--big", type=Path, default=None, help="a >= 1 GB JSON Lines corpus")
    parser.add_argument("--planted", type=int, default=2000, help="near-copies to plant")
    parser.add_argument("--sample", type=int, default=2000, help="sample size for --big scoring")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per child run")
    parser.add_argument("--keep", action="store_true", help="keep report directories")
    parser.add_argument("--exhaustive-big", action="store_true",
                        help="also score --big against an exhaustive search (slow, pure Python)")
    parser.add_argument("--preflight", default=None, help="command that runs the CLI")
    parser.add_argument("--baseline", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--baseline-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.baseline is not None:  # the child process
        return baseline(args.baseline, args.baseline_out)
    if args.src is None:
        parser.error("CORPUS is required")

    workdir: Path = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = find_preflight(args.preflight)
    if cmd is None:
        raise SystemExit("error: preflight not found")
    scratch = workdir / "near_dups"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    numba_cache = scratch / "numba_cache"  # fresh: the first preflight run compiles
    rules = scratch / "rules.yaml"
    rules.write_text(RULES_YAML)
    table = cf_table()
    results: dict[str, Any] = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "source": str(args.src),
        "seed": args.seed,
        "params": {"num_perm": NUM_PERM, "bands": BANDS, "rows": ROWS, "shingle_words": NGRAM,
                   "threshold": THRESHOLD},
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count()},
        "preflight_command": cmd,
    }
    try:
        results["main"] = run_main(args, cmd, scratch, rules, numba_cache, table)
        if args.big is not None:
            results["big"] = run_big(args, cmd, scratch, rules, numba_cache, table)
    finally:
        out = workdir / "near_dups_results.json"
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"\nresults written to {out}")
        if args.keep:
            print(f"reports kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


def run_main(args, cmd, scratch: Path, rules: Path, numba_cache: Path,
             table: dict[int, None]) -> dict[str, Any]:
    """datasketch vs preflight on CORPUS with planted near-copies."""
    data = scratch / "near_dups_corpus.jsonl"
    print(f"building {data} ...", flush=True)
    built = build_main_corpus(args.src, data, args.planted, args.seed)
    planted = built["planted"]
    planted_jaccard(planted, table)
    eligible = [p["jaccard"] >= THRESHOLD for p in planted]
    nbytes = data.stat().st_size
    print(f"{built['rows']:,} records ({built['source_rows']:,} + {len(planted):,} planted), "
          f"{nbytes / MB:.1f} MB; {sum(eligible):,} planted pairs at Jaccard >= {THRESHOLD}",
          flush=True)
    warm_cache(data)
    logs = scratch / "logs"
    logs.mkdir(exist_ok=True)

    print("running datasketch ...", flush=True)
    ds_out = scratch / "baseline.json"
    ds_cmd = [sys.executable, str(Path(__file__).resolve()), "--baseline", str(data),
              "--baseline-out", str(ds_out)]
    m = run_measured(ds_cmd, logs / "baseline.stdout", logs / "baseline.stderr", args.timeout)
    if m.timed_out or m.exit_code != 0:
        err = (logs / "baseline.stderr").read_text(errors="replace")[-2000:]
        raise SystemExit(f"datasketch baseline failed (exit {m.exit_code}): {err}")
    ds = json.loads(ds_out.read_text())
    pairs_u, pairs_v = ds.pop("pairs_u"), ds.pop("pairs_v")
    direct_pairs = set(zip(pairs_u, pairs_v, strict=True))
    ds_direct = [(p["original"], p["copy"]) in direct_pairs for p in planted]
    comp = union_find(pairs_u, pairs_v)
    ds_cluster = [comp.get(p["copy"], -1) == comp.get(p["original"], -2) for p in planted]
    ds["wall_seconds"] = round(m.seconds, 3)
    ds["peak_rss_mb"] = round(m.peak_rss_mb, 1)
    ds["recall_direct"] = recall_summary(ds_direct, eligible)
    ds["recall_clustered"] = recall_summary(ds_cluster, eligible)
    ds["recall_direct_by_kind"] = by_kind(planted, ds_direct)
    print(f"datasketch: {ds['seconds']:.2f} s in script, {m.seconds:.2f} s wall, "
          f"{m.peak_rss_mb:.0f} MB", flush=True)

    shutil.rmtree(numba_cache, ignore_errors=True)
    pf_runs = []
    for i in (1, 2):
        print(f"running preflight ({i}/2{', numba compiles' if i == 1 else ''}) ...", flush=True)
        pf_runs.append(run_preflight(cmd, data, rules, scratch / "report_main", logs,
                                     args.timeout, numba_cache))
        r = pf_runs[-1]
        print(f"preflight run {i}: rule {r['rule_seconds']:.2f} s, total "
              f"{r['total_seconds']:.2f} s, wall {r['wall_seconds']:.2f} s, "
              f"{r['peak_rss_mb']:.0f} MB", flush=True)
    pf = pf_runs[1]
    findings, cluster_of = load_findings(scratch / "report_main")
    pf_found = preflight_recall(planted, cluster_of)
    pf["recall"] = recall_summary(pf_found, eligible)
    pf["recall_by_kind"] = by_kind(planted, pf_found)
    pf["findings"] = len(findings)
    print("scoring against an exhaustive search ...", flush=True)
    pf["exhaustive"] = exhaustive_scores(data, findings, table, args.workdir / "near_dups_truth")
    print_exhaustive(pf["exhaustive"])
    pf["first_run"] = {k: pf_runs[0][k] for k in
                       ("wall_seconds", "rule_seconds", "total_seconds", "peak_rss_mb")}

    # Planted copies one tool found and the other did not, with their exact Jaccard.
    disagree = [
        {"copy": p["copy"], "original": p["original"], "kind": p["kind"],
         "jaccard": round(p["jaccard"], 4), "preflight": f, "datasketch_direct": d}
        for p, f, d in zip(planted, pf_found, ds_direct, strict=True) if f != d
    ]
    docs = pf["records"]
    table_rows = [
        row("datasketch (in script)", ds["docs"], ds["seconds"], nbytes, ds["peak_rss_mb"],
            ds["recall_direct"]),
        row("datasketch (wall)", ds["docs"], ds["wall_seconds"], nbytes, ds["peak_rss_mb"],
            ds["recall_direct"]),
        row("preflight rule time", docs, pf["rule_seconds"], nbytes, pf["peak_rss_mb"],
            pf["recall"], ds["seconds"] / pf["rule_seconds"]),
        row("preflight total (report.json)", docs, pf["total_seconds"], nbytes,
            pf["peak_rss_mb"], pf["recall"], ds["seconds"] / pf["total_seconds"]),
        row("preflight (wall)", docs, pf["wall_seconds"], nbytes, pf["peak_rss_mb"],
            pf["recall"], ds["wall_seconds"] / pf["wall_seconds"]),
    ]
    print_main_table(table_rows)
    print("ratio column: datasketch in-script seconds / preflight rule or total seconds; "
          "wall row: wall / wall.")
    print(f"preflight first run (numba compiling): rule {pf_runs[0]['rule_seconds']:.2f} s, "
          f"total {pf_runs[0]['total_seconds']:.2f} s, wall {pf_runs[0]['wall_seconds']:.2f} s")
    print(f"datasketch breakdown: {ds['breakdown_seconds']}; candidate pairs "
          f"{ds['candidate_pairs']:,}; clustered recall {ds['recall_clustered']['recall']}")
    print(f"preflight: candidate pairs {pf['stats'].get('candidate_pairs'):,}, confirmed "
          f"{pf['stats'].get('confirmed_pairs'):,}, findings {pf['findings']:,}")
    print(f"recall by kind: preflight {pf['recall_by_kind']}; "
          f"datasketch {ds['recall_direct_by_kind']}")
    print(f"planted copies found by one tool only: {len(disagree)}")
    for d in disagree[:20]:
        print(f"  {d}")
    return {
        "corpus": {k: v for k, v in built.items() if k != "planted"},
        "bytes": nbytes,
        "planted_kinds": by_kind(planted, [True] * len(planted)),
        "planted_jaccard": quantiles([p["jaccard"] for p in planted]),
        "datasketch": ds,
        "preflight": pf,
        "table": table_rows,
        "disagreements": disagree,
    }


def run_big(args, cmd, scratch: Path, rules: Path, numba_cache: Path,
            table: dict[int, None]) -> dict[str, Any]:
    """preflight alone on the big corpus with planted copies; precision and recall samples."""
    data = scratch / "near_dups_big.jsonl"
    print(f"\nbuilding {data} from {args.big} ...", flush=True)
    try:
        built = build_big_corpus(args.big, data, args.planted, args.seed)
        planted = built["planted"]
        planted_jaccard(planted, table)
        eligible = [p["jaccard"] >= THRESHOLD for p in planted]
        nbytes = data.stat().st_size
        print(f"{built['rows']:,} lines, {nbytes / MB:,.1f} MB (built in "
              f"{built['build_seconds']} s)", flush=True)
        warm_cache(data)
        logs = scratch / "logs_big"
        logs.mkdir(exist_ok=True)
        print("running preflight ...", flush=True)
        out_dir = scratch / "report_big"
        pf = run_preflight(cmd, data, rules, out_dir, logs, args.timeout, numba_cache)
        findings, cluster_of = load_findings(out_dir)
        found = preflight_recall(planted, cluster_of)
        pf["recall"] = recall_summary(found, eligible)
        pf["recall_by_kind"] = by_kind(planted, found)
        pf["findings"] = len(findings)
        docs = pf["records"]
        table_rows = [
            row("preflight rule time", docs, pf["rule_seconds"], nbytes, pf["peak_rss_mb"],
                pf["recall"]),
            row("preflight total (report.json)", docs, pf["total_seconds"], nbytes,
                pf["peak_rss_mb"], pf["recall"]),
            row("preflight (wall)", docs, pf["wall_seconds"], nbytes, pf["peak_rss_mb"],
                pf["recall"]),
        ]
        print_main_table(table_rows)
        print(f"read {pf['read_seconds']} s; candidate pairs "
              f"{pf['stats'].get('candidate_pairs'):,}, confirmed "
              f"{pf['stats'].get('confirmed_pairs'):,}, findings {pf['findings']:,}, clusters "
              f"{pf['stats'].get('clusters'):,}; recall by kind {pf['recall_by_kind']}")
        missed = [
            {"copy": p["copy"], "original": p["original"], "kind": p["kind"],
             "jaccard": round(p["jaccard"], 4)}
            for p, f in zip(planted, found, strict=True) if not f
        ]
        print(f"planted copies missed: {len(missed)}")
        for d in missed[:20]:
            print(f"  {d}")
        if args.exhaustive_big:
            print("scoring against an exhaustive search ...", flush=True)
            pf["exhaustive"] = exhaustive_scores(data, findings, table,
                                                 args.workdir / "near_dups_truth")
            print_exhaustive(pf["exhaustive"])
        print("scoring against exact Jaccard ...", flush=True)
        quality = big_quality(data, findings, cluster_of, args.src, args.sample, args.seed,
                              table)
        p, nr = quality["precision"], quality["natural_pair_recall"]
        print(f"precision sample ({p['sampled_findings']:,} findings): Jaccard with kept row "
              f">= {THRESHOLD}: {p['share_jaccard_with_kept_row_at_threshold']}; best Jaccard "
              f"in cluster >= {THRESHOLD}: {p['share_best_jaccard_in_cluster_at_threshold']}")
        print(f"  Jaccard with kept row: {p['jaccard_with_kept_row']}")
        print(f"  histogram: {p['jaccard_with_kept_row_histogram']}")
        print(f"  best in cluster: {p['best_jaccard_in_cluster']}; below the finding's own "
              f"reported Jaccard: {p['best_below_detail']}")
        print(f"  best >= {THRESHOLD}: {p['share_best_at_threshold_in_full_clusters']} of "
              f"findings in clusters of <= {CLUSTER_CAP + 1} (every member compared), "
              f"{p['share_best_at_threshold_in_capped_clusters']} of the "
              f"{p['in_clusters_over_cap']} in larger clusters ({CLUSTER_CAP} members sampled: "
              f"a lower bound)")
        print(f"natural-pair recall ({nr['sampled_pairs']:,} pairs, "
              f"{nr['skipped_not_aligned_or_malformed']} skipped): "
              f"{nr['clustered_at_threshold']:,}/{nr['pairs_at_threshold']:,} at >= "
              f"{THRESHOLD} = {nr['recall_at_threshold']}; below: "
              f"{nr['clustered_below_threshold']}/{nr['pairs_below_threshold']} clustered")
        print(f"  pair Jaccard: {nr['jaccard']}")
        return {
            "path": str(args.big),
            "corpus": {k: v for k, v in built.items() if k != "planted"},
            "bytes": nbytes,
            "preflight": pf,
            "table": table_rows,
            "missed_planted": missed,
            "quality": quality,
        }
    finally:
        data.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
