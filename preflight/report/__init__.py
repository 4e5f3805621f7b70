"""The report: one pydantic model (``model.py``) and one renderer per format."""

from preflight.report.model import Example, Report, RuleResult

__all__ = ["Example", "Report", "RuleResult"]
