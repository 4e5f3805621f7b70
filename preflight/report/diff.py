"""What changed between two runs of the gate: rules that started or stopped failing, count
deltas, the smoke verdict. A rule got worse when its status did (pass -> fail -> error) or,
still failing, when its violations grew; a new rule that fails is worse too."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from preflight.report.model import Report, RuleResult, RulesInfo

Change = Literal["worse", "better", "same", "new", "removed"]
_RANK = {"pass": 0, "fail": 1, "error": 2}
_SMOKE_RANK = {"skipped": 0, "pass": 0, "data_fault": 1, "code_fault": 1}


class RuleChange(BaseModel):
    """One rule in both runs (either side may be missing)."""

    id: str
    check: str
    change: Change
    old_status: str | None = None
    new_status: str | None = None
    old_violations: int | None = None
    new_violations: int | None = None
    delta: int = Field(0, description="new violations minus old (0 when a side is missing).")


class ReportDiff(BaseModel):
    """Two gate runs compared."""

    old: str = Field(description="The old report's source path.")
    new: str
    old_verdict: str
    new_verdict: str
    rules: list[RuleChange]
    smoke: tuple[str | None, str | None] = (None, None)
    worse: bool = Field(description="True when a rule (or the smoke test) got worse.")
    warnings: list[str] = Field(
        default_factory=list, description="Why the two runs may not compare like for like "
        "(different rules files).")

    def changed(self) -> list[RuleChange]:
        """The rules whose status or count moved, worst first."""
        order = {"worse": 0, "new": 1, "removed": 2, "better": 3, "same": 4}
        moved = [r for r in self.rules if r.change != "same" or r.delta]
        return sorted(moved, key=lambda r: (order[r.change], r.id))


def diff_reports(old: Report, new: Report) -> ReportDiff:
    """Compare ``old`` and ``new`` rule by rule (by id)."""
    before = {r.id: r for r in old.rules}
    after = {r.id: r for r in new.rules}
    changes = [_change(before.get(i), after.get(i))
               for i in [*after, *(i for i in before if i not in after)]]
    old_smoke = old.smoke.verdict if old.smoke else None
    new_smoke = new.smoke.verdict if new.smoke else None
    smoke_worse = _SMOKE_RANK.get(new_smoke or "pass", 0) > _SMOKE_RANK.get(old_smoke or "pass", 0)
    worse = smoke_worse or any(
        c.change == "worse" or (c.change == "new" and c.new_status != "pass") for c in changes
    )
    return ReportDiff(old=old.source.path, new=new.source.path, old_verdict=old.verdict,
                      new_verdict=new.verdict, rules=changes, smoke=(old_smoke, new_smoke),
                      worse=worse, warnings=_rules_warnings(old, new))


def _rules_warnings(old: Report, new: Report) -> list[str]:
    """A warning when the two runs used different rules (another file or preset, or the
    same file edited in between): a rule's change may then be the rules', not the data's."""
    a, b = old.rules_file, new.rules_file
    if (a.path, a.preset, a.sha256) == (b.path, b.preset, b.sha256):
        return []

    def name(info: RulesInfo) -> str:
        where = info.path or (f"preset {info.preset}" if info.preset else "rules given in code")
        return f"{where} (sha256 {info.sha256[:12]})" if info.sha256 else where

    same_place = (a.path, a.preset) == (b.path, b.preset)
    what = "the rules file changed between the runs" if same_place else \
        "the two reports used different rules files"
    return [f"{what}: old {name(a)}, new {name(b)}; a rule's change may come from the rules, "
            "not the data"]


def _change(a: RuleResult | None, b: RuleResult | None) -> RuleChange:
    if a is None:
        assert b is not None
        return RuleChange(id=b.id, check=b.check, change="new", new_status=b.status,
                          new_violations=b.violations)
    if b is None:
        return RuleChange(id=a.id, check=a.check, change="removed", old_status=a.status,
                          old_violations=a.violations)
    rank_a, rank_b = _RANK[a.status], _RANK[b.status]
    delta = b.violations - a.violations
    if rank_b > rank_a or (rank_b == rank_a and b.status != "pass" and delta > 0):
        change: Change = "worse"
    elif rank_b < rank_a or (b.status != "pass" and delta < 0):
        change = "better"
    else:
        change = "same"
    return RuleChange(id=b.id, check=b.check, change=change, old_status=a.status,
                      new_status=b.status, old_violations=a.violations,
                      new_violations=b.violations, delta=delta)
