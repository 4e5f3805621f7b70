"""The distributed executor's merge, without Ray: pieces read apart (each batch scanned by a
worker of its own), their results merged in read order, must end as the local run does."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import xxhash

from preflight.checks.state import empty_like, merge
from preflight.config import RuleSet
from preflight.errors import InputError
from preflight.executor import pieces
from preflight.executor.local import scan_local, start_checks
from preflight.executor.worker import Merge, Worker
from preflight.findings import FindingsSink
from preflight.pipeline import run
from preflight.resolve import gate_rules, rules_eval_path, rules_tokenizer
from preflight.sampling import Sampler
from preflight.source import open_source
from tests.executor.cases import (
    CORPORA,
    malformed_shard_case,
    sample_case,
    shards_case,
    tokens_case,
    vectors_case,
    vocab_case,
)


def merged_run(path: Path, rules: RuleSet, *, piece_bytes: int) -> dict[str, tuple]:
    """What the Ray driver does, in process: every batch scanned by a fresh worker."""
    src = open_source(path)
    plan = pieces.plan(src, piece_bytes=piece_bytes)
    plan = pieces.numbered(plan, [pieces.count(p) for p in plan])
    first = next(iter(src.batches()))
    fields, _, _, running = start_checks(rules, gate_rules(rules), first,
                                         tokenizer=rules_tokenizer(rules),
                                         eval_path=rules_eval_path(rules))
    scan_plans = {i: p for i, r in enumerate(running)
                  if r.error is None and (p := r.check.scan_plan(first))}
    sink = FindingsSink(None, show_text=False)
    merge_ = Merge(running, sink, None)
    for piece in plan:
        for batch in pieces.read(piece):
            merge_.add(Worker(rules, fields, keep_ids=True, plans=scan_plans).scan(batch))
    plans = {i: r.check.revisit_plan() for i, r in enumerate(running)
             if r.error is None and r.check.wants_revisit()}
    for piece in plan:
        for batch in pieces.read(piece):
            for i, part in Worker(rules, fields, keep_ids=True).revisit(batch, plans).items():
                running[i].check.merge_state(part)
    out = {}
    for r in running:
        if r.error is None:
            sink.add(r.rule, frame=r.check.finish())
        tally = sink.tally(r.rule.id)
        out[r.rule.id] = (tally.violations, tally.codes,
                          [(e.row, e.code, e.detail) for e in tally.examples],
                          r.check.summary() if r.error is None else None)
    return out


def local_run(path: Path, rules: RuleSet) -> dict[str, tuple]:
    report = run(path, rules)
    return {r.id: (r.violations, r.codes, [(e.row, e.code, e.detail) for e in r.examples],
                   r.stats if r.status != "error" else None) for r in report.rules}


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_sample_corpora_merge_to_the_local_findings(corpus: str) -> None:
    path, rules = sample_case(corpus)
    local = local_run(path, rules)
    merged = merged_run(path, rules, piece_bytes=9_000)
    assert merged == local
    assert sum(v[0] for v in local.values()) > 0


def test_shards_with_outliers_overlap_and_near_duplicates(tmp_path: Path) -> None:
    path, rules = shards_case(tmp_path)
    local = local_run(path, rules)
    assert local["score"][1].get("outlier", 0) + local["score"][1].get("robust_outlier", 0) > 0 \
        or local["score"][0] > 0
    assert local["near"][0] > 0 and local["overlap"][0] > 0 and local["dupes"][0] > 0
    assert merged_run(path, rules, piece_bytes=5_000) == local


def test_feature_vector_positions_merge_to_the_local_run(tmp_path: Path) -> None:
    path, rules = vectors_case(tmp_path)
    local = local_run(path, rules)
    assert local["values"][1] == {"nan": 4, "null": 1, "outlier": 1, "wrong_length": 5}
    assert merged_run(path, rules, piece_bytes=5_000) == local


def test_token_lengths_use_the_first_batchs_calibration(tmp_path: Path) -> None:
    """Workers do not calibrate on their own first batch: the driver's calibration, made on
    the corpus's first batch as in the local run, goes to every worker."""
    path, rules = tokens_case(tmp_path)
    local = local_run(path, rules)
    assert local["tok"][3]["bytes_per_token"]
    assert merged_run(path, rules, piece_bytes=3_000) == local


