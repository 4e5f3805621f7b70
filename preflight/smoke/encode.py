"""Rows to tensors as training sees them: token ids, assistant-only labels, class ids,
float targets and features. Bad values are encoded as they are (a NaN stays NaN); what an
index tensor cannot hold (an id past the vocabulary, a label that is no class) is reported
per row here, on the CPU, before anything reaches a GPU."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from preflight.config import Fields, ModelFacts
from preflight.field_paths import record_value
from preflight.text import as_text, first_line
from preflight.tokenizer.counter import TokenCounter, estimate_counter

IGNORE = -100
BYTE_VOCAB = 256
# What the targets tensor holds for a label that is no class id at all (a string where ints
# are declared, a null): out of range, so the loss guard stops it as it would stop a bad id.
NOT_A_CLASS = -1


@dataclass
class Encoded:
    """One row, encoded: what the tiny models train on, and what is wrong with it."""

    ids: list[int] | None = None
    labels: list[int] | None = None
    label: int | None = None  # None: not a class id at all (see ``problems``)
    target: float | None = None
    features: list[float] | None = None
    feature_count: int | None = None  # the length of a list feature field as read
    problems: list[tuple[str, str]] = field(default_factory=list)
    # The first value of the token id (label) field that is no integer, as written: it is
    # encoded as -1 (out of range), and named in the detail instead of that -1.
    odd_id: str | None = None
    odd_label: str | None = None


def infer_task(task: str | None, fields: Fields) -> str | None:
    """The rules' task, or the one the declared fields imply (None when nothing trains)."""
    if task:
        return task
    if fields.messages:
        return "chat"
    if fields.label:
        return "classification"
    if fields.target:
        return "regression"
    if fields.text is not None or fields.input_ids:
        return "lm"
    return None


