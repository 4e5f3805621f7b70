"""The control batch: rows in spec by construction (same fields, same count, similar
lengths, valid ranges, finite values) with a pattern a working model learns quickly. It
goes through the same collate, model and loop as the real sample: if it fails too, the
fault is in the code, not the data."""

from __future__ import annotations

import math
import random
from typing import Any

from preflight.config import Fields, ModelFacts
from preflight.field_paths import record_value
from preflight.smoke.encode import Encoder

WORDS = tuple(str.split(
    "the of and to in is was for on that with as by at from his her they this which were "
    "be are or an had not but have one all their has been would more when who will there "
    "can out about so up said what its into them than some could other time only new these "
    "two may first then do any like"
))


def control_rows(task: str, fields: Fields, model: ModelFacts, real: list[dict[str, Any]],
                 *, seed: int, vocab_size: int, classes: int | None, max_length: int,
                 center: float = 0.0, scale: float = 1.0) -> list[dict[str, Any]]:
    """One in-spec row per real row, in the real rows' layout; regression targets on the
    real targets' scale (``center`` + ``scale`` times a unit linear function)."""
    rng = random.Random(seed)
    width = feature_width(real, fields)
    listed = isinstance(fields.features, str) and 2 * sum(
        isinstance(r.get(fields.features), list) for r in real) >= len(real)
    weights = [rng.gauss(0, 1) for _ in range(max(width, 1))]
    norm = math.sqrt(sum(w * w for w in weights)) or 1.0
    weights = [w / norm for w in weights]
    out = []
    for i, row in enumerate(real):
        new = dict(row)
        if fields.id:
            new[fields.id] = f"control-{i}"
        cls = i % classes if classes else 0
        words = _words(rng, _length(row, fields, max_length), start=cls * 7)
        for name in fields.text_fields():
            new[name] = words
        if fields.messages:
            answer = _words(rng, _length(row, fields, max_length, answer=True), cls * 7)
            new[fields.messages] = [{"role": "user", "content": words},
                                    {"role": "assistant", "content": answer}]
        if fields.input_ids:
            k = max(2, min(64, vocab_size - 1))
            first = rng.randrange(k)
            ids = [1 + (first + j) % k for j in range(min(max_length + 1, 32))]
            new[fields.input_ids] = ids
            if fields.token_labels:
                new[fields.token_labels] = list(ids)
        if task == "classification" and fields.label:
            new[fields.label] = model.labels[cls] if model.labels else cls
        xs = [rng.gauss(0, 1) for _ in range(width)]
        if fields.features and task == "classification" and width:
            xs[cls % width] += 3.0
        if fields.features:
            if isinstance(fields.features, str):
                # The modal shape in every row: a row of another (null, or a number among
                # vectors) got one number, padded with NaN beside the others' vectors, and
                # the in-spec batch failed: a code fault for a data fault.
                new[fields.features] = xs if listed else xs[0]
            else:
                new.update(dict(zip(fields.features, xs, strict=False)))
        if task == "regression" and fields.target:
            unit = sum(w * x for w, x in zip(weights, xs, strict=False)) if width else (
                len(words.split()) / max_length - 0.5) * 2  # text only: a function of length
            new[fields.target] = center + scale * unit
        out.append(new)
    return out


def _words(rng: random.Random, n: int, start: int) -> str:
    """``n`` words of a fixed cycle, from a random point of its class's part of the cycle."""
    offset = start + rng.randrange(8)
    return " ".join(WORDS[(offset + j) % len(WORDS)] for j in range(max(n, 4)))


def _length(row: dict[str, Any], fields: Fields, max_length: int, *,
            answer: bool = False) -> int:
    """Words for a control text: about the real row's (its text fields, or its chat turns:
    the assistant's for an answer, the others' for the prompt), capped near what the models
    see."""
    chars = sum(len(str(record_value(row, n) or "")) for n in fields.text_fields())
    turns = row.get(fields.messages) if fields.messages else None
    if isinstance(turns, list):
        chars += sum(len(str(t.get("content") or "")) for t in turns if isinstance(t, dict)
                     and (t.get("role") == "assistant") == answer)
    return max(8, min(chars // 5, max_length))


def feature_width(real: list[dict[str, Any]], fields: Fields) -> int:
    """The features' length in the control rows, and in the built-in model and collate:
    the modal length of the real rows (a null or a number counts as one value); on a tie,
    the shortest."""
    if not fields.features:
        return 0
    if not isinstance(fields.features, str):
        return len(fields.features)
    widths = [len(r[fields.features]) if isinstance(r.get(fields.features), list) else 1
              for r in real]
    return max(sorted(set(widths)), key=widths.count) if widths else 1


def fix_feature_width(task: str, encoder: Encoder, rows: list[dict[str, Any]],
                      fields: Fields) -> str | None:
    """Give the built-in collate one length for a list feature field (the control's, so
    both batches fit one model): the modal length, held by at least 90% of the sampled rows
    (the gate's own ``wrong_length`` share); a row of another length is then that row's
    problem, a data fault. None, or why nothing can train: ragged vectors, or empty ones
    only. A modal length below the longest made the in-spec control batch too narrow for
    the model (sized by the longest), a code fault for a data fault."""
    name = fields.features
    if task not in ("classification", "regression") or not isinstance(name, str):
        return None
    lists = [len(v) for r in rows if isinstance(v := r.get(name), list)]
    if 2 * len(lists) < len(rows):  # a number per row: one value, as it always was
        return None
    width = feature_width(rows, fields)
    held = sum(n == width for n in lists)
    if 10 * held < 9 * len(lists):
        return (f"{name} holds vectors of {len(set(lists))} lengths (the commonest, {width}, "
                f"in {held} of {len(lists)} sampled rows): the built-in model takes one "
                "length; smoke-test a model that takes these with --model and its own collate")
    if width == 0 and not encoder.uses_text:
        return f"nothing to learn {task} from: {name} is empty ([]) in the sampled rows"
    encoder.feature_width = width
    return None
