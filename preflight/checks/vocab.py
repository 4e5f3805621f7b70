"""``vocab``: token ids the model's embedding has no row for.

A tokenizer that gained tokens (``add_special_tokens({"pad_token": "<|pad|>"})``, a chat
template's role markers) while the model's embedding was never resized produces ids past the
embedding: on CUDA a device-side assert that kills the run, hours in, on whichever batch first
holds such a token; with few such rows, a short smoke test may never sample one. This check
needs no training: it compares the tokenizer and the corpus with the embedding's rows
(``model.vocab_size``, or ``config.json`` of ``--model hf:DIR``). Its codes:

- ``vocab_mismatch`` (corpus level): the tokenizer has ids past the embedding, naming the
  added tokens that are (or saying its base vocabulary itself is larger: another model's
  tokenizer?);
- ``special_token_out_of_range`` (corpus level): a special token (bos, eos, pad, unk, sep,
  cls, mask, or one the post-processor adds to every text) has an id past the embedding, or
  the tokenizer's config names one the tokenizer lacks and loading it would append it there;
- ``token_id_out_of_range`` (per record): the record's text (its text fields joined as
  ``token_length`` joins them, or the conversation rendered with the chat template) encodes
  to ids past the embedding; the detail names the tokens and their ids.

Only ids at or past the embedding's size can fail, and with the tokenizer's base vocabulary
inside it those are added tokens, which are matched on the text itself: one vectorised
substring search (Aho-Corasick) finds the records holding their strings, and only those are
encoded (with ``token_length``'s encoding, shared per batch, so no text is encoded twice).
When the base vocabulary is larger than the embedding, or a suspect added token is matched
after a normalizer (so its raw string may not appear in the text), every text is encoded and
the ``vocab_mismatch`` finding says so. Tokens the post-processor adds to every text (bos,
eos) are reported once, as ``special_token_out_of_range``, not on every record.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from preflight.batch import Batch
from preflight.checks.base import Check, Context, Params, corpus_findings, findings
from preflight.checks.model_text import documents, token_ids
from preflight.checks.registry import register
from preflight.tokenizer.counter import TokenCounter

# Tokens named in one detail; the rest are counted.
_NAMED = 3


@register("vocab")
class Vocab(Check):
    """Tokenizer (incl. added and special tokens) and corpus token ids against the
    model's embedding rows."""

    description = (
        "Token ids against the model's embedding rows (model.vocab_size or an hf: folder's "
        "config.json): vocab_mismatch and special_token_out_of_range for the tokenizer "
        "(corpus level), token_id_out_of_range per record. Added whenever the model is known."
    )
    Params = Params
    merged = ("_searched", "_encoded", "_flagged")

    def __init__(self, params: Params, ctx: Context) -> None:
        super().__init__(params, ctx)
        self.size = ctx.model.vocab_size
        self.tok: TokenCounter | None = ctx.tokenizer if ctx.tokenizer and ctx.tokenizer.ids \
            else None
        self._searched = 0
        self._encoded = 0
        self._flagged = 0
        # Suspect added tokens (id past the embedding, not only put there by the
        # post-processor), and why every text must be encoded (None: search is exact).
        self.suspects: dict[str, int] = {}
        self.encode_all: str | None = None
        self._template: np.ndarray = np.zeros(0, dtype=np.uint32)
        if self.size is not None and self.tok is not None:
            self._plan(self.tok, self.size)
            if self.encode_all is not None or self.suspects:
                ctx.needs.add("token_ids")  # only then does this check encode texts

    def _plan(self, tok: TokenCounter, size: int) -> None:
        # What the post-processor adds to every text is reported once, at the end (a chat
        # is encoded without it: there the template places the specials, in the text).
        template = set() if self.ctx.messages else {i for i in tok.template_ids if i >= size}
        self._template = np.array(sorted(template), dtype=np.uint32)
        self.suspects = {t: i for t, i in tok.added_tokens.items()
                         if i >= size and i not in template and t}
        if tok.base_max_id is None:
            self.encode_all = "the tokenizer's base vocabulary size is unknown"
        elif tok.base_max_id >= size:
            self.encode_all = (f"its base vocabulary reaches id {tok.base_max_id:,}, past the "
                               "embedding, so any text may hold such a token")
        elif normalized := sorted(set(self.suspects) & tok.added_normalized):
            self.encode_all = (f"added token {_tick(normalized[0])} is matched after the "
                               "tokenizer's normalizer, so its string may not appear as is")

    def config_problem(self) -> str | None:
        if self.size is None:
            return ("no embedding size: set model.vocab_size (the model's embedding rows) or "
                    "give --model hf:DIR (its config.json's vocab_size)")
        if self.ctx.tokenizer is None:
            return ("no tokenizer: set model.tokenizer (or give --model hf:DIR with a "
                    "tokenizer.json in the folder)")
        if self.tok is None:
            return f"tokenizer {self.ctx.tokenizer.name} gives no token ids"
        return None

    def required_fields(self) -> list[str]:
        # Without a text field only the tokenizer is compared (a token-id corpus is
        # label_range's); a declared one must be there.
        return [*self.ctx.text_fields, *([self.ctx.messages] if self.ctx.messages else [])]

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        if self.tok is None or self.size is None or not (self.ctx.text_fields
                                                         or self.ctx.messages):
            return None
        if self.encode_all is None and not self.suspects:
            return None  # no id the tokenizer can produce is past the embedding
        docs, _ = documents(batch, self.ctx, self.tok)  # template errors: token_length's
        index = docs.is_not_null().arg_true().to_numpy()
        self._searched += len(index)
        if self.encode_all is None:
            hit = docs.gather(index).str.contains_any(list(self.suspects)).fill_null(False)
            index = index[hit.to_numpy()]
        if not len(index):
            return None
        ids = token_ids(batch, self.ctx, self.tok, index)
        self._encoded += len(index)
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.uint32)
        past = flat >= self.size
        if len(self._template):
            past &= ~np.isin(flat, self._template)
        if not past.any():
            return None
        owner = np.repeat(np.arange(len(ids)), lengths)
        rows = np.unique(owner[past])
        self._flagged += len(rows)
        details = [self._detail(ids[k][ids[k] >= self.size]) for k in rows]
        return findings({"i": pl.Series(index[rows], dtype=pl.UInt32)},
                        "token_id_out_of_range", details)

    def _detail(self, bad: np.ndarray) -> str:
        bad = bad[~np.isin(bad, self._template)] if len(self._template) else bad
        values, first, counts = np.unique(bad, return_index=True, return_counts=True)
        order = np.argsort(first)  # in the order the text holds them
        named = [f"{self._name(int(values[k]))} (id {int(values[k]):,}"
                 + (f", {int(counts[k])}×)" if counts[k] > 1 else ")") for k in order[:_NAMED]]
        if len(values) == 1 and counts[0] == 1:
            head = f"token {self._name(int(values[0]))} has id {int(values[0]):,}"
        else:
            more = f" and {len(values) - _NAMED} more" if len(values) > _NAMED else ""
            head = "tokens " + ", ".join(named) + more
        return f"{head}; the model's embedding has {self.size:,} rows"

    def _name(self, token_id: int) -> str:
        tok = self.tok
        text = tok.token_text(token_id) if tok is not None and tok.token_text else None
        return _tick(text) if text is not None else f"#{token_id}"

    def finish(self) -> pl.DataFrame | None:
        if self.tok is None or self.size is None:
            return None
        details = self._mismatch(self.tok, self.size) + self._specials(self.tok, self.size)
        return corpus_findings(details)

    def _mismatch(self, tok: TokenCounter, size: int) -> list[tuple[str, str]]:
        base = tok.base_max_id if tok.base_max_id is not None else (tok.vocab_size or 0) - 1
        top = max([base, *tok.added_tokens.values()])
        if top < size:
            return []
        count = f"{tok.vocab_size:,} tokens" if tok.vocab_size else f"ids up to {top:,}"
        past = sorted(((i, t) for t, i in tok.added_tokens.items() if i >= size))
        if tok.base_max_id is not None and tok.base_max_id >= size:
            encoded = (" (every text was encoded to find the records with ids past it)"
                       if self.ctx.text_fields or self.ctx.messages else "")
            what = (f"the tokenizer's base vocabulary reaches id {tok.base_max_id:,}, the "
                    f"model's embedding has {size:,} rows: is this the model's own "
                    f"tokenizer?{encoded}")
            return [("vocab_mismatch", what)]
        names = ", ".join(_tick(t) for _, t in past[:_NAMED])
        more = f" and {len(past) - _NAMED} more" if len(past) > _NAMED else ""
        ids = (f"id {past[0][0]:,}" if len(past) == 1
               else f"ids {past[0][0]:,}–{past[-1][0]:,}")
        incl = f" incl. added {names}{more} ({ids})" if past else ""
        how = (f" (every text was encoded: {self.encode_all})"
               if self.encode_all and (self.ctx.text_fields or self.ctx.messages) else "")
        return [("vocab_mismatch",
                 f"tokenizer has {count}{incl}, the model's embedding has {size:,} rows: "
                 "resize_token_embeddings(len(tokenizer)) before training, or drop the "
                 f"tokens{how}")]

    def _specials(self, tok: TokenCounter, size: int) -> list[tuple[str, str]]:
        roles: dict[str, list[str]] = {}
        ids: dict[str, int | None] = {}
        for role, (token, token_id) in tok.special_tokens.items():
            if token_id is None and tok.vocab_size is not None and tok.vocab_size >= size:
                roles.setdefault(token, []).append(role)
                ids[token] = None
            elif token_id is not None and token_id >= size:
                roles.setdefault(token, []).append(role)
                ids[token] = token_id
        out = []
        for token, named in roles.items():
            who = " and ".join(named)
            if ids[token] is None:
                out.append(("special_token_out_of_range",
                            f"{who} token {_tick(token)} is not in the tokenizer: loading it "
                            f"appends it as id {tok.vocab_size:,}, past the model's embedding "
                            f"({size:,} rows); add it and resize_token_embeddings"))
            else:
                out.append(("special_token_out_of_range",
                            f"{who} token {_tick(token)} has id {ids[token]:,}; the model's "
                            f"embedding has {size:,} rows"))
        for token_id in self._template.tolist():
            text = tok.token_text(token_id) if tok.token_text else None
            if text is not None and text in roles:
                continue
            out.append(("special_token_out_of_range",
                        f"token {self._name(token_id)} (id {token_id:,}) is added to every "
                        f"text by the tokenizer; the model's embedding has {size:,} rows"))
        return out

    def summary(self) -> dict[str, Any]:
        tok = self.tok
        return {
            "embedding_rows": self.size,
            "tokenizer": tok.name if tok else None,
            "tokenizer_size": tok.vocab_size if tok else None,
            "suspect_tokens": dict(list(self.suspects.items())[:20]),
            "encode_all": self.encode_all,
            "searched": self._searched,
            "encoded": self._encoded,
            "flagged": self._flagged,
        }


def _tick(token: str) -> str:
    """A token shown in backticks (a backtick inside doubled)."""
    return "`" + token.replace("`", "``") + "`"