def test_vocab_findings_and_counts_merge_to_the_local_run(tmp_path: Path) -> None:
    path, rules = vocab_case(tmp_path)
    local = local_run(path, rules)
    assert local["vocab"][1] == {"token_id_out_of_range": 9, "vocab_mismatch": 1}
    assert merged_run(path, rules, piece_bytes=3_000) == local


def test_smoke_sample_when_batches_hold_only_malformed_lines(tmp_path: Path) -> None:
    """A batch without records still flags rows (its malformed lines), which can retire
    flagged rows held so far: the merged sample must retire them too."""
    path, rules = malformed_shard_case(tmp_path)
    k, seed = rules.smoke.samples, rules.smoke.seed

    def sample(merged: bool) -> list[tuple[int, int, bool]]:
        src = open_source(path)
        sampler = Sampler(k, seed)
        sink = FindingsSink(None, show_text=False, flagged=sampler.flagged)
        if merged:
            running = start_checks(rules, gate_rules(rules), None, tokenizer=None,
                                   eval_path=None)[3]
            merge_ = Merge(running, sink, sampler)
            worker = Worker(rules, rules.fields, keep_ids=False, sample=(k, seed))
            plan = pieces.numbered(*_counted(src, 10_000))
            for batch in (b for p in plan for b in pieces.read(p)):
                merge_.add(worker.scan(batch))
        else:
            running = scan_local(src, rules, gate_rules(rules), tokenizer=None,
                                 eval_path=None, sink=sink, sampler=sampler, limit=None,
                                 timings={"read": 0.0}, progress=None).running
        for r in running:
            sink.add(r.rule, frame=r.check.finish())
        return [(s.file_index, s.row, s.flagged) for s in sampler.finish(src.batches())]

    local = sample(merged=False)
    assert any(flagged for _, _, flagged in local)
    assert sample(merged=True) == local


def test_pieces_of_a_file_read_as_the_whole_file(tmp_path: Path) -> None:
    """Rows, malformed lines, a BOM and a last line without a newline: reading in byte
    ranges gives what one read gives."""
    lines = [b'\xef\xbb\xbf{"text": "first"}'] + [
        b'{"text": "line %d"}' % i if i % 17 else b'{"text": broken' for i in range(1, 400)
    ] + [b'{"text": "\xff bad utf8"}', b"", b'{"text": "no newline at the end"}']
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(lines))
    src = open_source(path)
    whole = [(b.rows.tolist(), b.frame.to_dicts(), b.malformed) for b in src.batches()]
    plan = pieces.plan(src, piece_bytes=1_000)
    assert len(plan) > 5
    counts = [pieces.count(p) for p in plan]
    assert sum(c.size for c in counts) == path.stat().st_size
    split = [(b.rows.tolist(), b.frame.to_dicts(), b.malformed)
             for p in pieces.numbered(plan, counts) for b in pieces.read(p)]
    assert [r for rows, _, _ in split for r in rows] == [r for rows, _, _ in whole for r in rows]
    assert [d for _, ds, _ in split for d in ds] == [d for _, ds, _ in whole for d in ds]
    assert [m for _, _, ms in split for m in ms] == [m for _, _, ms in whole for m in ms]


def test_a_file_in_one_piece_has_the_local_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "x"}\n' * 50)
    src = open_source(path)
    list(src.batches())
    plan = pieces.plan(src)
    assert pieces.fingerprint(plan, [pieces.count(p) for p in plan]) == src.fingerprint()
    split = pieces.plan(src, piece_bytes=100)
    assert pieces.fingerprint(split, [pieces.count(p) for p in split])["bytes"] == \
        src.fingerprint()["bytes"]


