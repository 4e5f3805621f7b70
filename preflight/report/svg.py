"""Small charts drawn as inline SVG text: histograms, bar charts, lines and marker lines on
linear or logarithmic axes, with ticks, axis labels, a title and a legend.

The report's plots need nothing more, and drawing them by hand keeps a plotting library
(matplotlib: about a second to import) out of every run that writes ``report.html``. The
output is deterministic (the same numbers give the same text), text stays text (the page's
own font, searchable), every label is escaped, and each chart carries ``role="img"`` and an
``aria-label`` for screen readers (the page's figure has the same title).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

WIDTH, HEIGHT = 520, 260  # one panel, in CSS pixels
_FONT = 11  # px
_CHAR = 6.2  # px per character at _FONT, for margins
_TOP, _RIGHT = 30, 12

Scale = Callable[[float], float]


@dataclass(frozen=True)
class _Frame:
    """Where a panel's plot area lies: data-to-pixel scales and the area's top and bottom."""

    x: Scale
    y: Scale
    top: float
    bottom: float


@dataclass
class _Mark:
    """Something drawn in a panel: its extent in data units and how to draw it."""

    xs: list[float]
    ys: list[float]
    draw: Callable[[_Frame], str]


@dataclass
class Panel:
    """One chart: add marks, then ``render`` one or more panels side by side."""

    title: str
    xlabel: str
    ylabel: str = ""
    xlog: bool = False
    ylog: bool = False
    categories: list[str] = field(default_factory=list)  # a categorical x axis
    rotate: bool = False  # categories written at 45 degrees
    width: int = WIDTH
    legend: list[tuple[str, str, str]] = field(default_factory=list)  # label, colour, kind
    _marks: list[_Mark] = field(default_factory=list)

    def stairs(self, counts: Sequence[float], edges: Sequence[float], color: str) -> None:
        """A filled histogram: ``counts[i]`` over ``[edges[i], edges[i+1])``."""
        edges = [self._positive(e) for e in edges] if self.xlog else list(edges)

        def draw(fr: _Frame) -> str:
            out = []
            for count, lo, hi in zip(counts, edges, edges[1:], strict=False):
                if count:
                    out.append(_rect(fr.x(lo), fr.y(count), fr.x(hi), fr.y(0), color))
            return "\n".join(out)

        self._marks.append(_Mark(list(edges), [0, *counts], draw))

    def bars(self, values: Sequence[float], color: str) -> None:
        """One bar per category (``categories``), in order."""

        def draw(fr: _Frame) -> str:
            return "\n".join(_rect(fr.x(i - 0.4), fr.y(v), fr.x(i + 0.4), fr.y(0), color)
                           for i, v in enumerate(values) if v)

        self._marks.append(_Mark([-0.5, len(values) - 0.5], [0, *values], draw))

    def line(self, xs: Sequence[float], ys: Sequence[float | None], *, color: str,
             label: str = "", dotted: bool = False, markers: bool = False) -> None:
        """A curve; a missing or non-finite value (or one ≤ 0 on a log axis) breaks it."""
        points = [(x, y) for x, y in zip(xs, ys, strict=True)
                  if y is not None and math.isfinite(y) and (y > 0 or not self.ylog)]
        dash = ' stroke-dasharray="2 3"' if dotted else ""

        def draw(fr: _Frame) -> str:
            out, run = [], []
            for x, y in zip(xs, ys, strict=True):
                if y is None or not math.isfinite(y) or (self.ylog and y <= 0):
                    out.append(_polyline(run, color, dash))
                    run = []
                else:
                    run.append((fr.x(x), fr.y(y)))
            out.append(_polyline(run, color, dash))
            if markers:
                out += [f'<circle cx="{_f(fr.x(x))}" cy="{_f(fr.y(y))}" r="2.5" fill="{color}"/>'
                        for x, y in points]
            return "\n".join(out)

        self._marks.append(_Mark([p[0] for p in points], [p[1] for p in points], draw))
        if label:
            self.legend.append((label, color, "dotted" if dotted else "line"))

    def vline(self, x: float, *, color: str, label: str = "") -> None:
        """A dashed vertical line across the panel at ``x``."""

        def draw(fr: _Frame) -> str:
            return (f'<line x1="{_f(fr.x(x))}" x2="{_f(fr.x(x))}" y1="{_f(fr.top)}" '
                    f'y2="{_f(fr.bottom)}" '
                    f'stroke="{color}" stroke-width="1.5" stroke-dasharray="5 3"/>')

        self._marks.append(_Mark([self._positive(x) if self.xlog else x], [], draw))
        if label:
            self.legend.append((label, color, "dashed"))

    def crosses(self, at: Sequence[int], *, color: str, label: str) -> None:
        """Crosses on the x axis at these category positions (zero-height bars)."""

        def draw(fr: _Frame) -> str:
            y = fr.y(0)
            return "\n".join(f'<path d="M{_f(fr.x(i) - 4)} {_f(y - 4)}l8 8m0 -8l-8 8" '
                           f'stroke="{color}" stroke-width="1.5"/>' for i in at)

        self._marks.append(_Mark([], [], draw))
        self.legend.append((label, color, "cross"))

    def _positive(self, x: float) -> float:
        return x if x > 0 else 0.5  # a log axis starts above zero

    def svg(self, left_x: float = 0) -> str:
        """This panel's axes and marks, drawn at ``left_x`` in the figure."""
        xs = [x for m in self._marks for x in m.xs]
        ys = [y for m in self._marks for y in m.ys]
        xlo, xhi = (min(xs), max(xs)) if xs else (0.0, 1.0)
        ylo, yhi = (min(ys), max(ys)) if ys else (0.0, 1.0)
        if not self.ylog:
            ylo = min(ylo, 0.0)
            yhi = yhi + (yhi - ylo) * 0.05 or 1.0
        xticks = (list(range(len(self.categories))) if self.categories
                  else _ticks(xlo, xhi, log=self.xlog))
        yticks = _ticks(ylo, yhi, log=self.ylog)
        if not self.categories and not self.xlog:
            xlo, xhi = min(xlo, xticks[0]), max(xhi, xticks[-1])
        if self.ylog:
            ylo, yhi = min(ylo, yticks[0]), max(yhi, yticks[-1])
        else:
            yhi = max(yhi, yticks[-1])
        ylabels = [_num(t) for t in yticks]
        left = left_x + 22 + _CHAR * max(map(len, ylabels)) + (14 if self.ylabel else 0)
        xlabels = self.categories or [_num(t) for t in xticks]
        drop = (_CHAR * max(map(len, xlabels)) * 0.72) if self.rotate else _FONT
        bottom = HEIGHT - 26 - drop
        right = left_x + self.width - _RIGHT
        sx = _scale(xlo, xhi, left, right, log=self.xlog)
        sy = _scale(ylo, yhi, bottom, _TOP, log=self.ylog)
        out = [f'<text x="{_f((left + right) / 2)}" y="16" text-anchor="middle" '
               f'font-weight="bold">{escape(self.title)}</text>']
        for t, text in zip(yticks, ylabels, strict=True):
            y = _f(sy(t))
            out.append(f'<line x1="{_f(left - 4)}" x2="{_f(left)}" y1="{y}" y2="{y}" '
                       f'stroke="#555"/><text x="{_f(left - 6)}" y="{y}" text-anchor="end" '
                       f'dominant-baseline="middle">{escape(text)}</text>')
        for t, text in zip(xticks, xlabels, strict=True):
            x = _f(sx(t))
            label = (f'<text x="{x}" y="{_f(bottom + 14)}" text-anchor="end" '
                     f'transform="rotate(-45 {x} {_f(bottom + 14)})">' if self.rotate
                     else f'<text x="{x}" y="{_f(bottom + 16)}" text-anchor="middle">')
            out.append(f'<line x1="{x}" x2="{x}" y1="{_f(bottom)}" y2="{_f(bottom + 4)}" '
                       f'stroke="#555"/>{label}{escape(text)}</text>')
        frame = _Frame(sx, sy, _TOP, bottom)
        out += [m.draw(frame) for m in self._marks]
        out.append(f'<path d="M{_f(left)} {_TOP}V{_f(bottom)}H{_f(right)}" fill="none" '
                   'stroke="#555"/>')
        out.append(f'<text x="{_f((left + right) / 2)}" y="{HEIGHT - 6}" '
                   f'text-anchor="middle">{escape(self.xlabel)}</text>')
        if self.ylabel:
            mid = _f((_TOP + bottom) / 2)
            out.append(f'<text x="{_f(left_x + 12)}" y="{mid}" text-anchor="middle" '
                       f'transform="rotate(-90 {_f(left_x + 12)} {mid})">'
                       f'{escape(self.ylabel)}</text>')
        out.append(_legend(self.legend, right))
        return "\n".join(out)


