"""In flight: the smoke test's first-failure localisation inside the real training run.

>>> import preflight
>>> with preflight.watch(model, optimizer, step_fn=step_fn, out="watch/") as w:
...     for batch in loader:
...         loss = step_fn(model, batch)
...         if not w.step(loss, batch):
...             continue
...         loss.backward(); optimizer.step(); optimizer.zero_grad()

``preflight.watch`` is this module and is also callable (``preflight.watch(...)`` is
``preflight.watch.watch(...)``). torch is imported here, never by ``import preflight``.
The seam for framework adapters is documented in ``preflight.watch.core``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from preflight.watch.core import TrainingFault, WatchCore
from preflight.watch.options import WatchConfig
from preflight.watch.plain import Watch, watch
from preflight.watch.rows import with_ids

__all__ = ["TrainingFault", "Watch", "WatchConfig", "WatchCore", "watch", "with_ids"]


class _CallableModule(types.ModuleType):
    """``preflight.watch(...)`` calls ``watch``; attributes are the module's."""

    def __call__(self, *args: Any, **kwargs: Any) -> Watch:
        return watch(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
