"""Corpora and rules on which a distributed run must give exactly the local run's findings:
the four sample corpora with their presets (every check family, planted faults), a folder
of shards, and an eval file for overlap. Shared by the in-process tests of the executor's
merge and by the Ray tests (tests/integrations/test_ray.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl

from preflight.config import RuleSet, load_rules, with_overrides
from preflight.report.model import Report

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
CORPORA = {
    "pretrain": ("pretrain-text", {}),
    "sft_chat": ("sft-chat", {}),
    "classification": ("classification", {"num_classes": 4}),
    "regression": ("regression", {}),
}


def sample_case(corpus: str) -> tuple[Path, RuleSet]:
    """A sample corpus and its preset."""
    preset, extra = CORPORA[corpus]
    return SAMPLE / f"{corpus}.jsonl", with_overrides(load_rules(preset=preset), **extra)


def shards_case(tmp: Path) -> tuple[Path, RuleSet]:
    """The pretraining sample cut into three shards (duplicates across shards), with a
    numeric field whose outliers need the whole corpus, and an eval file for overlap."""
    lines = (SAMPLE / "pretrain.jsonl").read_bytes().splitlines(keepends=True)
    folder = tmp / "shards"
    folder.mkdir()
    for k in range(3):
        (folder / f"part-{k}.jsonl").write_bytes(b"".join(lines[k * 100:(k + 1) * 100]))
    # A numeric column, with outliers, appended to the readable objects of the first shard.
    out = []
    for i, line in enumerate(lines[:100]):
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(record, dict):
            record["score"] = 1e6 if i in (7, 93) else float(i % 10)
            out.append((json.dumps(record) + "\n").encode())
        else:
            out.append(line)
    (folder / "part-0.jsonl").write_bytes(b"".join(out))
    eval_file = tmp / "eval.jsonl"
    eval_file.write_bytes(b"".join(lines[200:300:7]))
    rules = load_rules({
        "fields": {"text": "text", "id": "id", "numeric": ["score"]},
        "eval": str(eval_file),
        "model": {"context_window": 64},
        "rules": [
            {"id": "empty", "check": "empty", "severity": "warn"},
            {"id": "hidden", "check": "invisible_unicode"},
            {"id": "enc", "check": "encoding", "severity": "warn"},
            {"id": "dupes", "check": "exact_duplicate"},
            {"id": "near", "check": "near_duplicate", "threshold": 0.7},
            {"id": "score", "check": "numeric", "severity": "warn"},
            {"id": "overlap", "check": "overlap"},
            {"id": "length", "check": "token_length", "severity": "warn"},
        ],
    })
    return folder, rules


def person_features(n: int, seed: int = 7) -> list[dict]:
    """Records with a heterogeneous feature vector, as a tabular model reads it: an age
    (20..70), three 0/1 flags and a small count (0..2)."""
    rnd = random.Random(seed)
    return [{"id": i, "text": f"person record number {i}",
             "features": [rnd.randint(20, 70), rnd.randint(0, 1), rnd.randint(0, 1),
                          rnd.randint(0, 1), rnd.randint(0, 2)]} for i in range(n)]


def vectors_case(tmp: Path) -> tuple[Path, RuleSet]:
    """A fixed-length feature vector judged per position across pieces: one planted age of
    250 (row 301), NaN elements in some records (their other elements keep their
    positions), a null vector; only row 301 is an outlier. Five records of another shape
    (a truncated vector, [NaN, NaN], a number, [], nested lists) are ``wrong_length``."""
    records = person_features(600)
    records[301]["features"][0] = 250
    for i in (5, 222, 480):
        records[i]["features"][i % 5] = float("nan")
    records[444]["features"] = None
    records[150]["features"] = [44, 1]
    records[151]["features"] = [float("nan"), float("nan")]
    records[400]["features"] = 3
    records[520]["features"] = []
    records[555]["features"] = [[1, 2], [3]]
    path = tmp / "vectors.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, load_rules({
        "fields": {"text": "text", "id": "id", "features": "features"},
        "rules": [{"id": "values", "check": "numeric"}],
    })


def tokens_case(tmp: Path) -> tuple[Path, RuleSet]:
    """Token lengths with a real (small, locally trained) tokenizer: lengths estimated from a
    bytes-per-token calibration made on the first batch, exact near the bounds."""
    from tests.tokenizers import build_bpe, made_up_text

    tokenizer = build_bpe(tmp / "tok")
    path = tmp / "tok.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in made_up_text(300, seed=2)))
    return path, load_rules({
        "fields": {"text": "text"},
        "model": {"context_window": 64, "tokenizer": str(tokenizer)},
        "rules": [{"id": "tok", "check": "token_length", "min_tokens": 2}],
    })


def vocab_case(tmp: Path) -> tuple[Path, RuleSet]:
    """A tokenizer with an added token the model's embedding lacks, in a few records across
    the corpus, beside token_length: the ids shared per batch, counts merged."""
    from tests.tokenizers import build_bpe_with_added, made_up_text

    tokenizer = build_bpe_with_added(tmp / "tok", ["<|sep|>"])
    texts = made_up_text(300, seed=5)
    path = tmp / "vocab.jsonl"
    path.write_text("".join(json.dumps({"text": t + (" <|sep|>" if i % 37 == 3 else "")}) + "\n"
                            for i, t in enumerate(texts)))
    return path, load_rules({
        "fields": {"text": "text"},
        "model": {"context_window": 64, "tokenizer": str(tokenizer), "vocab_size": 1000},
        "rules": [{"id": "tok", "check": "token_length"}],
    })


def string_labels_case(tmp: Path, fmt: str = "jsonl") -> Path:
    """Class names taken from the data (no rules file): a blank name, an integer among them,
    variants and typos spread across the pieces, whose rows only the merged class counts
    reveal (a second read finds them)."""
    labels = [("sports", "politics", "science")[i % 3] for i in range(1_500)]
    for row, value in ((3, ""), (250, 7), (400, "Sports"), (777, "politcs"), (1_201, "science "),
                       (1_499, "Sports")):
        labels[row] = value
    if fmt == "csv":
        path = tmp / "topics.csv"
        path.write_text("text,label\n" + "".join(f"article number {i},{v}\n"
                                                 for i, v in enumerate(labels)))
    else:
        path = tmp / "topics.jsonl"
        path.write_text("".join(json.dumps({"text": f"article number {i}", "label": v}) + "\n"
                                for i, v in enumerate(labels)))
    return path


def malformed_shard_case(tmp: Path) -> tuple[Path, RuleSet]:
    """A shard of records with empty texts, then a shard of only malformed lines: its
    batches have no records, and their flags still change which flagged rows the smoke
    sample holds."""
    folder = tmp / "flags"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(
        json.dumps({"text": "" if i % 3 == 0 else f"doc {i}"}) + "\n" for i in range(60)))
    (folder / "b.jsonl").write_text('{"text": broken\n' * 200)
    return folder, load_rules({"fields": {"text": "text"}, "smoke": {"samples": 6},
                               "rules": [{"id": "empty", "check": "empty"}]})


def malformed_start_case(tmp: Path, bad_lines: int, *, chat: bool = False) -> Path:
    """A folder of shards with inferred fields: one of ``bad_lines`` malformed lines only,
    two text shards that start with as many (one zero-width space planted in each), and,
    with ``chat``, a chat shard (another shape: ``mixed_shards``)."""
    folder = tmp / "shards"
    folder.mkdir()
    (folder / "a.jsonl").write_text("{oops\n" * bad_lines)
    for name in ("b", "c"):
        (folder / f"{name}.jsonl").write_text("{bad\n" * bad_lines + "".join(
            json.dumps({"id": i, "text": f"{name} doc {i}" + ("\u200b" if i == 7 else "")})
            + "\n" for i in range(300)))
    if chat:
        (folder / "d.jsonl").write_text("".join(
            json.dumps({"messages": [{"role": "user", "content": f"q {i}"}]}) + "\n"
            for i in range(300)))
    return folder


def same_findings(a: Report, b: Report, a_out: Path, b_out: Path) -> None:
    """Assert two runs found the same: per rule counts, codes, examples and stats, the
    source's counts, and findings.parquet (the same bytes: rule by rule, in read order)."""
    assert a.verdict == b.verdict
    assert a.source.records == b.source.records
    assert a.source.malformed == b.source.malformed
    assert [r.id for r in a.rules] == [r.id for r in b.rules]
    for ra, rb in zip(a.rules, b.rules, strict=True):
        assert (ra.status, ra.violations, ra.findings, ra.codes) == (
            rb.status, rb.violations, rb.findings, rb.codes), ra.id
        assert ra.examples == rb.examples, ra.id
        assert ra.stats == rb.stats, ra.id
    fa = pl.read_parquet(a_out / "findings.parquet")
    fb = pl.read_parquet(b_out / "findings.parquet")
    assert fa.height > 0
    assert fa.equals(fb)
    assert (a_out / "findings.parquet").read_bytes() == (b_out / "findings.parquet").read_bytes()


def same_report(a: Report, b: Report) -> None:
    """Assert two runs wrote the same report but for how they ran: the timings, the output
    paths (their folders differ) and the executor's own description in ``environment``."""
    skip = {"timings": True, "outputs": True}
    da, db = a.model_dump(mode="json", exclude=skip), b.model_dump(mode="json", exclude=skip)
    for d in (da, db):
        for key in ("workers", "executor", "ray"):
            d["environment"].pop(key, None)
        if d.get("smoke"):
            d["smoke"].pop("seconds", None)
    assert da == db, _differences(da, db)


def _differences(a: object, b: object, at: str = "") -> list[str]:
    """Where two JSON values differ (paths), for the assertion message."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in _differences(a.get(k), b.get(k), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in _differences(x, y, f"{at}[{i}]")]
    return [] if a == b else [f"{at}: {a!r} != {b!r}"]
