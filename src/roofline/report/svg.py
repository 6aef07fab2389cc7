"""Inline SVG charts for the HTML report and notebook cards — no matplotlib, no JavaScript
library: a log-log roofline (one compute roof per distinct peak, one slope per memory level,
operator points that point at their table rows) and line charts for sweeps.

Each point that belongs to a table row carries ``data-row`` (the row's id) and ``data-tip``
(its label), which the report's small inline script uses for hover.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .html import esc

__all__ = ["PALETTE", "MARKERS", "LogChart", "roofline_svg", "lines_svg"]

#: colour-blind-safe (Okabe–Ito) colours, then Tableau; one per device/series
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#8c564b", "#7f7f7f", "#bcbd22")
MARKERS = ("circle", "square", "triangle", "diamond", "cross")
BOUND_COLOURS = {"compute": "#1f77b4", "memory": "#d62728"}
_IDS = itertools.count()  # clip-path ids unique within a page


@dataclass
class LogChart:
    """A plot area with log or linear axes mapping data to pixels."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    logx: bool = True
    logy: bool = True
    width: int = 760
    height: int = 440
    left: int = 70
    right: int = 20
    top: int = 30
    bottom: int = 50
    uid: int = -1

    def __post_init__(self) -> None:
        self.uid = next(_IDS)

    def _t(self, v: float, lo: float, hi: float, log: bool) -> float:
        if log:
            return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
        return (v - lo) / (hi - lo)

    def px(self, x: float) -> float:
        w = self.width - self.left - self.right
        return self.left + w * self._t(x, self.x_lo, self.x_hi, self.logx)

    def py(self, y: float) -> float:
        h = self.height - self.top - self.bottom
        return self.top + h * (1 - self._t(y, self.y_lo, self.y_hi, self.logy))

    def frame(self, xlabel: str, ylabel: str, title: str) -> list[str]:
        """Axes, decade (or linear) ticks with grid lines, labels and title."""
        out = []
        x0, x1 = self.left, self.width - self.right
        y0, y1 = self.top, self.height - self.bottom
        for v, lab in _ticks(self.x_lo, self.x_hi, self.logx):
            x = self.px(v)
            out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y1}" stroke="#eceff3"/>'
                       f'<text x="{x:.1f}" y="{y1 + 14}" font-size="11" text-anchor="middle" '
                       f'fill="#5b6474">{esc(lab)}</text>')
        for v, lab in _ticks(self.y_lo, self.y_hi, self.logy):
            y = self.py(v)
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#eceff3"/>'
                       f'<text x="{x0 - 4}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
                       f'fill="#5b6474">{esc(lab)}</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" '
                   'stroke="#9aa3b2"/>')
        out.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{self.height - 12}" font-size="12" '
                   f'text-anchor="middle">{esc(xlabel)}</text>')
        out.append(f'<text transform="translate(14,{(y0 + y1) / 2:.0f}) rotate(-90)" '
                   f'font-size="12" text-anchor="middle">{esc(ylabel)}</text>')
        out.append(f'<text x="{x0}" y="18" font-size="13" font-weight="600">{esc(title)}</text>')
        return out

    def clip(self) -> str:
        return (f'<clipPath id="rlclip{self.uid}"><rect x="{self.left}" y="{self.top}" '
                f'width="{self.width - self.left - self.right}" '
                f'height="{self.height - self.top - self.bottom}"/></clipPath>')

    def svg(self, parts: Sequence[str], label: str) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
                f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" role="img" '
                f'aria-label="{esc(label)}">' + "".join(parts) + "</svg>")


def _ticks(lo: float, hi: float, log: bool) -> list[tuple[float, str]]:
    if log:
        decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        # under three decades in range: 2x and 5x ticks too, so the axis is readable
        steps = (1.0,) if math.log10(hi / lo) >= 2.5 else (1.0, 2.0, 5.0)
        out = []
        for e in decades:
            for m in steps:
                v = m * 10.0 ** e
                if lo <= v <= hi:
                    out.append((v, _eng(v)))
        return out
    step = 10 ** math.floor(math.log10((hi - lo) / 4 or 1))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= 6:
            step *= m
            break
    v = math.ceil(lo / step) * step
    out = []
    while v <= hi + 1e-12 * step:
        out.append((v, _eng(v)))
        v += step
    return out


