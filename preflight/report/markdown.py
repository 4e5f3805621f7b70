"""``report.md``: a compact summary for a pull-request comment (verdict, failed rules with
counts, a few example rows, the smoke test), cut to a length limit on a section boundary."""

from __future__ import annotations

import html
import re

from preflight.choices import MD_MAX_CHARS
from preflight.report.console import share
from preflight.report.model import Report, RuleResult

_EXAMPLES = 3
_CUT = "\n_… cut to the length limit; see report.html for the rest._\n"


def render_markdown(report: Report, *, max_chars: int = MD_MAX_CHARS) -> str:
    """The Markdown summary of ``report``, at most ``max_chars`` characters."""
    icon = "✅" if report.passed else "❌"
    src = report.source
    head = [f"## {icon} preflight: **{report.verdict.upper()}**", "",
            f"`{src.path}` · {src.format}{src.dialect()} · {src.records:,} records · "
            f"{src.malformed:,} malformed", ""]
    head += [f"- {_cell(reason)}" for reason in report.reasons]
    notes = [f"- {_code(r.id)}: {_cell(note)}" for r in report.rules for note in r.notes]
    notes += [f"- not checked: {_cell(what)}" for what in report.rules_file.not_checked]
    # How the input was read and which fields were inferred: a column left unchecked
    # (numbers in only some records, tokenizer outputs) is said only there.
    notes += [f"- warning: {_cell(w)}" for w in src.warnings]
    notes += [f"- inferred {role}: {_cell(why)}"
              for role, why in report.rules_file.inferred.items()]
    sections = ["\n".join(head).rstrip() + "\n", _table(report.rules)]
    if notes:
        sections.append("\n".join(notes) + "\n")
    if report.smoke is not None:
        s = report.smoke
        line = f"**Smoke test: {s.verdict.replace('_', ' ')}** · {_cell(s.reason)}"
        if s.minimal_rows:
            line += f" · minimal rows {', '.join(map(str, s.minimal_rows[:10]))}"
        sections.append(line + "\n")
    for r in report.rules:
        if r.status != "pass" and r.examples:
            sections.append(_examples(r))
    whole = "".join(section + "\n" for section in sections)
    if len(whole) <= max_chars:
        return whole
    # Cut: whole sections while they fit with the note; the verdict line always stays.
    kept: list[str] = []
    for section in sections:
        if sum(map(len, kept)) + len(section) + 1 + len(_CUT) > max_chars:
            break
        kept.append(section + "\n")
    if not kept:  # even the verdict section is too long: its lines, as many as fit
        lines = sections[0].splitlines(keepends=True)
        kept = [lines[0]]
        for line in lines[1:]:
            if sum(map(len, kept)) + len(line) + len(_CUT) > max_chars:
                break
            kept.append(line)
    return "".join(kept) + _CUT


def _table(rules: list[RuleResult]) -> str:
    rows = ["| status | rule | check | severity | violations | share | codes |",
            "|---|---|---|---|--:|--:|---|"]
    for r in rules:
        status = r.status.upper() if r.blocking or r.status == "pass" else f"{r.status} (warn)"
        codes = ", ".join(f"{c} {n:,}" for c, n in r.codes.items())
        rows.append(f"| {status} | {_code(r.id)} | {r.check} | {r.severity} | {r.violations:,} | "
                    f"{share(r.fraction, r.threshold.get('max_fraction'))} | {_cell(codes)} |")
    return "\n".join(rows) + "\n"


def _examples(r: RuleResult) -> str:
    lines = [f"<details><summary><code>{html.escape(r.id)}</code>: first rows</summary>", ""]
    for ex in r.examples[:_EXAMPLES]:
        where = "corpus" if ex.row is None else f"row {ex.row}"
        ident = f" {_code(ex.id)}" if ex.id else ""
        lines.append(f"- {where}{ident} {_code(ex.code)}: {_cell(ex.detail)}")
    return "\n".join([*lines, "", "</details>"]) + "\n"


def _cell(text: str) -> str:
    """Record text safe in Markdown: no HTML (GitHub would render it), no pipe or newline
    breaking a table row."""
    text = html.escape(text, quote=False)
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """``text`` as an inline code span, fenced with more backticks than it holds."""
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text.replace(chr(10), ' ').replace('|', chr(92) + '|')}{pad}{fence}"
