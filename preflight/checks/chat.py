"""``chat_format``: conversations a chat template would reject or train on wrongly.

The field declared as ``fields.messages`` holds a list of turns ``{role, content}`` (OpenAI /
Hugging Face chat style). The rules, each with its own code:

- the field is a list (``not_a_list``; a missing or null value too), not empty
  (``empty_conversation``), of objects (``turn_not_object``);
- every turn has a ``role`` (``missing_role``) from ``roles`` (``unknown_role``); a
  ``system`` turn only as the first turn (``system_not_first``);
- ``content`` is a string (``content_not_string``: a list of parts, a number, an object) and,
  unless ``allow_empty_content``, not missing, null, empty or whitespace only
  (``empty_content``) — except an assistant turn that carries ``tool_calls`` (OpenAI style:
  its content may be null or empty);
- with ``alternate``, the user, assistant and tool turns follow each other as chat templates
  require (``not_alternating``): the first is ``user``; ``user`` is followed by
  ``assistant``; ``assistant`` by ``user`` or ``tool``; ``tool`` by ``tool`` (parallel calls)
  or ``assistant``. Any other role allowed in ``roles`` (``function``, ``ipython``) counts as
  a tool turn. The system turn, unknown roles and non-object turns are left out of this
  sequence (they have their own codes); alternation is checked only when ``user`` and
  ``assistant`` are both allowed roles;
- with ``require_assistant``, at least one assistant turn (``no_assistant_turn``: nothing to
  learn from with assistant-only loss); with ``require_last_assistant`` (off by default,
  since prompt-only data ends with a user turn), the last turn is the assistant's
  (``last_turn_not_assistant``: often a truncated conversation).

The typed column (a list of structs with a string ``role``) is checked with polars over one
row per turn; a batch where the field has another shape (mixed JSON types, content given as a
list of parts in some records) is first turned into the same table from the Python values.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl
from pydantic import Field, StrictBool

from preflight.batch import Batch, positions, repeated
from preflight.checks.base import Check, Context, Params, findings
from preflight.checks.registry import register
from preflight.format_expr import format_str
from preflight.json_types import JSON_TYPE_NOUNS, dtype_kind, json_type

# Which kind of turn may follow which (None: the first turn of the sequence); "tool" stands
# for every allowed role besides system, user and assistant.
_NEXT: dict[str | None, tuple[str, ...]] = {
    None: ("user",),
    "user": ("assistant",),
    "assistant": ("user", "tool"),
    "tool": ("tool", "assistant"),
}
_TURNS_SCHEMA: dict[str, pl.DataType] = {
    "i": pl.UInt32(),
    "turn": pl.Int64(),
    "is_object": pl.Boolean(),
    "turn_type": pl.String(),
    "role": pl.String(),
    "role_other": pl.String(),
    "content_kind": pl.String(),
    "content": pl.String(),
    "tool_calls": pl.Boolean(),
}


class ChatFormatParams(Params):
    roles: list[str] = Field(
        default_factory=lambda: ["system", "user", "assistant", "tool"],
        min_length=1,
        description="Roles a turn may have (case-sensitive).",
    )
    alternate: StrictBool = Field(
        True,
        description="User and assistant turns alternate, starting with user; tool turns "
        "follow an assistant turn or another tool turn and are followed by assistant or tool.",
    )
    require_assistant: StrictBool = Field(
        True, description="Every conversation has at least one assistant turn."
    )
    require_last_assistant: StrictBool = Field(
        False, description="The last turn is the assistant's (off: prompt-only data is valid)."
    )
    allow_empty_content: StrictBool = Field(
        False,
        description="Accept missing, null, empty or whitespace-only content (an assistant "
        "turn with tool_calls may always have empty content).",
    )


@register("chat_format")
class ChatFormat(Check):
    """Chat conversations: roles, system turn first, alternation, content present and text."""

    description = (
        "Chat messages: allowed roles, system turn first, user/assistant alternation, "
        "non-empty string content, an assistant turn."
    )
    Params = ChatFormatParams
    fixes = ("quarantine", "none", "drop")
    merged = ("_conversations", "_turns", "_roles")

    def __init__(self, params: ChatFormatParams, ctx: Context) -> None:
        super().__init__(params, ctx)
        self._conversations = 0
        self._turns = 0
        self._roles: Counter[str] = Counter()

    def config_problem(self) -> str | None:
        """Why the rule cannot run (no messages field), or None."""
        if not self.ctx.messages:
            return "no messages field declared or inferred; set fields.messages in the rules file"
        return None

    def required_fields(self) -> list[str]:
        return [self.ctx.messages] if self.ctx.messages else []

    def scan(self, batch: Batch) -> pl.DataFrame | None:
        name = self.ctx.messages
        if not name:
            return None
        records, turns = _tables(batch, name)
        self._count(records, turns)
        parts = [*self._record_findings(name, records, turns), *self._turn_findings(name, turns)]
        parts = [p for p in parts if p.height]
        if not parts:
            return None
        return (
            pl.concat(parts)
            .sort("i", "turn", nulls_last=True, maintain_order=True)
            .drop("turn")
        )

    def _count(self, records: pl.DataFrame, turns: pl.DataFrame) -> None:
        self._conversations += records.filter(pl.col("kind") == "array").height
        self._turns += turns.height
        roles = turns.get_column("role").drop_nulls().value_counts()
        self._roles.update(dict(roles.iter_rows()))

    def _record_findings(self, name: str, records: pl.DataFrame,
                         turns: pl.DataFrame) -> list[pl.DataFrame]:
        p = self.params
        kind, n = pl.col("kind"), pl.col("n")
        per_record = turns.group_by("i").agg(
            has_assistant=(pl.col("role") == "assistant").any(),
            last_role=pl.col("role").sort_by("turn").last(),
        )
        frame = records.join(per_record, on="i", how="left")
        conversation = (kind == "array") & (n > 0)
        rules: list[tuple[str, pl.Expr, pl.Expr]] = [
            ("not_a_list", kind != "array",
             pl.when(kind == "null").then(pl.lit(f"{name}: missing or null"))
             .otherwise(format_str(f"{name}: expected a list of turns, got {{}}",
                                  kind.replace_strict(_NOUN, default=kind)))),
            ("empty_conversation", (kind == "array") & (n == 0),
             pl.lit(f"{name}: empty list, no turns")),
        ]
        if p.require_assistant:
            rules.append(("no_assistant_turn",
                          conversation & ~pl.col("has_assistant").fill_null(False),
                          pl.lit(f"{name}: no assistant turn, nothing to learn from")))
        if p.require_last_assistant:
            rules.append((
                "last_turn_not_assistant",
                conversation & (pl.col("last_role").fill_null("") != "assistant"),
                format_str(f"{name}[{{}}]: last turn is {{}}, not 'assistant'", n - 1,
                           format_str("'{}'", pl.col("last_role"))
                           .fill_null(pl.lit("without role"))),
            ))
        out = []
        for code, flag, detail in rules:
            hit = frame.filter(flag).select("i", detail.alias("detail"))
            out.append(_findings(hit, code))
        return out

    def _turn_findings(self, name: str, turns: pl.DataFrame) -> list[pl.DataFrame]:
        p = self.params
        allowed = p.roles
        obj, role, other = pl.col("is_object"), pl.col("role"), pl.col("role_other")
        content, ckind = pl.col("content"), pl.col("content_kind")
        at = format_str(f"{name}[{{}}]: ", pl.col("turn"))
        listed = ", ".join(allowed)
        rules: list[tuple[str, pl.Expr, pl.Expr]] = [
            ("turn_not_object", ~obj,
             format_str("{}{} is not an object with role and content", at,
                       pl.col("turn_type").replace_strict(_NOUN, default=pl.col("turn_type")))),
            ("missing_role", obj & role.is_null() & other.is_null(),
             format_str("{}no role", at)),
            ("unknown_role",
             obj & (other.is_not_null() | (role.is_not_null() & ~role.is_in(allowed))),
             format_str(f"{{}}role {{}} not in {listed}", at,
                       pl.coalesce(other, format_str("'{}'", role)))),
            ("content_not_string", obj & ~ckind.is_in(["string", "null"]),
             format_str("{}content is {}, not a string", at,
                       ckind.replace_strict(_NOUN, default=ckind))),
        ]
        if "system" in allowed:
            rules.append(("system_not_first", obj & (role == "system") & (pl.col("turn") > 0),
                          format_str("{}system turn not first", at)))
        if not p.allow_empty_content:
            blank = content.str.strip_chars() == ""
            excused = (role == "assistant") & pl.col("tool_calls")
            rules.append((
                "empty_content",
                obj & ~excused & ((ckind == "null") | ((ckind == "string") & blank)),
                format_str("{}content {}", at,
                          pl.when(ckind == "null").then(pl.lit("missing or null"))
                          .when(content == "").then(pl.lit("empty"))
                          .otherwise(pl.lit("whitespace only"))),
            ))
        out = []
        for code, flag, detail in rules:
            hit = turns.filter(flag).select("i", "turn", detail.alias("detail"))
            out.append(_findings(hit, code))
        if p.alternate and {"user", "assistant"} <= set(allowed):
            out.append(self._alternation(name, turns))
        return out

    def _alternation(self, name: str, turns: pl.DataFrame) -> pl.DataFrame:
        # Roles allowed besides system, user and assistant ("tool", "function", "ipython")
        # are tool turns here; the transitions are checked on that kind, details show names.
        tools = [r for r in self.params.roles if r not in ("system", "user", "assistant")]
        names = {"user": ["user"], "assistant": ["assistant"], "tool": tools}
        expected = {
            prev: _either([n for kind in nxt for n in names[kind]])
            for prev, nxt in _NEXT.items()
        }
        role, kind, prev_kind = pl.col("role"), pl.col("kind"), pl.col("prev_kind")
        ok = pl.lit(False)
        for before, nxt in _NEXT.items():
            after = prev_kind.is_null() if before is None else prev_kind.eq_missing(before)
            ok = ok | (after & kind.is_in(list(nxt)))
        prev = pl.col("prev")
        tool_kind = {t: "tool" for t in tools}
        seq = (
            turns.filter(pl.col("is_object") & role.is_in(["user", "assistant", *tools]))
            .with_columns(prev=role.shift(1).over("i"))
            .with_columns(kind=role.replace(tool_kind), prev_kind=prev.replace(tool_kind))
            .filter(~ok)
        )
        detail = pl.when(prev.is_null()).then(
            format_str(f"{name}[{{}}]: starts with '{{}}' (expected {expected[None]})",
                      "turn", "role")
        ).otherwise(
            format_str(f"{name}[{{}}]: '{{}}' after '{{}}' (expected {{}})", "turn", "role", prev,
                      prev_kind.replace_strict(
                          {k: v for k, v in expected.items() if k}, default=""))
        )
        return _findings(seq.select("i", "turn", detail.alias("detail")), "not_alternating")

    def summary(self) -> dict[str, Any]:
        roles = sorted(self._roles.items(), key=lambda kv: (-kv[1], kv[0]))
        return {"conversations": self._conversations, "turns": self._turns,
                "roles": dict(roles)}


_NOUN = JSON_TYPE_NOUNS


def _either(names: list[str]) -> str:
    """``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``."""
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _findings(hit: pl.DataFrame, code: str) -> pl.DataFrame:
    """Findings for ``hit`` (``i``, ``detail``, and ``turn`` for turn findings), keeping a
    ``turn`` column (null for record findings) to sort on."""
    frame = findings({"i": hit.get_column("i")}, code, hit.get_column("detail"))
    turn = (hit.get_column("turn") if "turn" in hit.columns
            else repeated(None, hit.height, pl.Int64))
    return frame.with_columns(turn=turn.cast(pl.Int64))


def _tables(batch: Batch, name: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The batch's conversations as two tables: one row per record (``i``, ``kind`` — the
    field's JSON type — and ``n`` turns) and one row per turn (``_TURNS_SCHEMA``)."""
    kind = batch.json_types(name)
    index = positions(len(batch))
    dtype = batch.frame.schema.get(name)
    struct = (
        dict(dtype.inner.to_schema())
        if name not in batch.raw and isinstance(dtype, pl.List)
        and isinstance(dtype.inner, pl.Struct) else None
    )
    if struct is not None and struct.get("role", pl.String) in (pl.String, pl.Null):
        col = batch.frame.get_column(name)
        records = pl.DataFrame({"i": index, "kind": kind, "n": col.list.len()})
        return records, _typed_turns(batch.frame.select(name), name, struct)
    if not batch.has(name):
        records = pl.DataFrame({"i": index, "kind": kind, "n": repeated(
            None, len(batch), pl.UInt32)})
        return records, pl.DataFrame(schema=_TURNS_SCHEMA)
    return _python_tables(batch.values(name), index, kind)