def render(panels: Sequence[Panel], title: str) -> str:
    """An ``<svg>`` element with the panels side by side; ``title`` names it for screen
    readers."""
    width = sum(p.width for p in panels)
    body, at = [""], 0
    for p in panels:
        body.append(p.svg(at))
        at += p.width
    body.append("</svg>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" '
            f'viewBox="0 0 {width} {HEIGHT}" role="img" aria-label="{escape(title)}" '
            f'font-size="{_FONT}" font-family="sans-serif">' + "\n".join(body))


def _legend(entries: list[tuple[str, str, str]], right: float) -> str:
    out = []
    for k, (label, color, kind) in enumerate(entries):
        y = _TOP + 8 + 15 * k
        x = right - 8 - _CHAR * len(label)
        sample = {
            "line": f'<line x1="{_f(x - 26)}" x2="{_f(x - 6)}" y1="{y}" y2="{y}" '
                    f'stroke="{color}" stroke-width="1.5"/>',
            "dotted": f'<line x1="{_f(x - 26)}" x2="{_f(x - 6)}" y1="{y}" y2="{y}" '
                      f'stroke="{color}" stroke-width="1.5" stroke-dasharray="2 3"/>',
            "dashed": f'<line x1="{_f(x - 26)}" x2="{_f(x - 6)}" y1="{y}" y2="{y}" '
                      f'stroke="{color}" stroke-width="1.5" stroke-dasharray="5 3"/>',
            "cross": f'<path d="M{_f(x - 20)} {y - 4}l8 8m0 -8l-8 8" stroke="{color}" '
                     'stroke-width="1.5"/>',
        }[kind]
        out.append(f'{sample}<text x="{_f(x)}" y="{y}" dominant-baseline="middle">'
                   f'{escape(label)}</text>')
    return "\n".join(out)


