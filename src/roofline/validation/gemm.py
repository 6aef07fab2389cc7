"""The GPU matmul model against measured GEMM kernel rates across shapes
(docs/validation/gemm.md).

Cases: src/roofline/data/validation/gemm.toml (OpenXLA's matmul performance table: bf16 dots
of m, n, k in 256..4096 on H100 and B200, kernel time). Each is priced as a one-op graph (the
``matmul`` formula, one dot) on the zoo part with the ``default`` preset: ours is the dot's
FLOPs over its **kernel** time (``OpTimes.t_kernel``: the compute / memory maximum, without the
launch gap or host dispatch the table's kernel tracer does not see).

Fitted here: the tile model's ``max``, ``a`` (= ``b``), ``c`` and ``fill`` of
data/presets/tiles.toml — one set for Hopper and Blackwell, by a grid search minimising the
squared log error over the cases given. Each device's table is its own source, so the
leave-one-source-out report is a leave-one-device-out one: the parameters fitted on the H100
table alone predict the B200's (and the reverse) with only the SM count, peak and bandwidth of
the part changed. "Before" is the smooth model (``1/e = (1 + a/M + b/N + c/K) / max`` of
``[gpu.gemm]``), the one every GPU had.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from .cases import Case, load_cases
from .holdout import FitReport, Refit, holdout_tables, leave_one_source_out

__all__ = ["gemm_cases", "predict_gemm", "gemm_errors", "fit_tiles", "gemm_holdout",
           "gemm_summary_table", "gemm_shape_table", "gemm_holdout_table", "PARAMS", "GRID"]

PARAMS = ("max", "a", "c", "fill")
#: the fit's grid (``b`` is tied to ``a``: the tables cannot tell rows from columns apart)
GRID: dict[str, tuple[float, ...]] = {
    "max": (0.85, 0.9, 0.95, 1.0), "a": (0.0, 8.0, 16.0, 32.0, 64.0),
    "c": (0.0, 32.0, 64.0, 128.0, 256.0, 512.0),
    "fill": (3e-6, 4e-6, 5e-6, 6e-6, 7e-6, 8e-6)}


def gemm_cases() -> tuple[Case, ...]:
    return load_cases("gemm").cases


@lru_cache(maxsize=1024)
def _graph(m: int, n: int, k: int, dtype: str) -> Any:
    from ..graphs.graph import GraphBuilder
    from ..specs.dtypes import precision

    b = GraphBuilder(f"dot {m}x{n}x{k}", "forward", precision(dtype))
    b.add("matmul", "dot", m=m, k=k, n=n)
    return b.build()


@lru_cache(maxsize=8)
def _hw_eff(key: str) -> tuple[Any, Any]:
    from ..engine.presets import efficiency_for
    from ..specs.hardware import hardware

    hw = hardware(key)
    return hw, efficiency_for(hw, "default")


def _model(case: Case, eff: Any) -> Any:
    from ..engine.core import TimeModel

    hw, _ = _hw_eff(case["hardware"])
    return TimeModel(_graph(case["m"], case["n"], case["k"], case["dtype"]), hw, eff)


def predict_gemm(case: Case, values: Mapping[str, float] | None = None, *,
                 smooth: bool = False, op_time: bool = False) -> float:
    """Our FLOP/s for ``case``: FLOPs / kernel time of the one-op graph at batch b;
    ``values``: tile parameters to use instead of the shipped ones; ``smooth``: without the
    tile model (the smooth matmul model, as before); ``op_time``: FLOPs / the op's time with
    the launch model (kernel + gap, at least the dispatch floor) instead of the kernel time."""
    hw, eff = _hw_eff(case["hardware"])
    if smooth:
        eff = replace(eff, tiles=None)
    elif values is not None:
        eff = replace(eff, tiles=_tiles(eff.tiles, values))
    ot = _model(case, eff).evaluate(float(case["b"]))
    return float(ot.flops.sum() / (ot.time if op_time else ot.t_kernel).sum())


def _tiles(t: Any, values: Mapping[str, float]) -> Any:
    v = dict(values)
    return replace(t, max=v["max"], a=v["a"], b=v["a"], c=v["c"], fill=v["fill"])


def gemm_errors(*, smooth: bool = False) -> list[tuple[Case, float, float]]:
    """(case, our FLOP/s, ours / measured − 1) for every case."""
    out = []
    for c in gemm_cases():
        f = predict_gemm(c, smooth=smooth)
        out.append((c, f, f / c.value_si - 1))
    return out


@lru_cache(maxsize=4)
def _arrays(ids: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Per part, the batch-independent arrays of its cases for the vectorised fit: the cases'
    positions, M/N/K, FLOPs, the memory time (it does not depend on the tile model), the
    peak the tiles run at and the part's tiles."""
    by_id = {c.id: c for c in gemm_cases()}
    cases = [by_id[i] for i in ids]
    out = []
    for key in dict.fromkeys(c["hardware"] for c in cases):
        hw, eff = _hw_eff(key)
        pos = [i for i, c in enumerate(cases) if c["hardware"] == key]
        mine = [cases[i] for i in pos]
        f, tm, dims = [], [], []
        for c in mine:
            ot = _model(c, replace(eff, tiles=None)).evaluate(float(c["b"]))
            f.append(float(ot.flops.sum()))
            tm.append(float(ot.t_memory.sum()))
            dims.append((c["m"] * c["b"], c["n"], c["k"]))
        d = np.array(dims, dtype=np.float64).T
        peak = hw.peak(mine[0]["dtype"]) * hw.sustained(mine[0]["dtype"])
        inv_bw = 1.0 / (hw.memory_bytes_per_s * eff.memory.max)
        out.append((np.array(pos), d, np.array(f), np.array(tm), peak, eff.tiles, inv_bw))
    return out


