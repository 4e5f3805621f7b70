"""``report.html``: one self-contained page (styles and SVG plots inline, no script, nothing
fetched) rendered from the report model alone."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import jinja2

from preflight.report import plots
from preflight.report.console import allowed, replay_command, share
from preflight.report.model import Report


@dataclass(frozen=True)
class Plot:
    """A plot as inline SVG, or (``svg`` empty) the sentence that says more than it."""

    kind: str
    title: str
    svg: str = ""
    note: str = ""


def render_html(report: Report) -> str:
    """The HTML page for ``report``."""
    template = _environment().get_template("report.html.j2")
    return template.render(report=report, plots=report_plots(report), share=share,
                           allowed=allowed, replay_command=replay_command)


def report_plots(report: Report) -> list[Plot]:
    """Every plot the report's numbers allow, in rule order, then the smoke test's curves."""
    out: list[Plot] = []
    for r in report.rules:
        if r.check == "token_length" and (svg := plots.token_lengths(r)):
            out.append(Plot("token_lengths", f"{r.id}: token lengths", svg))
        elif r.check in ("exact_duplicate", "near_duplicate") and (note := plots.cluster_note(r)):
            out.append(Plot("cluster_sizes", f"{r.id}: cluster sizes", note=note))
        elif r.check in ("exact_duplicate", "near_duplicate") and (svg := plots.cluster_sizes(r)):
            out.append(Plot("cluster_sizes", f"{r.id}: cluster sizes", svg))
        elif r.check == "label_range" and (svg := plots.label_distribution(r)):
            out.append(Plot("labels", f"{r.id}: labels", svg))
        elif r.check == "numeric":
            for field, stats in (r.stats.get("fields") or {}).items():
                if svg := plots.value_distribution(field, stats):
                    out.append(Plot("values", f"{r.id}: {field}", svg))
    if report.smoke is not None and (svg := plots.smoke_curves(report.smoke)):
        title = ("smoke test curves" if report.smoke.history_start is None
                 else "loss, gradient norm and scale of the last steps")
        out.append(Plot("smoke_curves", title, svg))
    return out


def _environment() -> jinja2.Environment:
    folder = resources.files("preflight.report") / "templates"
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: (folder / name).read_text("utf-8")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