def _scale(lo: float, hi: float, a: float, b: float, *, log: bool) -> Scale:
    """Data to pixels: ``lo`` -> ``a``, ``hi`` -> ``b`` (logarithmically when ``log``)."""
    f = math.log10 if log else float
    flo, fhi = f(lo), f(hi)
    span = (fhi - flo) or 1.0

    def scale(v: float) -> float:
        return a + (f(max(v, lo) if log else v) - flo) / span * (b - a)

    return scale


def _ticks(lo: float, hi: float, *, log: bool) -> list[float]:
    """Round tick values covering ``lo``..``hi``: 1-2-5 steps, or powers of ten."""
    if log:
        first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        ticks = [10.0**k for k in range(first, last + 1)]
        if len(ticks) < 3:
            ticks = sorted({t * m for t in ticks for m in (1, 2, 5)})
        inside = [t for t in ticks if lo <= t <= hi]
        return [t for t in ticks if t < lo][-1:] + inside + [t for t in ticks if t > hi][:1]
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    start = math.floor(lo / step) * step
    count = math.ceil((hi - start) / step - 1e-9)
    return [round(start + k * step, 12) for k in range(count + 1)]


def _num(v: float) -> str:
    """A tick or range label: 1,024 / 0.25 / 1e-05."""
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:,.4g}" if 1e-4 <= abs(v) < 1e15 else f"{v:.3g}"


def _f(v: float) -> str:
    return f"{v:.1f}"


def _rect(x0: float, y0: float, x1: float, y1: float, color: str) -> str:
    return (f'<rect x="{_f(min(x0, x1))}" y="{_f(min(y0, y1))}" width="{_f(abs(x1 - x0))}" '
            f'height="{_f(abs(y1 - y0))}" fill="{color}"/>')


def _polyline(points: list[tuple[float, float]], color: str, dash: str) -> str:
    if not points:
        return ""
    text = " ".join(f"{_f(x)},{_f(y)}" for x, y in points)
    return (f'<polyline points="{text}" fill="none" stroke="{color}" '
            f'stroke-width="1.5"{dash}/>')
