"""Shards that disagree on what their records are.

Fields are inferred from the corpus's first batch with records. In a folder of shards where
some hold chat records and others plain text, the fields inferred from the first shard do not
exist in the others, and every record there would be a finding of every text check ("missing
text" times thousands) that hides the one real problem: the folder mixes two datasets. With
inferred fields, each shard's first batch with records is inferred again; a shard of another
shape is not scanned, and the gate gets one corpus-level finding, ``mixed_shards``, naming
the shards of each shape.

A label is the same kind of blind spot: when the first shard has no label field (no such
column, or values that are no class set) and a later one does, the run checks no labels, and
a ``-3`` there passed. Such shards are scanned as usual, and the gate gets one finding per
label field, ``unjudged_labels``, naming the shards and the option that judges them. So
for numbers (``unjudged_numbers``): a column of numbers that the first shard lacks (or holds
in only some records, so it is not inferred) and a later one holds in every record was never
read by the ``numeric`` check, and its NaN passed with no word.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from preflight.batch import Batch
from preflight.checks.base import corpus_findings
from preflight.config import Fields
from preflight.infer import infer_fields

_LISTED = 5  # shard names listed per shape


def shape_of(fields: Fields) -> str:
    """What inferred fields say the records are: a chat, text, or neither."""
    if fields.messages:
        return f"chat ({fields.messages!r})"
    if fields.text is not None:
        return f"text ({', '.join(map(repr, fields.text_fields()))})"
    return "no text or chat field"


@dataclass(frozen=True)
class Shape:
    """What a shard's first batch says its records are, and its label field (if any)."""

    records: str  # ``shape_of``
    label: str | None
    numbers: tuple[str, ...] = ()  # the fields of numbers inference found


def batch_shape(batch: Batch) -> Shape:
    """The shape of a shard, inferred from its first batch."""
    fields = infer_fields(batch)[0]
    return Shape(shape_of(fields), fields.label, _numbers(fields))


def _numbers(fields: Fields) -> tuple[str, ...]:
    """The fields the ``numeric`` check reads: numeric, target and features."""
    return tuple(name for role in (fields.numeric, fields.target, fields.features)
                 for name in ([role] if isinstance(role, str) else role or []))


class ShardShapes:
    """The shape of each shard's records, from its first batch, against the first shard's."""

    def __init__(self, first: Fields) -> None:
        # The first shard's shape as inference sees it, like every other shard's: the run's
        # fields may name a text inference would not pick (``--text-field title`` beside a
        # longer ``body``), and compared with those no shard matched: none was scanned.
        self.first: str | None = None
        self.labelled = first.label is not None
        self.numbered = set(_numbers(first))
        # the run's numeric fields, which the finding's option must keep naming
        self.numeric = [first.numeric] if isinstance(first.numeric, str) else list(
            first.numeric or [])
        self.unnumbered: dict[str, list[str]] = {}  # numbers field -> shards, none in the first
        self.files: dict[str, list[str]] = {}
        self.unjudged: dict[str, list[str]] = {}  # label field -> shards, none in the first
        self._file: int | None = None
        self._same = True

    def matches(self, batch: Batch) -> bool:
        """True when ``batch``'s shard has the first shard's shape (its records are
        scanned); inferred again at each shard's first batch with records (malformed
        lines alone say nothing of a shard's shape)."""
        undecided = batch.file_index != self._file
        return self.matches_shape(batch.file_index, batch.file,
                                  batch_shape(batch) if undecided and len(batch) else None)

    def matches_shape(self, file_index: int, file: str | None, shape: Shape | None) -> bool:
        """``matches`` for a batch scanned elsewhere: ``shape`` is its ``batch_shape`` when
        it is the first batch with records of its piece (else None); call in read order.
        Until a shard's first batch with records, its batches (malformed lines only) match."""
        if file_index != self._file:
            if shape is None:
                return True
            self._file = file_index
            name = file or f"#{file_index}"
            self.files.setdefault(shape.records, []).append(name)
            if self.first is None:
                self.first = shape.records
                # a field of numbers the first shard holds is no later shard's blind spot
                # (the run's fields may be set, and leave it out on purpose)
                self.numbered |= set(shape.numbers)
            self._same = shape.records == self.first
            if shape.label is not None and not self.labelled and self._same:
                self.unjudged.setdefault(shape.label, []).append(name)
            for number in shape.numbers if self._same else ():
                if number not in self.numbered:
                    self.unnumbered.setdefault(number, []).append(name)
        return self._same

    def finding(self) -> pl.DataFrame | None:
        """A ``mixed_shards`` finding when the shards differ, an ``unjudged_labels`` one per
        label field and an ``unjudged_numbers`` one per field of numbers that only later
        shards hold; None when there are none."""
        details = []
        if len(self.files) >= 2:
            parts = [f"{shape} in {len(names):,} shard(s): {_listed(names)}"
                     for shape, names in self.files.items()]
            details.append(("mixed_shards", (
                f"the shards hold records of different shapes (fields inferred per shard); "
                f"{'; '.join(parts)}. Only the shards like the first were checked: give "
                "the fields in a rules file, or check each kind of shard on its own")))
        details += _unjudged("unjudged_labels", self.unjudged, holds="labels",
                             lacking="the first", remedy=lambda field: (
            f"no label was checked; --label-field {field} checks them (a record without one "
            "is then the schema's finding)"))
        # the option names the run's numeric fields too: alone, the new one replaced them
        names_all = list(dict.fromkeys([*self.numeric, *self.unnumbered]))
        # quoted for a shell (a name may hold a space): the message is a command to paste
        option = shlex.quote(f"fields.numeric={names_all[0]}" if len(names_all) == 1
                             else f"fields.numeric=[{','.join(names_all)}]")
        details += _unjudged("unjudged_numbers", self.unnumbered, holds="numbers",
                             lacking="every record of the first", remedy=lambda _: (
            f"its NaN, Inf and bounds were not checked; --set {option} checks them "
            "(with --set values.allow_null=true a record without one passes)"))
        return corpus_findings(details)


def _unjudged(code: str, shards: dict[str, list[str]], *, holds: str, lacking: str,
              remedy: Callable[[str], str]) -> list[tuple[str, str]]:
    """One ``code`` finding per field that holds ``holds`` in only later ``shards`` (not in
    ``lacking``), naming them and what judges them (``remedy(field)``)."""
    return [(code, f"{field!r} holds {holds} in {len(names):,} shard(s) ({_listed(names)}) "
                   f"but not in {lacking}, whose fields were inferred: {remedy(field)}")
            for field, names in shards.items()]


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - _LISTED:,} more" if len(names) > _LISTED else ""
    return ", ".join(names[:_LISTED]) + more
