"""Fitting the small efficiency model from measurements (pure functions, no timing).

GEMM efficiency (fraction of the measured dense peak) over the implicit-GEMM sizes M, N, K::

    1/eff = (1 + a/M + b/N + c/K) / gemm_max        a, b, c >= 0, 0 < gemm_max <= 1

is linear in (1/gemm_max, a/gemm_max, b/gemm_max, c/gemm_max), so it is fitted by least squares
on relative residuals, over every subset of {a, b, c} allowed to be non-zero (a non-negative
least squares by enumeration: 8 tiny solves), keeping the best feasible one.

Bandwidth levels: the STREAM sweep (bandwidth vs working set) is cut into at most
``max_levels`` plateaus by dynamic programming on log-bandwidth; adjacent plateaus within 25 %
are merged. Each plateau is one memory level: its bandwidth is the median of its points, its
capacity the geometric midpoint between its largest working set and the next plateau's smallest.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["GemmFit", "fit_gemm", "Plateau", "fit_levels", "geomean"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmFit:
    gemm_max: float  #: best fraction of peak
    a: float  #: M at which the M term alone halves efficiency
    b: float  #: as a, for N
    c: float  #: as a, for K
    rms_log_error: float  #: root-mean-square of ln(predicted / measured) over the fit points
    n: int  #: points fitted

    def efficiency(self, m: float, n: float, k: float) -> float:
        return self.gemm_max / (1 + self.a / m + self.b / n + self.c / k)


def fit_gemm(points: Sequence[tuple[float, float, float, float]],
             max_ceiling: float = 1.0) -> GemmFit:
    """Fit ``(M, N, K, measured efficiency)`` points; efficiencies are fractions of peak.
    ``max_ceiling``: the largest gemm_max allowed (1 when the peak is the asymptote; more
    when the peak is only the best rate measured at one size)."""
    if len(points) < 2:
        raise ValueError("fit_gemm needs at least 2 points")
    P = np.asarray(points, dtype=np.float64)
    M, N, K, eff = P.T
    if np.any(eff <= 0):
        raise ValueError("efficiencies must be > 0")
    y = 1.0 / eff
    X = np.stack([np.ones_like(M), 1 / M, 1 / N, 1 / K], axis=1)
    w = 1.0 / y  # relative residuals
    best: tuple[float, np.ndarray] | None = None
    for mask in itertools.product((0, 1), repeat=3):
        cols = [0] + [i + 1 for i, on in enumerate(mask) if on]
        for fix_x0 in (False, True):
            coef = np.zeros(4)
            if fix_x0:  # gemm_max = 1: x0 = 1, fit the rest on y - 1
                if len(cols) == 1:
                    coef[0] = 1.0
                else:
                    sol, *_ = np.linalg.lstsq((X[:, cols[1:]] * w[:, None]), (y - 1) * w,
                                              rcond=None)
                    coef[0] = 1.0
                    coef[cols[1:]] = sol
            else:
                sol, *_ = np.linalg.lstsq(X[:, cols] * w[:, None], y * w, rcond=None)
                coef[cols] = sol
            if coef[0] < 1.0 / max_ceiling - 1e-12 or np.any(coef < 0):
                continue
            r = np.log(X @ coef) - np.log(y)
            sse = float(r @ r)
            if best is None or sse < best[0] - 1e-15:
                best = (sse, coef)
    assert best is not None  # the all-zero, gemm_max = 1 model is always feasible
    sse, coef = best
    x0 = coef[0]
    return GemmFit(gemm_max=float(1 / x0), a=float(coef[1] / x0), b=float(coef[2] / x0),
                   c=float(coef[3] / x0), rms_log_error=math.sqrt(sse / len(y)), n=len(y))


@dataclass(frozen=True, slots=True, kw_only=True)
class Plateau:
    bytes_per_s: float  #: median bandwidth of the plateau's points
    capacity_bytes: float  #: working sets up to this run at this bandwidth
    smallest_bytes: float  #: smallest working set measured in it
    largest_bytes: float  #: largest working set measured in it
    n: int  #: points


def fit_levels(ws_bytes: Sequence[float], bytes_per_s: Sequence[float], *, max_levels: int = 4,
               merge_ratio: float = 1.25) -> list[Plateau]:
    """Cut a bandwidth-vs-working-set curve into plateaus, innermost (smallest) first.

    The last plateau is main memory: its capacity is +inf here (the caller supplies RAM size).
    """
    order = np.argsort(ws_bytes)
    ws = np.asarray(ws_bytes, dtype=np.float64)[order]
    lb = np.log(np.asarray(bytes_per_s, dtype=np.float64)[order])
    n = len(ws)
    if n == 0:
        raise ValueError("fit_levels needs points")
    k_max = min(max_levels, n)

    def cost(i: int, j: int) -> float:  # points i..j-1 as one plateau
        seg = lb[i:j]
        return float(((seg - seg.mean()) ** 2).sum())

    # dp[k][j]: best cost of the first j points in k segments
    INF = math.inf
    dp = [[INF] * (n + 1) for _ in range(k_max + 1)]
    cut = [[0] * (n + 1) for _ in range(k_max + 1)]
    dp[0][0] = 0.0
    for k in range(1, k_max + 1):
        for j in range(1, n + 1):
            for i in range(k - 1, j):
                c = dp[k - 1][i] + cost(i, j)
                if c < dp[k][j]:
                    dp[k][j], cut[k][j] = c, i
    bounds = []
    j = n
    for k in range(k_max, 0, -1):
        i = cut[k][j]
        bounds.append((i, j))
        j = i
    bounds.reverse()
    segs = [list(range(i, j)) for i, j in bounds if j > i]
    merged: list[list[int]] = []
    for s in segs:
        if merged:
            prev = merged[-1]
            b_prev = statistics.median(lb[prev].tolist())
            b_this = statistics.median(lb[s].tolist())
            if abs(b_prev - b_this) < math.log(merge_ratio):
                merged[-1] = prev + s
                continue
        merged.append(s)
    out = []
    for idx, s in enumerate(merged):
        lo, hi = ws[s[0]], ws[s[-1]]
        cap = math.sqrt(hi * ws[merged[idx + 1][0]]) if idx + 1 < len(merged) else math.inf
        out.append(Plateau(bytes_per_s=float(math.exp(statistics.median(lb[s].tolist()))),
                           capacity_bytes=float(cap), smallest_bytes=float(lo),
                           largest_bytes=float(hi), n=len(s)))
    return out


def geomean(xs: Sequence[float]) -> float:
    xs = [float(x) for x in xs]
    if not xs or any(x <= 0 for x in xs):
        raise ValueError("geomean needs positive numbers")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))