def _log_errors(values: Mapping[str, float] | None, cases: Sequence[Case]) -> list[float]:
    """log(ours / measured) per case (vectorised: the engine's kernel time, max(compute in
    whole waves, memory), for the one dot of each case; a test checks it against
    ``predict_gemm``)."""
    from ..engine.tiles import WaveOps

    ids = tuple(c.id for c in cases)
    out = np.empty(len(cases))
    for pos, (m, n, k), flops, t_mem, peak, t, inv_bw in _arrays(ids):
        tt = t if values is None else _tiles(t, values)
        w = WaveOps(np.arange(len(m)), m, n, k, flops / (2.0 * m * n * k), peak * tt.max, tt,
                    inv_bw)
        tk = np.maximum(w.seconds(1.0, np.nan), t_mem)
        meas = np.array([cases[i].value_si for i in pos])
        out[pos] = np.log(flops / tk / meas)
    return out.tolist()


def fit_tiles(cases: Sequence[Case]) -> Refit:
    """The tile parameters (max, a = b, c, fill) minimising Σ log² error over ``cases``, on
    ``GRID``."""
    best: tuple[float, dict[str, float]] | None = None
    for combo in itertools.product(*(GRID[p] for p in PARAMS)):
        vals = dict(zip(PARAMS, combo))
        e = _log_errors(vals, cases)
        s = math.fsum(x * x for x in e)
        if best is None or s < best[0]:
            best = (s, vals)
    assert best is not None
    return Refit(values=best[1], note="b tied to a")


def gemm_holdout() -> FitReport:
    """In-sample and leave-one-device-out error of the tile parameters."""
    cs = gemm_cases()
    t = _hw_eff(cs[0]["hardware"])[1].tiles
    shipped = {"max": t.max, "a": t.a, "c": t.c, "fill": t.fill}
    return leave_one_source_out("gpu tiles", cs, PARAMS, shipped, fit_tiles, _log_errors)


def _summary(errs: Sequence[float]) -> str:
    a = np.abs(np.asarray(errs))
    return f"{np.median(a):.1%} | {a.max():.0%}"


def gemm_summary_table() -> str:
    """Markdown: per part and size class, median and worst |error| before and after."""
    after = gemm_errors()
    before = gemm_errors(smooth=True)
    rows = ["| part | shapes | n | before: median | worst | with waves: median | worst |",
            "|---|---|---:|---:|---:|---:|---:|"]
    classes = (("all", lambda c: True),
               ("small (m·n·k ≤ 1024³)", lambda c: c["m"] * c["n"] * c["k"] <= 1024 ** 3),
               ("large (m·n·k ≥ 2048³)", lambda c: c["m"] * c["n"] * c["k"] >= 2048 ** 3))
    for hw in dict.fromkeys(c["hardware"] for c, _, _ in after):
        for label, sel in classes:
            a = [e for c, _, e in after if c["hardware"] == hw and sel(c)]
            b = [e for c, _, e in before if c["hardware"] == hw and sel(c)]
            rows.append(f"| {hw} | {label} | {len(a)} | {_summary(b)} | {_summary(a)} |")
    return "\n".join(rows)


def gemm_shape_table() -> str:
    """Markdown: the square dots of each part, before and after (FLOP/s; + = too fast)."""
    before = {c.id: e for c, _, e in gemm_errors(smooth=True)}
    rows = ["| case | published | ours (kernel) | error | before: kernel | error "
            "| before: op time (gap, dispatch floor) | error |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c, f, e in gemm_errors():
        if not (c["m"] == c["n"] == c["k"]):
            continue
        fb = c.value_si * (1 + before[c.id])
        fo = predict_gemm(c, smooth=True, op_time=True)
        rows.append(f"| {c.id} | {c.value_si / 1e12:.1f} TFLOP/s | {f / 1e12:.1f} | {e:+.1%} | "
                    f"{fb / 1e12:.1f} | {before[c.id]:+.1%} | {fo / 1e12:.1f} | "
                    f"{fo / c.value_si - 1:+.1%} |")
    return "\n".join(rows)


def gemm_holdout_table(rep: FitReport | None = None) -> str:
    """The markdown hold-out tables of docs/validation/gemm.md."""
    return holdout_tables(gemm_holdout() if rep is None else rep,
                          lambda k, v: f"{v * 1e6:g} µs" if k == "fill" else f"{v:g}")
