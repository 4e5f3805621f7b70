"""The local process pool (``--workers N``): on every sample corpus and preset, on shards,
Parquet row groups, Arrow, a JSON array, a ``datasets`` folder, a .gz file, CSV with quoted
newlines, malformed lines at piece boundaries and ``--limit``, two workers give the report,
findings and smoke sample of ``--workers 1``. The thresholds that keep small inputs in
process are lowered here so the small test files are cut into several pieces."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from preflight import InputError, WorkerError, run_preflight
from preflight.cli import main
from preflight.config import load_rules
from preflight.executor import launch, pieces, pool
from preflight.report.model import Report
from preflight.source import csv as csv_source
from preflight.source import open_source
from tests.executor.cases import (
    CORPORA,
    SAMPLE,
    malformed_shard_case,
    malformed_start_case,
    same_findings,
    same_report,
    sample_case,
    shards_case,
    tokens_case,
    vectors_case,
)


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pool even the small test files, cut into pieces of about 8 KB."""
    monkeypatch.setattr(launch, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(pool, "MIN_PIECE_BYTES", 8_000)


def both(path: Path | str, rules: object, tmp: Path, **kwargs: object) -> tuple[Report, Report]:
    """The run with one worker (in process) and with two (the pool)."""
    one = run_preflight(path, rules, tmp / "one", workers=1, **kwargs)  # type: ignore[arg-type]
    two = run_preflight(path, rules, tmp / "two", workers=2, **kwargs)  # type: ignore[arg-type]
    assert one.environment["workers"] == 1 and "pool:scan" not in one.timings
    assert two.environment["workers"] == 2 and "pool:scan" in two.timings
    return one, two


def equal(one: Report, two: Report, tmp: Path) -> None:
    same_findings(one, two, tmp / "one", tmp / "two")
    same_report(one, two)


@pytest.mark.parametrize("preset", ["own", "default"])
@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_sample_corpus_and_preset(corpus: str, preset: str, tmp_path: Path) -> None:
    path, rules = sample_case(corpus)
    if preset == "default":
        rules = load_rules(preset="default")
    assert len(pieces.plan(open_source(path), piece_bytes=8_000)) > 1
    one, two = both(path, rules, tmp_path, smoke=False)
    equal(one, two, tmp_path)


def test_findings_spilled_in_small_row_groups_are_the_same_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With findings spilled every few rows (as a large corpus's are), the two schedules
    still write the same bytes: rule by rule, in read order, in row groups of ROW_GROUP."""
    import pyarrow.parquet as pq

    from preflight import findings

    monkeypatch.setattr(findings, "ROW_GROUP", 7)
    path, _ = sample_case("pretrain")
    one, two = both(path, load_rules(preset="default"), tmp_path, smoke=False)
    equal(one, two, tmp_path)
    written = tmp_path / "two" / "findings.parquet"
    sizes = [g.num_rows for g in (pq.ParquetFile(written).metadata.row_group(i)
                                  for i in range(pq.ParquetFile(written).num_row_groups))]
    assert len(sizes) > 3 and set(sizes[:-1]) == {7} and 0 < sizes[-1] <= 7
    rules = pl.read_parquet(written).get_column("rule").to_list()
    assert rules == sorted(rules, key=[r.id for r in two.rules].index)  # grouped by rule
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["findings.parquet",
                                                                      "report.html",
                                                                      "report.json"]


def test_smoke_sample_is_the_one_of_one_worker(tmp_path: Path) -> None:
    """Rows flagged while scanning and at the end (duplicates, fetched from their pieces)
    make the same sample, and the smoke test trains on it to the same verdict."""
    path, rules = sample_case("pretrain")
    one, two = both(path, rules, tmp_path, smoke=True)
    assert one.smoke is not None and two.smoke is not None
    assert one.smoke.flagged_in_sample
    assert (two.smoke.sample_rows, two.smoke.flagged_in_sample, two.smoke.verdict) == (
        one.smoke.sample_rows, one.smoke.flagged_in_sample, one.smoke.verdict)
    same_findings(one, two, tmp_path / "one", tmp_path / "two")


def test_smoke_sample_with_a_shard_of_malformed_lines(tmp_path: Path) -> None:
    path, rules = malformed_shard_case(tmp_path)
    one, two = both(path, rules, tmp_path, smoke=True)
    assert one.smoke is not None and two.smoke is not None
    assert (two.smoke.sample_rows, two.smoke.flagged_in_sample) == (
        one.smoke.sample_rows, one.smoke.flagged_in_sample)


def test_shards_with_overlap_outliers_and_near_duplicates(tmp_path: Path) -> None:
    path, rules = shards_case(tmp_path)
    one, two = both(path, rules, tmp_path, smoke=False)
    found = {r.id: r.violations for r in one.rules}
    assert found["near"] and found["dupes"] and found["overlap"] and found["score"]
    equal(one, two, tmp_path)


def test_feature_vector_outliers_per_position(tmp_path: Path) -> None:
    path, rules = vectors_case(tmp_path)
    one, two = both(path, rules, tmp_path, smoke=False)
    assert one.rule("values").codes == {"nan": 4, "null": 1, "outlier": 1, "wrong_length": 5}
    assert [e.row for e in one.rule("values").examples if e.code == "outlier"] == [301]
    assert one.rule("values").stats["fields"]["features"]["per_position"] is True
    equal(one, two, tmp_path)


def test_token_lengths_with_a_tokenizer_in_each_worker(tmp_path: Path) -> None:
    path, rules = tokens_case(tmp_path)
    one, two = both(path, rules, tmp_path, smoke=False)
    assert one.rule("tok").stats["bytes_per_token"]
    equal(one, two, tmp_path)


def test_malformed_lines_at_piece_boundaries(tmp_path: Path) -> None:
    """Broken lines, invalid UTF-8 and non-objects as the first and last line of pieces."""
    lines = [json.dumps({"text": f"line {i} " + "word " * (i % 13)}).encode()
             for i in range(1_200)]
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    starts = [p.start for p in pieces.plan(open_source(path), piece_bytes=8_000)][1:]
    assert len(starts) > 3
    data = path.read_bytes()
    first_rows = [data[:s].count(b"\n") for s in starts]
    bad = [b'{"text": broken', b'{"text": "\xff\xfe"}', b"[1, 2]", b'"just a string"']
    for k, row in enumerate(first_rows):
        lines[row] = bad[k % len(bad)]  # the first line of a piece
        lines[row - 1] = bad[(k + 1) % len(bad)]  # the last line of the one before
    path.write_bytes(b"\n".join(lines) + b"\n")
    one, two = both(path, None, tmp_path, smoke=False)
    assert one.source.malformed == 2 * len(first_rows)
    equal(one, two, tmp_path)
    found = pl.read_parquet(tmp_path / "two" / "findings.parquet").filter(
        pl.col("check") == "malformed")
    assert sorted(found["row"].to_list()) == sorted(
        [r for row in first_rows for r in (row - 1, row)])


@pytest.mark.parametrize("change", ["append", "rewrite"])
def test_a_file_that_changes_while_the_pool_reads_it_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """The pieces are cut, numbered and read at separate times: a file written meanwhile
    (lines appended by a writer still at work, an earlier line made longer) had its new
    lines left unread, or its pieces start mid-line (a record counted twice, as two
    malformed halves), under a report of the file as planned. It is exit 3, named."""
    path = tmp_path / "data.jsonl"
    lines = [json.dumps({"text": f"line {i} " + "word " * (i % 13)}) for i in range(1_200)]
    path.write_text("\n".join(lines) + "\n")
    counting = pieces._read_counting

    def written_meanwhile(piece: pieces.Piece, h: object, **kwargs: object) -> object:
        if piece.index == 0:  # the first piece is out to a worker: the writer strikes
            if change == "append":
                with path.open("a") as f:
                    f.write(json.dumps({"text": "late \u200b"}) + "\n")
            else:
                lines[10] = json.dumps({"text": "longer " * 500})
                path.write_text("\n".join(lines) + "\n")
        return counting(piece, h, **kwargs)

    monkeypatch.setattr(pieces, "_read_counting", written_meanwhile)
    with pytest.raises(InputError, match="changed while it was read"):
        run_preflight(path, None, tmp_path / "two", workers=2, smoke=False)
    assert not (tmp_path / "two" / "report.json").exists()


def test_near_copies_across_piece_boundaries(tmp_path: Path) -> None:
    """Near-copies of a record planted in other pieces, chains through them and a crowded
    bucket of 40 copies: signatures and the second read run on the workers, buckets and
    confirmation here, and the clusters, kept rows, partners and Jaccards are the ones of
    one process."""
    rng = random.Random(3)
    vocabulary = [f"w{k}" for k in range(400)]
    originals = [" ".join(rng.choice(vocabulary) for _ in range(60)) for _ in range(30)]

    def edited(words: str) -> str:  # one word replaced: Jaccard at least 51/61
        out = words.split()
        out[rng.randrange(len(out))] = "edit"
        return " ".join(out)

    texts = [" ".join(rng.choice(vocabulary) for _ in range(60)) for _ in range(2_000)]
    copies = {}
    for k, original in enumerate(originals):  # an original, then copies far after it
        texts[k * 20] = original
        for at in (k * 20 + 600, k * 20 + 1_200):
            texts[at], copies[at] = edited(original), k * 20
    for at in range(1_800, 2_000, 5):  # crowded: 40 copies of one text
        texts[at], copies[at] = originals[0], 0
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                            for i, t in enumerate(texts)))
    starts = [p.start for p in pieces.plan(open_source(path), piece_bytes=8_000)]
    assert len(starts) > 10
    rules = load_rules({"fields": {"text": "text", "id": "id"},
                        "rules": [{"id": "near", "check": "near_duplicate"}]})
    one, two = both(path, rules, tmp_path, smoke=False)
    equal(one, two, tmp_path)
    key = ["row", "cluster", "partner", "detail"]
    fa, fb = (pl.read_parquet(tmp_path / run / "findings.parquet").select(key).sort("row")
              for run in ("one", "two"))
    assert fa.equals(fb)
    rows = dict(zip(fa["row"].to_list(), fa["cluster"].to_list(), strict=True))
    # Every planted copy is found, in its original's cluster, from another piece.
    assert rows == copies
    assert one.rule("near").stats["clusters"] == len(originals)


def test_near_copies_in_the_second_and_fourth_shard(tmp_path: Path) -> None:
    """Near-copies that live in odd-numbered shards (and Parquet cut by row groups) are read
    again for confirmation, as in one process."""
    rng = random.Random(5)
    vocabulary = [f"w{k}" for k in range(300)]
    texts = [" ".join(rng.choice(vocabulary) for _ in range(40)) for _ in range(400)]
    folder = tmp_path / "shards"
    folder.mkdir()
    for k in range(4):  # each shard: 100 texts, the last 20 of them copies of earlier ones
        part = texts[k * 100:k * 100 + 80] + [t + " edit" for t in texts[k * 20:k * 20 + 20]]
        pl.DataFrame({"text": part}).write_parquet(folder / f"part-{k}.parquet",
                                                   row_group_size=10)
    rules = load_rules({"fields": {"text": "text"},
                        "rules": [{"id": "near", "check": "near_duplicate"}]})
    one, two = both(folder, rules, tmp_path, smoke=False)
    assert one.rule("near").violations == 80
    equal(one, two, tmp_path)


def test_whole_number_ids_beside_a_fraction_in_another_piece(tmp_path: Path) -> None:
    """Ids are numbers, one of them with a fraction: the batch that holds it types the
    column as floats; a record's id still reads as written ("7", never "7.0"), whichever
    records share its batch or piece."""
    lines = [{"id": i, "text": f"record {i}" + ("\u200b" if i % 50 == 0 else "")}
             for i in range(3_000)]
    lines[1] = {"id": 1.5, "text": "a fraction"}
    lines[2_001] = {"id": "s2001", "text": "a string"}
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    one, two = both(path, None, tmp_path, smoke=False)
    equal(one, two, tmp_path)
    found = pl.read_parquet(tmp_path / "one" / "findings.parquet").filter(
        pl.col("check") == "invisible_unicode")
    assert found.height == 60
    assert found["id"].to_list() == [str(r) for r in found["row"].to_list()]


def test_csv_with_quoted_newlines_across_batches(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """One reader feeds the workers a CSV: a record whose quoted text spans lines, at the
    edge of a batch, keeps its row."""
    monkeypatch.setattr(csv_source, "BATCH_ROWS", 7)
    rows = ["text,label"]
    for i in range(60):
        text = f'"row {i} says ""hi""\nand goes on\non three lines"' if i % 7 in (0, 6) \
            else f"row {i}\u200b" if i % 11 == 0 else f"plain row {i % 20}"
        rows.append(f"{text},{i % 3}")
    path = tmp_path / "data.csv"
    path.write_text("\n".join(rows) + "\n")
    one, two = both(path, None, tmp_path, smoke=False)
    assert one.source.records == 60
    equal(one, two, tmp_path)


@pytest.mark.parametrize("delimiter", [None, ";"])
def test_csv_shards_keep_each_files_delimiter_and_warning(tmp_path: Path,
                                                          delimiter: str | None) -> None:
    """Workers read the shards of a CSV folder: the report still names each file's delimiter
    and warns of a forced one that leaves a header one column, as one process does."""
    folder = tmp_path / "csv"
    folder.mkdir()
    for k, d in enumerate([";", ",", "\t"]):
        rows = [f"row {k} {i}" + ("\u200b" if i % 9 == 0 else "") + f"{d}{i % 3}"
                for i in range(90)]
        (folder / f"part-{k}.csv").write_text(f"text{d}label\n" + "\n".join(rows) + "\n")
    one, two = both(folder, None, tmp_path, smoke=False, delimiter=delimiter)
    warned = [w for w in one.source.warnings if "check --delimiter" in w]
    if delimiter is None:  # sniffed, one per file
        assert "part-1.csv: ," in (one.source.delimiter or "") and not warned
    else:  # forced: the files with another delimiter read as one column, said so
        assert one.source.delimiter == ";" and len(warned) == 2
    equal(one, two, tmp_path)


def test_gz_file_fed_by_one_reader(tmp_path: Path) -> None:
    path = tmp_path / "pretrain.jsonl.gz"
    path.write_bytes(gzip.compress((SAMPLE / "pretrain.jsonl").read_bytes()))
    one, two = both(path, sample_case("pretrain")[1], tmp_path, smoke=False)
    equal(one, two, tmp_path)


def test_limit_reads_the_first_records(tmp_path: Path) -> None:
    path, rules = sample_case("pretrain")
    one, two = both(path, rules, tmp_path, smoke=False, limit=157)
    assert one.source.records == 157 and one.source.limit == 157
    equal(one, two, tmp_path)


def test_parquet_by_row_group(tmp_path: Path) -> None:
    texts = [f"record {i % 90} about rivers" + ("\u200b" if i % 31 == 0 else "")
             for i in range(900)]
    path = tmp_path / "data.parquet"
    pl.DataFrame({"text": texts, "score": [float(i % 17) for i in range(900)]}).write_parquet(
        path, row_group_size=100)
    plan = pieces.plan(open_source(path), piece_bytes=1_000, row_groups=True)
    assert len(plan) > 3 and all(p.groups is not None for p in plan)
    one, two = both(path, None, tmp_path, smoke=False)
    equal(one, two, tmp_path)


def test_shards_of_two_shapes(tmp_path: Path) -> None:
    """Inferred fields: a chat shard among text shards is not scanned, and says so."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    for k in range(3):
        (folder / f"text-{k}.jsonl").write_text("".join(
            json.dumps({"text": f"shard {k} doc {i}" + (" " if i % 9 == 0 else "")}) + "\n"
            for i in range(300)))
    (folder / "text-1b.jsonl").write_text("".join(
        json.dumps({"messages": [{"role": "user", "content": f"q {i}"}]}) + "\n"
        for i in range(300)))
    one, two = both(folder, None, tmp_path, smoke=False)
    assert "mixed_shards" in json.dumps(one.model_dump(mode="json"))
    equal(one, two, tmp_path)


@pytest.mark.parametrize("bad_lines", [3, 3000], ids=["a-few", "a-batch-of-them"])
def test_shards_that_start_with_malformed_lines(tmp_path: Path, bad_lines: int) -> None:
    """The fields come from the first records, not from a first shard (or a shard's first
    batch) of malformed lines only: every shard's text is checked, none is "mixed"."""
    one, two = both(malformed_start_case(tmp_path, bad_lines), None, tmp_path, smoke=False)
    counts = {r.id: r.violations for r in one.rules}
    assert counts["malformed"] == 3 * bad_lines
    assert counts["hidden-chars"] == 2  # one planted in each text shard
    assert "mixed_shards" not in json.dumps(one.model_dump(mode="json"))
    equal(one, two, tmp_path)


# -- the CLI, errors, and stopping ------------------------------------------------------

def test_workers_on_the_cli(tmp_path: Path) -> None:
    path, _ = sample_case("pretrain")
    runner = CliRunner()
    for n in ("0", "-2"):
        result = runner.invoke(main, ["check", str(path), "--no-smoke", "--workers", n,
                                      "--out", str(tmp_path / n)])
        assert result.exit_code == 2, result.output
        assert "--workers" in result.output
        assert not (tmp_path / n).exists()
    result = runner.invoke(main, ["check", str(path), "--no-smoke", "--workers", "2",
                                  "--executor", "ray", "--out", str(tmp_path / "ray")])
    assert result.exit_code == 2 and "workers" in result.output
    result = runner.invoke(main, ["check", str(path), "--no-smoke", "--preset",
                                  "pretrain-text", "--workers", "2", "--out",
                                  str(tmp_path / "ok")])
    assert result.exit_code == 1, result.output  # the sample's planted faults
    report = json.loads((tmp_path / "ok" / "report.json").read_text())
    assert report["environment"]["workers"] == 2 and "pool:scan" in report["timings"]


def test_unset_workers_are_left_to_the_input_size() -> None:
    from preflight import check_workers

    assert check_workers(None, "local") is None  # decided by pool.default_workers
    assert check_workers(3, "local") == 3


def test_a_worker_that_dies_is_an_error_not_a_hang() -> None:
    with (pytest.raises(WorkerError, match="worker process died") as caught,
          pool.Pool(2) as workers):
        list(workers.ordered([(signal.raise_signal, (signal.SIGKILL,))]))
    assert caught.value.exit_code == 3
    assert workers.processes and not any(p.is_alive() for p in workers.processes)


def test_ctrl_c_stops_the_workers() -> None:
    """Workers ignore SIGINT (the driver's to handle): Ctrl-C in the driver ends them."""
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt), pool.Pool(2) as workers:
        timer.start()
        list(workers.ordered([(time.sleep, (600,))] * 2))
    timer.join()
    assert len(workers.processes) == 2 and not any(p.is_alive() for p in workers.processes)


def test_workers_run_one_thread_per_library() -> None:
    """The workers' variables are set in the workers only: the driver keeps its own."""
    before = dict(os.environ)
    keys = sorted(launch.WORKER_ENV)
    with pool.Pool(1) as workers:
        seen = list(workers.ordered([(os.getenv, (key,)) for key in keys]))
    assert seen == [launch.WORKER_ENV[key] for key in keys]
    assert dict(os.environ) == before


@pytest.mark.parametrize("form", ["json", "arrow", "datasets"])
def test_json_array_arrow_and_datasets_inputs_equal_one_worker(tmp_path: Path,
                                                              form: str) -> None:
    """The shapes one reader feeds to the workers (or Arrow cut by batches) give the report
    of one process too."""
    import pyarrow as pa
    import pyarrow.feather as feather

    records = [{"id": f"r{i}", "text": f"record {i % 70} about rivers"
                + ("\u200b" if i % 29 == 0 else ""), "score": float(i % 11)}
               for i in range(600)]
    if form == "json":
        path = tmp_path / "data.json"
        path.write_text(json.dumps(records))
    elif form == "arrow":
        path = tmp_path / "data.arrow"
        feather.write_feather(pa.Table.from_pylist(records), path, compression="uncompressed")
    else:
        from datasets import Dataset

        path = tmp_path / "ds"
        Dataset.from_list(records).save_to_disk(str(path))
    one, two = both(path, None, tmp_path, smoke=False)
    assert one.source.records == 600
    assert any(r.violations for r in one.rules)  # the planted zero-width spaces were seen
    equal(one, two, tmp_path)


def test_a_full_disk_under_the_pool_is_exit_3_and_ends_the_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import multiprocessing

    import pyarrow.parquet as pq

    from preflight.errors import PreflightError

    def write_table(self: object, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)  # the driver's sink
    path, rules = sample_case("pretrain")
    out = tmp_path / "out"
    with pytest.raises(PreflightError) as caught:
        run_preflight(path, rules, out, workers=2, smoke=False)
    assert caught.value.exit_code == 3
    assert "No space left on device" in str(caught.value)
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]
    assert not [p for p in out.rglob("*") if ".tmp" in p.name or p.name.startswith(".")]


