"""``label_range``: labels a loss function cannot take — before they reach a GPU.

Three fields, each optional, checked when declared:

- ``fields.label`` (a class label): an integer in ``[0, model.num_classes)``, or a member of
  ``model.labels`` when the set is declared (strings, integers or both). A whole float reads
  as an integer (``0.0`` is class 0); a float with a fraction, a boolean, a list, an object or
  a string where integers are declared is ``label_wrong_type``; a missing or null label is
  ``label_null``. The class distribution is kept for the whole corpus: ``finish`` reports
  declared classes that never occur (``class_absent``) and classes holding more than
  ``max_class_share`` of the valid labels (``class_dominant``), both with a null row.
  With no classes declared but ``infer_classes``, the classes are the data's own: integer
  ids ``0..max``, or, when the first batch mostly holds strings (``holds_names``), the
  distinct names; then a blank name is ``label_null``, a non-string ``label_wrong_type``,
  and another class's spelling or typo ``label_variant``/``label_stray``
  (``preflight.checks.class_names``; their rows are found by reading the corpus again).
- ``fields.token_labels`` (a list per record): integers in ``[0, model.vocab_size)`` (or
  ``[0, model.num_classes)`` when no vocabulary size is declared: token classification),
  except the ignore index; a record whose labels are all ignored (or empty) has no token to
  learn from, so its mean loss is 0/0 = NaN (``all_labels_ignored``).
- ``fields.input_ids`` (a list per record): integers in ``[0, model.vocab_size)``; the ignore
  index is not a token id. Non-integers inside are ``token_ids_wrong_type``.

Whole floats count as integers in token lists too, as they do for class labels. With no
bound declared for a token list, negative values (other than the ignore index) and values
from 2**31 on (past any vocabulary: a corrupted id) are out of range. When both token lists
are declared they must have the same length per record
(``same_length``), as causal LM and token classification need.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl
from pydantic import Field, StrictBool, StrictFloat, StrictInt

from preflight.batch import Batch
from preflight.checks.base import Check, Context, Params, corpus_findings, findings
from preflight.checks.class_labels import (
    SHOWN_CLASSES,
    Classes,
    declared_classes,
    dense_top,
    holds_names,
    label_detail,
    label_values,
    show_key,
    strays,
)
from preflight.checks.class_names import suspect_names
from preflight.checks.registry import register
from preflight.checks.token_lists import (
    CLIP,
    all_ignored,
    int_lists,
    length_mismatch,
    out_of_range,
)

_LISTED_ABSENT = 100


class LabelRangeParams(Params):
    ignore_index: StrictInt = Field(
        -100,
        ge=-(2**31),
        le=2**31 - 1,
        description="Token label that the loss ignores (PyTorch's CrossEntropyLoss default); "
        "valid in token_labels, never in input_ids (a 32-bit integer).",
    )
    max_class_share: StrictFloat | None = Field(
        None,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="Flag a class holding more than this share of the valid class labels "
        "(class_dominant). None: do not flag.",
    )
    absent_classes: StrictBool = Field(
        True, description="Flag declared classes that never occur in the corpus (class_absent)."
    )
    infer_classes: StrictBool = Field(
        False,
        description="With neither model.num_classes nor model.labels: take the classes from "
        "the data instead of not running: 0 to the largest label, or the distinct names when "
        "most labels are strings; labels of another kind still fail (the default rules set "
        "this).",
    )
    same_length: StrictBool = Field(
        True,
        description="When both token_labels and input_ids are declared, flag records whose "
        "two lists differ in length (turn off for seq2seq data).",
    )


@register("label_range")
class LabelRange(Check):
    """Class labels, token labels and token ids outside what the model declares."""

    description = (
        "Class labels outside num_classes or the declared labels, wrong type or null; token "
        "labels and token ids outside the vocabulary; samples whose labels are all ignored."
    )
    Params = LabelRangeParams
    fixes = ("quarantine", "none", "drop")
    merged = ("_counts", "_first", "_minus_one")
    revisited = ("_hits",)

    def __init__(self, params: LabelRangeParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        self._classes = declared_classes(ctx) if ctx.fields.label else None
        # No classes declared but asked to infer them: any non-negative integer is a
        # class; the range the data shows is reported, not judged.
        self._inferred = (ctx.fields.label is not None and self._classes is None
                          and params.infer_classes)
        if self._inferred:
            self._classes = Classes(CLIP, None, inferred=True)
        # Inferred classes: names (strings) or ids, decided on the corpus's first batch
        # (``scan_plan`` shares the decision with a distributed run's workers).
        self._names: bool | None = None
        # class names flagged from the counts -> (code, detail); their rows, read again
        self._suspects: dict[str, tuple[str, str]] | None = None
        self._hits: list[pl.DataFrame] = []
        self._counts: Counter[str] = Counter()
        # labels of -1 that are no class: how the hub marks an unlabeled (test) split
        self._minus_one = 0
        # where each valid class was first seen, (file_index, row): a stray label's record
        self._first: dict[str, tuple[int, int]] = {}
        self._strays: list[str] = []
        self._absent: list[str] = []
        self._dominant: list[str] = []

    def required_fields(self) -> list[str]:
        f = self.ctx.fields
        return [name for name in (f.label, f.token_labels, f.input_ids) if name]

    def config_problem(self) -> str | None:
        """Why the rule cannot run with the declared fields and model facts, or None."""
        f, m = self.ctx.fields, self.ctx.model
        if not (f.label or f.token_labels or f.input_ids):
            return (
                "no label, token_labels or input_ids field declared or inferred; set "
                "fields.label (with model.num_classes or model.labels), fields.token_labels "
                "or fields.input_ids in the rules file"
            )
        if f.label and m.num_classes is None and m.labels is None and not self._inferred:
            return (
                f"fields.label is {f.label!r} but the classes are not declared; pass "
                "--num-classes N, or set model.num_classes or model.labels in the rules file"
            )
        if m.labels is not None:
            if not m.labels:
                return "model.labels is empty; list the class labels or use model.num_classes"
            seen: set[tuple[type, Any]] = set()
            for value in m.labels:
                if (type(value), value) in seen:
                    return f"model.labels lists {value!r} twice; each class once"
                seen.add((type(value), value))
            if m.num_classes is not None and len(m.labels) != m.num_classes:
                return (
                    f"model.labels lists {len(m.labels)} classes but model.num_classes is "
                    f"{m.num_classes}; make them agree or give only one"
                )
            bad = [v for v in m.labels if isinstance(v, int) and m.num_classes is not None
                   and not 0 <= v < m.num_classes]
            if bad:
                return (
                    f"model.labels has {bad[0]!r}, outside [0, {m.num_classes}) given by "
                    "model.num_classes"
                )
        return None

    def scan_plan(self, first: Batch) -> dict[str, Any]:
        """Names or ids, judged on the first batch as the local run judges it."""
        if self._inferred and self._names is None and len(first):
            self._decide(first)
        return {"_names": self._names} if self._names is not None else {}

    def apply_plan(self, plan: dict[str, Any]) -> None:
        super().apply_plan(plan)
        if plan.get("_names"):
            self._classes = Classes(None, None, inferred=True, names=True)

    def _decide(self, batch: Batch) -> None:
        label = self.ctx.fields.label
        assert label is not None
        self.apply_plan({"_names": holds_names(batch, label)})

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        f = self.ctx.fields
        parts: list[pl.DataFrame] = []
        if self._inferred and self._names is None and len(batch):
            self._decide(batch)
        if f.label and self._classes is not None:
            parts.extend(self._scan_label(batch, f.label, self._classes))
        labels = ids = None
        if f.token_labels:
            labels, problems = int_lists(batch, f.token_labels, "token_labels_wrong_type")
            parts.append(problems)
            bound = self.ctx.model.vocab_size or self.ctx.model.num_classes
            parts.append(out_of_range(labels, f.token_labels, bound, self.params.ignore_index,
                                       "token_label_out_of_range"))
            parts.append(all_ignored(labels, f.token_labels, self.params.ignore_index))
        if f.input_ids:
            ids, problems = int_lists(batch, f.input_ids, "token_ids_wrong_type")
            parts.append(problems)
            parts.append(out_of_range(ids, f.input_ids, self.ctx.model.vocab_size, None,
                                       "token_id_out_of_range"))
        if labels is not None and ids is not None and self.params.same_length:
            parts.append(length_mismatch(labels, ids, f.token_labels, f.input_ids))
        parts = [p for p in parts if p.height]
        return pl.concat(parts).sort("i", maintain_order=True) if parts else None

    def _scan_label(self, batch: Batch, name: str, classes: Classes) -> list[pl.DataFrame]:
        # CSV writes every value as text: there "2" is the number 2 where integers are
        # declared, and an empty cell is a missing label.
        textual = getattr(batch, "textual", False)
        values = label_values(batch, name, textual=textual,
                              numbers=textual and (classes.names or "integer" in classes.kinds))
        kind, as_int, as_str = pl.col("kind"), pl.col("int"), pl.col("str")
        if classes.names:  # names from the data: any non-blank string is a class
            code = (pl.when(kind == "null").then(pl.lit("label_null"))
                    .when(kind != "string").then(pl.lit("label_wrong_type"))
                    .when(as_str.str.strip_chars() == "").then(pl.lit("label_null")))
            return self._judged(batch, name, classes, values.with_columns(code=code, key=as_str))
        ints = pl.Series(classes.ints or [], dtype=pl.Int64)
        strs = pl.Series(classes.strs, dtype=pl.String)
        # A null ``int`` of an integer (beyond Int64) is never in range nor in the set.
        if classes.ints is not None:
            int_code, int_ok = "label_not_in_set", as_int.is_in(ints.implode())
        else:
            int_code, int_ok = "label_out_of_range", as_int.is_between(0, classes.num_classes - 1)
        code = (
            pl.when(kind == "null").then(pl.lit("label_null"))
            .when(~kind.is_in(sorted(classes.kinds))).then(pl.lit("label_wrong_type"))
            .when((kind == "integer") & ~int_ok.fill_null(False)).then(pl.lit(int_code))
            .when((kind == "string") & ~as_str.is_in(strs.implode()).fill_null(False))
            .then(pl.lit("label_not_in_set"))
        )
        key = pl.when(kind == "integer").then(as_int.cast(pl.String)).otherwise(as_str)
        return self._judged(batch, name, classes, values.with_columns(code=code, key=key))

    def _judged(self, batch: Batch, name: str, classes: Classes, judged: pl.DataFrame
                ) -> list[pl.DataFrame]:
        """Count the valid labels (``code`` null) by ``key``; the findings of the others."""
        valid = judged.filter(pl.col("code").is_null())
        self._counts.update(dict(valid.get_column("key").value_counts().iter_rows()))
        if self._inferred and not classes.names:
            first = valid.group_by("key").agg(pl.col("i").min())
            for key, i in first.iter_rows():
                self._first.setdefault(key, (batch.file_index, int(batch.rows[i])))
        bad = judged.filter(pl.col("code").is_not_null())
        if not bad.height:
            return []
        self._minus_one += int(((bad.get_column("kind") == "integer")
                                & (bad.get_column("int") == -1)).sum())
        # Details for flagged records only: a few words each, formatted in Python.
        details = [
            label_detail(name, c, k, shown, classes)
            for c, k, shown in bad.select("code", "kind", "shown").iter_rows()
        ]
        return [findings({"i": bad.get_column("i")}, bad.get_column("code"), details)]

    def wants_revisit(self) -> bool:
        """Read the corpus again for the rows of names flagged from the class counts."""
        if not self._names or self._suspects is not None:
            return False
        self._suspects = suspect_names(dict(self._counts), self.ctx.fields.label or "")
        return bool(self._suspects)

    def revisit_plan(self) -> dict[str, Any]:
        return {"_suspects": self._suspects}

    def revisit(self, batch: Batch) -> None:
        assert self._suspects is not None and self.ctx.fields.label is not None
        textual = getattr(batch, "textual", False)
        values = label_values(batch, self.ctx.fields.label, textual=textual, numbers=textual)
        hit = values.filter((pl.col("kind") == "string")
                            & pl.col("str").is_in(pl.Series(list(self._suspects)).implode()))
        if hit.height:
            index = hit.get_column("i").to_numpy()
            self._hits.append(pl.DataFrame({
                "file_index": pl.Series([batch.file_index] * hit.height, dtype=pl.Int32),
                "row": pl.Series(batch.rows[index], dtype=pl.Int64),
                "key": hit.get_column("str")}))

    def finish(self) -> pl.DataFrame | None:
        if self._classes is None:
            return None
        total = sum(self._counts.values())
        if self._names:  # the classes are the names the data holds
            self._classes.keys = self._classes.strs = sorted(self._counts)
        elif self._inferred:  # the classes are what the data holds
            top = max((int(k) for k in self._counts), default=-1)
            self._classes.keys = [str(k) for k in range(top + 1)]
            self._strays = strays({int(k): n for k, n in self._counts.items()}, total)
        keys = self._classes.keys
        self._absent = [k for k in keys if not self._counts.get(k)]
        share = self.params.max_class_share
        self._dominant = [
            k for k in keys
            if share is not None and total and self._counts.get(k, 0) / total > share
        ]
        details: list[tuple[str, str]] = []
        if self.params.absent_classes and not self._inferred:
            details += [("class_absent", f"class {show_key(k, self._classes)} never occurs "
                                         f"({total} valid labels)") for k in self._absent]
        details += [
            ("class_dominant",
             f"class {show_key(k, self._classes)} has {self._counts[k]} of {total} valid "
             f"labels ({self._counts[k] / total:.1%}), more than max_class_share {share}")
            for k in self._dominant
        ]
        stray = self._named_findings() if self._names else self._stray_findings(total)
        corpus = corpus_findings(details)
        parts = [f for f in (stray, corpus) if f is not None]
        return pl.concat(parts) if parts else None

    def _named_findings(self) -> pl.DataFrame | None:
        """The rows of the flagged names (``wants_revisit`` found them, a second read
        located them)."""
        if not self._hits:
            return None
        hits = pl.concat(self._hits)
        keys = hits.get_column("key").to_list()
        assert self._suspects is not None
        return findings({"file_index": hits.get_column("file_index"),
                         "row": hits.get_column("row")},
                        [self._suspects[k][0] for k in keys],
                        [self._suspects[k][1] for k in keys])

    def _stray_findings(self, total: int) -> pl.DataFrame | None:
        if not self._strays:
            return None
        dense = dense_top({int(k): n for k, n in self._counts.items()}, total)
        where = [self._first[str(k)] for k in self._strays]
        name = self.ctx.fields.label
        details = [f"{name}: {k} occurs once, past the classes 0..{dense} that hold the labels "
                   f"(most classes between never occur): a stray label? set --num-classes"
                   for k in self._strays]
        return findings({"file_index": pl.Series([w[0] for w in where], dtype=pl.Int32),
                         "row": pl.Series([w[1] for w in where], dtype=pl.Int64)},
                        "label_stray", details)

    def summary(self) -> dict[str, Any]:
        if self._classes is None:
            return {}
        keys = self._classes.keys
        named = {"class_names": True} if self._names else {}  # the classes are names
        return {
            **named,
            "classes": {k: self._counts[k] for k in keys if self._counts.get(k)},
            "num_classes": len(keys),
            "labelled": sum(self._counts.values()),
            "absent": self._absent[:_LISTED_ABSENT],
            "absent_count": len(self._absent),
            "dominant": self._dominant,
            "inferred": self._inferred,
        }

    def notes(self) -> list[str]:
        if not self._inferred or self._classes is None:
            return []
        if not self._classes.keys:
            unlabeled = (f"; {self._minus_one:,} label(s) are -1, as the hub marks the labels "
                         "of an unlabeled split (a test split?): train on a labelled split"
                         if self._minus_one else "")
            return ["no valid class label in the data; set --num-classes to check against "
                    f"the model{unlabeled}"]
        if self._names:
            keys = self._classes.keys
            listed = ", ".join(map(repr, keys[:SHOWN_CLASSES])) + (
                " …" if len(keys) > SHOWN_CLASSES else "")
            return [f"classes inferred from the data: {len(keys):,} name"
                    f"{'s' if len(keys) > 1 else ''} ({listed}); set model.labels to check "
                    "against the model"]
        top = len(self._classes.keys) - 1
        absent = [k for k in self._classes.keys if not self._counts.get(k)]
        if absent == ["0"]:  # 1..K, as stars and ratings count: no stray, 0-based or not
            return [f"classes inferred as 0..{top} from the data; 0 never occurs: the labels "
                    f"count from 1 (1..{top}); a model with {top} outputs needs them shifted "
                    f"to 0..{top - 1}, and --num-classes checks them against the model"]
        if absent:
            listed = ", ".join(absent[:SHOWN_CLASSES]) + (" …" if len(absent) > SHOWN_CLASSES
                                                            else "")
            return [f"classes inferred as 0..{top} from the data; {listed} never occur — a "
                    "stray label? set --num-classes to check against the model"]
        return [f"classes inferred as 0..{top} from the data; set --num-classes to check "
                "against the model"]
