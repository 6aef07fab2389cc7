"""The time model's closed form (engine/core.py ``TimeModel._envelope``): every op's lines in B
and their sums as one piecewise-linear function of the batch (``lines.envelope``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .lines import envelope, launch_lines, quiet

__all__ = ["envelope_of"]


def envelope_of(tm: Any) -> tuple[list[float], np.ndarray]:
    """Per-op lines in B and their sums as a piecewise-linear closed form (lines.envelope):
    compute p0 + p1·B; memory q0 + q1·B and the bound's memory roof, both per level choice
    (a level stops fitting at (cap − ab0)/ab1); the bound's compute roof; the launch lines."""
    C0, C1 = tm.C0, tm.C1
    f0, f1, mb0, mb1, ab0, ab1 = C0[0], C1[0], C0[1], C1[1], C0[2], C1[2]
    with quiet(tm.finite):  # 0 × inf on an absurd spec (TimeModel.finite)
        p0 = f0 * tm.inv_c0 + f1 * tm.inv_c1
        p1 = f1 * tm.inv_c0
        c0_, c1_ = f0 * tm.inv_bound, f1 * tm.inv_bound
    variants = [(tm.inv_act, 1.0 / tm.bw)] + [
        (tm.inv_act * tm.bw / lbw, 1.0 / lbw) for _, lbw in tm.levels]
    computes = [(p0, p1)]
    fl = tm.floor
    if fl is not None:  # below B* the floor's line: flops · (inv_cap + inv_c0)
        rate = tm.inv_cap + tm.inv_c0
        computes.append((f0 * rate, f1 * rate))
    cands = []
    b_star: Any = None
    with np.errstate(divide="ignore", invalid="ignore"):
        for inv_a, inv_ab in variants:
            q0, q1 = mb0 * tm.inv_main + ab0 * inv_a, mb1 * tm.inv_main + ab1 * inv_a
            cands += [(q0 - a) / (b - q1) for a, b in computes]
            m0, m1 = mb0 / tm.bw + ab0 * inv_ab, mb1 / tm.bw + ab1 * inv_ab
            cands.append((m0 - c0_) / (c1_ - m1))
            if not tm.sync:
                cands.append((tm.disp - tm.gap - q0) / q1)
        if not tm.sync:
            cands += [(tm.disp - tm.gap - a) / b for a, b in computes]
        cands += [(cap - ab0) / ab1 for cap, _ in tm.levels]
        if fl is not None:
            b_star = np.where(fl, tm.inv_c1 / tm.inv_cap, 0.0)
            cands.append(b_star)

    def lines_at(xs: np.ndarray) -> dict[str, Any]:
        if tm.levels:  # the level an op's activations live in changes along B
            act = ab0 + ab1 * xs[:, None]
            inv_a = np.full_like(act, tm.inv_act)
            inv_ab = np.full_like(act, 1.0 / tm.bw)
            for cap, lbw in tm.levels:
                fits = act <= cap
                inv_a = np.where(fits, tm.inv_act * tm.bw / lbw, inv_a)
                inv_ab = np.where(fits, 1.0 / lbw, inv_ab)
        else:
            inv_a, inv_ab = tm.inv_act, 1.0 / tm.bw
        q0, q1 = mb0 * tm.inv_main + ab0 * inv_a, mb1 * tm.inv_main + ab1 * inv_a
        m0, m1 = mb0 / tm.bw + ab0 * inv_ab, mb1 / tm.bw + ab1 * inv_ab
        pa, pb = p0, p1
        if fl is not None:  # the floor's line below each op's B*, the smooth one above
            below = xs[:, None] < b_star
            pa, pb = np.where(below, computes[1][0], p0), np.where(below, computes[1][1], p1)
        kern = ((pa, pb), (q0, q1))
        rows = {"bound": (((c0_, c1_), (m0, m1)), None),
                "time": (launch_lines(kern, tm.gap, tm.disp, tm.sync), None),
                "kernel": (kern, None), "cbt": (kern, 0), "memory": (((q0, q1),), None)}
        if fl is not None:  # Σ compute seconds changes at each B* too
            rows["compute"] = (((pa, pb),), None)
        return rows

    edges, rows = envelope(cands, 1.0, lines_at)
    keys: tuple[str, ...] = ("bound", "time", "kernel", "cbt", "memory")
    if fl is not None:
        keys += ("compute",)
    # [K, 10] (intercept, slope) per row; [K, 12] with Σ compute seconds where floors apply
    return edges, np.concatenate([rows[k] for k in keys], axis=1)