def test_workers_past_the_usable_cores_are_capped_with_a_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--workers 64 copied from a bigger machine runs one worker per usable core, says so,
    and finds what one process finds."""
    from preflight import cores

    monkeypatch.setattr(cores, "available_cores", lambda: 2)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"record {i} " * 20}) + "\n"
                            for i in range(3000)) + "{broken\n")
    one = run_preflight(data, None, tmp_path / "one", workers=1, smoke=False)
    many = run_preflight(data, None, tmp_path / "many", workers=64, smoke=False)
    assert many.environment["workers"] == 2 and "pool:scan" in many.timings
    assert any("workers: 64 asked, 2 run" in n for n in many.rules_file.notes)
    assert not any("workers:" in n for n in one.rules_file.notes)
    same_findings(one, many, tmp_path / "one", tmp_path / "many")


def test_no_workers_asked_means_a_pool_per_core_for_large_inputs_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from preflight import cores

    monkeypatch.setattr(cores, "available_cores", lambda: 2)
    monkeypatch.setattr(launch, "AUTO_POOL_CORES", 2)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"record {i} " * 20}) + "\n"
                            for i in range(3000)) + "{broken\n")
    small = run_preflight(data, None, tmp_path / "small", smoke=False)
    assert small.environment["workers"] == 1 and "pool:scan" not in small.timings
    monkeypatch.setattr(launch, "AUTO_POOL_BYTES", data.stat().st_size)  # now large enough
    monkeypatch.setattr(launch, "AUTO_POOL_CORES", 3)  # but too few cores
    few = run_preflight(data, None, tmp_path / "few", smoke=False)
    assert few.environment["workers"] == 1 and "pool:scan" not in few.timings
    monkeypatch.setattr(launch, "AUTO_POOL_CORES", 2)
    large = run_preflight(data, None, tmp_path / "large", smoke=False)
    assert large.environment["workers"] == 2 and "pool:scan" in large.timings
    assert not any("workers:" in n for n in large.rules_file.notes)  # nothing was capped
    same_findings(small, large, tmp_path / "small", tmp_path / "large")
    # a MinHash rule: one process keeps its shingle sets, a pool would read again
    near = {"rules": [{"id": "near", "check": "near_duplicate"}]}
    alone = run_preflight(data, near, tmp_path / "near", smoke=False)
    assert alone.environment["workers"] == 1 and "pool:scan" not in alone.timings
