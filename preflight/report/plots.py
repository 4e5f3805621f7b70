"""Plots for the HTML report, as inline SVG strings: drawn from the report's numbers only
(histograms, counts and curves the checks and the smoke test recorded), never from data."""

from __future__ import annotations

import io
import math
from typing import Any

import matplotlib as mpl
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

from preflight.report.model import RuleResult, SmokeResult

_STYLE = {
    "svg.fonttype": "none",  # text stays text: smaller files, the page's own font
    "svg.hashsalt": "preflight",  # element ids stable from run to run
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_BAR, _MARK, _CONTROL, _REAL = "#4c78a8", "#e45756", "#54a24b", "#4c78a8"
_SHOWN_CLASSES = 40


def token_lengths(rule: RuleResult) -> str | None:
    """Token counts per record, in bins scaled to the data, with the context window
    marked (reports written before the ``lengths`` histogram: bins up to twice it)."""
    lengths = rule.stats.get("lengths") or {}
    if len(lengths.get("edges") or []) >= 2:
        fig, ax = _figure()
        ax.stairs(lengths["counts"], lengths["edges"], fill=True, color=_BAR)
        if lengths.get("log"):
            ax.set_xscale("log")
        _context_window(ax, rule.stats.get("limit"))
        ax.set(xlabel="tokens per record" + (" (log scale)" if lengths.get("log") else ""),
               ylabel="records", title="Token lengths")
        return _svg(fig)
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
    fig, ax = _figure()
    ax.stairs(counts, edges, fill=True, color=_BAR)
    _context_window(ax, rule.stats.get("limit"))
    ax.set(xlabel="tokens per record", ylabel="records", title="Token lengths")
    return _svg(fig)


def _context_window(ax: Any, limit: int | None) -> None:
    if limit:
        ax.axvline(limit, color=_MARK, linestyle="--", label=f"context window {limit:,}")
        ax.legend(frameon=False)


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
    fig, ax = _figure()
    ax.bar([str(s) for s, _ in pairs], [n for _, n in pairs], color=_BAR)
    ax.set(xlabel="records in the cluster", ylabel="clusters",
           title=f"Cluster sizes ({rule.id})")
    return _svg(fig)


def value_distribution(field: str, stats: dict[str, Any]) -> str | None:
    """A numeric field's finite values, with the outlier bounds and what lies beyond."""
    hist = stats.get("histogram") or {}
    edges, counts = hist.get("edges") or [], hist.get("counts") or []
    if len(edges) < 2:
        return None
    fig, ax = _figure()
    ax.stairs(counts, edges, fill=True, color=_BAR)
    for bound in hist.get("bounds") or []:
        if edges[0] <= bound <= edges[-1]:
            ax.axvline(bound, color=_MARK, linestyle="--")
    beyond = [f"{hist[k]:,} {k}" for k in ("below", "above") if hist.get(k)]
    note = f" ({', '.join(beyond)} the range shown)" if beyond else ""
    ax.set(xlabel=field, ylabel="values", title=f"{field}: {stats.get('outliers', 0):,} "
           f"outliers{note}")
    return _svg(fig)


def label_distribution(rule: RuleResult) -> str | None:
    """Records per class, absent declared classes included (as zero)."""
    classes = dict(rule.stats.get("classes") or {})
    for absent in rule.stats.get("absent") or []:
        classes.setdefault(str(absent), 0)
    if not classes:
        return None
    shown = list(classes.items())[:_SHOWN_CLASSES]
    fig, ax = _figure()
    ax.bar([k for k, _ in shown], [v for _, v in shown], color=_BAR)
    absent = [k for k, v in shown if not v]
    if absent:  # a zero-height bar is invisible: mark the class on the axis
        ax.plot(absent, [0] * len(absent), "x", color=_MARK, markersize=8, clip_on=False,
                label="absent")
        ax.legend(frameon=False)
    more = f", first {_SHOWN_CLASSES} of {len(classes)}" if len(classes) > _SHOWN_CLASSES else ""
    ax.set(xlabel="class", ylabel="records", title=f"Labels{more}")
    ax.tick_params(axis="x", labelrotation=45 if len(shown) > 8 else 0)
    return _svg(fig)


def smoke_curves(smoke: SmokeResult) -> str | None:
    """Loss, gradient norm and AMP scale per step, control beside real, with the first
    non-finite step marked."""
    runs = [(name, run) for name, run in (("control", smoke.control), ("real", smoke.real),
                                          ("repeat", smoke.repeat)) if run is not None]
    if not runs:
        return None
    panels = [("loss", "loss"), ("grad_norm", "gradient norm")]
    if any(run.scale for _, run in runs):
        panels.append(("scale", "AMP scale"))
    with mpl.rc_context(_STYLE):
        fig = Figure(figsize=(3.2 * len(panels), 2.6), layout="constrained")
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
    styles = {"control": (_CONTROL, "-"), "real": (_REAL, "-"), "repeat": ("#9d9d9d", ":")}
    start = smoke.history_start or 0  # a watch's fault: the run's last steps, numbered
    for ax, (key, title) in zip(axes, panels, strict=True):
        for name, run in runs:
            values = [math.nan if v is None else v for v in getattr(run, key)]
            if not values:
                continue
            color, line = styles[name]
            label = "training" if smoke.history_start is not None else name
            ax.plot(range(start, start + len(values)), values, color=color, linestyle=line,
                    label=label, marker="." if len(values) < 3 else None)
            if run.first_bad_step is not None:
                bad = start + run.first_bad_step
                ax.axvline(bad, color=_MARK if name != "control" else "#b26a00",
                           linestyle="--", label=f"{label}: non-finite at step {bad}")
        if key in ("loss", "grad_norm") and _positive(runs, key):
            ax.set_yscale("log")
        ax.set(xlabel="step", title=title)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(frameon=False)
    return _svg(fig)


def _positive(runs: list[tuple[str, Any]], key: str) -> bool:
    values = [v for _, run in runs for v in getattr(run, key) if v is not None]
    return bool(values) and min(values) > 0 and max(values) / min(values) > 50


def _figure() -> tuple[Figure, Any]:
    with mpl.rc_context(_STYLE):
        fig = Figure(figsize=(5.2, 2.6), layout="constrained")
        ax = fig.add_subplot()
    return fig, ax


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    with mpl.rc_context(_STYLE):
        FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]  # inline: drop the XML declaration and doctype
