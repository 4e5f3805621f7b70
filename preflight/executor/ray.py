"""The Ray executor (``--executor ray``, extra ``[ray]``): the same checks on Ray Data.

Stages, each a Ray Data operation over the source's pieces (``preflight.executor.pieces``):

1. count: line ends and a hash per piece (row numbers of split files, the fingerprint);
   the files must still be those the plan cut (``pieces.unchanged``: checked again after
   the scan and after the revisit, as the pool does);
2. scan: ``map_batches`` with one ``Worker`` per CPU: each reads its pieces with preflight's
   own readers (so row numbers and malformed-line findings are those of the local run) and
   scans every batch; a batch gives a row with its findings (a Parquet shard: rows located,
   ids attached), a row with the rest (check state, sample candidates, ids for corpus-wide
   findings) and one per duplicate check (its keyed rows: hashes or LSH band keys);
3. group: per duplicate check, the keys are grouped (``groupby(["g", "key"]).count()``);
   only records whose key is shared by another record reach the driver;
4. revisit (near-duplicate confirmation): the pieces holding candidate documents are read
   again on the workers, which keep the shingle sets of those documents only;
5. fetch (after ``finish``, for the smoke test): the flagged records the sample wants that
   were found only at the end (duplicates, outliers), from the pieces that hold them.

The driver merges the results in read order (Ray keeps the order of the pieces) into its
own check instances, findings sink and sampler, then ``finish`` runs as in the local run:
both executors give the same findings. Ray is imported only here.
"""

from __future__ import annotations

import io
import logging
import pickle
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from preflight.checks.base import Check
from preflight.config import Rule, RuleSet
from preflight.errors import ConfigError, PreflightError
from preflight.executor import driver
from preflight.executor import pieces as piecework
from preflight.executor.launch import WORKER_ENV
from preflight.executor.worker import Merge, Worker
from preflight.findings import FindingsSink
from preflight.sampling import Sampler, SampleRow, records_with
from preflight.source import Source

if TYPE_CHECKING:
    from preflight.batch import Batch
    from preflight.executor.local import Read
    from preflight.pipeline import Progress
    from preflight.tokenizer.counter import TokenCounter

_RESULT = -1  # the ``rule`` of a row holding a batch's Scanned (without its findings)
_FINDINGS = -2  # the ``rule`` of a row holding a batch's findings: a Parquet shard
_MIX = np.uint64(0x9E3779B97F4A7C15)


def scan_on_ray(src: Source, rules: RuleSet, rule_list: list[Rule], *,
                tokenizer: TokenCounter | None, eval_path: str | None, sink: FindingsSink,
                sampler: Sampler | None, limit: int | None, address: str | None,
                timings: dict[str, float], progress: Progress | None) -> Read:
    """Read and scan ``src`` on Ray; leave the driver's checks ready for ``finish``. A
    preflight error raised on a worker (a file it cannot read, a tokenizer it cannot load)
    is raised here as itself, not as Ray's wrapper."""
    try:
        return _scan_on_ray(src, rules, rule_list, tokenizer=tokenizer, eval_path=eval_path,
                            sink=sink, sampler=sampler, limit=limit, address=address,
                            timings=timings, progress=progress)
    except PreflightError:
        raise
    except Exception as e:
        cause = _preflight_cause(e)
        if cause is None:
            raise
        raise cause from e