class Encoder:
    """Encodes rows for one task with the rules' tokenizer (UTF-8 bytes when none)."""

    def __init__(self, task: str, fields: Fields, model: ModelFacts,
                 tokenizer: TokenCounter | None, *, max_length: int) -> None:
        self.task = task
        self.fields = fields
        self.model = model
        self.max_length = max_length
        self._ids = tokenizer.ids if tokenizer is not None and tokenizer.ids else None
        self._render = (tokenizer or estimate_counter()).render
        self.tokenizer = tokenizer.name if self._ids and tokenizer is not None else "bytes"
        vocab = tokenizer.vocab_size if self._ids and tokenizer is not None else BYTE_VOCAB
        self.tokenizer_size = vocab or BYTE_VOCAB
        self.vocab_size = model.vocab_size or vocab
        self.classes = _classes(model)
        # The one length of a list feature field the built-in collate makes (and its model
        # takes); a row of another length is a ``wrong_length`` problem. None: not fixed.
        self.feature_width: int | None = None
        # Keyed by the record object's id; the record is kept so its id cannot be reused.
        self._memo: dict[int, tuple[dict[str, Any], Encoded]] = {}
        self._failed: dict[int, str] = {}  # rows the chat template rejected, while encoding

    @property
    def uses_text(self) -> bool:
        """True when rows carry text or token ids for this task (a regression with features
        learns from the features alone)."""
        f = self.fields
        if self.task == "regression" and f.features:
            return False
        return bool(f.text is not None or f.messages or f.input_ids)

    def encode(self, rows: list[dict[str, Any]]) -> list[Encoded]:
        """Encode ``rows`` (memoised per record object, so subsets re-encode for free)."""
        todo = [r for r in rows if id(r) not in self._memo]
        if todo:
            for r, enc in zip(todo, self._encode(todo), strict=True):
                self._memo[id(r)] = (r, enc)
        return [self._memo[id(r)][1] for r in rows]

    def _encode(self, rows: list[dict[str, Any]]) -> list[Encoded]:
        out = [Encoded() for _ in rows]
        if self.uses_text:
            for enc, row, (ids, labels) in zip(out, rows, self._tokens(rows), strict=True):
                enc.ids, enc.labels = ids, labels
                enc.odd_id = getattr(ids, "odd", None)
                enc.odd_label = getattr(labels, "odd", None)
                if id(row) in self._failed:
                    enc.problems.append(("chat_template_error", self._failed.pop(id(row))))
        if self.task == "classification":
            for enc, row in zip(out, rows, strict=True):
                enc.label = self._class_id(row.get(self.fields.label or ""), enc)
        if self.task == "regression":
            for enc, row in zip(out, rows, strict=True):
                enc.target = _number(row.get(self.fields.target or ""))
        if self.fields.features and self.task in ("classification", "regression"):
            for enc, row in zip(out, rows, strict=True):
                enc.features = _features(row, self.fields.features)
                value = row.get(self.fields.features) if isinstance(self.fields.features,
                                                                    str) else None
                enc.feature_count = len(value) if isinstance(value, list) else None
        return out

    def size_for_builtin(self, encoded: list[Encoded]) -> None:
        """Size the range of ids for preflight's own model: every id the tokenizer produces
        (its size incl. added tokens, or the largest id seen). An id past the declared
        ``model.vocab_size`` is then the ``vocab`` check's finding in the gate, never an
        index error in preflight's embedding. Token ids read from a field keep the declared
        size: nothing else bounds them; with none declared (a pre-tokenized corpus, no
        model named), the largest id seen bounds them, as a tokenizer's output would be."""
        if not self.uses_text or (self.fields.input_ids and self.model.vocab_size):
            return
        seen = max((max(e.ids) for e in encoded if e.ids), default=-1)
        self.vocab_size = max(self.tokenizer_size, seen + 1)

    def problems(self, rows: list[dict[str, Any]]) -> list[list[tuple[str, str]]]:
        """Per row, what no model can train on: (code, detail) pairs, empty when fine."""
        out = []
        for enc in self.encode(rows):
            found = list(enc.problems)
            if not any(code == "chat_template_error" for code, _ in found):
                self._check(enc, found)  # a conversation never rendered has no tokens
            out.append(found)
        return out

    def _tokens(self, rows: list[dict[str, Any]]) -> list[tuple[list[int], list[int] | None]]:
        f = self.fields
        if f.input_ids:
            result = []
            for row in rows:
                ids = _ints(row.get(f.input_ids))
                labels = _ints(row.get(f.token_labels)) if f.token_labels else None
                result.append((ids, labels))
            return result  # type: ignore[return-value]  # _Ints are lists of ints
        if f.messages:
            out = []
            for row in rows:
                try:
                    out.append(self._chat(row.get(f.messages)))
                except Exception as e:  # the chat template rejects this conversation
                    self._failed[id(row)] = f"the chat template rejects it: {first_line(e)}"
                    out.append(([], []))
            return out
        texts = ["\n".join(as_text(value) or str(value or "")
                           for value in (record_value(row, name) for name in f.text_fields()))
                 for row in rows]
        # Cut long texts first: the tiny models see max_length tokens, never more.
        return [(ids, None) for ids in self._encode_texts([t[: self.max_length * 16]
                                                           for t in texts])]

    def _encode_texts(self, cut: list[str], *, specials: bool = True) -> list[list[int]]:
        if self._ids is not None:
            return [list(ids) for ids in self._ids(cut, specials)]
        return [list(t.encode("utf-8", "surrogatepass")) for t in cut]

    def _chat(self, turns: Any) -> tuple[list[int], list[int] | None]:
        """Token ids of a conversation and a mask of assistant tokens (labels: 1 where the
        assistant speaks): each turn ends where the rendered prefix up to it ends, counted
        without the tokenizer's added specials and shifted past the leading ones."""
        if not isinstance(turns, list) or not turns:
            return [], []
        prefixes = [self._render(turns[: k + 1]) for k in range(len(turns))]
        ids = self._encode_texts(prefixes[-1:])[0]
        bare = self._encode_texts(prefixes, specials=False)
        lead = _offset(ids, bare[-1])
        mask = [0] * len(ids)
        start = lead
        for turn, prefix_ids in zip(turns, bare, strict=True):
            end = min(lead + len(prefix_ids), len(ids))
            if isinstance(turn, dict) and turn.get("role") == "assistant":
                mask[start:end] = [1] * max(end - start, 0)
            start = end
        return ids, mask

    def _class_id(self, value: Any, enc: Encoded) -> int | None:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # a whole float is an integer, as in the checks
        if self.model.labels is not None:
            for i, declared in enumerate(self.model.labels):
                if value == declared and type(value) is type(declared):
                    return i
            enc.problems.append(("label_not_a_class", f"label {value!r} is not a declared class"))
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        enc.problems.append(("label_not_a_class", f"label {value!r} is not a class id"))
        return None

    def _check(self, enc: Encoded, problems: list[tuple[str, str]]) -> None:
        if enc.ids is not None:
            bad = [t for t in enc.ids if not 0 <= t < self.vocab_size]
            if bad:
                problems.append(("token_id_out_of_range",
                                 _out_of_range("token id", bad[0], enc.odd_id,
                                               self.vocab_size)))
        if enc.labels is not None and self.fields.token_labels:
            bad = [t for t in enc.labels if t != IGNORE and not 0 <= t < self.vocab_size]
            if bad:
                problems.append(("token_label_out_of_range",
                                 _out_of_range("token label", bad[0], enc.odd_label,
                                               self.vocab_size)))
        if self.task == "chat" and enc.labels is not None and not any(enc.labels[1:]):
            problems.append(("all_labels_ignored",
                             "no assistant token: every label is ignored (loss 0/0)"))
        if self.task == "lm" and enc.labels is not None and all(
            t == IGNORE for t in enc.labels[1:]
        ):
            problems.append(("all_labels_ignored",
                             "every token label is the ignore index: the row trains nothing "
                             "(a per-sequence mean loss is 0/0 = NaN)"))
        width = self.feature_width
        if width is not None and enc.feature_count is not None and enc.feature_count != width:
            problems.append(("wrong_length",
                             f"{self.fields.features}: {enc.feature_count} values, not {width} "
                             "(the length the sampled rows hold)"))
        if enc.label is not None and (
            enc.label < 0 or (self.classes is not None and enc.label >= self.classes)
        ):
            bound = f"[0, {self.classes})" if self.classes is not None else "[0, …)"
            problems.append(("label_out_of_range", f"class {enc.label} outside {bound}"))

    def set_classes(self, encoded: list[Encoded]) -> None:
        """With no class count declared, take it from the sample's largest class id."""
        if self.classes is None:
            seen = [e.label for e in encoded if e.label is not None and e.label >= 0]
            self.classes = max(seen, default=0) + 1


