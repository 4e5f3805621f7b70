"""Plots for the HTML report, as inline SVG strings: drawn from the report's numbers only
(histograms, counts and curves the checks and the smoke test recorded), never from data.
``svg.py`` draws them (no plotting library to import)."""

from __future__ import annotations

from typing import Any

from preflight.report.model import RuleResult, SmokeResult
from preflight.report.svg import Panel, render

_BAR, _MARK, _CONTROL, _REAL = "#4c78a8", "#e45756", "#54a24b", "#4c78a8"
_SHOWN_CLASSES = 40


def token_lengths(rule: RuleResult) -> str | None:
    """Token counts per record, in bins scaled to the data, with the context window
    marked (reports written before the ``lengths`` histogram: bins up to twice it)."""
    lengths = rule.stats.get("lengths") or {}
    if len(lengths.get("edges") or []) >= 2:
        log = bool(lengths.get("log"))
        panel = Panel("Token lengths", "tokens per record" + (" (log scale)" if log else ""),
                      "records", xlog=log)
        panel.stairs(lengths["counts"], lengths["edges"], _BAR)
        _context_window(panel, rule.stats.get("limit"))
        return render([panel], f"{rule.id}: token lengths")
    hist = rule.stats.get("histogram") or {}
    edges = hist.get("edges") or []
    if len(edges) < 2:
        return None
    counts = [a + b for a, b in zip(hist.get("exact", []), hist.get("estimated", []),
                                    strict=False)]
    finite = [e for e in edges if e is not None]
    # The last bin is open (up to infinity): draw it as wide as a quarter of the range.
    edges = [e if e is not None else finite[-1] + (finite[-1] - finite[0]) / 4 or 1.0
             for e in edges]
    panel = Panel("Token lengths", "tokens per record", "records")
    panel.stairs(counts, edges, _BAR)
    _context_window(panel, rule.stats.get("limit"))
    return render([panel], f"{rule.id}: token lengths")


def _context_window(panel: Panel, limit: int | None) -> None:
    if limit:
        panel.vline(limit, color=_MARK, label=f"context window {limit:,}")


def cluster_note(rule: RuleResult) -> str | None:
    """A sentence instead of a plot when every cluster has one size (one bar says no more
    than the sentence, on a meaningless axis)."""
    sizes = rule.stats.get("cluster_sizes") or {}
    if len(sizes) != 1:
        return None
    ((size, n),) = sizes.items()
    return (f"1 cluster of {int(size):,} records" if n == 1
            else f"{n:,} clusters, each of {int(size):,} records")


def cluster_sizes(rule: RuleResult) -> str | None:
    """How many duplicate clusters there are of each size."""
    sizes = rule.stats.get("cluster_sizes") or {}
    if not sizes:
        return None
    pairs = sorted((int(k), v) for k, v in sizes.items())
    panel = Panel(f"Cluster sizes ({rule.id})", "records in the cluster", "clusters",
                  categories=[str(s) for s, _ in pairs])
    panel.bars([n for _, n in pairs], _BAR)
    return render([panel], f"{rule.id}: cluster sizes")


def value_distribution(field: str, stats: dict[str, Any]) -> str | None:
    """A numeric field's finite values, with the outlier bounds and what lies beyond."""
    hist = stats.get("histogram") or {}
    edges, counts = hist.get("edges") or [], hist.get("counts") or []
    if len(edges) < 2:
        return None
    beyond = [f"{hist[k]:,} {k}" for k in ("below", "above") if hist.get(k)]
    note = f" ({', '.join(beyond)} the range shown)" if beyond else ""
    panel = Panel(f"{field}: {stats.get('outliers', 0):,} outliers{note}", field, "values")
    panel.stairs(counts, edges, _BAR)
    for bound in hist.get("bounds") or []:
        if edges[0] <= bound <= edges[-1]:
            panel.vline(bound, color=_MARK)
    return render([panel], f"{field}: values")


def label_distribution(rule: RuleResult) -> str | None:
    """Records per class, absent declared classes included (as zero)."""
    classes = dict(rule.stats.get("classes") or {})
    for absent in rule.stats.get("absent") or []:
        classes.setdefault(str(absent), 0)
    if not classes:
        return None
    shown = list(classes.items())[:_SHOWN_CLASSES]
    more = f", first {_SHOWN_CLASSES} of {len(classes)}" if len(classes) > _SHOWN_CLASSES else ""
    panel = Panel(f"Labels{more}", "class", "records", categories=[k for k, _ in shown],
                  rotate=len(shown) > 8)
    panel.bars([v for _, v in shown], _BAR)
    absent = [i for i, (_, v) in enumerate(shown) if not v]
    if absent:  # a zero-height bar is invisible: mark the class on the axis
        panel.crosses(absent, color=_MARK, label="absent")
    return render([panel], f"{rule.id}: labels")


def smoke_curves(smoke: SmokeResult) -> str | None:
    """Loss, gradient norm and AMP scale per step, control beside real, with the first
    non-finite step marked (or, for a run the time limit cut short, the step it stopped
    in: its curve holds the steps it completed)."""
    runs = [(name, run) for name, run in (("control", smoke.control), ("real", smoke.real),
                                          ("repeat", smoke.repeat)) if run is not None]
    if not runs:
        return None
    panels = [("loss", "loss"), ("grad_norm", "gradient norm")]
    if any(run.scale for _, run in runs):
        panels.append(("scale", "AMP scale"))
    styles = {"control": (_CONTROL, False), "real": (_REAL, False), "repeat": ("#9d9d9d", True)}
    start = smoke.history_start or 0  # a watch's fault: the run's last steps, numbered
    drawn = []
    for k, (key, title) in enumerate(panels):
        panel = Panel(title, "step", width=320,
                      ylog=key in ("loss", "grad_norm") and _positive(runs, key))
        for name, run in runs:
            values = getattr(run, key)
            if not values:
                continue
            color, dotted = styles[name]
            label = "training" if smoke.history_start is not None else name
            what = "stopped" if run.cut_short else "non-finite"
            panel.line(range(start, start + len(values)), values, color=color, dotted=dotted,
                       label=f"{label} (cut short)" if run.cut_short else label,
                       markers=len(values) < 3)
            if run.first_bad_step is not None:
                bad = start + run.first_bad_step
                panel.vline(bad, color=_MARK if name != "control" else "#b26a00",
                            label=f"{label}: {what} at step {bad}")
        if k:  # one legend, in the first panel
            panel.legend.clear()
        drawn.append(panel)
    return render(drawn, "smoke test: " + ", ".join(title for _, title in panels))


def _positive(runs: list[tuple[str, Any]], key: str) -> bool:
    values = [v for _, run in runs for v in getattr(run, key) if v is not None]
    return bool(values) and min(values) > 0 and max(values) / min(values) > 50
