"""The refit of the GPU factors on the GPU inference cases (docs/validation/inference.md,
"Refit of the GPU factors"): one grid of ``[gpu]`` factor sets, every non-outlier case priced
under each (``inference.seconds_with``: rl.solve's engine plan with the factors replaced), the
best set chosen in-sample (all cases) and leave-one-source-out (the best set on the other
sources' cases, judged on the held-out source's). The page's ``refit`` block is ``refit_table()``
(``python -m roofline.validation.regenerate --only pages:inference.md``, about a minute).

Nothing here changes the preset: the page reports what a refit would give, and why it is not
adopted.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .inference import factor, inference_cases, measured_seconds, seconds_with

__all__ = ["GRID", "PRESET", "RefitGrid", "refit_grid", "best_set", "loso_ratios", "refit_table",
           "refit_figures"]

#: the grid searched: flat factor name -> values (gemm_b follows gemm_a)
GRID: dict[str, tuple[float, ...]] = {
    "gemm_max": (0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85),
    "memory_max": (0.75, 0.8, 0.88, 0.95), "gemm_a": (16.0, 32.0, 64.0, 128.0),
    "kernel_gap": (1e-6, 2e-6, 4e-6), "dispatch": (2e-6, 5e-6, 10e-6)}
#: the default preset's [gpu] values of the same factors (data/presets/default.toml)
PRESET = {"gemm_max": 0.80, "memory_max": 0.88, "gemm_a": 32.0, "kernel_gap": 2e-6,
          "dispatch": 5e-6}


@dataclass(frozen=True, slots=True)
class RefitGrid:
    """Every factor set of the grid and, per set, r = ours / measured for every case."""

    cases: tuple[str, ...]  #: case ids (non-outliers, data-file order)
    sources: tuple[str, ...]  #: each case's source key
    sets: tuple[dict[str, float], ...]
    ratios: tuple[tuple[float, ...], ...]  #: ratios[i][j]: set i, case j
    preset: tuple[float, ...]  #: r under the preset's values (rl.solve)


def _with(ch: Mapping[str, float]) -> dict[str, float]:
    return {**ch, "gemm_b": ch["gemm_a"]}


def refit_grid(grid: Mapping[str, Sequence[float]] | None = None) -> RefitGrid:
    """Price every non-outlier case under every set of ``grid`` (default ``GRID``)."""
    grid = GRID if grid is None else grid
    cases = [c for c in inference_cases().cases if not c.known_outlier]
    meas = [measured_seconds(c) for c in cases]
    sets = tuple(dict(zip(grid, v)) for v in itertools.product(*grid.values()))
    ratios = tuple(tuple(seconds_with(c, **_with(s)) / m for c, m in zip(cases, meas))
                   for s in sets)
    preset = tuple(seconds_with(c) / m for c, m in zip(cases, meas))
    return RefitGrid(cases=tuple(c.id for c in cases), sources=tuple(c.source for c in cases),
                     sets=sets, ratios=ratios, preset=preset)


def _rms(rs: Sequence[float]) -> float:
    return math.sqrt(statistics.fmean(math.log(r) ** 2 for r in rs))


def best_set(ratios: Sequence[Sequence[float]], on: Sequence[int]) -> int:
    """Index of the set with the smallest RMS log error over the cases ``on`` (first on ties)."""
    return min(range(len(ratios)), key=lambda i: _rms([ratios[i][j] for j in on]))


def loso_ratios(g: RefitGrid) -> tuple[list[float], dict[str, int]]:
    """Leave-one-source-out: per source, the best set on the other sources' cases; returns r of
    every case under the set fitted without its source, and the set chosen per source."""
    out = [0.0] * len(g.cases)
    chosen = {}
    for s in dict.fromkeys(g.sources):
        train = [j for j, src in enumerate(g.sources) if src != s]
        i = best_set(g.ratios, train)
        chosen[s] = i
        for j, src in enumerate(g.sources):
            if src == s:
                out[j] = g.ratios[i][j]
    return out, chosen


def _stats(rs: Sequence[float]) -> str:
    fs = [factor(r) for r in rs]
    geo = math.exp(statistics.fmean(math.log(f) for f in fs))
    bias = math.exp(statistics.fmean(math.log(r) for r in rs))
    return (f"{statistics.median(fs):.3f} | {geo:.3f} | {max(fs):.2f} | {bias:.2f} | "
            f"{_rms(rs):.3f}")


def _show(s: Mapping[str, float]) -> str:
    return (f"gemm_max {s['gemm_max']:g}, memory_max {s['memory_max']:g}, a = b = "
            f"{s['gemm_a']:g}, gap {s['kernel_gap'] * 1e6:g} µs, dispatch "
            f"{s['dispatch'] * 1e6:g} µs")


def refit_table(g: RefitGrid | None = None) -> str:
    """docs/validation/inference.md's ``refit`` block (markdown): the preset, the in-sample best
    set and the leave-one-source-out sets, each with median / geo-mean / worst error factor,
    bias and RMS log error over the cases it is judged on."""
    g = refit_grid() if g is None else g
    every = list(range(len(g.cases)))
    best = best_set(g.ratios, every)
    held, chosen = loso_ratios(g)
    lines = ["| factors | judged on | cases | median | geo-mean | worst | bias | rms log |",
             "|---|---|---:|---:|---:|---:|---:|---:|",
             f"| the preset: {_show(PRESET)} | all | {len(every)} | {_stats(g.preset)} |",
             f"| best on all cases (in-sample): {_show(g.sets[best])} | all | {len(every)} | "
             f"{_stats(g.ratios[best])} |"]
    for s, i in chosen.items():
        js = [j for j, src in enumerate(g.sources) if src == s]
        lines.append(f"| best without `{s}`: {_show(g.sets[i])} | `{s}` (held out) | "
                     f"{len(js)} | {_stats([held[j] for j in js])} |")
    lines.append(f"| leave-one-source-out, pooled (each case under the set fitted without its "
                 f"source) | all, held out | {len(every)} | {_stats(held)} |")
    return "\n".join(lines)


def refit_figures(g: RefitGrid | None = None) -> dict[str, str]:
    """The median error factors the page's prose quotes (inline markers): ``refit.preset``,
    ``refit.insample`` (the best set on all cases, judged on them) and ``refit.loso`` (pooled
    leave-one-source-out)."""
    g = refit_grid() if g is None else g
    every = list(range(len(g.cases)))
    med = lambda rs: f"{statistics.median(factor(r) for r in rs):.3f}"  # noqa: E731
    return {"refit.preset": med(g.preset),
            "refit.insample": med(g.ratios[best_set(g.ratios, every)]),
            "refit.loso": med(loso_ratios(g)[0])}
