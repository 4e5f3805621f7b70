"""``token_length``: documents that the context window would silently truncate, or that are
too short to teach anything, counted with the model's real tokenizer.

Tokenising is the slow part of a gate (a BPE encodes a few MB/s per core), so texts whose
proven bounds (see ``preflight.tokenizer.bounds``) already settle the answer are not counted:
with a 4,096-token window and a byte-level BPE, a text of at most 4,095 UTF-8 bytes cannot be too
long. The others are counted exactly; for a byte-level BPE that splits before spaces, from
the counts of their pieces, each distinct piece encoded once (``preflight.token_pieces``).
The verdict stays exact; only the histogram of the skipped texts is estimated (from the
bytes-per-token ratio of the texts that were counted), and the report says so. With no
tokenizer at all every count is an estimate: the finding code is ``too_long_estimated`` and
the rule carries a note saying so wherever its verdict is shown.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from pydantic import Field, StrictInt

from preflight.batch import Batch
from preflight.checks.base import Check, Params, findings
from preflight.checks.model_text import add_specials, documents, token_counts
from preflight.checks.registry import register
from preflight.limits import MAX_TOKENS
from preflight.tokenizer.counter import TokenCounter, estimate_counter

_CALIBRATION = 256
# Without a tokenizer the counts are estimates: a text judged too long on one is
# ``too_long_estimated`` (same severity: an estimate never turns a failure into a pass).
ESTIMATED_NOTE = "estimated from bytes; give --tokenizer for exact counts"
_PERCENTILES = (50, 90, 95, 99)


class TokenLengthParams(Params):
    reserve: StrictInt = Field(
        0, ge=0, le=MAX_TOKENS, description="Tokens kept free for special tokens or generation."
    )
    min_tokens: StrictInt = Field(
        0, ge=0, le=MAX_TOKENS, description="Fewer tokens than this is `too_short`."
    )
    max_tokens: StrictInt | None = Field(
        None, ge=1, le=MAX_TOKENS, description="Limit instead of model.context_window "
        "(1 to 100,000,000)."
    )
    bins: StrictInt = Field(
        40, ge=2, le=1000, description="Histogram bins up to twice the limit (2 to 1000)."
    )


def token_limit(params: TokenLengthParams, model: Any) -> int | None:
    """The most tokens a text may have: ``max_tokens`` or the context window, minus
    ``reserve`` (None when neither is set)."""
    window = params.max_tokens or model.context_window
    return (window - params.reserve) if window else None


@register("token_length")
class TokenLength(Check):
    """Token count against the context window (minus reserve) and a minimum."""

    description = "Token count (real tokenizer) against the context window and a minimum."
    Params = TokenLengthParams
    fixes = ("truncate", "quarantine", "drop", "none")
    merged = ("_hist_exact", "_hist_estimated", "_counts", "_encoded", "_skipped")
    needs_text = True

    def __init__(self, params: TokenLengthParams, ctx: Any) -> None:
        super().__init__(params, ctx)
        self.counter: TokenCounter = ctx.tokenizer or estimate_counter()
        self.limit = token_limit(params, ctx.model)
        self._edges = (
            np.append(np.linspace(0, 2 * self.limit, params.bins + 1), np.inf)
            if self.limit
            else None
        )
        self._hist_exact = np.zeros(params.bins + 1, dtype=np.int64)
        self._hist_estimated = np.zeros(params.bins + 1, dtype=np.int64)
        self._counts: list[np.ndarray] = []
        self._bytes_per_token: float | None = None
        self._encoded = 0
        self._skipped = 0

    def config_problem(self) -> str | None:
        if self.limit is None:
            return ("no token limit: set model.context_window (--context-window N) or "
                    "max_tokens on the rule")
        if self.limit <= 0:
            return f"reserve {self.params.reserve} leaves no room in the context window"
        if self.params.min_tokens > self.limit:
            return (f"min_tokens {self.params.min_tokens:,} is above the token limit "
                    f"{self.limit:,}: every text would fail; lower min_tokens")
        return super().config_problem()

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        assert self.limit is not None and self._edges is not None
        docs, problems = documents(batch, self.ctx, self.counter)
        index = docs.is_not_null().arg_true().to_numpy()
        docs = docs.gather(index)
        if not len(docs):
            return problems
        chat = bool(self.ctx.messages)
        nbytes = docs.str.len_bytes().to_numpy().astype(np.int64)
        upper = self.counter.upper_bound(nbytes, specials=not chat)
        lower = self.counter.lower_bound(nbytes, specials=not chat)
        if not self.counter.exact:
            need = np.zeros(len(docs), dtype=bool)
        elif upper is None:
            need = np.ones(len(docs), dtype=bool)
        else:
            need = upper > self.limit
            if self.params.min_tokens:
                need |= lower < self.params.min_tokens if lower is not None else True
        counts = self._estimates(batch, index, nbytes, upper, lower, chat)
        todo = np.flatnonzero(need)
        if len(todo):
            counts[todo] = token_counts(batch, self.ctx, self.counter, index[todo])
        exact = np.zeros(len(docs), dtype=bool)
        exact[todo] = self.counter.exact
        self._encoded += int(exact.sum())
        self._skipped += int((~exact).sum())
        self._hist_exact += np.histogram(counts[exact], self._edges)[0]
        self._hist_estimated += np.histogram(counts[~exact], self._edges)[0]
        self._counts.append(counts.astype(np.int32))
        return self._findings(index, counts, problems)

    def scan_plan(self, first: Batch) -> dict[str, Any]:
        """The bytes-per-token calibration, on the first batch as in the local run."""
        if self.counter.exact and self._bytes_per_token is None:
            docs = documents(first, self.ctx, self.counter)[0]
            index = docs.is_not_null().arg_true().to_numpy()
            if len(index):
                nbytes = docs.gather(index).str.len_bytes().to_numpy().astype(np.int64)
                self._calibrate(first, index, nbytes)
        if self._bytes_per_token is None:
            return {}
        return {"_bytes_per_token": self._bytes_per_token}

    def _calibrate(self, batch: Batch, index: np.ndarray, nbytes: np.ndarray) -> None:
        """Bytes per token of the first documents (``index``: their batch positions), for
        the estimates of the others; counted without the added special tokens."""
        sample = index[:_CALIBRATION]
        counts = token_counts(batch, self.ctx, self.counter, sample)
        added = self.counter.specials if add_specials(self.ctx) else 0
        tokens = int(np.maximum(counts - added, 0).sum())
        self._bytes_per_token = float(nbytes[: len(sample)].sum()) / max(tokens, 1)

    def _estimates(self, batch: Batch, index: np.ndarray, nbytes: np.ndarray,
                   upper: np.ndarray | None, lower: np.ndarray | None,
                   chat: bool) -> np.ndarray:
        if not self.counter.exact:
            return self.counter.estimate(nbytes)
        if self._bytes_per_token is None:
            self._calibrate(batch, index, nbytes)
        estimate = np.round(nbytes / max(self._bytes_per_token, 1e-9)).astype(np.int64)
        estimate += 0 if chat else self.counter.specials
        if upper is not None:
            estimate = np.minimum(estimate, upper)
        if lower is not None:
            estimate = np.maximum(estimate, lower)
        return estimate

    def _findings(self, index: np.ndarray, counts: np.ndarray,
                  problems: pl.DataFrame | None) -> pl.DataFrame | None:
        assert self.limit is not None
        approx = "" if self.counter.exact else "~"
        too_long = np.flatnonzero(counts > self.limit)
        too_short = np.flatnonzero(counts < self.params.min_tokens)
        parts = [problems] if problems is not None else []
        if len(too_long):
            parts.append(findings(
                {"i": pl.Series(index[too_long], dtype=pl.UInt32)},
                "too_long" if self.counter.exact else "too_long_estimated",
                [f"{approx}{c:,} tokens > limit {self.limit:,}" for c in counts[too_long]],
            ))
        if len(too_short):
            parts.append(findings(
                {"i": pl.Series(index[too_short], dtype=pl.UInt32)},
                "too_short",
                [f"{approx}{c:,} tokens < min_tokens {self.params.min_tokens:,}"
                 for c in counts[too_short]],
            ))
        return pl.concat(parts).sort("i", maintain_order=True) if parts else None

    def notes(self) -> list[str]:
        if self.counter.exact:
            return []
        return [ESTIMATED_NOTE]

    def summary(self) -> dict[str, Any]:
        counts = np.concatenate(self._counts) if self._counts else np.zeros(0, np.int32)
        edges = self._edges.tolist() if self._edges is not None else []
        return {
            "tokenizer": self.counter.name,
            "family": self.counter.family,
            "estimated": not self.counter.exact,
            "limit": self.limit,
            "min_tokens": self.params.min_tokens,
            "encoded": self._encoded,
            "skipped_by_bound": self._skipped if self.counter.exact else 0,
            "bytes_per_token": self._bytes_per_token,
            "histogram": {
                "edges": [e if np.isfinite(e) else None for e in edges],
                "exact": self._hist_exact.tolist(),
                "estimated": self._hist_estimated.tolist(),
            },
            "lengths": length_histogram(counts, self.limit, self.params.bins),
            "percentiles": (
                {f"p{p}": int(np.percentile(counts, p)) for p in _PERCENTILES}
                | {"max": int(counts.max())}
                if len(counts)
                else {}
            ),
        }


def length_histogram(counts: np.ndarray, limit: int | None, bins: int) -> dict[str, Any]:
    """Token counts binned over the range the data spans, stretched to include ``limit`` so
    the context window stays in view; geometric bins (``log``) when the longest record or
    the limit is over 50 times the shortest, so short texts do not all fall in one bin."""
    if not len(counts):
        return {}
    low, top = max(int(counts.min()), 1), max(int(counts.max()), limit or 0, 1)
    log = top / low > 50
    if log:
        edges = np.geomspace(low, top * 1.05, bins + 1)
    else:
        edges = np.linspace(0, top * 1.05 if top > 0 else 1.0, bins + 1)
    hist = np.histogram(np.clip(counts, edges[0], edges[-1]), edges)[0]
    return {"edges": [round(float(e), 3) for e in edges], "counts": hist.tolist(), "log": log}