def test_the_survey_numbers_each_piece_before_counting_it(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A pool's workers get a file's first pieces while the rest are still counted: a piece
    comes out of the survey once the line ends before it are counted, not after the whole
    file; the numbers and the fingerprint end as the local reader's."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(b'{"text": "record %d"}\n' % i for i in range(3_000)))
    (tmp_path / "b.jsonl").write_bytes(b'{"text": "x"}\n' * 10)
    src = open_source(tmp_path)
    list(src.batches())
    split = pieces.plan(src, piece_bytes=5_000)
    assert len([p for p in split if p.file_index == 0]) > 3
    counted: list[int] = []
    real = pieces._read_counting

    def counting(piece: pieces.Piece, h: object, **kwargs: object) -> pieces.Counted:
        counted.append(piece.index)
        return real(piece, h, **kwargs)

    monkeypatch.setattr(pieces, "_read_counting", counting)
    survey = pieces.Survey(split)
    walk = iter(survey)
    assert next(walk).row0 == 0 and counted == []  # given out before anything was read
    first_lines = path.read_bytes()[:split[0].end].count(b"\n")
    assert next(walk).row0 == first_lines and counted == [0]
    rest = list(walk)
    assert counted == [p.index for p in split]  # each piece counted once, in order
    assert survey.pieces[2:] == rest
    assert survey.pieces == pieces.numbered(split, [real(p, xxhash.xxh3_128()) for p in split])
    assert survey.fingerprint == src.fingerprint()


@pytest.mark.parametrize("change", ["append", "rewrite", "touch", "replace", "remove",
                                    "while cut"])
def test_a_file_written_since_the_plan_is_refused(tmp_path: Path, change: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``unchanged``, which the pool (``Survey``) and Ray both call: a cut file and a whole
    one as planned pass; lines appended, a line rewritten, the time written moved, another
    file at the path (same bytes, same time), the file gone, or a write while the plan cut
    it: InputError naming the file with its planned and present sizes."""
    path = tmp_path / "a.jsonl"
    lines = [f'{{"text": "record {i}"}}' for i in range(300)]
    path.write_text("\n".join(lines) + "\n")
    (tmp_path / "b.jsonl").write_text('{"text": "x"}\n' * 10)
    size = path.stat().st_size
    if change == "while cut":
        cuts = pieces._cuts

        def written_while_cut(*args: object) -> object:
            with path.open("a") as f:
                f.write('{"text": "late"}\n')
            return cuts(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(pieces, "_cuts", written_while_cut)
    split = pieces.plan(open_source(tmp_path), piece_bytes=1_000)
    assert len({p.path for p in split}) == 2 and len(split) > 3
    if change != "while cut":
        pieces.unchanged(split, [pieces.count(p) for p in split])  # as planned
        pieces.Survey(split).unchanged()
    st = path.stat()
    if change == "append":
        with path.open("a") as f:
            f.write('{"text": "late"}\n')
    elif change == "rewrite":
        lines[10] = '{"text": "longer and longer"}'
        path.write_text("\n".join(lines) + "\n")
    elif change == "touch":
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    elif change == "replace":
        copy = tmp_path / "copy"
        copy.write_bytes(path.read_bytes())
        os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(copy, path)
        assert path.stat().st_size == size and path.stat().st_mtime_ns == st.st_mtime_ns
    elif change == "remove":
        path.unlink()
    now = path.stat().st_size if path.exists() else -1
    assert (now == size) == (change in ("touch", "replace"))
    expected = f"{path} changed while it was read ({size} bytes when the run began, {now} now)"
    with pytest.raises(InputError, match=re.escape(expected)):
        pieces.unchanged(split)
    with pytest.raises(InputError, match=re.escape(expected)):
        pieces.Survey(split).unchanged()


def test_counts_of_a_file_that_is_not_the_planned_one_are_refused(tmp_path: Path) -> None:
    """What the count tasks found must agree with the plan, whatever the file looks like by
    the time the driver looks again: a file appended to before it was counted, then put
    back as it was (bytes, inode and time written as planned), is refused for its counts."""
    path = tmp_path / "a.jsonl"
    original = b"".join(b'{"text": "record %d"}\n' % i for i in range(300))
    path.write_bytes(original)
    split = pieces.plan(open_source(path), piece_bytes=1_000)
    st = path.stat()
    with path.open("ab") as f:
        f.write(b'{"text": "late"}\n')
    counts = [pieces.count(p) for p in split]  # the planned ranges, in a longer file
    assert sum(c.size for c in counts) == len(original)
    with path.open("r+b") as f:
        f.truncate(len(original))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    pieces.unchanged(split)  # the file is as planned again
    with pytest.raises(InputError, match=re.escape(
            f"({len(original)} bytes when the run began, {len(original) + 17} now)")):
        pieces.unchanged(split, counts)


def test_sample_candidates_taken_in_order_match_offer() -> None:
    """The smoke sample drawn from workers' candidates is the one drawn while reading."""
    from preflight.batch import record_key

    path, _ = sample_case("pretrain")
    src = open_source(path)
    batches = [b for p in pieces.numbered(*_counted(src, 9_000)) for b in pieces.read(p)]
    assert len(batches) > 3
    local, remote = Sampler(10, 3, id_field="id"), Sampler(10, 3, id_field="id")
    worker = Sampler(10, 3, id_field="id")
    for batch in batches:
        flagged = record_key(np.full(len(batch), batch.file_index), batch.rows)[::13]
        local.flagged.add(flagged)
        remote.flagged.add(flagged)
        local.offer(batch)
        remote.take(worker.candidates(batch, flagged))
    assert remote.missing() == set()
    assert [(s.row, s.flagged) for s in remote.finish(iter(()))] == \
        [(s.row, s.flagged) for s in local.finish(iter(()))]


def _counted(src, piece_bytes):
    plan = pieces.plan(src, piece_bytes=piece_bytes)
    return plan, [pieces.count(p) for p in plan]


def test_state_merges_by_kind() -> None:
    assert merge([1], [2]) == [1, 2]
    assert merge(Counter(a=1), Counter(a=2, b=1)) == Counter(a=3, b=1)
    assert merge({"x": [1]}, {"x": [2], "y": [3]}) == {"x": [1, 2], "y": [3]}
    assert merge(3, 4) == 7
    assert merge({1}, {2}) == {1, 2}
    assert merge({0: "a.jsonl"}, {0: "a.jsonl", 1: "b.jsonl"}) == {0: "a.jsonl", 1: "b.jsonl"}
    assert (merge(np.array([1, 2]), np.array([3, 4])) == np.array([4, 6])).all()
    assert empty_like({"x": [1], "c": Counter(a=1), "n": 5}) == {"x": [], "c": Counter(), "n": 0}


def test_numeric_stats_merge_keeps_min_and_max() -> None:
    from preflight.checks.numeric_stats import Stats

    a = Stats(count=2, nan=1, min=-3.0, max=5.0)
    b = Stats(count=1, min=-1.0, max=9.0)
    m = merge(a, b)
    assert (m.count, m.nan, m.min, m.max) == (3, 1, -3.0, 9.0)
    assert merge(Stats(), b).min == -1.0


def test_holding_finds_the_pieces_of_record_keys(tmp_path: Path) -> None:
    from preflight.batch import record_key

    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"text": "row {i}"}}\n' for i in range(300)))
    src = open_source(path)
    plan = pieces.numbered(*_counted(src, 1_000))
    assert len(plan) > 3
    rows = [0, 150, 299]
    found = pieces.holding(plan, set(record_key(np.zeros(3), np.array(rows)).tolist()))
    read_rows = {int(r) for p in found for b in pieces.read(p) for r in b.rows}
    assert set(rows) <= read_rows
    assert len(found) == 3  # one piece each, none else


