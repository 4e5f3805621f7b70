"""The local process pool (``--workers N``, the default): the executor's pieces, scanned by
worker processes on this machine.

The same stages as on Ray (``preflight.executor.ray``), with a process pool for scheduler:

1. plan: the source's pieces (``preflight.executor.pieces``): plain JSON Lines cut at line
   ends, Parquet between row groups, a folder of shards by file; ``Survey`` numbers them
   and hashes each file whole (the fingerprint is the local one) as the workers scan them;
2. scan: each worker reads its pieces with preflight's own readers and scans every batch
   with its own checks (``worker.Worker``); an input that cannot be cut (one compressed
   file, CSV, a JSON array, standard input, a ``datasets`` dataset, or any input with
   ``--limit``) is read by one reader here, which feeds its batches to the workers;
3. merge: results come back in read order into the driver's checks, findings sink and
   sampler (``worker.Merge``, keyed rows included: the driver's checks group the
   duplicate keys as the local run does);
4. revisit (near-duplicate confirmation) reads the pieces that hold the records it needs
   again, on the workers; the smoke sample's rows flagged at the end are fetched here from
   the pieces that hold them.

Workers are forked by a fork server that imported the checks once (``PRELOAD``), started with
the pool so that its imports overlap the plan; where there is none (Windows), spawned. At
most two tasks per worker are in flight, so memory stays bounded: a worker holds one
piece's batches at a time. A worker that dies is a ``WorkerError`` (exit 3), Ctrl-C stops
the pool.
"""

from __future__ import annotations

import multiprocessing.connection
import multiprocessing.context
import os
import pickle
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from preflight.batch import Batch
from preflight.errors import WorkerError
from preflight.executor import driver, launch
from preflight.executor import pieces as piecework
from preflight.executor.worker import Merge, Scanned, Worker
from preflight.sampling import SampleRow, records_with
from preflight.source import READERS, Source

if TYPE_CHECKING:
    from preflight.config import Rule, RuleSet
    from preflight.executor.local import Read
    from preflight.findings import FindingsSink
    from preflight.pipeline import Progress
    from preflight.sampling import Sampler
    from preflight.tokenizer.counter import TokenCounter

# Pieces: about four per worker, so a slow one does not hold the others up.
PIECES_PER_WORKER = 4
MIN_PIECE_BYTES = 4 << 20
MAX_PIECE_BYTES = 64 << 20

_POLL_S = 0.25  # how often the driver wakes up while it waits for a worker
_STOP_S = 15.0  # the longest close(kill=True) keeps ending workers
_STARTING_S = 2.0  # how long it waits for a worker still starting to show up
_WORKER: Worker | None = None  # in a worker process: its checks
_SETUP = b""  # ... and the setup they were built from
# Checks whose kernels are numba's: with one of them the server imports numba too.
_MINHASH_CHECKS = frozenset({"near_duplicate", "overlap"})


def uses_pool(src: Source, workers: int) -> bool:
    """True when ``src`` is worth a pool of ``workers`` processes (else the local loop)."""
    return workers > 1 and _input_bytes(src) >= launch.POOL_MIN_BYTES


def default_workers(src: Source, rule_list: list[Rule]) -> int:
    """The workers when none are asked for: one per usable core for an input of
    ``launch.AUTO_POOL_BYTES`` or more on ``launch.AUTO_POOL_CORES`` cores or more, else this
    alone; this process too when a MinHash rule runs (one process keeps its shingle sets, a
    pool reads the candidates again: 0.85x of one process for near_duplicate at 250 MB)."""
    from preflight.cores import available_cores

    if _minhash(rule_list):
        return 1
    cores = available_cores()
    return (cores if cores >= launch.AUTO_POOL_CORES
            and _input_bytes(src) >= launch.AUTO_POOL_BYTES else 1)


def _minhash(rule_list: list[Rule]) -> bool:
    return any(rule.check in _MINHASH_CHECKS for rule in rule_list)


def _input_bytes(src: Source) -> int:
    return src.total if src.unit == "bytes" else sum(
        f.stat().st_size for f in src.files if f.is_file())


