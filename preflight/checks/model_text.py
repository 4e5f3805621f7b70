"""The corpus as the model sees it, shared by the checks that tokenise it (``token_length``,
``vocab``): each record's document and its token ids, each computed at most once per batch,
by whichever check asks first.

Tokenising is the slow part of a gate, so no text is encoded twice: a check asks for the ids
of the documents it needs (``token_ids``), and only those not encoded yet in this batch are
sent to the tokenizer's batch API. The ids live with the batch (``uint32``, about the size of
the text itself) and go with it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from preflight.batch import Batch, positions
from preflight.checks.base import Context, findings
from preflight.tokenizer.counter import TokenCounter


def documents(batch: Batch, ctx: Context,
              counter: TokenCounter) -> tuple[pl.Series, pl.DataFrame | None]:
    """Each record's text as the model sees it (null where there is none): its text fields
    joined by newlines, or the conversation rendered with the tokenizer's chat template (or
    the plain one); with the ``chat_template_error`` findings of conversations the template
    rejects."""
    key = ("model_documents", ctx.text_fields, ctx.messages, id(counter))
    return batch.shared(key, lambda: _documents(batch, ctx, counter))


def add_specials(ctx: Context) -> bool:
    """Whether the tokenizer adds its special tokens (not for chat: the template places
    them)."""
    return not ctx.messages


def token_ids(batch: Batch, ctx: Context, counter: TokenCounter,
              index: np.ndarray) -> list[np.ndarray]:
    """Token ids of the documents at ``index`` (batch positions of non-null documents),
    as the token count sees them (``add_specials``); each encoded once per batch."""
    assert counter.ids is not None
    cache: _Ids = batch.shared(("token_ids", ctx.text_fields, ctx.messages, id(counter)), _Ids)
    with cache.lock:
        todo = [int(i) for i in index if int(i) not in cache.ids]
        if todo:
            docs = documents(batch, ctx, counter)[0]
            texts = docs.gather(todo).to_list()
            for i, ids in zip(todo, counter.ids(texts, add_specials(ctx)), strict=True):
                cache.ids[i] = np.asarray(ids, dtype=np.uint32)
            cache.encoded += len(todo)
        return [cache.ids[int(i)] for i in index]


def token_counts(batch: Batch, ctx: Context, counter: TokenCounter,
                 index: np.ndarray) -> np.ndarray:
    """Token counts of the documents at ``index``: from their pieces where the tokenizer
    counts so (cheaper than any encoding), else through ``token_ids`` when a started check
    reads the ids, so that no text is encoded twice."""
    if counter.pieces is not None or counter.ids is None or "token_ids" not in ctx.needs:
        docs = documents(batch, ctx, counter)[0]
        return counter.count_series(docs.gather(index), add_special_tokens=add_specials(ctx))
    return np.fromiter((len(x) for x in token_ids(batch, ctx, counter, index)),
                       dtype=np.int64, count=len(index))


@dataclass
class _Ids:
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: dict[int, np.ndarray] = field(default_factory=dict)
    encoded: int = 0


def _not_text(batch: Batch, fields: tuple[str, ...]) -> pl.DataFrame | None:
    """``not_text`` findings: a text field holding a number, a list or an object, which no
    tokenizer counts (left out of the document, not passed in silence)."""
    parts = []
    for name in fields:
        kinds = batch.json_types(name)
        bad = ((kinds != "string") & (kinds != "null")).arg_true()
        if len(bad):
            parts.append(findings({"i": bad.cast(pl.UInt32)}, "not_text",
                                  [f"{name}: {k}, not text; not counted"
                                   for k in kinds.gather(bad).to_list()]))
    return pl.concat(parts).sort("i", maintain_order=True) if parts else None


def _documents(batch: Batch, ctx: Context,
               counter: TokenCounter) -> tuple[pl.Series, pl.DataFrame | None]:
    if not ctx.messages:
        problems = _not_text(batch, ctx.text_fields)
        if len(ctx.text_fields) == 1:
            return batch.documents(ctx.text_fields, None), problems
        joined = (
            batch.texts(ctx.text_fields, None)
            .group_by("i", maintain_order=True)
            .agg(pl.col("text").drop_nulls().str.join("\n"), pl.col("text").count().alias("n"))
            .select("i", pl.when(pl.col("n") > 0).then(pl.col("text")).alias("text"))
        )
        docs = (
            pl.DataFrame({"i": positions(len(batch))})
            .join(joined, on="i", how="left", maintain_order="left")
            .get_column("text")
        )
        return docs, problems
    rendered: list[str | None] = []
    bad: dict[str, list[Any]] = {"i": [], "code": [], "detail": []}
    # One template render per conversation: Jinja templates have no batch API.
    for i, turns in enumerate(batch.values(ctx.messages)):
        if not isinstance(turns, list) or not turns:
            rendered.append(None)
            continue
        try:
            rendered.append(counter.render(turns))
        except Exception as e:  # a template may raise on a conversation it rejects
            rendered.append(None)
            bad["i"].append(i)
            bad["code"].append("chat_template_error")
            bad["detail"].append(f"chat template failed: {e}")
    problems = (
        findings({"i": pl.Series(bad["i"], dtype=pl.UInt32)}, bad["code"], bad["detail"])
        if bad["i"]
        else None
    )
    return pl.Series(rendered, dtype=pl.String), problems
