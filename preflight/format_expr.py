"""``pl.format`` rebuilt from ``pl.concat_str``, for the details of findings.

``pl.format`` panics (``assertion failed: i < self.len()`` in polars' binview) on a column
holding an empty chunk, which a filter leaves behind when a list expression split its
input into chunks: a JSON array of tokenized records with a negative id crashed the run
(polars issue #25187, still in polars 2.1). ``concat_str`` over the same values gives the
same text (a null argument: null) and takes any chunking.
"""

from __future__ import annotations

import polars as pl

_SLOT = "{}"


def format_str(template: str, *args: str | pl.Expr) -> pl.Expr:
    """The text of ``template`` with each ``{}`` replaced by the next of ``args`` (a column
    name or an expression) as a string, as ``pl.format(template, *args)``."""
    pieces = template.split(_SLOT)
    if len(pieces) != len(args) + 1:
        raise ValueError(f"{template!r} has {len(pieces) - 1} slots for {len(args)} values")
    parts: list[pl.Expr] = []
    for piece, arg in zip(pieces, [*args, None], strict=True):
        if piece:
            parts.append(pl.lit(piece))
        if arg is not None:
            parts.append((pl.col(arg) if isinstance(arg, str) else arg).cast(pl.String))
    return pl.concat_str(parts) if parts else pl.lit("")
