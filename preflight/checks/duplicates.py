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
from pydantic import Field

from preflight.batch import Batch
from preflight.checks.base import Check, Params, findings
from preflight.checks.registry import register
from preflight.text import fold

_SEEDS = (0x5EED, 0xC0FFEE)
_TOP_CLUSTERS = 10


class ExactDuplicateParams(Params):
    min_chars: int = Field(
        1,
        ge=1,
        description="Ignore documents shorter than this after folding (empty text is the "
        "`empty` check's job and is never grouped).",
    )


@register("exact_duplicate")
class ExactDuplicate(Check):
    """Documents identical after folding case, whitespace and invisible characters."""

    description = "Documents identical after folding case, whitespace and invisible characters."
    Params = ExactDuplicateParams
    fixes = ("keep_first", "quarantine", "none")
    needs_text = True

    def __init__(self, params: ExactDuplicateParams, ctx: Any) -> None:
        super().__init__(params, ctx)
        self._parts: list[pl.DataFrame] = []
        self._groups: list[tuple[int, int, int]] = []
        self._clusters = 0

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        folded = fold(batch.documents(self.ctx.text_fields, self.ctx.messages))
        keep = (folded.str.len_chars() >= self.params.min_chars).fill_null(False)
        doc = folded.filter(keep)
        self._parts.append(
            pl.DataFrame(
                {
                    "h1": doc.hash(_SEEDS[0]),
                    "h2": doc.hash(_SEEDS[1]),
                    "file_index": pl.Series(np.full(len(doc), batch.file_index, np.int32)),
                    "row": pl.Series(batch.rows[keep.to_numpy()]),
                }
            )
        )
        return None

    def finish(self) -> pl.DataFrame | None:
        if not self._parts:
            return None
        state = pl.concat(self._parts, rechunk=True)
        self._parts = []
        key = ["h1", "h2"]
        grouped = state.with_columns(
            kept_file=pl.col("file_index").first().over(key),
            kept_row=pl.col("row").first().over(key),
            size=pl.len().over(key),
        )
        dupes = grouped.filter(
            (pl.col("file_index") != pl.col("kept_file")) | (pl.col("row") != pl.col("kept_row"))
        )
        clusters = (
            grouped.filter(pl.col("size") > 1)
            .group_by("kept_file", "kept_row")
            .agg(pl.len().alias("size"))
            .sort(["size", "kept_file", "kept_row"], descending=[True, False, False])
        )
        self._clusters = clusters.height
        self._groups = [tuple(r) for r in clusters.head(_TOP_CLUSTERS).iter_rows()]
        if not dupes.height:
            return None
        detail = pl.format("duplicate of row {} ({} copies in all)", "kept_row", "size")
        return findings(
            {"file_index": dupes.get_column("file_index"), "row": dupes.get_column("row")},
            "exact_duplicate_of",
            dupes.select(detail).to_series(),
            cluster=dupes.get_column("kept_row"),
        )

    def summary(self) -> dict[str, Any]:
        return {
            "clusters": self._clusters,
            "largest_clusters": [
                {"file_index": f, "kept_row": r, "size": s} for f, r, s in self._groups
            ],
        }
