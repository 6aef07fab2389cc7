"""From measurements to numbers: peaks, memory levels, the GEMM and vector efficiency fits, fixed
per-call costs, cold-weight and cache-eviction terms — each with the derivation it records."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import SpecError
from .fit import GemmFit, fit_gemm, fit_levels, geomean
from .plan import _FP32, vector_cost
from .run import Measurements
from .timing import Sample

__all__ = ["Fitted", "derive"]


def _num(v: float) -> str:
    if v == 0:
        return "0"
    r = float(f"{v:.4g}")
    return repr(int(r)) if r.is_integer() and abs(r) < 1e15 else repr(r)


def _spread(s: Sample) -> str:
    return (f"median of {s.n} samples, p10-p90 spread {s.spread:.0%}"
            + (f", {s.discarded} dropped for run-queue delay" if s.discarded else ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class Fitted:
    """Numbers derived from Measurements (what goes into the spec)."""

    dispatch_s: float
    levels: list[Any]  #: fit.Plateau, innermost first (the last is main memory)
    gemm: GemmFit | None
    gemm_used: int
    vector_frac: dict[str, tuple[float, str]]  #: efficiency field -> (value, derivation)
    page_fault_s: float | None
    page_derivation: str
    dispatch_note: str = ""
    scales: dict[str, tuple[float, str]] = field(default_factory=dict)
    main_read: tuple[float, str] | None = None
    #: ``dispatch_<class>`` -> (seconds, derivation): fixed per-call cost by op class
    dispatch_class: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: cold-weight terms (``cold_after``, ``cold_read_max``, ``cold_pack_max``,
    #: ``pack_min_rows``) -> (value, derivation); CPUs only
    cold: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: ``evicted_dispatch`` (s), ``evict_after`` (bytes) -> (value, derivation); CPUs only
    evicted: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: fresh bytes a convolution call maps per byte of output, with its derivation
    conv_fresh: tuple[float, str] | None = None


def _cold_terms(ms: Measurements, levels: list[Any], main_bw: float,
                main_read: tuple[float, str] | None) -> dict[str, tuple[float, str]]:
    """Weights a whole model reuses only once per pass are evicted in between ("cold"):
    the threshold, their read rate and the repacking a multi-row GEMM does on them."""
    if ms.kind != "cpu" or len(levels) < 2 or not ms.pack or main_read is None:
        return {}
    llc = levels[-2]
    out = {"cold_after": (llc.largest_bytes, (
        f"largest STREAM working set still at the last cache level's bandwidth "
        f"({llc.largest_bytes / 2**10:,.0f} KiB): when the rest of a graph moves more bytes "
        f"than this between two uses of an op's weights, they have left the cache")),
        "cold_read_max": main_read}
    n, k = ms.pack_shape
    w = 4.0 * n * k
    by_rows = sorted((r, s.median_s) for r, s in ms.pack)
    r1, t1 = by_rows[0]
    r_top, t_top = by_rows[-1]
    extra = t_top - t1
    times = ", ".join(f"{r} rows {t * 1e3:.3f} ms" for r, t in by_rows)
    if r1 != 1 or r_top <= 1 or not extra > 0.1 * t1:
        return out
    out["cold_pack_max"] = (min(1.0, w / (main_bw * extra)), (
        f"cold {n}x{k} fp32 weights ({w / 2**20:.0f} MiB, cycling through more than the LLC): "
        f"{times}; ({w / 1e6:.1f} MB / ({t_top * 1e3:.3f} - {t1 * 1e3:.3f}) ms) / DRAM STREAM "
        f"{main_bw / 1e9:.1f} GB/s: the multi-row GEMM repacks the weights before computing, "
        f"the matrix-vector path does not"))
    r_min = next(r for r, t in by_rows if r > 1 and t - t1 >= 0.5 * extra)
    out["pack_min_rows"] = (float(r_min), (
        f"fewest rows whose cold time exceeds the 1-row time by at least half the "
        f"{r_top}-row excess ({times})"))
    return out


def _evicted_terms(ms: Measurements, disp: float) -> dict[str, tuple[float, str]]:
    """Extra fixed costs of a call whose framework code earlier ops evicted from the private
    caches, as medians over the small ops at the largest flush: the op kind's own part (what
    remains when a tiny op of another kind ran after the flush) and the common part (the
    rest); and the bytes moved from which they apply (where the first op's excess passes half
    its largest: geometric midpoint of the two sizes)."""
    if ms.kind != "cpu" or not ms.evict or not ms.evict_hot:
        return {}
    top = max(f for _, f, _ in ms.evict)
    after = {op: s.median_s for op, f, s in ms.evict if f == top and op in ms.evict_hot}
    ops = [op for op in after if op in ms.evict_other]
    if not ops:
        return {}
    hot = {op: ms.evict_hot[op].median_s for op in ops}
    total = statistics.median(after[op] - hot[op] for op in ops)
    kind = max(0.0, statistics.median(ms.evict_other[op].median_s - hot[op] for op in ops))
    kind = min(kind, total)
    if not total > 0.5 * disp:
        return {}  # not distinguishable from the call cost itself
    each = "; ".join(f"{op} {hot[op] * 1e6:.2f} -> {after[op] * 1e6:.2f} us (with a tiny op "
                     f"of another kind between: {ms.evict_other[op].median_s * 1e6:.2f} us)"
                     for op in ops)
    op0 = ms.evict[0][0]
    series = sorted((f, s.median_s - ms.evict_hot[op0].median_s) for op, f, s in ms.evict
                    if op == op0)
    half = 0.5 * series[-1][1]
    i = next(j for j, (_, p) in enumerate(series) if p >= half)
    at = math.sqrt(series[i - 1][0] * series[i][0]) if i > 0 else series[0][0] / math.sqrt(2)
    steps = ", ".join(f"{f / 2**20:g} MiB +{p * 1e6:.1f} us" for f, p in series)
    how = (f"small ops back to back -> right after an op moving {top / 2**20:g} MiB: {each}")
    return {
        "evicted_dispatch": (total - kind, (
            f"median excess right after the evicting op ({total * 1e6:.2f} us) minus the part "
            f"that stays when a tiny op of another kind ran in between (the op kind's own code: "
            f"evicted_kind_dispatch); {how}")),
        "evicted_kind_dispatch": (kind, (
            f"median excess when a tiny op of another kind ran after the evicting op; {how}")),
        "evict_after": (at, (
            f"{op0} after an op moving {steps}: geometric midpoint of the two sizes around "
            f"half the largest excess"))}


def _net_of(disp: float, sync: bool) -> Callable[[float], float]:
    """Time of the work itself: synchronous CPU calls add the per-call cost ``disp``; on a GPU
    back-to-back launches overlap with the kernels (time = max(launch, kernel)). NaN where the
    call, not the work, binds."""
    def net_of(t: float) -> float:
        if sync:
            return t - disp if t - disp > 0.5 * t else math.nan
        return t if t > 2 * disp else math.nan
    return net_of


def derive(ms: Measurements) -> Fitted:
    """Ceilings and the efficiency model from raw measurements (pure arithmetic)."""
    if ms.tiny is None or "fp32" not in ms.peaks:
        raise SpecError("measurements lack the call overhead or the fp32 GEMM peak")
    sync = ms.kind == "cpu"
    levels, disp, disp_note = _levels(ms, sync)
    net_of = _net_of(disp, sync)
    main_bw = levels[-1].bytes_per_s
    peak32 = ms.peaks["fp32"][0]
    pts = _gemm_points(ms, net_of, levels, peak32)
    gemm, scales = _gemm_fits(pts)
    frac, disp_cls = _vector_terms(ms, net_of, sync, disp, peak32)
    main_read, pf, pder, cold, conv_fresh = _memory_terms(ms, net_of, levels, main_bw)
    return Fitted(conv_fresh=conv_fresh, dispatch_s=disp, levels=levels, gemm=gemm,
                  gemm_used=len(pts["gemm"]),
                  cold=cold, evicted=_evicted_terms(ms, disp),
                  scales=scales, main_read=main_read, dispatch_class=disp_cls,
                  vector_frac=frac, page_fault_s=pf, page_derivation=pder,
                  dispatch_note=disp_note)


def _levels(ms: Measurements, sync: bool) -> tuple[list[Any], float, str]:
    """Memory levels from the STREAM sweep, and the per-call cost (refined on a CPU by the
    innermost plateau's intercept): (levels, dispatch seconds, how)."""
    assert ms.tiny is not None
    disp = ms.tiny.median_s
    net_of = _net_of(disp, sync)
    # bandwidth per working set: median over kernels of bytes / (time - per-call cost), keeping
    # points where the per-call cost is under half the time (else the call, not memory, binds)
    by_ws: dict[float, list[float]] = {}
    t_by_ws: dict[float, list[float]] = {}
    for _kern, ws, s in ms.stream:
        net = net_of(s.median_s)
        if net > 0:
            by_ws.setdefault(ws, []).append(ws / net)
            t_by_ws.setdefault(ws, []).append(s.median_s)
    if not by_ws:
        raise SpecError("every STREAM point was dominated by per-call overhead; use larger sizes")
    ws_list = sorted(by_ws)
    bw_list = [statistics.median(by_ws[w]) for w in ws_list]
    # below the working set of the best bandwidth the curve rises: per-call costs (and
    # single-threaded small calls) bind there, not a memory level; those points are dropped
    top = max(range(len(bw_list)), key=bw_list.__getitem__)
    ws_list, bw_list = ws_list[top:], bw_list[top:]
    levels = fit_levels(ws_list, bw_list, max_levels=4)
    # the innermost plateau: t = d + ws / bw by least squares gives the fixed per-op cost of
    # a multi-threaded call (thread wake-up included) and the level's bandwidth together
    inner = levels[0]
    pts_in = [(w, statistics.median(t_by_ws[w])) for w in ws_list
              if inner.smallest_bytes <= w <= inner.largest_bytes]
    disp_note = "one framework call on a 1-element tensor"
    if sync and len(pts_in) >= 3:
        X = [w for w, _ in pts_in]
        Y = [t for _, t in pts_in]
        mx, my = statistics.fmean(X), statistics.fmean(Y)
        sxx = sum((x - mx) ** 2 for x in X)
        slope = sum((x - mx) * (y - my) for x, y in zip(X, Y)) / sxx if sxx else 0.0
        icpt = my - slope * mx
        if slope > 0 and disp < icpt < 10 * disp:
            disp = icpt
            levels[0] = replace(inner, bytes_per_s=1.0 / slope)
            disp_note = (f"intercept of time = d + bytes/bandwidth fitted to STREAM at "
                         f"{len(pts_in)} working sets of the innermost measured level "
                         f"(a 1-element call costs {ms.tiny.median_s * 1e6:.2f} us)")
    return levels, disp, disp_note


def _gemm_points(ms: Measurements, net_of: Callable[[float], float], levels: list[Any],
                 peak32: float) -> dict[str, list[tuple[float, float, float, float]]]:
    """(M, N, K, efficiency) of the compute-bound GEMM, convolution, attention and bf16 points
    (memory- or overhead-bound points dropped)."""
    main_bw = levels[-1].bytes_per_s
    pts: dict[str, list[tuple[float, float, float, float]]] = {"gemm": [], "conv": [],
                                                                "sdpa": [], "bf16": []}
    def bw_holding(ws: float) -> float:
        """Bandwidth of the innermost measured level whose capacity holds ``ws`` bytes (a
        benchmark re-run on the same operands reads them from there)."""
        return next((lv.bytes_per_s for lv in levels[:-1] if ws <= lv.capacity_bytes),
                    main_bw)

    for label, M, N, K, flops, s in ms.gemm_points:
        kind = label.split()[0]
        net = net_of(s.median_s)
        byts = (2 if kind == "bf16" else _FP32) * (M * K + K * N + M * N)
        if not net > 0 or byts / bw_holding(byts) > 0.5 * net:
            continue  # memory- or overhead-bound: says nothing about compute efficiency
        pk = ms.peaks["bf16"][0] if kind == "bf16" else peak32
        pts[kind].append((M, N, K, min(1.0, flops / net / pk)))
    return pts


def _gemm_fits(pts: dict[str, list[tuple[float, float, float, float]]]
               ) -> tuple[GemmFit | None, dict[str, tuple[float, str]]]:
    """The GEMM efficiency fit and the convolution, attention and bf16 terms beside it."""
    gemm = fit_gemm(pts["gemm"]) if len(pts["gemm"]) >= 2 else None
    scales: dict[str, tuple[float, str]] = {}
    if gemm is not None and len(pts["conv"]) >= 5:
        # convolutions get their own a, b, c (their efficiency depends on K = C·kh·kw quite
        # differently from a GEMM's) and their own best fraction, as conv_scale
        cf = fit_gemm(pts["conv"])
        cder = (f"least-squares fit of 1/eff = (1 + a/M + b/N + c/K)/(gemm_max*conv_scale) to "
                f"{cf.n} convolutions at their implicit-GEMM M, N, K; rms log error "
                f"{cf.rms_log_error:.3f}")
        scales["conv_scale"] = (min(4.0, cf.gemm_max / gemm.gemm_max), cder)
        scales["conv_a"], scales["conv_b"], scales["conv_c"] = ((cf.a, cder), (cf.b, cder),
                                                                 (cf.c, cder))
    if len(pts["bf16"]) >= 4:
        # the bf16 peak is the best rate at the sizes run, not necessarily the asymptote of
        # its tiles: gemm_max_bf16 may exceed 1 (up to 2)
        bf = fit_gemm(pts["bf16"], max_ceiling=2.0)
        bder = (f"least-squares fit (relative residuals, a,b,c >= 0) of 1/eff = (1 + a/M + b/N "
                f"+ c/K)/gemm_max to {bf.n} bf16 GEMM shapes, efficiency against the bf16 peak "
                f"(the best measured rate, so gemm_max may exceed 1, at most 2); rms log error "
                f"{bf.rms_log_error:.3f}")
        for fld, v in (("gemm_max_bf16", bf.gemm_max), ("gemm_a_bf16", bf.a),
                       ("gemm_b_bf16", bf.b), ("gemm_c_bf16", bf.c)):
            scales[fld] = (v, bder)
    if gemm is not None:
        for cls, fld in (("conv", "conv_scale"), ("sdpa", "attention_scale")):
            if pts[cls] and fld not in scales:
                r = [e / gemm.efficiency(M, N, K) for M, N, K, e in pts[cls]]
                what = "convolutions" if cls == "conv" else "fused attention calls"
                ratios = ", ".join(f"{x:.2f}" for x in r)
                scales[fld] = (min(4.0, geomean(r)), (
                    f"geometric mean over {len(r)} {what} of measured efficiency / the GEMM "
                    f"model's at their implicit-GEMM M, N, K ({ratios})"))
    return gemm, scales


def _vector_terms(ms: Measurements, net_of: Callable[[float], float], sync: bool, disp: float,
                  peak32: float) -> tuple[dict[str, tuple[float, str]],
                                          dict[str, tuple[float, str]]]:
    """Vector-class rates as fractions of the fp32 peak, and fixed per-call costs per class."""
    # vector classes: at two in-cache sizes, time = fixed cost + FLOPs / rate per op (slope and
    # intercept); with one size only, the rate of time minus the per-op cost
    per_op: dict[str, tuple[str, float, float | None, str]] = {}  # op -> cls, rate, icpt, how
    for op, (f1, _b, cls, s1) in ms.vector.items():
        small = ms.vector_small.get(op)
        if small is not None and sync:
            f0, s0 = small[0], small[3]
            dt = s1.median_s - s0.median_s
            if dt > 0 and f1 > f0:
                rate = (f1 - f0) / dt
                icpt = s0.median_s - f0 / rate
                per_op[op] = (cls, rate, icpt, (
                    f"{op}: ({_num(f1)} - {_num(f0)}) FLOPs / ({s1.median_s * 1e6:.2f} - "
                    f"{s0.median_s * 1e6:.2f}) us = {rate / 1e9:.3g} GFLOP/s, intercept "
                    f"{icpt * 1e6:.2f} us"))
                continue
        net = net_of(s1.median_s)
        if net > 0:
            per_op[op] = (cls, f1 / net, None, f"{op}: {f1 / net / 1e9:.3g} GFLOP/s (time "
                                                 "minus the per-op cost)")
    vs_note = (f" ({ms.vector_sizes[0]:,} and {ms.vector_sizes[1]:,} elements, inside the "
               f"innermost STREAM plateau)" if all(ms.vector_sizes) else "")
    field_of = {"elementwise": "vector_max", "norm": "norm_max", "softmax": "softmax_max",
                "pool": "pool_max"}
    frac: dict[str, tuple[float, str]] = {}
    disp_cls: dict[str, tuple[float, str]] = {}
    for cls in field_of:
        ops = [op for op, v in per_op.items() if v[0] == cls]
        if not ops:
            continue
        # the class's compute ceiling is the rate of its most FLOP-heavy op per element (tanh-
        # GELU among elementwise ops, LayerNorm among norms): the cheaper ops of the class are
        # bound by memory or by their fixed cost, not by this rate
        fpe = {op: vector_cost(op, 4096)[0] / 4096 for op in ops}
        heavy = max(ops, key=lambda o: (fpe[o], o))
        rate = per_op[heavy][1]
        allhow = "; ".join(per_op[o][3] for o in ops)
        frac[field_of[cls]] = (min(1.0, rate / peak32), (
            f"rate of {heavy} (the class's most FLOP-heavy op per element, FLOPs per ops.formulas) "
            f"/ fp32 peak {peak32 / 1e9:.4g} GFLOP/s; measured at "
            f"{'two sizes' if per_op[heavy][2] is not None else 'one size'}"
            f"{vs_note} "
            f"({allhow})"))
        icpts = {o: x for o, x in ((o, per_op[o][2]) for o in ops)
                 if x is not None and 0.5 * disp <= x <= 1e-3}
        if icpts:
            # the least intercept: ops with heavier per-element math (tanh-GELU, SiLU) scale
            # sub-linearly between the two sizes, which inflates their intercept; the call's
            # own fixed cost is what the lightest op (ReLU among elementwise ops) shows
            low = min(icpts, key=lambda o: (icpts[o], o))
            disp_cls[f"dispatch_{cls}"] = (icpts[low], (
                f"fixed per-call cost: least intercept (of {low}) of time = cost + FLOPs/rate "
                f"over {', '.join(icpts)} at two sizes above PyTorch's parallel grain "
                f"({allhow})"))
    for cls, smp in ms.tiny_class.items():
        disp_cls[f"dispatch_{cls}"] = (smp.median_s, (
            f"one {cls} call on a minimal input ({_spread(smp)})"))
    return frac, disp_cls


def _memory_terms(ms: Measurements, net_of: Callable[[float], float], levels: list[Any],
                  main_bw: float) -> tuple[Any, float | None, str, Any, Any]:
    """Cold-weight reads, page faults of fresh outputs, the cold-cache terms and the conv's
    freshly mapped bytes."""
    cold_bw = []
    for n, k, smp in ms.cold:
        net = net_of(smp.median_s)
        if net > 0:
            cold_bw.append(4.0 * n * k / net)
    main_read = None
    if cold_bw:
        f = min(1.0, statistics.median(cold_bw) / main_bw)
        sizes = ", ".join(f"{4 * n * k / 2**20:.0f}" for n, k, _ in ms.cold)
        main_read = (f, f"median over matrix-vector products each reading a cold weight "
                        f"matrix ({sizes} MiB; cycling through more than the LLC): "
                        f"{', '.join(f'{b / 1e9:.1f}' for b in cold_bw)} GB/s, / DRAM STREAM "
                        f"{main_bw / 1e9:.1f} GB/s")
    pf: float | None = None
    pder = ""
    if ms.fresh is not None:
        n, fresh, reused = ms.fresh
        pages = math.ceil(n * _FP32 / 4096)
        pf = max(0.0, fresh.median_s - reused.median_s) / pages
        pder = (f"(a + b into a fresh {n * _FP32 / 2**20:.0f} MiB output: "
                f"{fresh.median_s * 1e3:.3f} ms) - (same into a preallocated output: "
                f"{reused.median_s * 1e3:.3f} ms), / {pages} pages of 4 KiB")
    cold = _cold_terms(ms, levels, main_bw, main_read)
    conv_fresh = None
    if ms.conv_fresh is not None and pf is not None:
        b, c, hw_, co, fb = ms.conv_fresh
        out_b = _FP32 * b * co * hw_ * hw_
        if fb > 0:
            conv_fresh = (fb / out_b, (
                f"minor page faults x 4 KiB of a 3x3 convolution {b}x{c}x{hw_}x{hw_} -> {co} "
                f"channels, per call: {fb / 2**20:.1f} MiB for a {out_b / 2**20:.1f} MiB output "
                f"(its output and the framework's temporaries, all freshly mapped at this "
                f"size)"))
    return main_read, pf, pder, cold, conv_fresh
