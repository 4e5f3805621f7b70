"""Shards that disagree on what their records are.

Fields are inferred from the corpus's first batch with records. In a folder of shards where
some hold chat records and others plain text, the fields inferred from the first shard do not
exist in the others, and every record there would be a finding of every text check ("missing
text" times thousands) that hides the one real problem: the folder mixes two datasets. With
inferred fields, each shard's first batch with records is inferred again; a shard of another
shape is not scanned, and the gate gets one corpus-level finding, ``mixed_shards``, naming
the shards of each shape.
"""

from __future__ import annotations

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


def batch_shape(batch: Batch) -> str:
    """The shape of a shard, inferred from its first batch."""
    return shape_of(infer_fields(batch)[0])


class ShardShapes:
    """The shape of each shard's records, from its first batch, against the first shard's."""

    def __init__(self, first: Fields) -> None:
        self.first = shape_of(first)
        self.files: dict[str, list[str]] = {}
        self._file: int | None = None
        self._same = True

    def matches(self, batch: Batch) -> bool:
        """True when ``batch``'s shard has the first shard's shape (its records are
        scanned); inferred again at each shard's first batch with records (malformed
        lines alone say nothing of a shard's shape)."""
        undecided = batch.file_index != self._file
        return self.matches_shape(batch.file_index, batch.file,
                                  batch_shape(batch) if undecided and len(batch) else None)

    def matches_shape(self, file_index: int, file: str | None, shape: str | None) -> bool:
        """``matches`` for a batch scanned elsewhere: ``shape`` is its ``batch_shape`` when
        it is the first batch with records of its piece (else None); call in read order.
        Until a shard's first batch with records, its batches (malformed lines only) match."""
        if file_index != self._file:
            if shape is None:
                return True
            self._file = file_index
            self.files.setdefault(shape, []).append(file or f"#{file_index}")
            self._same = shape == self.first
        return self._same

    def finding(self) -> pl.DataFrame | None:
        """One ``mixed_shards`` finding when the shards differ, else None."""
        if len(self.files) < 2:
            return None
        parts = []
        for shape, names in self.files.items():
            more = f" and {len(names) - _LISTED:,} more" if len(names) > _LISTED else ""
            parts.append(f"{shape} in {len(names):,} shard(s): "
                         f"{', '.join(names[:_LISTED])}{more}")
        detail = (f"the shards hold records of different shapes (fields inferred per shard); "
                  f"{'; '.join(parts)}. Only the shards like the first were checked: give "
                  "the fields in a rules file, or check each kind of shard on its own")
        return corpus_findings([("mixed_shards", detail)])
