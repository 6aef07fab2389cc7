"""Running a plan: every benchmark of a ``MeasurePlan`` on the backends, into ``Measurements``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from ..ops import cost
from ..progress import Progress
from .backends import EVICT_OPS, STREAM_ARRAYS, TINY_CLASSES, VECTOR_OPS, Backend
from .plan import _FP32, MeasurePlan, vector_cost
from .timing import Sample

__all__ = ["Measurements", "run_plan", "vector_sizes", "PARALLEL_MIN_ELEMS"]


@dataclass
class Measurements:
    """Raw results of a plan (what the spec's numbers are computed from)."""

    kind: str
    info: dict[str, str]
    peaks: dict[str, tuple[float, str, Sample]] = field(default_factory=dict)
    peak_candidates: list[tuple[str, str, int, float]] = field(default_factory=list)
    tiny: Sample | None = None
    stream: list[tuple[str, float, Sample]] = field(default_factory=list)  # kernel, ws, sample
    gemm_points: list[tuple[str, float, float, float, float, Sample]] = \
        field(default_factory=list)  # label, M, N, K, flops, sample
    vector: dict[str, tuple[float, float, str, Sample]] = field(default_factory=dict)
    #: the same ops at the plan's smaller size
    vector_small: dict[str, tuple[float, float, str, Sample]] = field(default_factory=dict)
    vector_sizes: tuple[int, int] = (0, 0)  #: (smaller, larger) element counts used
    tiny_class: dict[str, Sample] = field(default_factory=dict)  #: op class -> minimal call
    fresh: tuple[int, Sample, Sample] | None = None
    #: (B, C, HW, C', fresh bytes per call) of the conv_fresh_shape benchmark
    conv_fresh: tuple[int, int, int, int, float] | None = None
    cold: list[tuple[int, int, Sample]] = field(default_factory=list)
    #: (rows, sample) of the cold-weight GEMM at plan.pack_shape
    pack: list[tuple[int, Sample]] = field(default_factory=list)
    pack_shape: tuple[int, ...] = ()
    #: small op -> back-to-back (hot) sample; (op, flush bytes, sample) right after a flush;
    #: op -> sample after the largest flush and a tiny op of another kind
    evict_hot: dict[str, Sample] = field(default_factory=dict)
    evict: list[tuple[str, int, Sample]] = field(default_factory=list)
    evict_other: dict[str, Sample] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    discarded: int = 0


_Progress = Progress  # the counted progress of a measurement (roofline.progress)


def _count(plan: MeasurePlan, n_backends: int) -> int:
    return (1 + sum(len(v) for v in plan.peak_sizes.values()) * n_backends
            + len(plan.stream_elems) * len(plan.stream_kernels) + len(plan.gemm_shapes)
            + len(plan.conv_shapes) + len(plan.sdpa_shapes) + len(plan.bf16_shapes)
            + len(VECTOR_OPS) * (2 if plan.vector_elems_small else 1) + len(TINY_CLASSES)
            + len(plan.cold_shapes) + (1 if plan.fresh_elems else 0)
            + (1 if plan.conv_fresh_shape else 0)
            + (len(plan.pack_rows) if plan.pack_shape else 0)
            + ((3 * len(EVICT_OPS) + len(plan.evict_flush) - 1) if plan.evict_flush else 0))


#: PyTorch's parallel grain (at::internal::GRAIN_SIZE, 32768 elements) plus a margin: CPU vector
#: benchmarks stay above it, as a model's ops are, so they time the parallel path
PARALLEL_MIN_ELEMS = 40960


def vector_sizes(stream: list[tuple[str, float, Sample]], largest: int) -> tuple[int, int]:
    """(larger, smaller) element counts for the two-size vector benchmarks on a CPU: both inside
    the innermost bandwidth plateau the STREAM sweep saw (the working sets within 0.8 of the
    best rate), so slope and intercept are not bent by a cache boundary; the smaller a quarter
    of the larger but above PyTorch's parallel grain; the larger at most ``largest`` and at
    least twice the smaller."""
    by_ws: dict[float, list[float]] = {}
    for _k, ws, smp in stream:
        by_ws.setdefault(ws, []).append(ws / smp.median_s)
    bw = {ws: statistics.median(v) for ws, v in by_ws.items()}
    if not bw:
        return largest, max(PARALLEL_MIN_ELEMS, largest // 4)
    best = max(bw.values())
    inner = max(ws for ws, b in bw.items() if b >= 0.8 * best)
    # the vector ops move about 8 bytes per element (4 read, 4 written)
    big = 2 ** int(math.log2(max(inner / 8, 1.0)))
    big = max(min(big, largest), 2 * PARALLEL_MIN_ELEMS)
    return big, max(PARALLEL_MIN_ELEMS, big // 4)


def run_plan(plan: MeasurePlan, backends: list[Backend],
             progress: TextIO | None = None) -> Measurements:
    """Run every benchmark of ``plan``; ``backends[0]`` is the primary one (PyTorch when
    present), the others only add GEMM peak candidates."""
    main = backends[0]
    ms = Measurements(kind=plan.kind, info=dict(main.info()))
    pr = Progress(_count(plan, len(backends)), progress, unit="benchmark")

    def keep(s: Sample) -> Sample:
        ms.discarded += s.discarded
        return s

    ms.tiny = keep(main.tiny())
    pr.step("per-op call overhead", f"{ms.tiny.median_s * 1e6:.2f} µs")
    _run_peaks(plan, backends, ms, keep, pr)
    _run_shapes(plan, main, ms, keep, pr)
    _run_vector(plan, main, ms, keep, pr)
    _run_memory(plan, main, ms, keep, pr)
    if plan.evict_flush:
        _run_evict(plan, main, ms, keep, pr)
    pr.close()
    return ms


def _run_peaks(plan: MeasurePlan, backends: list[Backend], ms: Measurements,
               keep: Callable[[Sample], Sample], pr: _Progress) -> None:
    """The GEMM peak per dtype: every backend at every size of ``plan.peak_sizes``."""
    for dtype, sizes in plan.peak_sizes.items():
        for be in backends:
            if dtype not in be.dtypes:
                continue
            for s in sizes:
                smp = keep(be.gemm(dtype, s, s, s))
                rate = 2 * s**3 / smp.median_s
                ms.peak_candidates.append((dtype, be.name, s, rate))
                pr.step(f"GEMM {dtype} {s}³ ({be.name})", f"{rate / 1e9:.1f} GFLOP/s "
                        f"(spread {smp.spread:.0%})")
                best = ms.peaks.get(dtype)
                if best is None or rate > best[0]:
                    ms.peaks[dtype] = (rate, f"{be.name} {s}x{s}x{s}", smp)
    for dtype in ("bf16", "fp16"):
        if dtype in plan.peak_sizes and dtype not in ms.peaks:
            ms.skipped.append(f"{dtype} GEMM peak (needs PyTorch)")


def _run_shapes(plan: MeasurePlan, main: Backend, ms: Measurements,
                keep: Callable[[Sample], Sample], pr: _Progress) -> None:
    """STREAM kernels, then the GEMM, convolution and attention shapes of the efficiency fit."""
    for n in plan.stream_elems:
        for kern in plan.stream_kernels:
            smp = keep(main.stream(kern, n))
            ws = STREAM_ARRAYS[kern][0] * _FP32 * n
            ms.stream.append((kern, ws, smp))
            pr.step(f"STREAM {kern} {ws / 2**10:,.0f} KiB", f"{ws / smp.median_s / 1e9:.1f} GB/s")
    for m, n, k in plan.gemm_shapes:
        smp = keep(main.gemm("fp32", m, n, k))
        ms.gemm_points.append((f"gemm {m}x{n}x{k}", m, n, k, 2.0 * m * n * k, smp))
        rate = 2.0 * m * n * k / smp.median_s
        if "fp32" in ms.peaks and rate > ms.peaks["fp32"][0]:  # the peak drifted up meanwhile
            ms.peaks["fp32"] = (rate, f"{main.name} {m}x{n}x{k} (a fit shape)", smp)
            ms.peak_candidates.append(("fp32", main.name, m, rate))
        pr.step(f"GEMM fp32 M={m} N={n} K={k}", f"{2 * m * n * k / smp.median_s / 1e9:.1f} "
                "GFLOP/s")
    if "bf16" in ms.peaks:
        for m, n, k in plan.bf16_shapes:
            smp = keep(main.gemm("bf16", m, n, k))
            ms.gemm_points.append((f"bf16 {m}x{n}x{k}", m, n, k, 2.0 * m * n * k, smp))
            rate = 2.0 * m * n * k / smp.median_s
            if rate > ms.peaks["bf16"][0]:
                ms.peaks["bf16"] = (rate, f"{main.name} {m}x{n}x{k} (a fit shape)", smp)
                ms.peak_candidates.append(("bf16", main.name, m, rate))
            pr.step(f"GEMM bf16 M={m} N={n} K={k}", f"{rate / 1e9:.1f} GFLOP/s")
    for b, c, hw, co, kk, st in plan.conv_shapes:
        try:
            smp = keep(main.conv(b, c, hw, co, kk, st))
        except NotImplementedError:
            ms.skipped.append("convolution shapes in the GEMM fit (need PyTorch)")
            break
        cv = cost("conv", batch=b, c_in=c, spatial=(hw, hw), c_out=co, kernel=kk, stride=st,
                  padding=kk // 2, act_bytes=_FP32, weight_bytes=_FP32)  # what Backend.conv runs
        assert cv.gemm is not None
        M, N, K = cv.gemm
        ms.gemm_points.append((f"conv b{b} {c}x{hw}x{hw} -> {co} k{kk} s{st}", M, N, K,
                               cv.flops, smp))
        pr.step(f"conv b={b} C={c} HW={hw} C'={co} k={kk} s={st}",
                f"{cv.flops / smp.median_s / 1e9:.1f} GFLOP/s")
    for b, h, t, sl, d in plan.sdpa_shapes:
        try:
            smp = keep(main.sdpa(b, h, t, sl, d))
        except NotImplementedError:
            ms.skipped.append("fused attention in the efficiency fit (needs PyTorch)")
            break
        at = cost("attention", batch=b, n_heads=h, n_kv_heads=h, head_dim=d, q_len=t,
                  kv_len=sl, causal=t == sl, act_bytes=_FP32)  # causal when T == S
        assert at.gemm is not None
        flops = at.flops
        ms.gemm_points.append((f"sdpa b{b} h{h} T={t} S={sl} d{d}", *at.gemm, flops, smp))
        pr.step(f"attention b={b} heads={h} T={t} S={sl} d={d}",
                f"{flops / smp.median_s / 1e9:.1f} GFLOP/s")


def _run_vector(plan: MeasurePlan, main: Backend, ms: Measurements,
                keep: Callable[[Sample], Sample], pr: _Progress) -> None:
    """Vector-op rates (at the plan's sizes, or those the caches give) and per-class call
    costs."""
    big, small = plan.vector_elems, plan.vector_elems_small
    if plan.kind == "cpu" and small and not plan.quick:
        big, small = vector_sizes(ms.stream, big)
    ms.vector_sizes = (small, big)
    vsizes: list[tuple[int, dict[str, tuple[float, float, str, Sample]]]] = [(big, ms.vector)]
    if small:
        vsizes.append((small, ms.vector_small))
    for op in VECTOR_OPS:
        try:
            for n_el, dest in vsizes:
                smp = keep(main.vector(op, n_el))
                flops, byts, cls = vector_cost(op, n_el)
                dest[op] = (flops, byts, cls, smp)
                pr.step(f"vector {op} ({n_el:,} elements)",
                        f"{n_el / smp.median_s / 1e9:.2f} G elements/s")
        except NotImplementedError:
            ms.skipped.append("vector-op rates (tanh-GELU, SiLU, softmax, LayerNorm, BatchNorm, "
                              "MaxPool: need PyTorch; the default preset's values are used)")
            break
    for cls in TINY_CLASSES:
        try:
            smp = keep(main.tiny_class(cls))
        except NotImplementedError:
            ms.skipped.append("per-class call costs of attention, embedding and copies (need "
                              "PyTorch)")
            break
        ms.tiny_class[cls] = smp
        pr.step(f"per-op call overhead, {cls}", f"{smp.median_s * 1e6:.2f} µs")


def _run_memory(plan: MeasurePlan, main: Backend, ms: Measurements,
                keep: Callable[[Sample], Sample], pr: _Progress) -> None:
    """Fresh-memory (page-fault) terms, then cold weights and repacking (after the page-fault
    benchmark: freeing the weight pool changes what malloc maps fresh)."""
    if plan.fresh_elems:
        n = plan.fresh_elems
        fresh = keep(main.fresh(n))
        reused = keep(main.stream("add", n))
        ms.fresh = (n, fresh, reused)
        pr.step(f"fresh {n * _FP32 / 2**20:.0f} MiB output vs preallocated",
                f"{fresh.median_s * 1e3:.2f} ms vs {reused.median_s * 1e3:.2f} ms")
    if plan.conv_fresh_shape:
        b, c, hw, co = plan.conv_fresh_shape
        try:
            fb = main.conv_fresh_bytes(b, c, hw, co)
            ms.conv_fresh = (b, c, hw, co, fb)
            pr.step(f"fresh memory of a convolution ({4 * b * co * hw * hw / 2**20:.0f} MiB "
                    "output)", f"{fb / 2**20:.1f} MiB per call")
        except NotImplementedError:
            ms.skipped.append("fresh memory of a convolution call (needs PyTorch)")
    # after the page-fault benchmark: freeing the weight pool changes what malloc maps fresh
    for n, k in plan.cold_shapes:
        smp = keep(main.cold_gemv(n, k, plan.pool_bytes))
        ms.cold.append((n, k, smp))
        pr.step(f"cold matrix-vector {n}x{k} ({4 * n * k / 2**20:.0f} MiB of weights)",
                f"{4 * n * k / smp.median_s / 1e9:.1f} GB/s")
    if plan.pack_shape:
        n, k = plan.pack_shape
        ms.pack_shape = (n, k)
        for rows in plan.pack_rows:
            smp = keep(main.cold_gemv(n, k, plan.pool_bytes, rows=rows))
            ms.pack.append((rows, smp))
            pr.step(f"cold GEMM {rows}x{k} @ {k}x{n} ({4 * n * k / 2**20:.0f} MiB of weights)",
                    f"{smp.median_s * 1e3:.2f} ms")


def _run_evict(plan: MeasurePlan, main: Backend, ms: Measurements,
               keep: Callable[[Sample], Sample], pr: _Progress) -> None:
    """Small ops back to back, then each right after an op that moves many bytes."""
    top = max(plan.evict_flush)
    try:
        for op in EVICT_OPS:
            ms.evict_hot[op] = keep(main.after_flush(op, 0))
            pr.step(f"small {op}, back to back", f"{ms.evict_hot[op].median_s * 1e6:.2f} µs")
        for op in EVICT_OPS:
            for fb in (plan.evict_flush if op == EVICT_OPS[0] else (top,)):
                smp = keep(main.after_flush(op, fb))
                ms.evict.append((op, fb, smp))
                pr.step(f"small {op} after an op moving {fb / 2**20:g} MiB",
                        f"{smp.median_s * 1e6:.2f} µs")
            ms.evict_other[op] = smp = keep(main.after_flush(op, top, other=True))
            pr.step(f"small {op} after an op moving {top / 2**20:g} MiB and a tiny op",
                    f"{smp.median_s * 1e6:.2f} µs")
    except NotImplementedError:
        ms.evict_hot.clear()
        ms.evict.clear()
        ms.evict_other.clear()
        ms.skipped.append("fixed cost of a call after a cache-evicting op (needs PyTorch)")
