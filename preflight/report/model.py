"""The report model: everything a gate run found and decided, versioned.

Every output format is rendered from this model alone; renderers compute nothing new.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = "1.0"

Status = Literal["pass", "fail", "error"]


class Example(BaseModel):
    """One example finding, with a snippet that is redacted unless ``--show-text``."""

    row: int | None = Field(None, description="None for a finding about the whole corpus.")
    file: str | None = None
    id: str | None = None
    code: str
    detail: str
    snippet: str | None = None


class RuleResult(BaseModel):
    """One rule's outcome."""

    id: str
    check: str
    severity: Literal["error", "warn", "info"]
    status: Status
    blocking: bool = Field(description="True when this rule's status fails the gate.")
    violations: int = Field(description="Records with at least one finding.")
    findings: int = Field(description="Findings (a record can have several).")
    fraction: float = Field(description="violations / records checked.")
    threshold: dict[str, int | float | None] = Field(
        description="The effective max_count and max_fraction."
    )
    codes: dict[str, int] = Field(default_factory=dict, description="Findings per code.")
    examples: list[Example] = Field(default_factory=list)
    message: str | None = Field(None, description="Why the rule errored, when it did.")
    stats: dict[str, Any] = Field(default_factory=dict, description="Check-specific numbers.")
    fix: str | None = None


class SourceInfo(BaseModel):
    """What was read."""

    path: str
    format: str
    files: int
    records: int = Field(description="Readable records checked.")
    malformed: int = Field(description="Lines or elements that were not readable records.")
    total: int = Field(description="records + malformed: the denominator of every fraction.")
    limit: int | None = None
    fingerprint: dict[str, Any] = Field(default_factory=dict)


class RulesInfo(BaseModel):
    """Which rules ran and where they came from."""

    path: str | None = None
    preset: str | None = None
    sha256: str | None = None
    fields: dict[str, Any] = Field(default_factory=dict)
    inferred: dict[str, str] = Field(default_factory=dict, description="Fields inferred, why.")
    notes: list[str] = Field(default_factory=list)


class Report(BaseModel):
    """A gate run: the verdict, each rule's result, and how it was reached."""

    schema_version: str = SCHEMA_VERSION
    verdict: Literal["pass", "fail"]
    strict: bool = False
    reasons: list[str] = Field(default_factory=list)
    source: SourceInfo
    rules_file: RulesInfo
    rules: list[RuleResult]
    timings: dict[str, float] = Field(default_factory=dict, description="Seconds per stage.")
    environment: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, str] = Field(default_factory=dict, description="Files written.")
    fix: dict[str, Any] | None = Field(None, description="The fix manifest, when fix ran.")

    @property
    def passed(self) -> bool:
        """True when the gate passed."""
        return self.verdict == "pass"

    def raise_for_status(self) -> Report:
        """Raise ``PreflightFailed`` when the gate failed; return self otherwise."""
        from preflight.errors import PreflightFailed

        if not self.passed:
            raise PreflightFailed(self)
        return self

    def rule(self, rule_id: str) -> RuleResult:
        """The result of one rule by id."""
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(rule_id)
