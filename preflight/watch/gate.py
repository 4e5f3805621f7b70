"""Link a failing batch's rows back to the gate: for each row, whether the gate flagged it,
by which rules and codes, and whether the rule let it through (``max_count`` /
``max_fraction``). Reads the gate's ``report.json`` and the ``findings.parquet`` beside it
(every finding); without the parquet file, the report's example rows only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from preflight.errors import ConfigError
from preflight.report.model import SCHEMA_VERSION, GateLink, Report, load_report
from preflight.text import first_line

FINDING_COLUMNS = ("row", "id", "rule", "code")  # what a link reads of findings.parquet


class Gate:
    """The gate's findings, by row number and by id."""

    def __init__(self, report: Report, findings: list[dict[str, Any]], *, complete: bool) -> None:
        self.report, self.complete = report, complete
        self.by_row: dict[int, list[dict[str, Any]]] = {}
        self.by_id: dict[str, list[dict[str, Any]]] = {}
        for f in findings:
            if f.get("row") is not None:
                self.by_row.setdefault(int(f["row"]), []).append(f)
            if f.get("id") is not None:
                self.by_id.setdefault(str(f["id"]), []).append(f)
        self.rules = {r.id: r for r in report.rules}

    def link(self, row: int | None, id_: str | None) -> GateLink:
        """What the gate said about one row (matched by id when the row has one)."""
        hits = self.by_id.get(id_, []) if id_ is not None else []
        # By row number only when the row has no id or the gate knew no ids: a row number
        # is the record's position in the gate's file, which the training set's order need
        # not keep (shuffled, filtered, another shard), so an id the gate did not flag must
        # not borrow another record's findings.
        if not hits and row is not None and (id_ is None or not self.by_id):
            hits = self.by_row.get(row, [])
        rules = sorted({str(f["rule"]) for f in hits})
        codes = sorted({str(f["code"]) for f in hits})
        allowed = [r for r in rules if r in self.rules and self.rules[r].status == "pass"]
        who = f"row {row:,}" if row is not None else f"id {id_}"
        if not hits:
            detail = f"{who} was not flagged by the gate" + (
                "" if self.complete else " (among the report's example rows; "
                "findings.parquet was not found beside it)")
        else:
            by = ", ".join(f"`{r}` ({', '.join(_codes(hits, r))})" for r in rules)
            detail = f"{who} was flagged by {by}"
            if allowed:
                how = ", ".join(f"{r} by {_threshold(self.rules[r].threshold)}" for r in allowed)
                detail += f" and allowed ({how})"
        return GateLink(row=row, id=id_, flagged=bool(hits), rules=rules, codes=codes,
                        allowed=allowed, detail=detail)


def check_gate(path: str | Path) -> Path:
    """The gate's ``report.json`` (or the folder holding it), checked when the watch
    starts: a ``ConfigError`` now rather than a note in a fault record much later."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    try:
        report = load_report(p)
        if report.source.format == "watch":
            raise ConfigError(f"{p} is a watch fault.json, not the gate's report.json")
        major = str(report.schema_version).partition(".")[0]
        if major != SCHEMA_VERSION.partition(".")[0]:
            raise ConfigError(f"{p} has report schema {report.schema_version}; this preflight "
                              f"reads schema {SCHEMA_VERSION}: run the gate again with it")
        parquet = p.with_name("findings.parquet")
        if parquet.is_file():
            import pyarrow.parquet as pq

            try:
                names = pq.read_schema(parquet).names
            except Exception as e:
                raise ConfigError(f"cannot read {parquet}: {first_line(e)}") from e
            if missing := [c for c in FINDING_COLUMNS if c not in names]:
                raise ConfigError(f"{parquet} has no column {', '.join(missing)}: not the "
                                  "findings the gate writes")
    except ConfigError as e:
        raise ConfigError(f"watch gate_report: {e}; give the report.json the gate wrote "
                          "(preflight check ... --out DIR writes DIR/report.json), or leave "
                          "gate_report out") from e
    return p


def load_gate(path: str | Path) -> Gate:
    """The gate's report (``report.json``, or the folder holding it) and its findings."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    report = load_report(p)
    parquet = p.with_name("findings.parquet")
    if not parquet.is_file():
        findings = [{"row": e.row, "id": e.id, "rule": r.id, "code": e.code}
                    for r in report.rules for e in r.examples]
        return Gate(report, findings, complete=False)
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(parquet, columns=list(FINDING_COLUMNS))
    except Exception as e:
        raise ConfigError(f"gate_report: cannot read {parquet}: {e}") from e
    return Gate(report, table.to_pylist(), complete=True)


def _threshold(threshold: dict[str, Any]) -> str:
    if threshold.get("max_fraction") is not None:
        return f"max_fraction {threshold['max_fraction']:g}"
    return f"max_count {threshold.get('max_count', 0)}"


def _codes(hits: list[dict[str, Any]], rule: str) -> list[str]:
    return sorted({str(f["code"]) for f in hits if f["rule"] == rule})