def _preflight_cause(error: BaseException) -> PreflightError | None:
    """The preflight error a Ray error wraps, if any (Ray keeps it as a cause)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, PreflightError):
            return e
        todo += [e.__cause__, e.__context__, getattr(e, "cause", None)]
    return None


def _scan_on_ray(src: Source, rules: RuleSet, rule_list: list[Rule], *,
                 tokenizer: TokenCounter | None, eval_path: str | None, sink: FindingsSink,
                 sampler: Sampler | None, limit: int | None, address: str | None,
                 timings: dict[str, float], progress: Progress | None) -> Read:
    from preflight.executor.local import Read

    if limit is not None:
        raise ConfigError("--limit reads the first N records in order, which only the local "
                          "executor does: drop --limit or --executor ray")
    plan = piecework.plan(src)
    ray = _connect(address, progress=progress is not None)
    from ray.data import ActorPoolStrategy

    t0 = time.perf_counter()
    counts = ray.get([ray.remote(num_cpus=1)(piecework.count).remote(p) for p in plan])
    piecework.unchanged(plan, counts)  # the counts are of the files as planned
    plan = piecework.numbered(plan, counts)
    src._fingerprint = piecework.fingerprint(plan, counts)
    timings["ray:count"] = round(time.perf_counter() - t0, 4)

    # Fields are inferred from the first batch, and calibrations made on it, as the local
    # executor does.
    started = driver.start(src, rules, rule_list, tokenizer=tokenizer, eval_path=eval_path,
                           sampler=sampler)
    fields, running, setup = started.fields, started.running, started.setup
    items = _dataset(plan)
    workers = max(int(ray.cluster_resources().get("CPU", 1)), 1)
    pool = min(workers, max(len(plan), 1))  # no idle worker for a small input

    t0 = time.perf_counter()
    scanned = items.map_batches(_Scan, fn_constructor_kwargs=setup, batch_size=1,
                                compute=ActorPoolStrategy(size=pool), num_cpus=1).materialize()
    piecework.unchanged(plan)  # every piece read as counted?
    timings["ray:scan"] = round(time.perf_counter() - t0, 4)

    t0 = time.perf_counter()
    merge = Merge(running, sink, sampler, started.shapes)
    shard = None
    for rule, payload in _payloads(scanned, [_FINDINGS, _RESULT]):
        if rule == _FINDINGS:  # comes just before its batch's result
            shard = payload
            continue
        result = pickle.loads(payload)
        result.findings = _unshard(shard, len(running))
        merge.add(result, with_keyed=False)
        if progress is not None:
            progress(merge.progress, src.total, src.unit)
    timings["ray:merge"] = round(time.perf_counter() - t0, 4)

    t0 = time.perf_counter()
    keyed = {index: r.check for index, r in enumerate(running)
             if r.error is None and r.check.key_groups()}
    if keyed:
        _merge_shared(scanned, keyed, partitions=2 * workers)
    timings["ray:group"] = round(time.perf_counter() - t0, 4)

    t0 = time.perf_counter()
    plans, needed = driver.revisit_plans(running)
    if plans:
        again = plan if needed is None else piecework.holding(plan, needed)
        revisited = _dataset(again).map_batches(
            _Revisit, fn_constructor_kwargs={**setup, "revisit": plans}, batch_size=1,
            compute=ActorPoolStrategy(size=min(pool, max(len(again), 1))), num_cpus=1)
        for row in revisited.iter_rows():
            running[int(row["rule"])].check.merge_state(pickle.loads(row["payload"]))
    piecework.unchanged(plan)  # read again as the scan read them?
    timings["ray:revisit"] = round(time.perf_counter() - t0, 4)

    def fetch(keys: set[int]) -> list[SampleRow]:
        """The records with these keys, read on Ray from the pieces that hold them (the
        smoke sample's rows flagged only by ``finish``)."""
        t0 = time.perf_counter()
        holding = piecework.holding(plan, keys)
        fetched = _dataset(holding).map_batches(
            _fetch, fn_kwargs={"keys": keys, "id_field": fields.id}, batch_size=1)
        rows = [pickle.loads(row["payload"]) for row in fetched.iter_rows()] if holding else []
        piecework.unchanged(holding)  # the sample's rows from the file the scan read
        timings["ray:fetch"] = round(time.perf_counter() - t0, 4)
        return rows

    cluster = {"version": ray.__version__, "workers": workers, "pieces": len(plan),
               "nodes": len([n for n in ray.nodes() if n.get("Alive")])}
    return Read(running=running, fields=fields, ctx=started.ctx, inferred=started.inferred,
                seen=merge.seen, records=merge.records, malformed=merge.malformed,
                cluster=cluster, fetch=fetch if sampler is not None else None,
                mixed=started.shapes.finding() if started.shapes is not None else None)


def _connect(address: str | None, *, progress: bool) -> Any:
    """Join the cluster at ``address`` (or ``RAY_ADDRESS``), or start Ray on this machine;
    an already initialised Ray is used as it is."""
    from preflight.integrations import require

    ray = require("ray", "ray")
    require("ray.data", "ray")
    if not ray.is_initialized():
        try:
            ray.init(address=address, runtime_env={"env_vars": WORKER_ENV},
                     include_dashboard=False, logging_level=logging.WARNING,
                     log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise ConfigError(f"cannot connect to the Ray cluster at {address}: {e}") from e
    from ray.data import DataContext

    context = DataContext.get_current()
    context.execution_options.preserve_order = True  # results merge in read order
    context.enable_progress_bars = progress
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return ray


def _dataset(pieces: list[piecework.Piece]) -> Any:
    """A Ray dataset of pieces, one block each (a block is one UDF call)."""
    from ray.data import from_items

    return from_items([{"piece": pickle.dumps(p)} for p in pieces],
                      override_num_blocks=max(len(pieces), 1))


def _batches(item: dict[str, np.ndarray]
             ) -> Iterator[tuple[piecework.Piece, int, Batch, bool]]:
    """The batches of the pieces in a UDF's input, with their piece, position and whether
    each is the first with records of its piece."""
    for blob in item["piece"]:
        piece = pickle.loads(blob)
        for seq, (batch, first) in enumerate(piecework.firsts(piecework.read(piece))):
            yield piece, seq, batch, first


def _rows(out: list[tuple[int, int, int, bytes]]) -> dict[str, np.ndarray]:
    return {
        "piece": np.array([o[0] for o in out], dtype=np.int64),
        "seq": np.array([o[1] for o in out], dtype=np.int64),
        "rule": np.array([o[2] for o in out], dtype=np.int64),
        "payload": np.array([o[3] for o in out], dtype=object),
    }


class _Scan:
    """Ray Data UDF: read pieces and scan their batches (one instance per worker)."""

    def __init__(self, **setup: Any) -> None:
        self.worker = Worker(**setup)

    def __call__(self, item: dict[str, np.ndarray]) -> Iterator[dict[str, np.ndarray]]:
        for piece, seq, batch, first in _batches(item):
            scanned = self.worker.scan(batch, first=first)
            out = [(piece.index, seq, index, _ipc(keyed))
                   for index, keyed in enumerate(scanned.keyed) if keyed is not None]
            scanned.keyed = [None] * len(scanned.keyed)
            out.append((piece.index, seq, _FINDINGS, _shard(scanned.findings)))
            scanned.findings = []
            out.append((piece.index, seq, _RESULT, pickle.dumps(scanned)))
            yield _rows(out)


class _Revisit:
    """Ray Data UDF: read pieces again for the checks that asked (``Check.revisit``)."""

    def __init__(self, *, revisit: dict[int, dict[str, Any]], **setup: Any) -> None:
        self.worker = Worker(**setup)
        self.plans = revisit

    def __call__(self, item: dict[str, np.ndarray]) -> Iterator[dict[str, np.ndarray]]:
        for piece, seq, batch, _ in _batches(item):
            states = self.worker.revisit(batch, self.plans)
            yield _rows([(piece.index, seq, index, pickle.dumps(state))
                         for index, state in states.items()])


def _fetch(item: dict[str, np.ndarray], *, keys: set[int], id_field: str | None
           ) -> dict[str, np.ndarray]:
    """Ray Data UDF: the records with the given record keys, from their pieces."""
    return _rows([(piece.index, seq, 0, pickle.dumps(s)) for piece, seq, batch, _ in
                  _batches(item) for s in records_with(batch, keys, id_field)])


def _ipc(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_ipc(buf)
    return buf.getvalue()


def _payloads(ds: Any, rules: list[int]) -> Iterator[tuple[int, bytes]]:
    """The rows of some kinds, in read order: (kind, payload)."""
    for batch in ds.map_batches(_only, fn_kwargs={"rule": rules},
                                batch_format="pyarrow").iter_batches(batch_format="pyarrow"):
        yield from zip(batch.column("rule").to_pylist(), batch.column("payload").to_pylist(),
                       strict=True)


def _shard(found: list[pl.DataFrame | None]) -> bytes:
    """One batch's located findings, every rule's, as one Parquet shard (``rule_index``:
    the rule's position)."""
    parts = [f.with_columns(rule_index=pl.lit(i, pl.Int32)) for i, f in enumerate(found)
             if f is not None]
    buf = io.BytesIO()
    if parts:
        pl.concat(parts, how="diagonal_relaxed").write_parquet(buf)
    return buf.getvalue()


def _unshard(shard: bytes | None, rules: int) -> list[pl.DataFrame | None]:
    """Per rule, the findings of a shard written by ``_shard``."""
    out: list[pl.DataFrame | None] = [None] * rules
    if shard:
        frame = pl.read_parquet(io.BytesIO(shard))
        for (index,), part in frame.group_by("rule_index", maintain_order=True):
            out[int(index)] = part.drop("rule_index")  # type: ignore[call-overload]
    return out


def _only(table: pa.Table, *, rule: int | list[int]) -> pa.Table:
    """The rows of one kind (a rule's position, or ``_RESULT``), or of several."""
    if isinstance(rule, list):
        return table.filter(pc.is_in(table["rule"], pa.array(rule, pa.int64())))
    return table.filter(pc.equal(table["rule"], rule))


def _merge_shared(scanned: Any, checks: dict[int, Check], *, partitions: int) -> None:
    """Group the duplicate checks' keys on Ray (one shuffle for all of them); merge into
    each driver check only the records whose key another record shares (the others
    cannot be findings)."""
    groups: dict[int, tuple[int, tuple[tuple[str, ...], ...]]] = {}
    for index, check in checks.items():
        offset = sum(len(g) for _, g in groups.values())
        groups[index] = (offset, check.key_groups())
    keyed = scanned.map_batches(_only, fn_kwargs={"rule": list(groups)}, batch_format="pyarrow")
    counted = (keyed.map_batches(_group_keys, fn_kwargs={"groups": groups},
                                 batch_format="pyarrow")
               .groupby(["g", "key"], num_partitions=partitions).count())
    shared: dict[int, list[np.ndarray]] = {}
    for batch in counted.iter_batches(batch_format="pyarrow"):
        batch = batch.filter(pc.greater(batch["count()"], 1))
        g = batch.column("g").to_numpy()
        key = batch.column("key").to_numpy()
        for value in np.unique(g):
            shared.setdefault(int(value), []).append(key[g == value])
    by_group = {g: np.unique(np.concatenate(parts)) for g, parts in shared.items()}
    for index, check in checks.items():
        offset, key_groups = groups[index]
        mine = {g - offset: keys for g, keys in by_group.items()
                if offset <= g < offset + len(key_groups)}
        if not mine:
            continue
        kept = keyed.map_batches(_keep_shared, fn_kwargs={"rule": index, "groups": key_groups,
                                                          "shared": mine},
                                 batch_format="pyarrow")
        frames = [pl.from_arrow(b) for b in kept.iter_batches(batch_format="pyarrow")
                  if b.num_rows]
        if frames:
            check.merge_keyed(pl.concat(frames).sort("file_index", "row"))  # type: ignore[arg-type]


def _group_key(frame: pl.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """One uint64 per row for a key group (several columns mixed: a collision only keeps
    a record the driver's exact grouping then drops)."""
    key = frame.get_column(columns[0]).to_numpy().astype(np.uint64)
    with np.errstate(over="ignore"):
        for name in columns[1:]:
            key = key ^ (frame.get_column(name).to_numpy().astype(np.uint64) * _MIX)
    return key


def _group_keys(table: pa.Table, *,
                groups: dict[int, tuple[int, tuple[tuple[str, ...], ...]]]) -> pa.Table:
    """Payload rows of keyed state → one row per record and key group: ``g`` (numbered
    across the checks), ``key``."""
    gs, keys = [np.zeros(0, np.int32)], [np.zeros(0, np.uint64)]
    for rule, payload in zip(table.column("rule").to_pylist(),
                             table.column("payload").to_pylist(), strict=True):
        frame = pl.read_ipc(io.BytesIO(payload))
        offset, key_groups = groups[rule]
        for g, columns in enumerate(key_groups):
            keys.append(_group_key(frame, columns))
            gs.append(np.full(frame.height, offset + g, np.int32))
    return pa.table({"g": np.concatenate(gs), "key": np.concatenate(keys)})


def _keep_shared(table: pa.Table, *, rule: int, groups: tuple[tuple[str, ...], ...],
                 shared: dict[int, np.ndarray]) -> pa.Table:
    """One check's payload rows of keyed state → the keyed rows whose key is shared in some
    group."""
    frames = []
    for payload in _only(table, rule=rule).column("payload").to_pylist():
        frame = pl.read_ipc(io.BytesIO(payload))
        hit = np.zeros(frame.height, dtype=bool)
        for g, columns in enumerate(groups):
            if g in shared:
                hit |= np.isin(_group_key(frame, columns), shared[g])
        frames.append(frame.filter(pl.Series(hit)))
    if not frames:
        return pa.table({"file_index": pa.array([], pa.int64()), "row": pa.array([], pa.int64())})
    return pl.concat(frames).to_arrow()
