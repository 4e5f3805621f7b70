"""A loss that compares every output with every target.

torch's element-wise losses (``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``)
broadcast an input and a target of different shapes and only warn: outputs ``(B, 1)``
against targets ``(B,)`` become a ``(B, B)`` comparison, every prediction against every
target, and the model learns the targets' mean. The run trains and the loss falls, so the
smoke test passed it. Seen on the first step through torch's own warning (a loss that
reshapes its inputs first never warns), it is the user's code to fix.
"""

from __future__ import annotations

import contextlib
import math
import re
import warnings
from collections.abc import Iterator

from preflight.errors import ConfigError

_SIZES = re.compile(
    r"Using a target size \(torch\.Size\(\[([\d, ]*)\]\)\) that is different "
    r"to the input size \(torch\.Size\(\[([\d, ]*)\]\)\)"
)


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(",") if n.strip())


def outer_comparison(message: str) -> str | None:
    """For torch's size-mismatch warning, what went wrong when the two shapes broadcast to
    more elements than either holds (every output against every target); else None."""
    if (m := _SIZES.search(message)) is None:
        return None
    target, output = _shape(m[1]), _shape(m[2])
    try:
        both = tuple(_broadcast(output, target))
    except ValueError:
        return None
    if math.prod(both) <= max(math.prod(output), math.prod(target)):
        return None  # a target broadcast along the outputs (one per row, say): no blow-up
    hint = " (e.g. outputs.squeeze(-1))" if output[-1:] == (1,) else ""
    return (
        f"your loss compared outputs {output} with targets {target}: torch broadcast "
        f"them to {both}, every output against every target, so it trains to the "
        f"targets' mean; make the model's outputs match the targets' shape{hint}"
    )


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> list[int]:
    width = max(len(a), len(b))
    a, b = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise ValueError(f"{a} and {b} do not broadcast")
        out.append(max(x, y))
    return out


@contextlib.contextmanager
def refuse_outer_comparison(enabled: bool) -> Iterator[None]:
    """Around a loss: a ``ConfigError`` when torch warns that it compared every output with
    every target. Every other warning is judged by the caller's filters where it was raised
    (``ignore`` by module, ``once``, ``error``) and shown once the block ends, also when the
    block raises (a warning that explains the error stays)."""
    if not enabled:
        yield
        return
    seen: list[warnings.WarningMessage] = []
    problems: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as seen:
            # torch's size warning is seen whatever the caller's filters say of it
            warnings.filterwarnings("always", message="Using a target size")
            yield
    finally:
        for w in seen:
            if (problem := outer_comparison(str(w.message))) is not None:
                problems.append(problem)
            elif _SIZES.search(str(w.message)):  # let through by our filter: the caller's now
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
    if problems:
        raise ConfigError(problems[0])