class Collate:
    """The built-in collate: rows -> ({"ids", "mask", "features"}, targets) for a task.

    ``vocab`` maps token ids to the tiny model's compact ids (the built-in models only
    embed the ids the sample uses, so a 100k-token vocabulary stays cheap); None keeps the
    real ids (a user's model with the built-in collate).
    """

    def __init__(self, encoder: Encoder, vocab: dict[int, int] | None = None) -> None:
        self.encoder = encoder
        self.vocab = vocab

    def __call__(self, rows: list[dict[str, Any]]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        enc = self.encoder.encode(rows)
        task, n = self.encoder.task, self.encoder.max_length
        inputs: dict[str, torch.Tensor] = {}
        if self.encoder.uses_text:
            if task in ("lm", "chat"):
                xs, ys = [], []
                for e in enc:
                    x, y = self._map(e.ids or []), self._targets(e)
                    s = target_window(y, n)
                    xs.append(x[s : s + n])
                    ys.append(y[s : s + n][: len(xs[-1])])  # token lists of unequal length
            else:
                xs = [self._map(e.ids or [])[:n] for e in enc]
                ys = [[] for _ in enc]
            width = max([len(x) for x in xs] + [1])
            ids = torch.zeros(len(enc), width, dtype=torch.long)
            mask = torch.zeros(len(enc), width, dtype=torch.bool)
            labels = torch.full((len(enc), width), IGNORE, dtype=torch.long)
            for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
                ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
                mask[i, : len(x)] = True
                if y:
                    labels[i, : len(y)] = torch.tensor(y, dtype=torch.long)
            inputs["ids"], inputs["mask"] = ids, mask
            if task in ("lm", "chat"):
                return inputs, labels
        if any(e.features is not None for e in enc):
            width = self.encoder.feature_width
            if width is None:
                width = max(len(e.features or []) for e in enc)
            feats = torch.full((len(enc), width), math.nan, dtype=torch.float32)
            for i, e in enumerate(enc):
                values = (e.features or [])[:width]
                feats[i, : len(values)] = torch.tensor(values, dtype=torch.float64).float()
            inputs["features"] = feats
        if task == "classification":
            labels = [e.label if e.label is not None and -2**63 <= e.label < 2**63
                      else NOT_A_CLASS for e in enc]
            return inputs, torch.tensor(labels, dtype=torch.long)
        return inputs, torch.tensor([e.target for e in enc], dtype=torch.float64).float()

    def _map(self, ids: list[int]) -> list[int]:
        if self.vocab is None:
            return ids
        # An id past the real vocabulary stays out of range (-1) so the guard stops it.
        return [self.vocab.get(t, -1) for t in ids]

    def _targets(self, e: Encoded) -> list[int]:
        """Next-token targets aligned with the inputs: the label (or the id) of the next
        position; -100 where the loss ignores it (not the assistant, an ignored label)."""
        ids = e.ids or []
        if e.labels is None:
            return [*self._map(ids[1:]), IGNORE]
        if self.encoder.task == "chat":  # labels is the assistant mask
            nxt = self._map(ids[1:])
            masked = [t if m else IGNORE for t, m in zip(nxt, e.labels[1:], strict=False)]
            return [*masked, IGNORE]
        shifted = [*e.labels[1:], IGNORE]
        return [t if t == IGNORE else self._map([t])[0] for t in shifted]


def _offset(ids: list[int], core: list[int]) -> int:
    """Where ``core`` (a text's ids without added specials) starts in ``ids`` (with them)."""
    for lead in range(len(ids) - len(core) + 1):
        if ids[lead : lead + len(core)] == core:
            return lead
    return 0


def target_window(targets: list[int], n: int) -> int:
    """Where a row's ``n``-token window starts: 0, unless every target there is ignored
    and a later one is not (a long prompt before the answer): then around that one."""
    if any(t != IGNORE for t in targets[:n]):
        return 0
    first = next((i for i, t in enumerate(targets) if t != IGNORE), None)
    return 0 if first is None else max(0, first - n // 2)


def compact_vocab(encoded: list[Encoded], vocab_size: int) -> dict[int, int]:
    """Compact ids (from 1; 0 is padding and unknown) for the in-range ids the rows use."""
    used: set[int] = set()
    for e in encoded:
        used.update(t for t in (e.ids or []) if 0 <= t < vocab_size)
        used.update(t for t in (e.labels or []) if 0 <= t < vocab_size)
    return {t: i + 1 for i, t in enumerate(sorted(used))}


def _classes(model: ModelFacts) -> int | None:
    if model.labels is not None:
        return len(model.labels)
    return model.num_classes


class _Ints(list):  # type: ignore[type-arg]
    """Token ids as ints; ``odd``: the first value that is no integer, as written."""

    odd: str | None = None


def _ints(value: Any) -> _Ints:
    """A list field's values as token ids, exact whatever their size (a whole float too:
    1e20 is 100000000000000000000, not -1); a value that is no integer is -1, out of range,
    so the range check stops it, and the first such is kept in ``odd`` to be named."""
    out = _Ints()
    if not isinstance(value, list):
        return out
    for v in value:
        whole = isinstance(v, float) and math.isfinite(v) and v.is_integer()
        if isinstance(v, int) and not isinstance(v, bool):
            out.append(v)
        elif whole:
            out.append(int(v))
        else:
            out.append(-1)  # not a token id: the range check reports it
            if out.odd is None:
                out.odd = _shown(v)
    return out


def _shown(value: Any) -> str:
    """A value as written, for a detail: strings quoted, JSON otherwise, at most 40 chars."""
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "an object"
    text = repr(value) if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _out_of_range(what: str, value: int, odd: str | None, size: int) -> str:
    """The detail for the first token id (or label) outside ``[0, size)``: its value as
    written (an id past int64 too), or, for one that is no integer, what was written."""
    if value == -1 and odd is not None:
        return f"{what} {odd} is not an integer (ids are in [0, {size}))"
    past = " (past int64: no tensor can hold it)" if not -2**63 <= value < 2**63 else ""
    return f"{what} {value} outside [0, {size}){past}"


def _number(value: Any) -> float:
    """A value as the float training would see: numbers as they are (an integer past
    float range is ±inf), NaN for anything else — a string "12.5" included, since a
    collate would not parse it either; the input check then names the row."""
    if isinstance(value, int | float):  # bool included: torch.tensor(True) is 1
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return math.nan


def _features(row: dict[str, Any], spec: str | list[str]) -> list[float]:
    if isinstance(spec, str):
        value = row.get(spec)
        if isinstance(value, list):
            return [_number(v) for v in value]
        return [_number(value)]
    return [_number(row.get(name)) for name in spec]
