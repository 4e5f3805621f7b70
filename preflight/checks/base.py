"""The seam every check plugs into.

A check is a class registered by name with a pydantic ``Params`` model (its rules-file
parameters, with defaults and descriptions). The pipeline calls ``scan`` once per batch and
``finish`` once at the end; both return findings as a polars frame, built with ``findings``:

- ``scan`` findings point at records of the batch by ``i`` (index in the batch);
- ``finish`` findings point at records by ``file_index`` and ``row`` (corpus-wide checks);
  a finding about the corpus as a whole ("class 3 never occurs") has a null ``row`` and
  counts as one violation.

Each finding has a stable snake_case ``code`` that tests and counters key on, a ``detail``
for people, and optionally ``cluster`` (the row of a kept duplicate), ``partner`` (the row a
near-duplicate was confirmed similar to) and ``snippet`` (raw text around the problem,
redacted by the pipeline unless ``--show-text``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

from preflight.batch import repeated
from preflight.checks import state

if TYPE_CHECKING:
    from preflight.batch import Batch
    from preflight.config import Fields, ModelFacts
    from preflight.tokenizer.counter import TokenCounter

FINDING_SCHEMA: dict[str, pl.DataType] = {
    "code": pl.String(),
    "detail": pl.String(),
    "cluster": pl.Int64(),
    "partner": pl.Int64(),
    "snippet": pl.String(),
}


class Params(BaseModel):
    """Base for check parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Context:
    """What a check knows besides its parameters: the resolved fields and model facts."""

    fields: Fields
    model: ModelFacts
    tokenizer: TokenCounter | None = None
    eval_path: str | None = None
    # What the started checks ask of the work they share per batch: ``"token_ids"`` when a
    # check reads token ids (``vocab``), so token counts come from the ids it will need
    # anyway; without it a count never builds the ids.
    needs: set[str] = field(default_factory=set, compare=False)
    # The corpus's first batch holds string fields or lists of strings besides the text
    # and messages: the character checks then have something to read with no text field.
    strings: bool = False

    @property
    def text_fields(self) -> tuple[str, ...]:
        return tuple(self.fields.text_fields())

    @property
    def messages(self) -> str | None:
        return self.fields.messages