def scan_on_pool(src: Source, rules: RuleSet, rule_list: list[Rule], *, workers: int,
                 tokenizer: TokenCounter | None, eval_path: str | None, sink: FindingsSink,
                 sampler: Sampler | None, limit: int | None, timings: dict[str, float],
                 progress: Progress | None) -> Read:
    """Read and scan ``src`` with ``workers`` processes; leave the driver's checks ready for
    ``finish``, with the local loop's findings."""
    from preflight.executor.local import Read

    # The workers start (spawn, imports) while this process plans and starts the checks.
    with Pool(workers, preload=("numba",) if _minhash(rule_list) else ()) as pool:
        t0 = time.perf_counter()
        cut = _plan(src, workers, limit)
        # The pieces are numbered (and the files hashed) by the survey while the workers
        # scan them; it notes the files as the plan cut them.
        survey = piecework.Survey(cut) if cut is not None else None
        started = driver.start(src, rules, rule_list, tokenizer=tokenizer,
                               eval_path=eval_path, sampler=sampler, limit=limit)
        setup = pickle.dumps(started.setup)
        timings["pool:plan"] = round(time.perf_counter() - t0, 4)

        t0 = time.perf_counter()
        merge = Merge(started.running, sink, sampler, started.shapes)
        units = survey if survey is not None else _fed(src, limit)
        for result in pool.ordered((_scan, (setup, unit)) for unit in units):
            for scanned in result:
                merge.add(scanned)
            if progress is not None:
                progress(merge.progress, src.total, src.unit)
        plan = None
        if survey is not None:
            plan, src._fingerprint = survey.pieces, survey.fingerprint
        timings["pool:scan"] = round(time.perf_counter() - t0, 4)

        t0 = time.perf_counter()
        plans, needed = driver.revisit_plans(started.running)
        if plans:
            blob = pickle.dumps(plans)
            again: Iterable[Any] = (
                _fed(src, limit) if plan is None
                else plan if needed is None else piecework.holding(plan, needed))
            for states in pool.ordered((_revisit, (setup, unit, blob)) for unit in again):
                for state in states:
                    for index, part in state.items():
                        started.running[index].check.merge_state(part)
        timings["pool:revisit"] = round(time.perf_counter() - t0, 4)
        if survey is not None:  # every piece read (twice for the revisit): as planned?
            survey.unchanged()
    return Read(running=started.running, fields=started.fields, ctx=started.ctx,
                inferred=started.inferred, seen=merge.seen, records=merge.records,
                malformed=merge.malformed, cluster={"workers": workers},
                fetch=_fetcher(plan, started.fields.id) if plan is not None else None,
                mixed=started.shapes.finding() if started.shapes else None)


