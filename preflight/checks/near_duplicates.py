"""``near_duplicate``: documents that are copies up to a few edits, by MinHash LSH.

Per batch: fold the text (as ``exact_duplicate`` does: case, whitespace, invisible
characters), shingle it, sign it (``preflight.minhash``, datasketch-compatible) and keep only
the LSH band keys (8 bytes per band per document). At the end, documents sharing a band key
are candidate pairs. By default each pair is confirmed by its exact Jaccard on the shingles,
so a hash collision can never fail a gate: the pipeline reads the corpus a second time
(``revisit``) and rebuilds the shingle sets of candidate documents only, on disk
(``preflight.spill``), to read back a chunk of pairs at a time. Confirmed pairs are
joined into clusters (connected components); the first document of a cluster is kept and is
not a finding, every other member is, with ``cluster`` = the kept row.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import Field, StrictFloat, StrictInt, model_validator

from preflight.batch import Batch, record_key
from preflight.checks.base import Check, Params, findings
from preflight.checks.registry import register
from preflight.limits import MAX_SHINGLE, SEED32_MAX
from preflight.minhash import LSH, components, jaccard_pairs, sorted_sets
from preflight.spill import Spilled
from preflight.text import fold

_TOP_CLUSTERS = 10
_PAIRS_PER_CHUNK = 1 << 13  # at most 16,384 sets (pages) mapped at a time


class NearDuplicateParams(Params):
    threshold: StrictFloat = Field(
        0.8, gt=0, le=1, description="Jaccard similarity that counts (above 0, up to 1)."
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
    confirm: bool = Field(
        True, description="Confirm candidate pairs by exact Jaccard (a second read)."
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
    revisited = ("_set_keys", "_set_values", "_set_sizes")
    needs_text = True

    def __init__(self, params: NearDuplicateParams, ctx: Any) -> None:
        super().__init__(params, ctx)
        self.lsh = LSH(**params.model_dump(exclude={"confirm"}))
        self._keys: list[np.ndarray] = []
        self._file: list[np.ndarray] = []
        self._row: list[np.ndarray] = []
        self._pairs: tuple[np.ndarray, np.ndarray] | None = None
        self._wanted: np.ndarray | None = None  # record keys of candidate documents, sorted
        # Shingle sets of candidate documents from the second read, as CSR chunks in read
        # order: record keys, set values, set lengths.
        self._set_keys: list[np.ndarray] = []
        self._set_values = Spilled()  # on disk: they grow with text, not with rows
        self._set_sizes: list[np.ndarray] = []
        self._stats: dict[str, Any] = {}
        self._labels: dict[int, str | None] = {}

    def _docs(self, batch: Batch) -> tuple[np.ndarray, pl.Series]:
        folded = batch.folded(self.ctx.text_fields, self.ctx.messages)
        present = (folded.str.len_bytes() > 0).fill_null(False)
        return present.to_numpy(), folded.filter(present)

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        present, docs = self._docs(batch)
        self._labels[batch.file_index] = batch.file
        if len(docs):
            self._keys.append(self.lsh.band_keys(*self.lsh.shingles(docs)))
            self._file.append(np.full(len(docs), batch.file_index, dtype=np.int64))
            self._row.append(batch.rows[present])
        return None

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
        u, v = self._candidates()
        self._pairs = (u, v)
        if not self.params.confirm or not len(u):
            return False
        docs = np.unique(np.concatenate([u, v]))
        self._wanted = np.sort(self._record_keys()[docs])
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
        if hit.any():  # fold and shingle only the candidates
            docs = fold(batch.documents(self.ctx.text_fields, self.ctx.messages).filter(hit))
            values, offsets = sorted_sets(*self.lsh.shingles(docs))
            self._set_keys.append(keys[hit])
            self._set_values.append(values)
            self._set_sizes.append(np.diff(offsets))

    def finish(self) -> pl.DataFrame | None:
        if self._pairs is None:
            self._pairs = self._candidates()
        u, v = self._pairs
        files, rows = self._concat(self._file), self._concat(self._row)
        similarity = self._confirm(u, v, files, rows)
        keep = similarity >= self.params.threshold if similarity is not None else slice(None)
        cu, cv = u[keep], v[keep]
        self._stats = {"candidate_pairs": len(u), "confirmed_pairs": len(cu)}
        if not len(cu):
            self._cluster_stats(np.zeros(0, np.int64), files, rows)
            return None
        nodes, inverse = np.unique(np.concatenate([cu, cv]), return_inverse=True)
        labels = nodes[components(inverse[: len(cu)], inverse[len(cu):], len(nodes))]
        self._cluster_stats(labels, files, rows)
        members = nodes[labels != nodes]
        kept = labels[labels != nodes]
        neighbour, best = _closest(nodes, cu, cv,
                                   similarity[keep] if similarity is not None else None)
        is_member = labels != nodes
        detail = [
            self._detail(k, nb, s, files, rows)
            for k, nb, s in zip(kept, neighbour[is_member], best[is_member], strict=True)
        ]
        return findings(
            {"file_index": pl.Series(files[members]), "row": pl.Series(rows[members])},
            "near_duplicate_of",
            detail,
            cluster=pl.Series(rows[kept]),
        )

    def _candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """Pairs of documents sharing a band key: each member of a bucket with the bucket's
        first member and with its predecessor (enough to connect the bucket)."""
        if not self._keys:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        keys = np.concatenate(self._keys)
        self._keys = [keys]
        us, vs = [], []
        for band in range(keys.shape[1]):
            # Stable (by key, then read order), so a bucket's pairs are the same whichever
            # other records are present: a distributed run merges only the shared ones.
            # polars sorts on all cores.
            order = pl.DataFrame({"k": keys[:, band]}).with_row_index("i").sort(
                ["k", "i"]).get_column("i").to_numpy()
            sorted_keys = keys[order, band]
            same = np.zeros(len(order), dtype=bool)
            same[1:] = sorted_keys[1:] == sorted_keys[:-1]
            if not same.any():
                continue
            starts = np.flatnonzero(~same)
            first = order[starts[np.cumsum(~same) - 1]]
            at = np.flatnonzero(same)
            us += [first[at], order[at - 1]]
            vs += [order[at], order[at]]
        if not us:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        u, v = np.concatenate(us), np.concatenate(vs)
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        pairs = np.unique((lo.astype(np.int64) << 32) | hi.astype(np.int64))
        return pairs >> 32, pairs & 0xFFFFFFFF

    def _confirm(self, u: np.ndarray, v: np.ndarray, files: np.ndarray, rows: np.ndarray
                 ) -> np.ndarray | None:
        if not self.params.confirm or not len(u):
            return None
        docs = np.unique(np.concatenate([u, v]))
        record = record_key(files[docs], rows[docs])
        keys = self._concat(self._set_keys)  # ascending: the second read is in read order
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum(self._concat(self._set_sizes), out=offsets[1:])
        at = np.searchsorted(keys, record)  # every candidate was revisited
        su, sv = at[np.searchsorted(docs, u)], at[np.searchsorted(docs, v)]
        # A chunk of pairs at a time (in order of their first document), with only the sets
        # it needs read back from disk: memory follows the chunk, not the corpus.
        similarity = np.empty(len(u), dtype=np.float64)
        order = np.argsort(su, kind="stable")
        for start in range(0, len(order), _PAIRS_PER_CHUNK):
            pick = order[start:start + _PAIRS_PER_CHUNK]
            need = np.unique(np.concatenate([su[pick], sv[pick]]))
            values, local = self._set_values.gather(offsets[need], offsets[need + 1])
            similarity[pick] = jaccard_pairs(values, local, np.searchsorted(need, su[pick]),
                                             np.searchsorted(need, sv[pick]))
        self._set_keys, self._set_values, self._set_sizes = [], Spilled(), []
        return similarity

    def _detail(self, kept: int, neighbour: int, similarity: float, files: np.ndarray,
                rows: np.ndarray) -> str:
        """"near-duplicate of row 4 (Jaccard 0.87)"; for a member linked to the kept row
        through another, the closest member and the cluster's kept row."""
        where = self._where(files[kept], rows[kept])
        if similarity != similarity:  # NaN: not confirmed, no Jaccard to quote
            return f"near-duplicate of {where}"
        if neighbour == kept:
            return f"near-duplicate of {where} (Jaccard {similarity:.2f})"
        via = self._where(files[neighbour], rows[neighbour])
        return f"near-duplicate of {via} (Jaccard {similarity:.2f}), in the cluster of {where}"

    def _where(self, file_index: int, row: int) -> str:
        label = self._labels.get(int(file_index))
        return f"row {row:,}" + (f" of {label}" if label else "")

    def _cluster_stats(self, labels: np.ndarray, files: np.ndarray, rows: np.ndarray) -> None:
        kept, sizes = np.unique(labels, return_counts=True)
        order = np.lexsort((kept, -sizes))[:_TOP_CLUSTERS]
        distribution, counts = np.unique(sizes, return_counts=True)
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


def _closest(nodes: np.ndarray, u: np.ndarray, v: np.ndarray, similarity: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray]:
    """For each node, its most similar confirmed neighbour and that Jaccard (NaN without
    confirmation; the neighbour is then any linked node)."""
    ends = np.concatenate([u, v])
    others = np.concatenate([v, u])
    sims = np.concatenate([similarity, similarity]) if similarity is not None else np.full(
        len(ends), np.nan)
    # Most similar first; on a tie the smallest index, i.e. the kept row when it is one.
    order = np.lexsort((others, -np.nan_to_num(sims, nan=0.0), ends))
    ends, others, sims = ends[order], others[order], sims[order]
    first = np.ones(len(ends), dtype=bool)
    first[1:] = ends[1:] != ends[:-1]
    at = np.searchsorted(nodes, ends[first])
    neighbour = np.zeros(len(nodes), dtype=np.int64)
    best = np.full(len(nodes), np.nan)
    neighbour[at], best[at] = others[first], sims[first]
    return neighbour, best