def _eng(v: float) -> str:
    """Tick label: 1k, 10M, 1T ... (decimal prefixes)."""
    if v == 0:
        return "0"
    for scale, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""),
                     (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")):
        if abs(v) >= scale:
            return f"{v / scale:g}{p}"
    return f"{v:g}"


def marker(shape: str, x: float, y: float, r: float, colour: str, attrs: str = "") -> str:
    """One point: circle, square, triangle, diamond or cross, centred at (x, y)."""
    if shape == "circle":
        return (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{colour}" '
                f'stroke="#fff" stroke-width="0.8"{attrs}/>')
    if shape == "square":
        return (f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" '
                f'fill="{colour}" stroke="#fff" stroke-width="0.8"{attrs}/>')
    pts = {"triangle": ((0, -1.2), (1.05, 0.6), (-1.05, 0.6)),
           "diamond": ((0, -1.3), (1.1, 0), (0, 1.3), (-1.1, 0)),
           "cross": ((-.35, -1), (.35, -1), (.35, -.35), (1, -.35), (1, .35), (.35, .35),
                     (.35, 1), (-.35, 1), (-.35, .35), (-1, .35), (-1, -.35), (-.35, -.35)),
           "star": tuple((math.sin(a) * (1.4 if k % 2 == 0 else 0.6),
                          -math.cos(a) * (1.4 if k % 2 == 0 else 0.6))
                         for k, a in enumerate(i * math.pi / 5 for i in range(10)))}[shape]
    d = " ".join(f"{x + dx * r:.1f},{y + dy * r:.1f}" for dx, dy in pts)
    return (f'<polygon points="{d}" fill="{colour}" stroke="#fff" stroke-width="0.8"{attrs}/>')


def roofline_svg(result: Any, hw: Any, points: dict[str, Any] | None, *,
                 row_prefix: str = "op", row_index: Sequence[int] | None = None) -> str:
    """Log-log roofline of one result on its hardware: a compute roof per distinct peak
    (labelled with the dtypes that share it; the result's dtype solid), one slope per memory
    level with a bandwidth (labelled), the ridge point of the result's dtype (labelled with that
    dtype), the operators (area ∝ time share, colour = bound) and the whole model (star)."""
    bw_main = hw.memory_bytes_per_s
    groups: dict[float, list[str]] = {}
    for d in hw.dtypes:
        groups.setdefault(hw.peak_flops_per_s[d], []).append(d)
    levels = [m for m in hw.memory if m.bytes_per_s and math.isfinite(m.bytes_per_s)]
    peak = result.peak_flops_per_s if math.isfinite(result.peak_flops_per_s) else max(groups)
    ridge = peak / bw_main
    xs = [ridge, 1.0]
    ys = [peak]
    if points is not None and len(points["intensity"]):
        xs += [float(v) for v in points["intensity"]]
        ys += [float(v) for v in points["achieved"]]
    model_ok = _pos(result.arithmetic_intensity) and _pos(result.flops) and _pos(result.latency)
    if model_ok:
        xs.append(result.arithmetic_intensity)
        ys.append(result.flops / result.latency)
    ridges = [p / bw_main for p in groups]
    x_lo = min(xs + ridges) / 4
    x_hi = max(xs + ridges) * 8
    y_hi = max([*groups, *ys]) * 2.5
    y_lo = min(ys + [bw_main * x_lo]) / 3
    ch = LogChart(x_lo, x_hi, y_lo, y_hi)
    parts = [ch.clip(), *ch.frame("arithmetic intensity [FLOP/B]",
                                  "attainable performance [FLOP/s]",
                                  f"{result.model} on {result.hardware}, batch {result.batch}, "
                                  f"{result.precision}")]
    g: list[str] = []
    top = max(groups)
    roofs = sorted(groups.items(), reverse=True)
    bold = ' font-weight="600"'
    label_y = _spread([ch.py(pk) - 4 for pk, _ in roofs], 12)
    for (pk, names), ly in zip(roofs, label_y):
        main = result.precision in names
        r0 = pk / bw_main
        g.append(f'<line x1="{ch.px(r0):.1f}" y1="{ch.py(pk):.1f}" x2="{ch.px(x_hi):.1f}" '
                 f'y2="{ch.py(pk):.1f}" stroke="#333" stroke-width="{2 if main else 1}"'
                 + ("" if main else ' stroke-dasharray="5,3" opacity="0.6"') + "/>")
        g.append(f'<text x="{ch.px(x_hi) - 4:.1f}" y="{ly:.1f}" font-size="11" '
                 f'text-anchor="end" fill="#333"{bold if main else ""}>'
                 f'{esc("/".join(names))} {pk / 1e12:.4g} TFLOP/s</text>')
    for j, lvl in enumerate(levels):
        bw = lvl.bytes_per_s
        x_end = top / bw
        colour = PALETTE[j % len(PALETTE)] if j else "#333"
        g.append(f'<line x1="{ch.px(x_lo):.1f}" y1="{ch.py(bw * x_lo):.1f}" '
                 f'x2="{ch.px(x_end):.1f}" y2="{ch.py(top):.1f}" stroke="{colour}" '
                 f'stroke-width="{2 if j == 0 else 1.2}"'
                 + ("" if j == 0 else ' stroke-dasharray="2,3"') + "/>")
        # the label runs along its slope, just above it
        lx = x_lo * 1.6 * (3.0 ** j)
        x1, y1 = ch.px(lx), ch.py(bw * lx)
        ang = math.degrees(math.atan2(ch.py(bw * lx * 10) - y1, ch.px(lx * 10) - x1))
        g.append(f'<text transform="translate({x1:.1f},{y1 - 4:.1f}) rotate({ang:.1f})" '
                 f'font-size="11" fill="{colour}">{esc(lvl.name)} {bw / 1e9:,.0f} GB/s</text>')
    g.append(f'<circle cx="{ch.px(ridge):.1f}" cy="{ch.py(peak):.1f}" r="5" fill="#fff" '
             'stroke="#333" stroke-width="1.5"/>'
             f'<text x="{ch.px(ridge) - 8:.1f}" y="{ch.py(peak) - 8:.1f}" font-size="11" '
             f'text-anchor="end" fill="#333">ridge {esc(result.precision)}: {ridge:,.4g} '
             "FLOP/B</text>")
    if points is not None and len(points["intensity"]):
        top_share = max(float(max(points["share"])), 1e-300)
        for k in range(len(points["intensity"])):
            ai, ach = float(points["intensity"][k]), float(points["achieved"][k])
            share, bound = float(points["share"][k]), str(points["bound"][k])
            r = max(2.0, 11.0 * math.sqrt(share / top_share))
            idx = row_index[k] if row_index is not None else k
            tip = (f"{points['name'][k]} ({bound}): {ai:,.4g} FLOP/B, {ach / 1e12:,.4g} TFLOP/s,"
                   f" {share * 100:.2f} % of time")
            g.append(f'<circle class="rl-pt" cx="{ch.px(ai):.1f}" cy="{ch.py(ach):.1f}" '
                     f'r="{r:.1f}" fill="{BOUND_COLOURS.get(bound, "#777")}" fill-opacity="0.5" '
                     f'data-row="{esc(row_prefix)}{idx}" data-tip="{esc(tip)}"/>')
    if model_ok:
        ai, ach = result.arithmetic_intensity, result.flops / result.latency
        tip = f"whole model: {ai:,.4g} FLOP/B, {ach / 1e12:,.4g} TFLOP/s ({result.bottleneck})"
        g.append(marker("star", ch.px(ai), ch.py(ach), 9, "#000",
                        f' data-row="{esc(row_prefix)}model" data-tip="{esc(tip)}"'))
    parts.append(f'<g clip-path="url(#rlclip{ch.uid})">' + "".join(g) + "</g>")
    parts.append(f'<text x="{ch.left}" y="{ch.height - 2}" font-size="10" fill="#5b6474">'
                 "dots: operators (area ∝ share of time; blue compute-bound, red memory-bound);"
                 " star: whole model; 2 FLOPs per multiply-add</text>")
    return ch.svg(parts, f"roofline chart of {result.model} on {result.hardware}")


def lines_svg(series: Sequence[dict[str, Any]], *, xlabel: str, ylabel: str, title: str,
              logx: bool = True, logy: bool = True, marks: Sequence[dict[str, Any]] = (),
              width: int = 560, height: int = 340) -> str:
    """Line chart: each series ``{"label", "x", "y"}`` gets its own colour and marker; the
    legend sits outside the plot area (right). ``marks``: ``{"x", "y", "label", "series"}``
    points drawn as rings (e.g. a crossover batch)."""
    pts = [(x, y) for s in series for x, y in zip(s["x"], s["y"]) if _ok(x, logx) and _ok(y, logy)]
    if not pts:
        return ""
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    lo_x, hi_x = min(xs), max(xs)
    lo_y, hi_y = min(ys), max(ys)
    if logx:
        lo_x, hi_x = (lo_x / 1.5, hi_x * 1.5)
    else:
        pad = (hi_x - lo_x) * 0.05 or 1
        lo_x, hi_x = lo_x - pad, hi_x + pad
    if logy:
        lo_y, hi_y = (lo_y / 2, hi_y * 2)
    else:
        lo_y, hi_y = 0.0, hi_y * 1.1 or 1
    legend_w = 40 + 7 * max(len(str(s_["label"])) for s_ in series)
    ch = LogChart(lo_x, hi_x, lo_y, hi_y, logx=logx, logy=logy, width=width + legend_w,
                  height=height, right=20 + legend_w)
    parts = [ch.clip(), *ch.frame(xlabel, ylabel, title)]
    g: list[str] = []
    lx = ch.width - legend_w + 4
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        shape = MARKERS[i % len(MARKERS)]
        good = [(x, y) for x, y in zip(s["x"], s["y"]) if _ok(x, logx) and _ok(y, logy)]
        if len(good) > 1:
            d = " ".join(f"{ch.px(x):.1f},{ch.py(y):.1f}" for x, y in good)
            g.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="1.6"/>')
        for x, y in good:
            g.append(marker(shape, ch.px(x), ch.py(y), 3.6, colour,
                            f' data-tip="{esc(s["label"])}: {x:g}, {y:,.4g}"'))
        ly = ch.top + 14 + 18 * i
        parts.append(marker(shape, lx + 6, ly - 4, 4, colour)
                     + f'<line x1="{lx - 2}" y1="{ly - 4}" x2="{lx + 14}" y2="{ly - 4}" '
                     f'stroke="{colour}" stroke-width="1.6"/>'
                     f'<text x="{lx + 20}" y="{ly}" font-size="11">{esc(s["label"])}</text>')
    for m in marks:
        if _ok(m["x"], logx) and _ok(m["y"], logy):
            g.append(f'<circle cx="{ch.px(m["x"]):.1f}" cy="{ch.py(m["y"]):.1f}" r="8" '
                     'fill="none" stroke="#000" stroke-width="1.5"/>'
                     f'<text x="{ch.px(m["x"]) + 10:.1f}" y="{ch.py(m["y"]) + 16:.1f}" '
                     f'font-size="10">{esc(m["label"])}</text>')
    parts.append(f'<g clip-path="url(#rlclip{ch.uid})">' + "".join(g) + "</g>")
    return ch.svg(parts, title)


def _spread(ys: Sequence[float], gap: float) -> list[float]:
    """Label baselines pushed apart (downwards, in order) so no two are closer than ``gap``."""
    out: list[float] = []
    for y in ys:
        out.append(max(y, out[-1] + gap) if out else y)
    return out


def _pos(v: Any) -> bool:
    try:
        return v is not None and math.isfinite(float(v)) and float(v) > 0
    except (TypeError, ValueError):
        return False


def _ok(v: Any, log: bool) -> bool:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return False
    return math.isfinite(f) and (f > 0 or not log)