def _plan(src: Source, workers: int, limit: int | None) -> list[piecework.Piece] | None:
    """The pieces the workers read, or None when one reader here feeds them batches."""
    if limit is not None or src.global_rows or not src.files or src.format not in READERS:
        return None
    size = sum(f.stat().st_size for f in src.files)
    piece_bytes = min(max(size // (workers * PIECES_PER_WORKER), MIN_PIECE_BYTES),
                      MAX_PIECE_BYTES)
    plan = piecework.plan(src, piece_bytes=piece_bytes, row_groups=True)
    return plan if len(plan) > 1 else None


def _fed(src: Source, limit: int | None) -> Iterator[tuple[Batch, bool]]:
    """The source's batches read here, as the local loop reads them (the first ``limit``
    records), each with whether it is the first with records of its file."""
    records, decided = 0, None
    batches = src.batches()
    try:
        for batch in batches:
            if limit is not None and records + len(batch) >= limit:
                batch = batch.head(limit - records)
            records += len(batch)
            first = batch.file_index != decided and len(batch) > 0
            if first:
                decided = batch.file_index
            yield batch, first
            if limit is not None and records >= limit:
                break
    finally:
        batches.close()


def _fetcher(plan: list[piecework.Piece], id_field: str | None
             ) -> Callable[[set[int]], list[SampleRow]]:
    """Fetches records by key from the pieces that hold them, here (the smoke sample's rows
    flagged only at the end: a few pieces at most, read once)."""
    def fetch(keys: set[int]) -> list[SampleRow]:
        holding = piecework.holding(plan, keys) if keys else []
        rows = [row for piece in holding
                for batch in piecework.read(piece) for row in records_with(batch, keys, id_field)]
        piecework.unchanged(holding)  # the sample's rows from the file the scan read
        return rows
    return fetch


# -- the pool ---------------------------------------------------------------------------

class Pool:
    """Worker processes with one thread per library (``launch.WORKER_ENV``), started at
    once (spawned), or forked by the fork server as the first calls come, the server
    started at once; results come back in submission order. A call's first argument may be the
    workers' setup (``_scan``, ``_revisit``): each worker builds its checks from it once."""

    def __init__(self, workers: int, preload: tuple[str, ...] = ()) -> None:
        self.workers = workers
        self._context = launch.context(preload)
        # The fork server keeps the variables of its own start: each worker takes this
        # process's current ones, as a spawned worker does.
        environ = {**os.environ, **launch.WORKER_ENV}
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=self._context,
                                         initializer=_start, initargs=(environ,))
        if isinstance(self._context, launch.ForkServerWithEnv):
            # A worker's start waits for the server's imports: start the server now,
            # the workers when the first calls come (forked at once by then).
            self._context.warm()
            return
        for _ in range(workers):  # one call each: every worker starts now
            self._submit(_ready, ())

    @property
    def processes(self) -> list[multiprocessing.process.BaseProcess]:
        """The worker processes this pool started."""
        return [p for p in self._context.started if p.pid is not None]

    def ordered(self, calls: Iterable[tuple[Callable[..., Any], tuple[Any, ...]]]
                ) -> Iterator[Any]:
        """Run ``fn(*args)`` for each call on the workers; yield the results in order,
        with at most two calls per worker in flight."""
        window = 2 * self.workers
        pending: deque[Future[Any]] = deque()
        for fn, args in calls:
            pending.append(self._submit(fn, args))
            if len(pending) >= window:
                yield self._result(pending.popleft())
        while pending:
            yield self._result(pending.popleft())

    def _submit(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Future[Any]:
        try:
            return self._pool.submit(fn, *args)
        except BrokenProcessPool as e:
            raise _died(e) from e

    def _result(self, future: Future[Any]) -> Any:
        while True:
            try:
                # A wait without a timeout may miss Ctrl-C (the signal can reach another
                # thread of this process); waking up now and then lets it through.
                return future.result(timeout=_POLL_S)
            except TimeoutError:
                continue
            except BrokenProcessPool as e:
                raise _died(e) from e

    def close(self, *, kill: bool = False) -> None:
        """Stop the workers: wait for them, or (``kill``: an error, Ctrl-C) end them now."""
        if not kill:
            self._pool.shutdown(wait=True)
            return
        # ``shutdown`` alone waits for the tasks running: end the processes themselves.
        self._pool.shutdown(wait=False, cancel_futures=True)
        # SIGTERM, then SIGKILL, until none is left: the executor may still be starting a
        # replacement (its pid not yet known) when this begins, so look again each round.
        began = time.monotonic()
        stop = "terminate"
        while time.monotonic() - began < _STOP_S:
            # A process object whose start never completes (interrupted) stays pid-less:
            # waited for a moment only.
            starting = [p for p in self._context.started if p.pid is None]
            alive = [p for p in self.processes if p.is_alive()]
            if not alive and (not starting or time.monotonic() - began > _STARTING_S):
                return
            for process in alive:
                getattr(process, stop)()
            for process in alive:
                process.join(timeout=1)
            stop = "kill"
            time.sleep(0.05)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.close(kill=kind is not None)


def _died(error: BaseException) -> WorkerError:
    return WorkerError(
        "a worker process died while scanning (killed, or out of memory: each worker holds "
        "a piece of up to 64 MB and its checks' state); nothing was written. Run again with "
        f"fewer --workers, or --workers 1 ({error})")


# -- in the worker processes ------------------------------------------------------------

def _start(environ: dict[str, str]) -> None:
    """A worker's start: the driver's variables (``environ``), Ctrl-C is the driver's to
    handle (it ends the pool), Arrow on one thread, and ``fork`` for the default start
    method where there is one: a worker starts no process, but numba makes a lock of that
    kind on its first parallel kernel, and fork's is unnamed, where another's is left to
    the driver's resource tracker when the pool ends the worker (Ctrl-C, an error), which
    then warns of "leaked semaphore objects"."""
    import pyarrow as pa

    os.environ.clear()
    os.environ.update(environ)
    if "fork" in multiprocessing.get_all_start_methods():
        multiprocessing.set_start_method("fork", force=True)
    driver_process = multiprocessing.parent_process()  # the driver, also for the server's
    if driver_process is not None:
        threading.Thread(target=_leave_with, args=(driver_process.sentinel,), daemon=True,
                         name="preflight-driver-watch").start()

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # blocked while it started (``launch._worker_env``)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def _leave_with(sentinel: int) -> None:
    """Exit this worker once the driver is gone (killed outright: SIGTERM from a scheduler,
    SIGKILL from the out-of-memory killer), which nothing else tells it: an idle worker would
    wait for its next task, a busy one finish its piece, and either keep the fork server,
    the memory and any pipe of the driver's output (a CI job's) held forever."""
    multiprocessing.connection.wait([sentinel])
    os._exit(1)


def _ready() -> None:
    """Nothing: a call that makes the pool start a worker."""


def _worker(setup: bytes) -> Worker:
    """This worker's checks, built from the driver's setup once (again for a new one)."""
    global _WORKER, _SETUP
    if _WORKER is None or setup != _SETUP:
        _WORKER, _SETUP = Worker(**pickle.loads(setup)), setup
    return _WORKER


def _batches(unit: piecework.Piece | tuple[Batch, bool]) -> Iterator[tuple[Batch, bool]]:
    """A unit's batches, each with whether it is the first with records of its piece."""
    if isinstance(unit, piecework.Piece):
        yield from piecework.firsts(piecework.read(unit))
    else:
        yield unit


def _scan(setup: bytes, unit: piecework.Piece | tuple[Batch, bool]) -> list[Scanned]:
    worker = _worker(setup)
    return [worker.scan(batch, first=first) for batch, first in _batches(unit)]


def _revisit(setup: bytes, unit: piecework.Piece | tuple[Batch, bool], plans: bytes
             ) -> list[dict[int, dict[str, Any]]]:
    worker, loaded = _worker(setup), pickle.loads(plans)
    return [worker.revisit(batch, loaded) for batch, _ in _batches(unit)]
