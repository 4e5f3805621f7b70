"""``near_duplicate``: documents that are copies up to a few edits, by MinHash LSH.

Per batch: fold the text (as ``exact_duplicate`` does: case, whitespace, invisible
characters), shingle it, sign it (``preflight.minhash``, datasketch-compatible) and keep only
the LSH band keys (8 bytes per band per document). At the end, documents sharing a band key
form buckets, and each member is compared with a few earlier members of its bucket
(``preflight.checks.near_pairs``: bounded work, pairs already linked skipped). By default each
pair is confirmed by its exact Jaccard on the shingles' 32-bit hashes. A text of one shingle
(a few words) would make a single 32-bit collision a Jaccard of 1.0 (132 unrelated pairs
among a million 5-word texts), so two one-shingle documents count as alike
only when their folded texts' 64-bit hashes agree too. In one process the scan keeps every
document's sorted shingle set on disk as it goes (``preflight.spill``, about 4 bytes per
shingle), so confirmation needs no second read; a
distributed scan (``--workers N``, Ray), whose workers' sets would have to travel, and a scan
that fills ``TMPDIR`` instead read the corpus a second time (``revisit``) and rebuild the sets
of bucketed documents only.
Either way the sets are read back a chunk of pairs at a time. Confirmed pairs are joined
into clusters (connected components); the first document of a cluster is kept and is not a
finding, every other member is, with ``cluster`` = the kept row and ``partner`` = the row it
was confirmed similar to (its most similar confirmed neighbour, whose Jaccard the detail
quotes): through a chain, a member can be far from the kept row, never from its partner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import Field, StrictBool, StrictFloat, StrictInt, model_validator

from preflight.batch import Batch, record_key
from preflight.checks.base import Check, Params, findings
from preflight.checks.near_pairs import (
    WINDOW,
    bucket_members,
    link,
    partners,
    unique,
    unique_counts,
)
from preflight.checks.registry import register
from preflight.errors import OutputError
from preflight.format_expr import format_str
from preflight.limits import MAX_SHINGLE, SEED32_MAX
from preflight.minhash import LSH, jaccard_pairs, sorted_sets
from preflight.spill import Spilled

_TOP_CLUSTERS = 10
_TEXT_SEED = 0x7E47
_PAIRS_PER_CHUNK = 1 << 13  # at most 16,384 sets mapped in at a time


class NearDuplicateParams(Params):
    threshold: StrictFloat = Field(
        0.8, gt=0, le=1, allow_inf_nan=False,
        description="Jaccard similarity that counts (above 0, up to 1).",
    )
    num_perm: StrictInt = Field(128, ge=8, le=1024, description="MinHash permutations (8 to 1024).")
    bands: StrictInt | None = Field(
        None, ge=1, le=1024, description="LSH bands (default: chosen for recall)."
    )
    rows: StrictInt | None = Field(None, ge=1, le=1024, description="Rows per band (with bands).")
    n: StrictInt = Field(5, ge=1, le=MAX_SHINGLE, description="Words per shingle (1 to 64).")
    char_n: StrictInt = Field(
        5, ge=1, le=MAX_SHINGLE, description="Characters per shingle, for texts without spaces "
        "(1 to 64)."
    )
    unit: Literal["auto", "word", "char"] = Field(
        "auto", description="Shingle unit; auto uses characters for a text with no space."
    )
    seed: StrictInt = Field(
        1, ge=0, le=SEED32_MAX,
        description="Seed of the permutations (datasketch's `seed`; 0 to 2^32-1).",
    )
    confirm: StrictBool = Field(
        True, description="Confirm candidate pairs by exact Jaccard (shingle sets kept on disk)."
    )

    @model_validator(mode="after")
    def _bands_and_rows(self) -> NearDuplicateParams:
        if (self.bands is None) != (self.rows is None):
            raise ValueError("give both bands and rows, or neither")
        if self.bands and self.rows and self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands x rows = {self.bands * self.rows} exceeds num_perm")
        return self


@register("near_duplicate")
class NearDuplicate(Check):
    """Near-copies by MinHash LSH over shingles of the folded text."""

    description = "Near-copies (MinHash LSH on word or character shingles, exact Jaccard)."
    Params = NearDuplicateParams
    fixes = ("keep_first", "quarantine", "none")
    merged = ("_labels",)
    revisited = ("_set_keys", "_set_values", "_set_sizes", "_set_texts")
    needs_text = True

    def __init__(self, params: NearDuplicateParams, ctx: Any) -> None:
        super().__init__(params, ctx)
        self.lsh = LSH(**params.model_dump(exclude={"confirm"}))
        self._keys: list[np.ndarray] = []
        self._file: list[np.ndarray] = []
        self._row: list[np.ndarray] = []
        self._buckets: tuple[np.ndarray, np.ndarray] | None = None  # members, ranks
        self._wanted: np.ndarray | None = None  # record keys of candidate documents, sorted
        # Shingle sets of candidate documents from the second read, as CSR chunks in read
        # order: record keys, set values, set lengths.
        self._set_keys: list[np.ndarray] = []
        self._set_values = Spilled()  # on disk: they grow with text, not with rows
        self._set_sizes: list[np.ndarray] = []
        self._set_texts: list[np.ndarray] = []  # 64-bit text hashes of one-shingle documents
        self._stats: dict[str, Any] = {}
        self._labels: dict[int, str | None] = {}
        # Sets kept by ``scan`` (one process); a distributed run's ``scan_plan`` turns it off.
        self._keep_sets = params.confirm

    def _docs(self, batch: Batch) -> tuple[np.ndarray, pl.Series]:
        folded = batch.folded(self.ctx.text_fields, self.ctx.messages)
        present = (folded.str.len_bytes() > 0).fill_null(False)
        return present.to_numpy(), folded.filter(present)

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        present, docs = self._docs(batch)
        self._labels[batch.file_index] = batch.file
        if len(docs):
            values, offsets = self.lsh.shingles(docs)
            self._keys.append(self.lsh.band_keys(values, offsets))
            self._file.append(np.full(len(docs), batch.file_index, dtype=np.int64))
            self._row.append(batch.rows[present])
            if self._keep_sets:
                try:
                    self._keep(record_key(self._file[-1], self._row[-1]), docs, values,
                               offsets)
                except OutputError:  # TMPDIR is full: keep the candidates' sets only, later
                    self._keep_sets = False
                    self._drop_sets()
        return None

    def scan_plan(self, first: Batch) -> dict[str, Any]:
        # Called by a distributed executor only: its workers' sets would travel to the
        # driver, all of them; the candidates' are cheaper to rebuild in a second read.
        self._keep_sets = False
        return {"_keep_sets": False}

    def _keep(self, keys: np.ndarray, docs: pl.Series, values: np.ndarray,
              offsets: np.ndarray) -> None:
        """Add documents' shingle sets (sorted, distinct) and text hashes for confirmation."""
        sets, set_offsets = sorted_sets(values, offsets)
        sizes = np.diff(set_offsets)
        self._set_keys.append(keys)
        self._set_values.append(sets)
        self._set_sizes.append(sizes)
        texts = np.zeros(len(sizes), dtype=np.uint64)  # hashed for one-shingle texts only
        single = sizes == 1
        if single.any():
            texts[single] = docs.filter(pl.Series(single)).hash(_TEXT_SEED).to_numpy()
        self._set_texts.append(texts)

    def _drop_sets(self) -> None:
        self._set_keys, self._set_values, self._set_sizes = [], Spilled(), []
        self._set_texts = []

    def key_groups(self) -> tuple[tuple[str, ...], ...]:
        return tuple((f"k{band}",) for band in range(self.lsh.bands))

    def keyed_rows(self) -> pl.DataFrame | None:
        if not self._keys:
            return None
        keys = np.concatenate(self._keys)
        rows = pl.DataFrame({"file_index": self._concat(self._file), "row": self._concat(self._row),
                             **{f"k{band}": keys[:, band] for band in range(keys.shape[1])}})
        self._keys, self._file, self._row = [], [], []
        return rows

    def merge_keyed(self, rows: pl.DataFrame) -> None:
        cols = [f"k{band}" for band in range(self.lsh.bands)]
        self._keys.append(rows.select(cols).to_numpy().astype(np.uint64).reshape(-1, len(cols)))
        self._file.append(rows.get_column("file_index").to_numpy())
        self._row.append(rows.get_column("row").to_numpy())

    # -- after the first read -----------------------------------------------------------

    def wants_revisit(self) -> bool:
        self._buckets = bucket_members(self._all_keys())
        if not self.params.confirm or not len(self._buckets[0]) or self._keep_sets:
            return False
        bucketed = np.zeros(len(self._all_keys()), dtype=bool)  # a mask: no sort of members
        bucketed[self._buckets[0]] = True
        self._wanted = np.sort(self._record_keys()[bucketed])
        return True

    def revisit_plan(self) -> dict[str, Any]:
        return {"_wanted": self._wanted}

    def revisit_records(self) -> np.ndarray | None:
        return self._wanted

    def revisit(self, batch: Batch) -> None:
        assert self._wanted is not None
        keys = record_key(np.full(len(batch), batch.file_index), batch.rows)
        pos = np.minimum(np.searchsorted(self._wanted, keys), len(self._wanted) - 1)
        hit = self._wanted[pos] == keys
        if hit.any():  # shingle only the candidates
            # The view the scan shingled (empty fields leave no separator behind).
            docs = batch.folded(self.ctx.text_fields, self.ctx.messages).filter(hit)
            self._keep(keys[hit], docs, *self.lsh.shingles(docs))

    def finish(self) -> pl.DataFrame | None:
        if self._buckets is None:
            self._buckets = bucket_members(self._all_keys())
        members, ranks = self._buckets
        files, rows = self._concat(self._file), self._concat(self._row)
        compare = self._jaccard(files, rows) if self.params.confirm else _unconfirmed
        linked = link(members, ranks, len(files), compare, self.params.threshold)
        self._drop_sets()
        self._stats = {"candidate_pairs": linked.compared, "confirmed_pairs": len(linked.u),
                       "window": WINDOW}
        nodes = unique(np.concatenate([linked.u, linked.v]))
        labels = linked.labels[nodes]
        self._cluster_stats(labels, files, rows)
        if not len(nodes):
            return None
        is_member = labels != nodes
        members, kept = nodes[is_member], labels[is_member]
        partner, best = partners(nodes, linked)
        partner, best = partner[is_member], best[is_member]
        detail = self._details(kept, partner, best, files, rows)
        return findings(
            {"file_index": pl.Series(files[members]), "row": pl.Series(rows[members])},
            "near_duplicate_of",
            detail,
            cluster=pl.Series(rows[kept]),
            partner=pl.Series(rows[partner]),
        )

    def _all_keys(self) -> np.ndarray:
        if not self._keys:
            return np.zeros((0, self.lsh.bands), np.uint64)
        self._keys = [np.concatenate(self._keys)]
        return self._keys[0]

    def _jaccard(self, files: np.ndarray, rows: np.ndarray
                 ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """Exact Jaccard of pairs of candidate documents, from the sets kept by the scan or
        the second read."""
        keys = self._concat(self._set_keys)  # ascending: both reads are in read order
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        sizes = self._concat(self._set_sizes)
        np.cumsum(sizes, out=offsets[1:])
        texts = self._concat(self._set_texts)
        values = self._set_values

        def similarity(u: np.ndarray, v: np.ndarray) -> np.ndarray:
            # every candidate was revisited
            su = np.searchsorted(keys, record_key(files[u], rows[u]))
            sv = np.searchsorted(keys, record_key(files[v], rows[v]))
            # A chunk of pairs at a time (in order of their first document), on the sets
            # mapped from disk: memory follows the chunk's pages, not the corpus.
            out = np.empty(len(u), dtype=np.float64)
            order = np.argsort(su, kind="stable")
            for start in range(0, len(order), _PAIRS_PER_CHUNK):
                pick = order[start:start + _PAIRS_PER_CHUNK]
                out[pick] = values.mapped(
                    lambda sets, pick=pick: jaccard_pairs(sets, offsets, su[pick], sv[pick]))
            # one shingle each: alike only when the texts are (not a 32-bit collision)
            single = (sizes[su] == 1) & (sizes[sv] == 1)
            out[single & (texts[su] != texts[sv])] = 0.0
            return out

        return similarity

    def _details(self, kept: np.ndarray, partner: np.ndarray, similarity: np.ndarray,
                 files: np.ndarray, rows: np.ndarray) -> pl.Series:
        """"near-duplicate of row 4 (Jaccard 0.87)" per finding; for a member whose partner is
        not the kept row (a chain), the partner with its Jaccard, then the cluster's kept
        row; "LSH candidate, not confirmed" where no Jaccard was computed (NaN). Built
        column-wise: a large corpus has hundreds of thousands."""
        values, inverse = np.unique(similarity, return_inverse=True)
        jaccard = pl.Series([f"{v:.2f}" for v in values], dtype=pl.String)
        frame = pl.DataFrame({
            "at": self._wheres(files[kept], rows[kept]),
            "via": self._wheres(files[partner], rows[partner]),
            "j": jaccard.gather(inverse.ravel()),
            "unconfirmed": np.isnan(similarity),
            "direct": partner == kept,
        })
        return frame.select(
            pl.when("unconfirmed", "direct")
            .then(format_str("near-duplicate of {} (LSH candidate, not confirmed)", "at"))
            .when("unconfirmed")
            .then(format_str("near-duplicate of {} (LSH candidate, not confirmed), in the "
                            "cluster of {}", "via", "at"))
            .when("direct").then(format_str("near-duplicate of {} (Jaccard {})", "at", "j"))
            .otherwise(format_str("near-duplicate of {} (Jaccard {}), in the cluster of {}",
                                 "via", "j", "at"))
        ).to_series()

    def _wheres(self, files: np.ndarray, rows: np.ndarray) -> pl.Series:
        """"row 1,234" per record, with " of FILE" where the corpus has several files."""
        # thousands separators: 21 digits in groups of three, leading zeros and commas cut
        digits = pl.Series(rows).cast(pl.String).str.zfill(21)
        grouped = pl.DataFrame({"d": digits}).select(
            pl.concat_str([pl.col("d").str.slice(k, 3) for k in range(0, 21, 3)], separator=",")
            .str.strip_chars_start("0,")
        ).to_series()
        text = ("row " + grouped.replace("", "0"))
        if not any(self._labels.values()):
            return text
        label = pl.Series(files).replace_strict(
            {k: v for k, v in self._labels.items() if v}, default=None, return_dtype=pl.String)
        return pl.DataFrame({"t": text, "l": label}).select(
            pl.when(pl.col("l").is_null()).then("t")
            .otherwise(format_str("{} of {}", "t", "l"))).to_series()

    def _cluster_stats(self, labels: np.ndarray, files: np.ndarray, rows: np.ndarray) -> None:
        kept, sizes = unique_counts(labels)
        order = np.lexsort((kept, -sizes))[:_TOP_CLUSTERS]
        distribution, counts = unique_counts(sizes)
        self._stats |= {
            "clusters": len(kept),
            "cluster_sizes": {str(s): int(c) for s, c in zip(distribution, counts, strict=True)},
            "largest_clusters": [
                {"file_index": int(files[kept[k]]), "kept_row": int(rows[kept[k]]),
                 "size": int(sizes[k])}
                for k in order
            ],
        }

    def _record_keys(self) -> np.ndarray:
        return record_key(self._concat(self._file), self._concat(self._row))

    @staticmethod
    def _concat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def summary(self) -> dict[str, Any]:
        return {
            **self.lsh.describe(),
            "confirmed_by": "exact Jaccard" if self.params.confirm else "LSH candidates only",
            **self._stats,
        }



def _unconfirmed(u: np.ndarray, v: np.ndarray) -> None:
    """No confirmation: every LSH candidate counts."""
    return None
