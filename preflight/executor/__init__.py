"""Executors: where the checks' per-batch work runs.

One design, three schedulers, and ``schedule`` picks one for a run. ``--workers 1`` is the
local loop (``local``), in this process: the reference. ``--workers N``
(``preflight.executor.pool``, the default for large inputs) and ``--executor ray``
(``preflight.executor.ray``, extra ``[ray]``) cut the source into pieces (``pieces``), start
the checks on the driver as the loop does (``driver``), scan the pieces on workers with
preflight's own readers (``worker.Worker``) and merge what they found in read order
(``worker.Merge``), so every schedule gives the same findings.
"""
