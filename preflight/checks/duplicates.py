"""``exact_duplicate``: the same document again, judged on the folded view.

Folding (NFC, casefold, format characters deleted, whitespace collapsed, ends trimmed) means
an injected zero-width space, other case or extra spaces cannot hide a copy. State is compact:
a 128-bit hash (two seeded 64-bit hashes) plus file index and row per document, grouped once
at the end. The first record of a group is kept and is not a finding; every other member is,
with ``cluster`` = the kept row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from pydantic import Field, StrictInt

from preflight.batch import Batch
from preflight.checks.base import Check, Params, findings
from preflight.checks.registry import register
from preflight.format_expr import format_str
from preflight.limits import MAX_CHARS

_SEEDS = (0x5EED, 0xC0FFEE)
_TOP_CLUSTERS = 10


class ExactDuplicateParams(Params):
    min_chars: StrictInt = Field(
        1,
        ge=1,
        le=MAX_CHARS,
        description="Ignore documents shorter than this after folding (1 to 10^9; empty text "
        "is the `empty` check's job and is never grouped).",
    )


@register("exact_duplicate")
class ExactDuplicate(Check):
    """Documents identical after folding case, whitespace and invisible characters."""

    description = "Documents identical after folding case, whitespace and invisible characters."
    Params = ExactDuplicateParams
    fixes = ("keep_first", "quarantine", "none")
    merged = ("_labels",)
    needs_text = True

    def __init__(self, params: ExactDuplicateParams, ctx: Any) -> None:
        super().__init__(params, ctx)
        self._h1: list[np.ndarray] = []
        self._h2: list[np.ndarray] = []
        self._file: list[np.ndarray] = []
        self._row: list[np.ndarray] = []
        self._groups: list[tuple[int, int, int]] = []
        self._clusters = 0
        self._sizes: dict[str, int] = {}  # cluster size -> clusters of that size
        self._labels: dict[int, str | None] = {}

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        folded = batch.folded(self.ctx.text_fields, self.ctx.messages)
        self._labels[batch.file_index] = batch.file
        keep = (folded.str.len_chars() >= self.params.min_chars).fill_null(False)
        doc = folded.filter(keep)
        self._h1.append(doc.hash(_SEEDS[0]).to_numpy())
        self._h2.append(doc.hash(_SEEDS[1]).to_numpy())
        self._file.append(np.full(len(doc), batch.file_index, np.int32))
        self._row.append(batch.rows[keep.to_numpy()])
        return None

    def key_groups(self) -> tuple[tuple[str, ...], ...]:
        return (("h1", "h2"),)

    def keyed_rows(self) -> pl.DataFrame | None:
        if not self._h1:
            return None
        rows = pl.DataFrame({"file_index": np.concatenate(self._file).astype(np.int64),
                             "row": np.concatenate(self._row).astype(np.int64),
                             "h1": np.concatenate(self._h1), "h2": np.concatenate(self._h2)})
        self._h1, self._h2, self._file, self._row = [], [], [], []
        return rows

    def merge_keyed(self, rows: pl.DataFrame) -> None:
        self._h1.append(rows.get_column("h1").to_numpy())
        self._h2.append(rows.get_column("h2").to_numpy())
        self._file.append(rows.get_column("file_index").to_numpy().astype(np.int32))
        self._row.append(rows.get_column("row").to_numpy())

    def finish(self) -> pl.DataFrame | None:
        if not self._h1:
            return None
        # One array at a time, each freed once sorted: this is the gate's peak of memory at
        # the end of a large corpus (28 bytes a row kept, not 80 at once).
        h1, h2 = _joined(self._h1), _joined(self._h2)
        files, rows = _joined(self._file), _joined(self._row)
        # A stable sort by hash keeps read order inside each group: its first is the kept one.
        order = np.lexsort((h2, h1))
        starts = np.ones(len(order), dtype=bool)
        h1 = h1[order]
        starts[1:] = h1[1:] != h1[:-1]
        del h1
        h2 = h2[order]
        starts[1:] |= h2[1:] != h2[:-1]
        del h2
        first = np.flatnonzero(starts)
        sizes = np.diff(np.append(first, len(order)))
        group = np.cumsum(starts)
        group -= 1
        member = order[~starts]
        kept = order[first[group[~starts]]]
        size = sizes[group[~starts]]
        by_read = np.argsort(member, kind="stable")
        member, kept, size = member[by_read], kept[by_read], size[by_read]

        big = np.flatnonzero(sizes > 1)
        self._clusters = len(big)
        distribution, counts = np.unique(sizes[big], return_counts=True)
        self._sizes = {str(s): int(c) for s, c in zip(distribution, counts, strict=True)}
        top = big[np.lexsort((order[first[big]], -sizes[big]))][:_TOP_CLUSTERS]
        self._groups = [
            (int(files[order[first[g]]]), int(rows[order[first[g]]]), int(sizes[g])) for g in top
        ]
        if not len(member):
            return None
        label = pl.Series([self._labels.get(int(f)) for f in np.unique(files[kept])],
                          dtype=pl.String)
        dupes = pl.DataFrame({"kept_row": rows[kept], "size": size, "file": files[kept]})
        of = pl.col("file").replace_strict(np.unique(files[kept]), label, default=None)
        detail = format_str("duplicate of row {}{} ({} copies in all)", "kept_row",
                           pl.concat_str(pl.lit(" of "), of).fill_null(""), "size")
        return findings(
            {"file_index": pl.Series(files[member]), "row": pl.Series(rows[member])},
            "exact_duplicate_of",
            dupes.select(detail).to_series(),
            cluster=pl.Series(rows[kept]),
        )

    def summary(self) -> dict[str, Any]:
        return {
            "clusters": self._clusters,
            "cluster_sizes": self._sizes,
            "largest_clusters": [
                {"file_index": f, "kept_row": r, "size": s} for f, r, s in self._groups
            ],
        }


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The parts as one array, the list emptied (so they are freed as it is made)."""
    joined = np.concatenate(parts)
    parts.clear()
    return joined