def _typed_turns(frame: pl.DataFrame, name: str, struct: dict[str, pl.DataType]
                 ) -> pl.DataFrame:
    m = pl.col(name)

    def field(key: str) -> pl.Expr:
        return m.struct.field(key) if key in struct else pl.lit(None)

    content_type = struct.get("content", pl.Null)
    if content_type == pl.String:
        ckind = pl.when(field("content").is_null()).then(pl.lit("null")).otherwise(
            pl.lit("string"))
    else:
        ckind = pl.when(field("content").is_null()).then(pl.lit("null")).otherwise(
            pl.lit(dtype_kind(content_type)))
    calls = field("tool_calls")
    if isinstance(struct.get("tool_calls"), pl.List):
        calls = calls.list.len() > 0
    else:
        calls = calls.is_not_null()
    return (
        frame.with_row_index("i")
        .filter(m.list.len() > 0)  # explode turns an empty list into a null row
        .explode(name)
        .with_columns(turn=pl.int_range(pl.len()).over("i"))
        .select(
            pl.col("i").cast(pl.UInt32),
            pl.col("turn").cast(pl.Int64),
            is_object=m.is_not_null(),
            turn_type=pl.when(m.is_null()).then(pl.lit("null")).otherwise(pl.lit("object")),
            role=field("role").cast(pl.String),
            role_other=pl.lit(None, pl.String),
            content_kind=ckind,
            content=(field("content") if content_type == pl.String
                     else pl.lit(None, pl.String)),
            tool_calls=calls.fill_null(False),
        )
    )


