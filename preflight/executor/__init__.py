"""Executors: where the checks' per-batch work runs.

The local executor is ``preflight.pipeline.run``'s own loop (no extra dependency). The Ray
executor (``preflight.executor.ray``, extra ``[ray]``) runs the same checks on Ray Data:
workers read pieces of the source with preflight's own readers and scan them
(``worker.Worker``); the driver merges what they found in read order (``worker.Merge``), so
both executors give the same findings.
"""
