"""Which field holds the class label, when the rules do not say.

``label`` and ``labels`` are a label by name: integer class ids (at least half the records
hold an integer there) or class names (``class_labels.class_names``: mostly strings, each
name used twice on average, so a free-text ``label`` is not one).

Corpora from the Hugging Face hub name their label otherwise too: ``coarse_label`` and
``fine_label`` (any ``*_label``), ``intent``, ``sentiment``, ``category``, ``class``,
``stars``, ``rating``, ``target``. Those names also name other things (a free-text
category, a sentiment score, a rating with halves, a regression target), so their values
must look like a class set as well:

- class ids: at least half the records hold an integer (a whole float counts), at most
  ``_STRAY`` of the numbers have a fraction and of the integers are negative (a planted
  ``2.5`` or ``-1`` is then label_range's finding, while a continuous score, a rating in
  halves or a signed delta stays a number), each distinct id is used twice on average,
  the smallest id is 0 or 1 (ages 18..90 are a quantity), and under ``target``, ``rating``
  and ``stars`` there are at most 32 of them (a count target 0..216 is a quantity);
- class names: as for ``label``.

Of several candidates the first that qualifies, in the order ``label``, ``labels``, the
``*_label`` fields sorted by name, then ``intent`` ... ``target``, is the label (one
``fields.label`` per run); the note on the inference names the others.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from preflight.batch import Batch
from preflight.checks.class_labels import class_names, label_values

LABEL_NAMES = ("label", "labels")
OTHER_NAMES = ("intent", "sentiment", "category", "class", "stars", "rating", "target")
SUFFIX = "_label"
# Class ids when at least half the records hold an integer (a stray string or NaN must not
# hide them: it is the label check's finding).
_MAJORITY = 0.5
# Under another name: at most this share of the numbers may have a fraction, and of the
# integers be negative; more is a score or a signed quantity, not class ids with a fault.
_STRAY = 0.1
# Names that as often hold a quantity (a count, a score) as classes: there more distinct
# ids than this are a quantity (a count target of 0..216), checked by ``numeric``.
_QUANTITIES = ("target", "rating", "stars")
_MAX_QUANTITY_CLASSES = 32


def candidates(columns: Any, taken: set[str]) -> list[str]:
    """The columns a label may be in, in the order they are tried."""
    suffixed = sorted(n for n in columns if n.endswith(SUFFIX) and n != SUFFIX)
    return [n for n in (*LABEL_NAMES, *suffixed, *OTHER_NAMES)
            if n in columns and n not in taken]


def label_kind(batch: Batch, name: str) -> str | None:
    """What ``name`` holds as a label (``integer class ids`` or ``class names: ...``), or
    None when its values are not a class set. Shares count the records that hold a value:
    missing and null labels are the check's findings, so a ``label`` field null in most (or
    all) of the first records is still the label."""
    if name in LABEL_NAMES:
        if not _values(batch, name).height and len(batch):
            return "every value null in the first records"
        if _integer_share(batch, name) >= _MAJORITY:
            return "integer class ids"
    elif _class_ids(batch, name):
        return "integer class ids"
    names = class_names(batch, name)
    return f"class names: {names}" if names is not None else None


def infer_label(batch: Batch, taken: set[str]) -> tuple[str, str] | None:
    """The label field of ``batch`` and why, or None: the first candidate that holds a
    class set, the others that do named in the why."""
    found = [(n, kind) for n in candidates(batch.schema, taken)
             if (kind := label_kind(batch, n)) is not None]
    if not found:
        return None
    (name, kind), others = found[0], [n for n, _ in found[1:]]
    why = f"{name!r} (by name, {kind}"
    if name == "target":
        why += "; a regression target? --set fields.target=target judges it as a number"
    if others:
        listed = ", ".join(map(repr, others))
        held = "holds" if len(others) == 1 else "hold"
        why += (f"; {listed} {held} labels too, not judged as such: one label field per run, "
                f"the first in the order {', '.join(LABEL_NAMES)}, *{SUFFIX}, "
                f"{', '.join(OTHER_NAMES)}; --label-field {others[0]} judges that one instead")
    return name, why + ")"


def _values(batch: Batch, name: str) -> pl.DataFrame:
    """The labels present in ``batch`` (missing and null ones left out)."""
    textual = getattr(batch, "textual", False)
    values = label_values(batch, name, textual=textual, numbers=textual)
    return values.filter(pl.col("kind") != "null")


def _integer_share(batch: Batch, name: str) -> float:
    kind = _values(batch, name).get_column("kind")
    return float((kind == "integer").mean() or 0.0) if len(kind) else 0.0


def _class_ids(batch: Batch, name: str) -> bool:
    """Whether ``name`` (not a label's own name) holds class ids: see the module's rules."""
    values = _values(batch, name)
    n = values.height
    kind = values.get_column("kind")
    ints = values.filter(kind == "integer").get_column("int")
    fractions = int((kind == "number").sum())
    ids = ints.filter(ints >= 0)
    return (
        n > 0
        and len(ints) >= _MAJORITY * n
        and fractions <= _STRAY * (len(ints) + fractions)
        and int((ints < 0).sum()) <= _STRAY * len(ints)
        and ints.n_unique() * 2 <= len(ints)
        # an index counts from 0 or 1: ages 18..90 are a quantity, not classes
        and len(ids) > 0 and int(ids.min()) <= 1  # type: ignore[arg-type]
        and (name not in _QUANTITIES or ids.n_unique() <= _MAX_QUANTITY_CLASSES)
    )
