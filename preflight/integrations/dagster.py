"""Preflight as Dagster asset checks: one check per rule, a failed error rule blocks downstream.

>>> import dagster as dg
>>> from preflight.integrations.dagster import preflight_asset_checks
>>> @dg.asset
... def corpus() -> None:
...     write_jsonl("data/corpus.jsonl")
>>> checks = preflight_asset_checks(corpus, "data/corpus.jsonl", rules="rules.yaml",
...                                 out="preflight-report")
>>> defs = dg.Definitions(assets=[corpus, train], asset_checks=checks)

The factory returns one ``@multi_asset_check`` (in a list, ready for ``asset_checks=``) whose
single op runs the gate once and yields one ``AssetCheckResult`` per rule, named
``{name}_{rule id}``, plus ``{name}_smoke`` when the smoke test runs and ``{name}_gate`` for the
verdict as a whole (it also catches what no rule owns, such as an input with no readable
records). How the gate maps onto Dagster:

- ``passed`` is the rule's status == "pass" (a rule whose check errored fails);
- ``severity`` is ``ERROR`` for a result that blocks the gate (an error rule, a check that could
  not run, a warn rule under ``strict``) and ``WARN`` otherwise (warn and info rules);
- ``blocking`` is set on the specs of rules that can block the gate (error rules, warn rules
  under ``strict``), on the smoke check and on the gate check, so a failure with ERROR
  severity stops downstream assets (``blocking`` exists in every Dagster the extra allows);
- ``metadata`` holds violations, findings, fraction, status, codes, the first example rows
  and, with ``out``, the path of ``report.json``.

The rules are loaded when the checks are defined (the check names come from the rule ids);
the data is read when the check runs. Each set of checks needs its own ``out``: a folder
that checks on another asset (or under another ``name``) already write into is a
``ConfigError`` when the second set is defined, as they would overwrite each other's report.
Dagster is imported only when the factory is called, so importing this module is cheap;
without it the call is a ``ConfigError`` naming the extra.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preflight.config import RuleSet, load_rules
from preflight.errors import ConfigError
from preflight.integrations import require

if TYPE_CHECKING:
    from dagster import AssetChecksDefinition, AssetCheckSpec

    from preflight.report.model import Report, RuleResult, SmokeResult

EXAMPLES = 5  # example rows per check in the metadata; the report holds the rest

# Report folders claimed by the checks defined in this process, and whose checks they are.
# Each run replaces report.json in its folder, so two sets of checks sharing one would each
# link (in their metadata) to whichever report was written last, and a run in parallel would
# be refused.
_OUT_OWNERS: dict[Path, str] = {}


def preflight_asset_checks(
    asset: Any,
    source: str | Path | Callable[[], Any],
    rules: str | Path | dict[str, Any] | RuleSet | None = None,
    out: str | Path | None = None,
    *,
    preset: str | None = None,
    strict: bool = False,
    smoke: bool | None = False,
    name: str = "preflight",
) -> list[AssetChecksDefinition]:
    """Asset checks that run the preflight gate on ``asset``'s data.

    ``asset``: what the checks are attached to (an ``AssetsDefinition``, ``AssetKey`` or key
    string). ``source``: the data, a path, or a callable with no arguments returning a path or
    a ``datasets.Dataset`` (called when the check runs). ``rules``, ``preset``, ``out``,
    ``strict`` and ``smoke`` are those of ``run_preflight`` (``smoke=None`` follows the rules
    file). ``name`` prefixes every check name and names the op.
    """
    dg = require("dagster", "dagster")
    if isinstance(rules, RuleSet) and preset is not None:  # the preset was ignored
        raise ConfigError("give either rules or preset, not both")
    ruleset = rules if isinstance(rules, RuleSet) else load_rules(rules, preset=preset)
    run_smoke = ruleset.smoke.enabled if smoke is None else smoke

    def spec(check: str, description: str, *, blocking: bool) -> AssetCheckSpec:
        return dg.AssetCheckSpec(_check_name(name, check), asset=asset,
                                 description=description, blocking=blocking)

    by_rule = {r.id: spec(r.id, f"preflight {r.check} ({r.severity})",
                          blocking=r.severity == "error" or (strict and r.severity == "warn"))
               for r in ruleset.rules}
    extra = {"gate": spec("gate", "preflight verdict", blocking=True)}
    if run_smoke:
        extra["smoke"] = spec("smoke", "preflight smoke test", blocking=True)
    specs = [*by_rule.values(), *extra.values()]
    names = [s.name for s in specs]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise ConfigError(f"rule ids map to the same Dagster check name {', '.join(clashes)} "
                          f"(check names allow only letters, digits and _); rename the rules")
    if out is not None:
        _claim_out(Path(out), f"{name!r} on asset {specs[0].asset_key.to_user_string()}")

    @dg.multi_asset_check(
        specs=specs,
        name=f"{_check_name(name, 'checks')}_{specs[0].asset_key.to_python_identifier()}",
        description=f"preflight gate on {specs[0].asset_key.to_user_string()}",
    )
    def _checks() -> Iterator[Any]:  # Dagster resolves this hint; its types are not in scope
        data = source() if callable(source) else source
        report = _run(data, ruleset, out, strict=strict, smoke=run_smoke)
        results = {r.id: r for r in report.rules}
        for rule_id, s in by_rule.items():
            r = results.get(rule_id)
            if r is None:  # only if the pipeline dropped a rule; say so rather than pass
                yield dg.AssetCheckResult(
                    check_name=s.name, asset_key=s.asset_key, passed=False,
                    severity=dg.AssetCheckSeverity.ERROR,
                    metadata={"message": "the rule is missing from the report"})
                continue
            yield _rule_result(dg, s, r, report)
        yield _gate_result(dg, extra["gate"], report)
        if "smoke" in extra:
            yield _smoke_result(dg, extra["smoke"], report.smoke)

    return [_checks]


def _run(data: Any, ruleset: RuleSet, out: str | Path | None, *, strict: bool,
         smoke: bool) -> Report:
    from preflight import run_preflight

    return run_preflight(data, rules=ruleset, out=out, strict=strict, smoke=smoke)


def _claim_out(out: Path, owner: str) -> None:
    """Refuse a report folder that other checks defined in this process write into."""
    prior = _OUT_OWNERS.setdefault(out.expanduser().resolve(), owner)
    if prior != owner:
        raise ConfigError(
            f"out={str(out)!r} is already the report folder of the preflight checks {prior}; "
            f"each run replaces report.json there, so the checks {owner} would overwrite "
            f"that report (and its checks would link to this one's): give each its own out, "
            f"e.g. out='{out}-{owner.rsplit(' ', 1)[-1].replace('/', '_')}' (checks defined "
            f"earlier in this process count until it ends: a notebook cell re-run after "
            f"renaming the asset needs a kernel restart, or the new out)")


def _check_name(prefix: str, check: str) -> str:
    # Dagster check names allow only [A-Za-z0-9_]; rule ids also allow '.' and '-'.
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{prefix}_{check}")


def _report_path(dg: Any, report: Report) -> dict[str, Any]:
    path = report.outputs.get("report")
    return {"report": dg.MetadataValue.path(path)} if path else {}


def _rule_result(dg: Any, spec: AssetCheckSpec, r: RuleResult, report: Report) -> Any:
    metadata: dict[str, Any] = {
        "status": r.status,
        "violations": r.violations,
        "findings": r.findings,
        "fraction": r.fraction,
        "codes": dg.MetadataValue.json(dict(r.codes)),
        "examples": dg.MetadataValue.json(
            [e.model_dump(exclude_none=True) for e in r.examples[:EXAMPLES]]),
        **_report_path(dg, report),
    }
    if r.message:
        metadata["message"] = r.message
    severity = dg.AssetCheckSeverity.ERROR if r.blocking else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(check_name=spec.name, asset_key=spec.asset_key,
                               passed=r.status == "pass", severity=severity, metadata=metadata)


def _gate_result(dg: Any, spec: AssetCheckSpec, report: Report) -> Any:
    metadata = {"verdict": report.verdict, "records": report.source.records,
                "malformed": report.source.malformed,
                "reasons": dg.MetadataValue.json(list(report.reasons)),
                **_report_path(dg, report)}
    return dg.AssetCheckResult(check_name=spec.name, asset_key=spec.asset_key,
                               passed=report.passed, severity=dg.AssetCheckSeverity.ERROR,
                               metadata=metadata)


def _smoke_result(dg: Any, spec: AssetCheckSpec, smoke: SmokeResult | None) -> Any:
    if smoke is None:  # asked for but not run: nothing to judge, and nothing failed
        return dg.AssetCheckResult(check_name=spec.name, asset_key=spec.asset_key, passed=True,
                                   metadata={"verdict": "not run"})
    metadata: dict[str, Any] = {"verdict": smoke.verdict, "reason": smoke.reason,
                                "device": smoke.device, "steps": smoke.steps,
                                "minimal_rows": dg.MetadataValue.json(smoke.minimal_rows[:20])}
    return dg.AssetCheckResult(check_name=spec.name, asset_key=spec.asset_key,
                               passed=not smoke.failed, severity=dg.AssetCheckSeverity.ERROR,
                               metadata=metadata)