def _python_tables(values: list[Any], index: pl.Series, kind: pl.Series
                   ) -> tuple[pl.DataFrame, pl.DataFrame]:
    # The field is not one typed list of structs in this batch (mixed JSON types, content
    # given as a list of parts somewhere): nested Python values, read one turn at a time
    # into the same table the typed path builds, so the rules below stay one polars pass.
    cols: dict[str, list[Any]] = {key: [] for key in _TURNS_SCHEMA}
    lengths: list[int | None] = []
    for i, turns in enumerate(values):
        lengths.append(len(turns) if isinstance(turns, list) else None)
        if not isinstance(turns, list):
            continue
        for t, turn in enumerate(turns):
            is_object = isinstance(turn, dict)
            role = turn.get("role") if is_object else None
            content = turn.get("content") if is_object else None
            cols["i"].append(i)
            cols["turn"].append(t)
            cols["is_object"].append(is_object)
            cols["turn_type"].append(json_type(turn))
            cols["role"].append(role if isinstance(role, str) else None)
            cols["role_other"].append(
                None if role is None or isinstance(role, str) else _shown(role))
            cols["content_kind"].append(json_type(content))
            cols["content"].append(content if isinstance(content, str) else None)
            cols["tool_calls"].append(is_object and bool(turn.get("tool_calls")))
    records = pl.DataFrame({"i": index, "kind": kind,
                            "n": pl.Series(lengths, dtype=pl.UInt32)})
    return records, pl.DataFrame(cols, schema=_TURNS_SCHEMA)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
