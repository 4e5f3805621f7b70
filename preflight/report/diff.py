"""What changed between two runs of the gate: rules that started or stopped failing, count
deltas, the smoke verdict. A rule got worse when its status did (pass -> fail -> error) or,
still failing, when its violations grew; a new rule that fails is worse too."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from preflight.report.model import Report, RuleResult

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
                      worse=worse)


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
