"""Which scheduler scans the corpus: the local loop (``--workers 1``), the process pool
(``--workers N``) or Ray (``--executor ray``), and with how many workers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from preflight import cores
from preflight.config import Rule, RuleSet
from preflight.executor.local import Read, scan_local
from preflight.executor.pool import default_workers, scan_on_pool, uses_pool
from preflight.findings import FindingsSink
from preflight.sampling import Sampler
from preflight.source import Source
from preflight.tokenizer.counter import TokenCounter

if TYPE_CHECKING:
    from preflight.pipeline import Progress


def worker_count(workers: int | None, executor: str, src: Source, rule_list: list[Rule]
                 ) -> tuple[int, list[str]]:
    """The local executor's processes and a note when they differ from those asked:
    ``workers`` capped at the cores this process may use, or with None sized to the input
    (``pool.default_workers``)."""
    if workers is None:
        return (default_workers(src, rule_list) if executor == "local" else 1), []
    # cores.available_cores, looked up when called: a test that sets it reaches the cap
    if executor == "local" and workers > (usable := cores.available_cores()):
        return usable, [f"workers: {workers} asked, {usable} run: this process may use "
                        f"{usable} core(s) (its affinity and cgroup quota), and a worker "
                        "past them adds memory, not speed"]
    return workers, []


def scan(src: Source, rules: RuleSet, rule_list: list[Rule], *, executor: str, workers: int,
         address: str | None, tokenizer: TokenCounter | None, eval_path: str | None,
         sink: FindingsSink, sampler: Sampler | None, limit: int | None,
         timings: dict[str, float], progress: Progress | None) -> Read:
    """Read and scan the corpus where ``executor`` and ``workers`` say; the checks are left
    ready for ``finish``, with the same findings on every scheduler."""
    if executor == "ray":
        from preflight.executor.ray import scan_on_ray

        return scan_on_ray(src, rules, rule_list, tokenizer=tokenizer, eval_path=eval_path,
                           sink=sink, sampler=sampler, limit=limit, address=address,
                           timings=timings, progress=progress)
    if executor == "local" and uses_pool(src, workers):
        return scan_on_pool(src, rules, rule_list, workers=workers, tokenizer=tokenizer,
                            eval_path=eval_path, sink=sink, sampler=sampler, limit=limit,
                            timings=timings, progress=progress)
    return scan_local(src, rules, rule_list, tokenizer=tokenizer, eval_path=eval_path,
                      sink=sink, sampler=sampler, limit=limit, timings=timings,
                      progress=progress)