def test_holding_finds_the_last_piece_of_every_file(tmp_path: Path) -> None:
    """A file's last piece runs to the file's end: the keys of the second file (index 1,
    whose bits overlap the open end's) are found too, in a file cut or whole."""
    from preflight.batch import record_key

    folder = tmp_path / "shards"
    folder.mkdir()
    for name, n in (("a", 300), ("b", 300), ("c", 10), ("d", 10)):
        (folder / f"{name}.jsonl").write_text("".join(f'{{"text": "{name} {i}"}}\n'
                                                      for i in range(n)))
    plan = pieces.numbered(*_counted(open_source(folder), 1_000))
    assert len({p.file_index for p in plan}) == 4 and len(plan) > 6
    last = {p.file_index: p for p in plan}  # each file's last piece (plan: read order)
    for file_index, row in ((0, 299), (1, 299), (2, 9), (3, 9)):
        key = record_key(np.array([file_index]), np.array([row]))
        assert pieces.holding(plan, set(key.tolist())) == [last[file_index]], file_index


def test_the_smoke_samples_late_rows_come_from_the_file_the_scan_read(tmp_path: Path) -> None:
    """The pool fetches the smoke sample's rows flagged only at the end from their pieces,
    after its last check: a file rewritten by then is refused there too."""
    from preflight.executor.pool import _fetcher

    path = tmp_path / "a.jsonl"
    path.write_text("".join(f'{{"text": "record {i}"}}\n' for i in range(300)))
    split = pieces.numbered(*_counted(open_source(tmp_path), 1_000))
    fetch = _fetcher(split, None)
    key = (0 << 40) | 250
    assert [r.row for r in fetch({key})] == [250]  # as planned: the record itself
    with path.open("a") as f:
        f.write('{"text": "late"}\n')
    with pytest.raises(InputError, match="changed while it was read"):
        fetch({key})