class Check:
    """Base class: override ``scan`` (and ``finish`` for corpus-wide checks)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Params: ClassVar[type[Params]] = Params
    # Fix actions this check accepts in a rule's ``fix:``; the first is the default.
    fixes: ClassVar[tuple[str, ...]] = ("none", "quarantine", "drop")
    # True when the check reads text fields (it then needs at least one declared).
    needs_text: ClassVar[bool] = False
    # For a distributed executor, which scans batches on workers (each with its own
    # instance) and merges what they built into one instance in read order before
    # ``finish``: the attributes holding corpus-wide state built by ``scan`` and by
    # ``revisit`` (merged by type, see ``preflight.checks.state``). Checks whose findings
    # only concern records sharing a key with another (duplicates) keep their per-record
    # state as ``keyed_rows`` instead, so the executor can group on the keys and merge only
    # the records in shared groups.
    merged: ClassVar[tuple[str, ...]] = ()
    revisited: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params: BaseModel, ctx: Context) -> None:
        self.params = params
        self.ctx = ctx

    @classmethod
    def reads_without_text(cls, params: dict[str, Any]) -> bool:
        """True when, with these rule parameters, a check that ``needs_text`` reads other
        fields too and so runs on data with no text field (the character checks)."""
        return False

    def config_problem(self) -> str | None:
        """Why this check cannot run with the rules as given (None when it can): the rule
        then reports status ``error`` with this message instead of a silent pass."""
        if self.needs_text and not self.ctx.text_fields and not self.ctx.messages:
            return "no text field declared or inferred; set fields.text in the rules file"
        return None

    def required_fields(self) -> list[str]:
        """Fields that must appear in the data for this check to run at all."""
        if self.needs_text:
            return [*self.ctx.text_fields, *([self.ctx.messages] if self.ctx.messages else [])]
        return []

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        """Findings for one batch (``i``-indexed), or None when there are none."""
        return None

    def wants_revisit(self) -> bool:
        """After the first read: True to see every batch once more (``revisit``) before
        ``finish``, e.g. to fetch the text of candidate pairs found from compact state."""
        return False

    def revisit(self, batch: Batch) -> None:
        """See a batch again during the second read (only when ``wants_revisit``)."""

    def export_state(self, *, revisit: bool = False) -> dict[str, Any]:
        """Take the state built by ``scan`` (or ``revisit``) since the last call."""
        names = self.revisited if revisit else self.merged
        out = {name: getattr(self, name) for name in names}
        for name, value in out.items():
            setattr(self, name, state.empty_like(value))
        return out

    def merge_state(self, part: dict[str, Any]) -> None:
        """Add a worker's state (call in read order)."""
        for name, value in part.items():
            setattr(self, name, state.merge(getattr(self, name), value))

    def key_groups(self) -> tuple[tuple[str, ...], ...]:
        """The key columns of ``keyed_rows``, one tuple per group: a record can only be a
        finding when, in some group, another record has the same key."""
        return ()

    def keyed_rows(self) -> pl.DataFrame | None:
        """The keyed state built since the last call as rows (``file_index``, ``row`` and
        the ``keyed`` columns), taken from the instance; None for checks without keys."""
        return None

    def merge_keyed(self, rows: pl.DataFrame) -> None:
        """Add keyed rows, in read order (only those whose keys are shared are needed)."""

    def scan_plan(self, first: Batch) -> dict[str, Any]:
        """Values every worker's instance must share before scanning, which the local run
        derives from the corpus's first batch (a calibration); the driver computes them
        from that batch and workers ``apply_plan`` them."""
        return {}

    def revisit_plan(self) -> dict[str, Any]:
        """What a worker's instance needs before ``revisit`` (set by ``wants_revisit``)."""
        return {}

    def revisit_records(self) -> np.ndarray | None:
        """The record keys ``revisit`` needs to see (None: every record), so a distributed
        executor reads again only the pieces that hold them."""
        return None

    def apply_plan(self, plan: dict[str, Any]) -> None:
        """Give a worker's instance the driver's ``scan_plan`` or ``revisit_plan``."""
        for name, value in plan.items():
            setattr(self, name, value)

    def finish(self) -> pl.DataFrame | None:
        """Corpus-wide findings (``file_index``/``row``-indexed), or None."""
        return None

    def summary(self) -> dict[str, Any]:
        """Extra numbers for the report (e.g. per-code-point counts)."""
        return {}

    def notes(self) -> list[str]:
        """What people must know beside the verdict (an estimate it rests on, an assumption
        made), shown with the rule in every report format; call after ``finish``."""
        return []

    def texts(self, batch: Batch) -> pl.DataFrame:
        """This check's view of the batch's text: ``i``, ``field``, ``text``."""
        return batch.texts(self.ctx.text_fields, self.ctx.messages)


def findings(
    index: dict[str, Any], code: Any, detail: Any, *, cluster: Any = None, partner: Any = None,
    snippet: Any = None,
) -> pl.DataFrame:
    """Build a findings frame. ``index`` is ``{"i": ...}`` or ``{"file_index": ..., "row": ...}``;
    the other arguments are columns or scalars broadcast to the index's length."""
    cols: dict[str, Any] = dict(index)
    n = len(next(iter(index.values())))
    for name, value in (("code", code), ("detail", detail), ("cluster", cluster),
                        ("partner", partner), ("snippet", snippet)):
        if isinstance(value, pl.Series | list):
            cols[name] = pl.Series(name, value, dtype=FINDING_SCHEMA[name])
        else:
            cols[name] = repeated(value, n, FINDING_SCHEMA[name], name)
    return pl.DataFrame(cols)


def corpus_findings(details: list[tuple[str, str]]) -> pl.DataFrame | None:
    """Findings that name no record (a corpus-level mismatch), from (code, detail) pairs;
    None when there are none."""
    if not details:
        return None
    n = len(details)
    return findings(
        {"file_index": pl.Series([None] * n, dtype=pl.Int32),
         "row": pl.Series([None] * n, dtype=pl.Int64)},
        [c for c, _ in details],
        [d for _, d in details],
    )
