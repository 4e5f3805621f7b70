"""``overlap``: training records that also appear, exactly or nearly, in the eval set.

Contamination makes an evaluation a lie. The eval file (``eval:`` in the rules, or
``--eval``) is read once when the check starts and kept in memory: per eval document its
folded-text hash, its shingle set and its LSH band keys (eval sets are small; its memory is
about 4 bytes per shingle). Each training batch is then folded, hashed and signed like
``near_duplicate`` does, looked up against the eval index, and every candidate pair is
confirmed by exact Jaccard on the spot, since the batch's text is at hand. A finding is on
the training row (the one to remove), with ``cluster`` = the eval row it matches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from preflight.batch import Batch
from preflight.checks.base import Check, findings
from preflight.checks.near_duplicates import NearDuplicateParams
from preflight.checks.registry import register
from preflight.minhash import LSH, jaccard_pairs, sorted_sets

_SEEDS = (0x5EED, 0xC0FFEE)


class OverlapParams(NearDuplicateParams):
    """The near-duplicate parameters; ``confirm`` is always on here (the text is at hand)."""


@register("overlap")
class Overlap(Check):
    """Training records that exactly or nearly duplicate an eval record."""

    description = "Train records that exactly or nearly duplicate an eval record (contamination)."
    Params = OverlapParams
    fixes = ("drop", "quarantine", "none")
    merged = ("_exact", "_near")
    needs_text = True

    def __init__(self, params: OverlapParams, ctx: Any) -> None:
        super().__init__(params, ctx)
        self.lsh = LSH(**params.model_dump(exclude={"confirm"}))
        self._eval: dict[str, Any] | None = None
        self._exact = 0
        self._near = 0

    def config_problem(self) -> str | None:
        if not self.ctx.eval_path:
            return "no eval file: set `eval:` in the rules file or pass --eval"
        problem = super().config_problem()
        if problem:
            return problem
        self._eval = self._load_eval()  # at setup, so an unusable eval file is an error
        if not len(self._eval["rows"]):
            return (f"the eval file {self.ctx.eval_path} has no text in the fields "
                    f"{', '.join(self.ctx.text_fields) or 'messages'}; nothing to compare with")
        return None

    def _sign(self, docs: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        values, offsets = self.lsh.shingles(docs)
        keys = self.lsh.band_keys(values, offsets)
        sets, set_offsets = sorted_sets(values, offsets)
        return keys, sets, set_offsets

    def _load_eval(self) -> dict[str, Any]:
        from preflight.source import open_source

        rows, labels, docs = [], [], []
        source = open_source(Path(self.ctx.eval_path))
        for batch in source.batches():
            folded = batch.folded(self.ctx.text_fields, self.ctx.messages)
            present = (folded.str.len_bytes() > 0).fill_null(False)
            docs.append(folded.filter(present))
            rows.append(batch.rows[present.to_numpy()])
            labels += [batch.file] * int(present.sum())
        folded = pl.concat(docs) if docs else pl.Series([], dtype=pl.String)
        keys, sets, set_offsets = self._sign(folded)
        h1 = folded.hash(_SEEDS[0]).to_numpy()
        order = np.argsort(h1, kind="stable")
        return {
            "rows": np.concatenate(rows) if rows else np.zeros(0, np.int64),
            "files": labels,
            "h1": h1[order], "h1_order": order, "h2": folded.hash(_SEEDS[1]).to_numpy(),
            "band_order": np.argsort(keys, axis=0, kind="stable"),
            "keys": keys, "sets": sets, "set_offsets": set_offsets,
        }

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        if self._eval is None:
            self._eval = self._load_eval()
        ev = self._eval
        folded = batch.folded(self.ctx.text_fields, self.ctx.messages)
        present = (folded.str.len_bytes() > 0).fill_null(False)
        index = present.arg_true().to_numpy()
        docs = folded.gather(index)
        if not len(docs) or not len(ev["rows"]):
            return None
        # Exact: the same folded text (both 64-bit hashes agree).
        h1, h2 = docs.hash(_SEEDS[0]).to_numpy(), docs.hash(_SEEDS[1]).to_numpy()
        pos = np.minimum(np.searchsorted(ev["h1"], h1), len(ev["h1"]) - 1)
        match = ev["h1_order"][pos]
        exact = (ev["h1"][pos] == h1) & (ev["h2"][match] == h2)
        # Near: share a band key with an eval document, then exact Jaccard.
        keys, sets, set_offsets = self._sign(docs)
        u, v = self._candidates(keys[~exact], np.flatnonzero(~exact))
        best_eval = np.full(len(docs), -1, dtype=np.int64)
        best_sim = np.zeros(len(docs))
        if len(u):
            merged = np.concatenate([sets, ev["sets"]])
            offsets = np.concatenate([set_offsets, ev["set_offsets"][1:] + set_offsets[-1]])
            sim = jaccard_pairs(merged, offsets, u, v + len(docs))
            # One shingle each and not the same text (that was exact): a 32-bit collision.
            sizes = np.diff(offsets)
            sim[(sizes[u] == 1) & (sizes[v + len(docs)] == 1)] = 0.0
            keep = sim >= self.params.threshold
            order = np.lexsort((-sim[keep], u[keep]))
            ku, kv, ks = u[keep][order], v[keep][order], sim[keep][order]
            first = np.ones(len(ku), dtype=bool)
            first[1:] = ku[1:] != ku[:-1]
            best_eval[ku[first]], best_sim[ku[first]] = kv[first], ks[first]
        near = best_eval >= 0
        self._exact += int(exact.sum())
        self._near += int(near.sum())
        hits = np.flatnonzero(exact | near)
        if not len(hits):
            return None
        eval_doc = np.where(exact[hits], match[hits], best_eval[hits])
        eval_rows = ev["rows"][eval_doc]
        detail = [
            f"in eval {_where(ev['files'][e], r)}"
            + (" (same text)" if x else f" (Jaccard {s:.2f})")
            for e, r, x, s in zip(eval_doc, eval_rows, exact[hits], best_sim[hits], strict=True)
        ]
        return findings(
            {"i": pl.Series(index[hits], dtype=pl.UInt32)},
            pl.Series(np.where(exact[hits], "in_eval_exact", "in_eval_near")),
            detail,
            cluster=pl.Series(eval_rows),
        )

    def _candidates(self, keys: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(train doc, eval doc) pairs sharing a band key."""
        ev = self._eval
        assert ev is not None
        us, vs = [], []
        for band in range(self.lsh.bands):
            column = ev["keys"][ev["band_order"][:, band], band]
            lo = np.searchsorted(column, keys[:, band], side="left")
            hi = np.searchsorted(column, keys[:, band], side="right")
            for k in np.flatnonzero(hi > lo):
                members = ev["band_order"][lo[k] : hi[k], band]
                us.append(np.full(len(members), docs[k]))
                vs.append(members)
        if not us:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        pairs = np.unique((np.concatenate(us) << 32) | np.concatenate(vs))
        return pairs >> 32, pairs & 0xFFFFFFFF

    def summary(self) -> dict[str, Any]:
        return {
            "eval": self.ctx.eval_path,
            "eval_records": len(self._eval["rows"]) if self._eval else 0,
            "exact": self._exact,
            "near": self._near,
            **self.lsh.describe(),
        }


def _where(file: str | None, row: int) -> str:
    return f"{file}:{row}" if file else f"row {row}"
