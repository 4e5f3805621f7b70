"""``report.md``: a compact summary for a pull-request comment (verdict, failed rules with
counts, a few example rows, the smoke test), cut to a length limit on a section boundary."""

from __future__ import annotations

from preflight.report.console import share
from preflight.report.model import Report, RuleResult

DEFAULT_MAX_CHARS = 60_000  # GitHub comments hold 65,536
_EXAMPLES = 3


def render_markdown(report: Report, *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The Markdown summary of ``report``, at most ``max_chars`` characters."""
    icon = "✅" if report.passed else "❌"
    src = report.source
    head = [f"## {icon} preflight: **{report.verdict.upper()}**", "",
            f"`{src.path}` · {src.format} · {src.records:,} records · {src.malformed:,} "
            "malformed", ""]
    head += [f"- {_cell(reason)}" for reason in report.reasons]
    sections = ["\n".join(head).rstrip() + "\n", _table(report.rules)]
    if report.smoke is not None:
        s = report.smoke
        line = f"**Smoke test: {s.verdict.replace('_', ' ')}** · {s.reason}"
        if s.minimal_rows:
            line += f" · minimal rows {', '.join(map(str, s.minimal_rows[:10]))}"
        sections.append(line + "\n")
    for r in report.rules:
        if r.status != "pass" and r.examples:
            sections.append(_examples(r))
    out = ""
    for section in sections:
        if len(out) + len(section) + 1 > max_chars:
            note = "\n_… cut to the length limit; see report.html for the rest._\n"
            return (out + note) if len(out) + len(note) <= max_chars else out[:max_chars]
        out += section + "\n"
    return out


def _table(rules: list[RuleResult]) -> str:
    rows = ["| status | rule | check | severity | violations | share | codes |",
            "|---|---|---|---|--:|--:|---|"]
    for r in rules:
        status = r.status.upper() if r.blocking or r.status == "pass" else f"{r.status} (warn)"
        codes = ", ".join(f"{c} {n:,}" for c, n in r.codes.items())
        rows.append(f"| {status} | `{r.id}` | {r.check} | {r.severity} | {r.violations:,} | "
                    f"{share(r.fraction)} | {_cell(codes)} |")
    return "\n".join(rows) + "\n"


def _examples(r: RuleResult) -> str:
    lines = [f"<details><summary><code>{r.id}</code>: first rows</summary>", ""]
    for ex in r.examples[:_EXAMPLES]:
        where = "corpus" if ex.row is None else f"row {ex.row}"
        ident = f" `{ex.id}`" if ex.id else ""
        lines.append(f"- {where}{ident} `{ex.code}`: {_cell(ex.detail)}")
    return "\n".join([*lines, "", "</details>"]) + "\n"


def _cell(text: str) -> str:
    """Text safe inside a table cell or list item: no pipes or newlines breaking it."""
    return text.replace("|", "\\|").replace("\n", " ")
