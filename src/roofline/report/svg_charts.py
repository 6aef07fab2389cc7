"""More inline SVG charts for the scenario reports: stacked horizontal bars (training step per
split), a latency histogram with its CDF (simulated serving) and the serving planner's
frontier (tokens/s per device vs per user, the SLO region shaded, the best layout starred).

Same conventions as ``svg.py``: Okabe–Ito colours, legends outside the plot area, every point
that belongs to a table row carries ``data-row`` and ``data-tip`` for the page's hover script.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .html import esc
from .svg import PALETTE, LogChart, _eng, _ticks, marker

__all__ = ["stacked_bars_svg", "hist_cdf_svg", "frontier_svg"]


def stacked_bars_svg(rows: Sequence[tuple[str, dict[str, float], str]], *, title: str,
                     xlabel: str, width: int = 760) -> str:
    """One horizontal bar per row ``(label, {part: value}, note)``, its parts stacked in the
    order of the first row's keys (one colour per part, legend on the right); ``note`` is
    written after the bar (e.g. the total)."""
    parts: list[str] = []
    for _, d, _ in rows:
        parts += [k for k in d if k not in parts]
    shown = [k for k in parts if any(d.get(k, 0.0) > 0 for _, d, _ in rows)]
    if not rows or not shown:
        return ""
    top = max(sum(max(d.get(k, 0.0), 0.0) for k in shown) for _, d, _ in rows) or 1.0
    lab_w = 8 + 6.2 * max(len(r[0]) for r in rows)
    legend_w = 30 + 6.5 * max(len(k) for k in shown)
    bar_h, gap, top_m = 16, 8, 30
    height = top_m + len(rows) * (bar_h + gap) + 40
    plot_l, plot_r = lab_w, width - legend_w - 150
    ch = LogChart(0.0, top, 0.0, 1.0, logx=False, logy=False, width=width, height=height,
                  left=int(plot_l), right=int(width - plot_r), top=top_m, bottom=40)
    out = [f'<text x="8" y="18" font-size="13" font-weight="600">{esc(title)}</text>']
    y1 = height - 40
    for v, _lab in _ticks(0.0, top, False):
        x = ch.px(float(v))
        out.append(f'<line x1="{x:.1f}" y1="{top_m}" x2="{x:.1f}" y2="{y1}" stroke="#eceff3"/>'
                   f'<text x="{x:.1f}" y="{y1 + 14}" font-size="11" text-anchor="middle" '
                   f'fill="#5b6474">{esc(_eng(float(v)) if v else "0")}</text>')
    out.append(f'<text x="{(plot_l + plot_r) / 2:.0f}" y="{height - 8}" font-size="12" '
               f'text-anchor="middle">{esc(xlabel)}</text>')
    for i, (label, d, note) in enumerate(rows):
        y = top_m + i * (bar_h + gap) + gap / 2
        out.append(f'<text x="{plot_l - 6:.1f}" y="{y + bar_h - 4:.1f}" font-size="11" '
                   f'text-anchor="end">{esc(label)}</text>')
        left = 0.0
        for j, k in enumerate(shown):
            v = max(d.get(k, 0.0), 0.0)
            if v <= 0:
                continue
            x0, x1 = ch.px(left), ch.px(left + v)
            out.append(f'<rect x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0, 0.5):.1f}" '
                       f'height="{bar_h}" fill="{PALETTE[j % len(PALETTE)]}" '
                       f'data-tip="{esc(label)}: {esc(k)} {v:,.4g}"/>')
            left += v
        out.append(f'<text x="{ch.px(left) + 4:.1f}" y="{y + bar_h - 4:.1f}" font-size="10" '
                   f'fill="#1d2330">{esc(note)}</text>')
    lx = width - legend_w + 4
    for j, k in enumerate(shown):
        ly = top_m + 12 + 16 * j
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" '
                   f'fill="{PALETTE[j % len(PALETTE)]}"/><text x="{lx + 16}" y="{ly}" '
                   f'font-size="11">{esc(k)}</text>')
    return ch.svg(out, title)


def hist_cdf_svg(values: np.ndarray, *, title: str, unit_s: float, unit: str,
                 lines: Sequence[tuple[str, float]] = (), bins: int = 40,
                 width: int = 520, height: int = 300) -> str:
    """Histogram of ``values`` (seconds; shown in ``unit``, ``unit_s`` seconds each) with its
    empirical CDF on a right-hand axis (0–100 %), and vertical ``lines`` (label, seconds) —
    the percentiles and the SLO."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)] / unit_s
    if len(v) == 0:
        return ""
    lo, hi = float(v.min()), float(v.max())
    marks = [(lab, x / unit_s) for lab, x in lines if math.isfinite(x)]
    hi = max([hi] + [x for _, x in marks])
    if hi <= lo:
        lo, hi = lo * 0.9 if lo > 0 else lo - 1, hi * 1.1 if hi > 0 else hi + 1
    counts, edges = np.histogram(v, bins=bins, range=(lo, hi))
    ch = LogChart(lo, hi, 0.0, float(counts.max()) * 1.1 or 1.0, logx=False, logy=False,
                  width=width, height=height, right=50)
    out = [ch.clip(), *ch.frame(f"{title} [{unit}]", "requests", f"{title}: {len(v):,} "
                                "requests (bars) and CDF (line, right axis)")]
    g = []
    for c, a, b in zip(counts, edges[:-1], edges[1:]):
        if c:
            x0, x1 = ch.px(float(a)), ch.px(float(b))
            g.append(f'<rect x="{x0:.1f}" y="{ch.py(float(c)):.1f}" '
                     f'width="{max(x1 - x0 - 1, 0.5):.1f}" '
                     f'height="{ch.py(0.0) - ch.py(float(c)):.1f}" fill="{PALETTE[5]}" '
                     f'data-tip="{a:,.4g}–{b:,.4g} {esc(unit)}: {int(c)} requests"/>')
    xs = np.sort(v)
    cdf = np.arange(1, len(xs) + 1) / len(xs)
    step = max(1, len(xs) // 400)
    y0, y1 = ch.top, ch.height - ch.bottom
    pts = " ".join(f"{ch.px(float(x)):.1f},{y1 - (y1 - y0) * float(p):.1f}"
                   for x, p in zip(xs[::step], cdf[::step]))
    g.append(f'<polyline points="{pts}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.8"/>')
    for k, (lab, x) in enumerate(marks):
        px = ch.px(x)
        colour = "#b42318" if lab.startswith("SLO") else "#1d2330"
        # the label on the side with room (left of a line in the right third)
        right = px > ch.left + 0.66 * (ch.width - ch.left - ch.right)
        g.append(f'<line x1="{px:.1f}" y1="{y0}" x2="{px:.1f}" y2="{y1}" stroke="{colour}" '
                 'stroke-dasharray="4,3"/>'
                 f'<text x="{px - 3 if right else px + 3:.1f}" y="{y0 + 12 + 12 * k:.1f}" '
                 f'font-size="10" fill="{colour}" text-anchor="{"end" if right else "start"}">'
                 f'{esc(lab)} {x:,.4g}</text>')
    out.append(f'<g clip-path="url(#rlclip{ch.uid})">' + "".join(g) + "</g>")
    xr = ch.width - ch.right
    for p in (0.0, 0.5, 1.0):
        out.append(f'<text x="{xr + 4}" y="{y1 - (y1 - y0) * p + 4:.1f}" font-size="11" '
                   f'fill="{PALETTE[0]}">{p * 100:.0f} %</text>')
    return ch.svg(out, f"{title} histogram and CDF")


def frontier_svg(plan: Any, *, row_prefix: str = "pareto") -> str:
    """The planner's frontier: every (layout, concurrency) point in grey, the Pareto frontier
    (points point at their Pareto-table rows), the region meeting the TPOT SLO shaded and the
    best layout's simulated point starred."""
    L, P = plan.layouts, plan.pareto
    if not len(L) and not len(P):
        return ""
    xs = [float(x) for x in list(L["tokens_per_s_per_user"]) + list(P["tokens_per_s_per_user"])]
    ys = [float(y) for y in list(L["tokens_per_s_per_device"])
          + list(P["tokens_per_s_per_device"])]
    best = plan.best
    bx = by = math.nan
    if best is not None and best.sim.tpot.mean > 0:
        bx, by = 1.0 / best.sim.tpot.mean, best.sim.tokens_per_s_per_device
        xs.append(bx)
        ys.append(by)
    good = [(x, y) for x, y in zip(xs, ys) if x > 0 and y > 0 and math.isfinite(x * y)]
    if not good:
        return ""
    x_lo, x_hi = min(x for x, _ in good) / 1.6, max(x for x, _ in good) * 1.6
    y_lo, y_hi = min(y for _, y in good) / 2, max(y for _, y in good) * 2
    legend_w = 230
    ch = LogChart(x_lo, x_hi, y_lo, y_hi, width=760 + legend_w, height=440,
                  right=20 + legend_w)
    parts = [ch.clip(), *ch.frame("output tokens/s per user (1 / TPOT)",
                                  "output tokens/s per device",
                                  f"{plan.model} on {plan.hardware}: serving frontier")]
    g: list[str] = []
    legend: list[tuple[str, str]] = []
    tpot = plan.slo.tpot_p99
    if tpot is not None and tpot > 0:
        x0 = ch.px(min(max(1.0 / tpot, x_lo), x_hi))
        g.append(f'<rect class="rl-slo" x="{x0:.1f}" y="{ch.top}" '
                 f'width="{ch.width - ch.right - x0:.1f}" '
                 f'height="{ch.height - ch.bottom - ch.top}" fill="{PALETTE[2]}" '
                 'fill-opacity="0.13"/>')
        legend.append((f'<rect width="12" height="10" fill="{PALETTE[2]}" fill-opacity="0.3"/>',
                       f"meets TPOT p99 ≤ {tpot * 1e3:g} ms"))
    blank = [""] * len(L)
    for x, y, lay, c in zip(L["tokens_per_s_per_user"], L["tokens_per_s_per_device"],
                            L["layout"] if "layout" in L.columns else blank,
                            L["max_concurrency"] if "max_concurrency" in L.columns else blank):
        if x > 0 and y > 0:
            g.append(f'<circle cx="{ch.px(float(x)):.1f}" cy="{ch.py(float(y)):.1f}" r="2.5" '
                     f'fill="#9aa3b2" data-tip="{esc(lay)} at concurrency {esc(c)}: '
                     f'{float(x):,.4g} tok/s/user, {float(y):,.4g} tok/s/device"/>')
    legend.append(('<circle cx="6" cy="5" r="3" fill="#9aa3b2"/>', "layout × concurrency"))
    o = np.argsort(np.asarray(P["tokens_per_s_per_user"], dtype=float))
    pts = [(float(P["tokens_per_s_per_user"][i]), float(P["tokens_per_s_per_device"][i]), int(i))
           for i in o]
    pts = [p for p in pts if p[0] > 0 and p[1] > 0]
    if len(pts) > 1:
        d = " ".join(f"{ch.px(x):.1f},{ch.py(y):.1f}" for x, y, _ in pts)
        g.append(f'<polyline points="{d}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.8"/>')
    lay_col = P["layout"] if "layout" in P.columns else [""] * len(P)
    for x, y, i in pts:
        tip = f"{lay_col[i]}: {x:,.4g} tok/s/user, {y:,.4g} tok/s/device"
        g.append(marker("circle", ch.px(x), ch.py(y), 4.2, PALETTE[0],
                        f' data-row="{esc(row_prefix)}{i}" data-tip="{esc(tip)}"'))
    legend.append((marker("circle", 6, 5, 4, PALETTE[0]), "Pareto frontier"))
    if math.isfinite(bx * by) and bx > 0 and by > 0:
        g.append(marker("star", ch.px(bx), ch.py(by), 9, PALETTE[1],
                        f' data-tip="best: {esc(best.layout)} (simulated): {bx:,.4g} tok/s/user,'
                        f' {by:,.4g} tok/s/device"'))
        legend.append((marker("star", 6, 5, 6, PALETTE[1]), f"best: {best.layout} (simulated)"))
    parts.append(f'<g clip-path="url(#rlclip{ch.uid})">' + "".join(g) + "</g>")
    lx = ch.width - legend_w + 6
    for k, (sym, lab) in enumerate(legend):
        ly = ch.top + 8 + 20 * k
        parts.append(f'<g transform="translate({lx},{ly})">{sym}</g>'
                     f'<text x="{lx + 18}" y="{ly + 9}" font-size="11">{esc(lab)}</text>')
    return ch.svg(parts, f"serving frontier of {plan.model} on {plan.hardware}")
