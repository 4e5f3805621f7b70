"""Checks, one module per family; importing this package registers them all."""

from preflight.checks import (  # noqa: F401 - imported to register
    chat,
    duplicates,
    encoding,
    invisible,
    labels,
    near_duplicates,
    numeric,
    overlap,
    records,
    tokens,
    vocab,
)
