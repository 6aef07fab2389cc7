"""``measure``: this machine's ceilings and a small fitted efficiency model, as a hardware spec.

What is measured (every benchmark: warm-up, repetitions until a minimum time, the median of
samples not disturbed by run-queue delay, and the p10–p90 spread):

- **peak FLOP/s per dtype**: the best median rate of large square GEMMs, through numpy's BLAS
  and through PyTorch (the faster counts; both are recorded); bf16/fp16 through PyTorch.
- **bandwidth per memory level**: STREAM copy/scale/add/triad (bytes read + written, outputs
  preallocated) over working sets from L1 to DRAM; the curve is cut into plateaus
  (``fit.fit_levels``), one memory level each (a hierarchical roofline).
- **fixed per-op cost**: one framework call on a one-element tensor.
- **the efficiency model** (``[efficiency]`` in the spec, used by the ``default`` preset):
  GEMM/convolution efficiency ``1/eff = (1 + a/M + b/N + c/K) / gemm_max`` fitted to a set of
  shapes; vector rates of elementwise (tanh-GELU, SiLU), norm (LayerNorm), softmax and pool
  (MaxPool) ops as fractions of the fp32 peak; page-fault cost of fresh outputs ≥ 32 MiB.

The spec is written atomically (temporary file + rename), so an interrupted run leaves no
half-written file.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import platform
import re
import socket
import statistics
import sys
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from .. import _args as A
from ..errors import SpecError
from ..ops.formulas import ELEMENTWISE_FLOPS, NORM_FLOPS, causal_pairs
from ..specs.hardware import Hardware, parse_hardware
from .backends import (
    EVICT_OPS,
    STREAM_ARRAYS,
    TINY_CLASSES,
    VECTOR_OPS,
    Backend,
    NumpyBackend,
    TorchBackend,
)
from .fit import GemmFit, fit_gemm, fit_levels, geomean
from .timing import Sample, thread_limit

__all__ = ["measure", "MeasurePlan", "plan_for", "Measurements", "run_plan", "spec_toml",
           "write_atomic", "check_writable", "vector_cost", "FRESH_ALLOC_MIN_BYTES",
           "last_text"]

#: glibc's malloc serves requests of at least M_MMAP_THRESHOLD with a fresh mmap; its dynamic
#: threshold is capped at DEFAULT_MMAP_THRESHOLD_MAX = 32 MiB on 64-bit systems (mallopt(3))
FRESH_ALLOC_MIN_BYTES = 32 * 2**20
_FP32 = 4


def vector_cost(op: str, n: int) -> tuple[float, float, str]:
    """(FLOPs, bytes read + written, op class) of a ``Backend.vector`` benchmark on n elements,
    counted with the library's own formulas (ops.formulas)."""
    if op in ("relu", "gelu_tanh", "silu"):
        return ELEMENTWISE_FLOPS[op] * n, 2 * _FP32 * n, "elementwise"
    if op == "softmax":
        rows = max(1, n // 1024) * 1024
        return 5 * rows, 2 * _FP32 * rows, "softmax"
    if op == "layernorm":
        rows = max(1, n // 1024) * 1024
        return NORM_FLOPS["layernorm"] * rows, 2 * _FP32 * rows, "norm"
    if op == "batchnorm":
        e = max(1, n // 64) * 64
        return NORM_FLOPS["batchnorm"] * e, 2 * _FP32 * e, "norm"
    if op == "maxpool":
        side = max(4, int(math.sqrt(n / 64)))
        out_side = (side + 2 - 3) // 2 + 1
        outs = 64 * out_side * out_side
        return 9 * outs, _FP32 * (64 * side * side + outs), "pool"
    raise SpecError(f"vector op {op!r}; allowed: {', '.join(VECTOR_OPS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasurePlan:
    """Which benchmarks to run (sizes differ for quick/full and CPU/GPU)."""

    kind: str
    peak_sizes: dict[str, tuple[int, ...]]  #: dtype -> square GEMM sizes for the peak
    gemm_shapes: tuple[tuple[int, int, int], ...]  #: (M, N, K) fp32 shapes for the fit
    #: (M, N, K) bf16 shapes for a GEMM model of its own (CPUs with a fast bf16 path)
    bf16_shapes: tuple[tuple[int, int, int], ...] = ()
    conv_shapes: tuple[tuple[int, int, int, int, int, int], ...]  #: (B, C, HW, C', k, s)
    #: (B, heads, T, S, head dim) fused attention shapes (causal when T == S)
    sdpa_shapes: tuple[tuple[int, int, int, int, int], ...] = ()
    #: (N, K) weight shapes read cold by a matrix-vector product, cycling through pool_bytes
    cold_shapes: tuple[tuple[int, int], ...] = ()
    pool_bytes: int = 0
    #: (N, K) of the cold-weight GEMM run at each of ``pack_rows`` rows (1 first): the time
    #: above the 1-row call is the repacking of cold weights; empty: skipped
    pack_shape: tuple[int, ...] = ()
    pack_rows: tuple[int, ...] = ()
    #: bytes moved by the cache-evicting op before each small op (EVICT_OPS); the first op is
    #: timed after each, the others after the largest only; empty: skipped
    evict_flush: tuple[int, ...] = ()
    stream_elems: tuple[int, ...]  #: elements per STREAM array
    stream_kernels: tuple[str, ...]
    vector_elems: int
    #: a second, smaller size of the vector ops: the two give each op a fixed cost
    #: (intercept) and a marginal rate (slope); 0: one size only
    vector_elems_small: int = 0
    fresh_elems: int  #: 0: skip the page-fault benchmark (GPUs)
    #: (B, C, HW, C') of a 3×3 convolution whose output is above 32 MiB: fresh bytes it maps
    #: per call; empty: skipped
    conv_fresh_shape: tuple[int, ...] = ()
    min_time_s: float
    quick: bool


def plan_for(kind: str, quick: bool = False) -> MeasurePlan:
    """The benchmark plan for a CPU or GPU, full (~1–2 min on 2 cores) or quick (seconds)."""
    if kind == "gpu":
        s = 1024 if quick else 8192
        f = 256 if quick else 2048
        return MeasurePlan(
            kind="gpu", quick=quick,
            peak_sizes={"bf16": (s,), "fp16": (s,), "fp32": (s // 2,), "fp64": (s // 2,)},
            gemm_shapes=tuple((m, n, k) for m, n, k in (
                (16, f, f), (64, f, f), (256, f, f), (f, f, f), (f, 64, f), (f, 256, f),
                (f, f, 64), (f, f, 256))),
            conv_shapes=((8, 64, 56, 64, 3, 1), (8, 256, 14, 256, 3, 1), (8, 128, 28, 512, 1, 1))
            if not quick else ((1, 16, 16, 16, 3, 1),),
            sdpa_shapes=((4, 16, 1024, 1024, 128),) if not quick else ((1, 8, 128, 128, 64),),
            cold_shapes=((8192, 4096), (16384, 2048)) if not quick else ((1024, 1024),),
            pool_bytes=(2 if quick else 1024) * 2**20,
            stream_elems=tuple(2**e for e in (range(14, 22, 2) if quick else range(14, 30))),
            stream_kernels=("copy", "triad") if quick else ("copy", "scale", "add", "triad"),
            vector_elems=2**16 if quick else 2**24,
            vector_elems_small=2**14 if quick else 2**22, fresh_elems=0,
            min_time_s=0.01 if quick else 0.05)
    if quick:
        return MeasurePlan(
            kind="cpu", quick=True, peak_sizes={"fp64": (192,), "fp32": (192,), "bf16": (192,)},
            gemm_shapes=((8, 192, 192), (64, 192, 192), (192, 192, 192), (192, 16, 192),
                         (192, 192, 16)),
            conv_shapes=((1, 16, 16, 16, 3, 1), (1, 32, 28, 64, 3, 1), (1, 64, 14, 64, 1, 1),
                         (2, 32, 14, 32, 3, 1), (1, 3, 56, 16, 7, 2)),
            sdpa_shapes=((1, 4, 64, 64, 32),),
            # a 1 MiB pool stays in cache: nothing here is cold, so no cold-weight terms
            cold_shapes=((256, 256),), pool_bytes=2**20,
            stream_elems=(2**11, 2**15, 2**19), stream_kernels=("copy", "triad"),
            vector_elems=2**13, vector_elems_small=2**11, fresh_elems=0, min_time_s=0.005)
    return MeasurePlan(
        kind="cpu", quick=False,
        peak_sizes={"fp64": (1024, 2048), "fp32": (1024, 2048), "bf16": (2048,),
                    "fp16": (1024,)},
        gemm_shapes=((8, 1024, 1024), (32, 1024, 1024), (128, 1024, 1024), (1024, 1024, 1024),
                     (1024, 32, 1024), (1024, 128, 1024), (1024, 1024, 32), (1024, 1024, 128),
                     (256, 256, 256), (512, 2048, 512), (96, 384, 1536)),
        # AMX tiles (bf16) fill up at other sizes than fp32 FMAs: square to skinny, none a
        # validation shape
        bf16_shapes=((256, 256, 256), (512, 2048, 512), (96, 384, 1536), (2048, 512, 1024),
                     (32, 1024, 1024), (1024, 1024, 128), (512, 512, 512)),
        conv_shapes=((1, 32, 64, 32, 3, 1), (1, 128, 32, 256, 1, 1), (4, 64, 32, 64, 3, 1),
                     (1, 256, 16, 256, 3, 1), (2, 3, 96, 32, 5, 2), (2, 512, 8, 512, 3, 1),
                     (2, 64, 40, 128, 1, 1), (1, 96, 32, 384, 1, 1), (1, 384, 16, 96, 1, 1),
                     (4, 192, 12, 192, 3, 1),
                     # pointwise convolutions over large images (M in the tens of thousands),
                     # a strided one, and a few-channel 7x7 stem-like one
                     (4, 64, 48, 192, 1, 1), (4, 192, 48, 48, 1, 1), (2, 256, 40, 384, 1, 2),
                     (2, 3, 160, 32, 7, 2)),
        sdpa_shapes=((1, 8, 256, 256, 64), (2, 16, 384, 384, 64)),
        # 4-16 MiB weight matrices (a transformer layer's), cycling through 384 MiB of them
        cold_shapes=((1024, 1024), (4096, 1024), (2048, 2048)), pool_bytes=384 * 2**20,
        # 15 MiB: not a validation shape; rows 1 (matrix-vector path) to 8 (packed GEMM)
        pack_shape=(2560, 1536), pack_rows=(1, 2, 4, 8),
        # 1-16 MiB moved before a small op: from inside the private caches to well past them
        evict_flush=tuple(m * 2**20 for m in (1, 2, 4, 8, 16)),
        stream_elems=tuple(2**e for e in range(11, 26)),  # 24 KiB .. 384 MiB (triad)
        stream_kernels=("copy", "scale", "add", "triad"),
        # at most 1 MiB per array; run_plan shrinks both sizes into the innermost plateau the
        # STREAM sweep saw (vector_sizes), keeping them above PyTorch's parallel grain
        vector_elems=2**18, vector_elems_small=2**16, fresh_elems=2**24, min_time_s=0.08,
        # 16 -> 640 channels at 64 x 64, batch 4: a 40 MiB output (not a validation shape;
        # above glibc's 32 MiB cap, so freeing it leaves malloc's dynamic threshold alone)
        conv_fresh_shape=(4, 16, 64, 640))


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


class _Progress:
    def __init__(self, total: int, out: TextIO | None) -> None:
        self.total, self.i, self.out = total, 0, out

    def step(self, what: str, result: str = "") -> None:
        self.i += 1
        if self.out is not None:
            print(f"[{self.i:>3}/{self.total}] {what}{': ' + result if result else ''}",
                  file=self.out, flush=True)

    def note(self, msg: str) -> None:
        if self.out is not None:
            print(msg, file=self.out, flush=True)


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
    pr = _Progress(_count(plan, len(backends)), progress)

    def keep(s: Sample) -> Sample:
        ms.discarded += s.discarded
        return s

    ms.tiny = keep(main.tiny())
    pr.step("per-op call overhead", f"{ms.tiny.median_s * 1e6:.2f} µs")
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
        ho = (hw + 2 * (kk // 2) - kk) // st + 1
        M, N, K = b * ho * ho, co, c * kk * kk
        ms.gemm_points.append((f"conv b{b} {c}x{hw}x{hw} -> {co} k{kk} s{st}", M, N, K,
                               2.0 * M * N * K, smp))
        pr.step(f"conv b={b} C={c} HW={hw} C'={co} k={kk} s={st}",
                f"{2 * M * N * K / smp.median_s / 1e9:.1f} GFLOP/s")
    for b, h, t, sl, d in plan.sdpa_shapes:
        try:
            smp = keep(main.sdpa(b, h, t, sl, d))
        except NotImplementedError:
            ms.skipped.append("fused attention in the efficiency fit (needs PyTorch)")
            break
        pairs = causal_pairs(t, sl) if t == sl else t * sl
        flops = 4.0 * b * h * pairs * d
        ms.gemm_points.append((f"sdpa b{b} h{h} T={t} S={sl} d{d}", b * h * t, sl, d, flops,
                               smp))
        pr.step(f"attention b={b} heads={h} T={t} S={sl} d={d}",
                f"{flops / smp.median_s / 1e9:.1f} GFLOP/s")
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
    if plan.evict_flush:
        _run_evict(plan, main, ms, keep, pr)
    return ms


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


# -- from measurements to a spec -----------------------------------------------------------------

def _num(v: float) -> str:
    if v == 0:
        return "0"
    r = float(f"{v:.4g}")
    return repr(int(r)) if r.is_integer() and abs(r) < 1e15 else repr(r)


def _esc(s: str) -> str:
    """``s`` as the inside of a TOML basic string (between double quotes)."""
    from .._data import toml_escape

    return toml_escape(str(s))


def _q(value: float, unit: str, source: str, derivation: str = "", note: str = "") -> str:
    parts = [f"value = {_num(value)}", f'unit = "{unit}"', f'source = "{source}"']
    if derivation:
        parts.append(f'derivation = "{_esc(derivation)}"')
    if note:
        parts.append(f'note = "{_esc(note)}"')
    return "{ " + ", ".join(parts) + " }"


def _spread(s: Sample) -> str:
    return (f"median of {s.n} samples, p10-p90 spread {s.spread:.0%}"
            + (f", {s.discarded} dropped for run-queue delay" if s.discarded else ""))


def _host() -> str:
    return socket.gethostname() or platform.node() or "unknown-host"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def _sysfs_caches() -> list[tuple[str, float]]:
    """(name, total bytes over all instances) of the data/unified caches sysfs lists,
    innermost first; [] where unavailable."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    out = []
    try:
        ncpu = len([d for d in Path("/sys/devices/system/cpu").glob("cpu[0-9]*")])
        for d in sorted(root.glob("index*")):
            typ = (d / "type").read_text().strip()
            if typ == "Instruction":
                continue
            lvl = (d / "level").read_text().strip()
            size = (d / "size").read_text().strip()
            mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
            b = float(size.rstrip("KMG")) * mult
            shared = (d / "shared_cpu_list").read_text().strip()
            n_share = sum(int(r.split("-")[1]) - int(r.split("-")[0]) + 1 if "-" in r else 1
                          for r in shared.split(",") if r)
            out.append((f"L{lvl}{'d' if typ == 'Data' else ''}", b * max(1, ncpu // n_share)))
    except (OSError, ValueError, IndexError):
        return []
    return out


def _cache_name(largest_ws: float, caches: list[tuple[str, float]]) -> str:
    """The innermost cache whose total capacity holds this plateau's working sets."""
    for name, cap in caches:
        if largest_ws <= cap:
            return name
    return f"{caches[-1][0]} (beyond its size)"


def _mem_total_bytes() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 16 * 2**30


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


def derive(ms: Measurements) -> Fitted:
    """Ceilings and the efficiency model from raw measurements (pure arithmetic)."""
    if ms.tiny is None or "fp32" not in ms.peaks:
        raise SpecError("measurements lack the call overhead or the fp32 GEMM peak")
    disp = ms.tiny.median_s
    sync = ms.kind == "cpu"

    def net_of(t: float) -> float:
        """Time of the work itself: synchronous CPU calls add the per-call cost; on a GPU
        back-to-back launches overlap with the kernels (time = max(launch, kernel))."""
        if sync:
            return t - disp if t - disp > 0.5 * t else math.nan
        return t if t > 2 * disp else math.nan

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
    main_bw = levels[-1].bytes_per_s
    peak32 = ms.peaks["fp32"][0]
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
    return Fitted(conv_fresh=conv_fresh, dispatch_s=disp, levels=levels, gemm=gemm,
                  gemm_used=len(pts["gemm"]),
                  cold=cold, evicted=_evicted_terms(ms, disp),
                  scales=scales, main_read=main_read, dispatch_class=disp_cls,
                  vector_frac=frac, page_fault_s=pf, page_derivation=pder,
                  dispatch_note=disp_note)


def _default_eff_rows(kind: str) -> dict[str, Any]:
    from ..engine.presets import _default_tables

    return {k: getattr(_default_tables()[kind], k) for k in
            ("gemm_max", "gemm_a", "gemm_b", "gemm_c", "vector_max", "workspace")}


def spec_toml(ms: Measurements, *, key: str | None = None, name: str | None = None,
              date: str | None = None, host: str | None = None,
              memory_bytes: float | None = None) -> str:
    """The hardware TOML text of a measured machine (same format as the zoo)."""
    fit = derive(ms)
    host = host or _host()
    date = date or _dt.date.today().isoformat()
    key = key or ("measured-" + (re.sub(r"[^a-z0-9.-]+", "-", host.lower()).strip("-.")
                                 or "host"))
    dev = ms.info.get("device") or (_cpu_name() if ms.kind == "cpu" else "GPU")
    name = name or f"{dev} (measured on {host})"
    mem_total = memory_bytes or float(ms.info.get("memory_bytes") or _mem_total_bytes())
    method = (f"roofline measure ({ms.info.get('framework', '?')}, "
              f"{ms.info.get('threads', '?')} threads)")
    mem_src = "/proc/meminfo MemTotal" if ms.kind == "cpu" else "device total memory"
    L: list[str] = [
        "# Measured by `roofline measure`: every number below is a median of repeated timings",
        "# on this machine (see each derivation); [efficiency] is the model fitted from them.",
        "schema = 1", f'key = "{_esc(key)}"', f'name = "{_esc(name)}"', 'vendor = "measured"',
        f'kind = "{ms.kind}"', f"year = {int(date[:4])}", "", "[sources]",
        f'm = "measured: {_esc(method)}, {_esc(date)}, {_esc(host)}; BLAS: '
        f'{_esc(ms.info.get("blas", "") or "n/a")}"',
        f'mem = "measured: {mem_src}, {_esc(date)}, {_esc(host)}"',
        'glibc = "Linux man-pages mallopt(3), M_MMAP_THRESHOLD: the dynamic threshold is capped at '
        'DEFAULT_MMAP_THRESHOLD_MAX = 4*1024*1024*sizeof(long) = 32 MiB on 64-bit systems; GNU C '
        'Library manual, Malloc Tunable Parameters (chunks above the threshold are mmapped)"',
        'default = "roofline data/presets/default.toml (per-kind default preset; not measured '
        'here)"',
        "", "[peak]",
    ]
    for dtype in ("fp64", "fp32", "tf32", "bf16", "fp16"):
        if dtype not in ms.peaks:
            continue
        rate, how, s = ms.peaks[dtype]
        others = "; ".join(f"{be} {sz}: {r / 1e9:.4g}" for d, be, sz, r in ms.peak_candidates
                           if d == dtype)
        L.append(f"{dtype} = " + _q(rate / 1e9, "GFLOP/s", "m",
                                    f"best GEMM rate, {how}: 2*n^3 / median time ({_spread(s)})",
                                    f"all candidates (GFLOP/s): {others}"))
    names = {1: ["DRAM"], 2: ["DRAM", "cache"], 3: ["DRAM", "LLC", "L2"],
             4: ["DRAM", "LLC", "L2", "L1"]}
    if ms.kind == "gpu":
        names = {1: ["HBM"], 2: ["HBM", "L2"], 3: ["HBM", "L2", "L1/shared"],
                 4: ["HBM", "L2", "L1/shared", "registers"]}
    lv = list(reversed(fit.levels))  # main first
    nm = names[min(len(lv), 4)]
    caches = _sysfs_caches() if ms.kind == "cpu" and not ms.info.get("framework", "").startswith(
        "fake") else []
    if caches:
        nm = ["DRAM"] + [_cache_name(p.largest_bytes, caches) for p in lv[1:]]
    nm = [nm[i] if i < len(nm) else f"level {i}" for i in range(len(lv))]
    total = {n: nm.count(n) for n in nm}
    seen: dict[str, int] = {}
    for i, p in enumerate(lv):
        nme = nm[i]
        if total[nme] > 1:  # one cache, several plateaus (e.g. a large shared L3): outer first
            seen[nme] = seen.get(nme, 0) + 1
            nme = (f"{nme} (outer part)" if seen[nme] == 1 else f"{nme} (inner part)"
                   if seen[nme] == total[nme] else f"{nme} (part {seen[nme]})")
        L += ["", "[[memory]]", f'name = "{nme}"']
        der_bw = (f"median over STREAM {'/'.join(sorted({k for k, _, _ in ms.stream}))} of "
                  f"bytes read+written / (time - per-op cost) at {p.n} working sets "
                  f"{p.smallest_bytes / 2**10:,.0f}-{p.largest_bytes / 2**10:,.0f} KiB")
        if i == 0:
            L.append("capacity = " + _q(mem_total / 2**30, "GiB", "mem"))
        else:
            L.append("capacity = " + _q(p.capacity_bytes / 2**10, "KiB", "m",
                     "effective: geometric midpoint between the largest working set at this "
                     f"bandwidth ({p.largest_bytes / 2**10:,.0f} KiB) and the smallest at the next "
                     "level's"))
        L.append("bandwidth = " + _q(p.bytes_per_s / 1e9, "GB/s", "m", der_bw))
    # -- efficiency
    d = _default_eff_rows(ms.kind)
    L += ["", "[efficiency]"]
    g = fit.gemm
    if g is not None:
        gd = (f"least-squares fit (relative residuals, a,b,c >= 0) of 1/eff = (1 + a/M + b/N + "
              f"c/K)/gemm_max to {fit.gemm_used} fp32 GEMM shapes; rms log error "
              f"{g.rms_log_error:.3f}")
        L += [f"gemm_max = {_q(g.gemm_max, '1', 'm', gd)}", f"gemm_a = {_q(g.a, '1', 'm', gd)}",
              f"gemm_b = {_q(g.b, '1', 'm', gd)}", f"gemm_c = {_q(g.c, '1', 'm', gd)}"]
    else:
        for k in ("gemm_max", "gemm_a", "gemm_b", "gemm_c"):
            L.append(f"{k} = {_q(d[k], '1', 'default', 'too few compute-bound GEMM shapes')}")
    for fld, (v, der) in fit.scales.items():
        L.append(f"{fld} = {_q(v, '1', 'm', der)}")
    for fld in ("vector_max", "norm_max", "softmax_max", "pool_max"):
        if fld in fit.vector_frac:
            v, der = fit.vector_frac[fld]
            L.append(f"{fld} = {_q(v, '1', 'm', der)}")
        elif fld == "vector_max":
            L.append(f"vector_max = {_q(d['vector_max'], '1', 'default', 'not measured')}")
    L.append("memory_max = " + _q(1.0, "1", "m", "the level bandwidths above are already "
                                  "measured achievable STREAM rates"))
    L.append("cache_fraction = " + _q(1.0, "1", "m", "the level capacities above are measured "
                                      "effective working sets"))
    L.append("dispatch = " + _q(fit.dispatch_s * 1e6, "us", "m",
                                f"{fit.dispatch_note} ({_spread(ms.tiny)})" if ms.tiny else ""))
    for k, (v, der) in sorted(fit.dispatch_class.items()):
        L.append(f"{k} = " + _q(v * 1e6, "us", "m", der))
    L.append("kernel_gap = " + _q(0.0, "us", "m", "synchronous CPU execution: the per-op cost "
                                  "is all in dispatch" if ms.kind == "cpu" else
                                  "not measured separately: back-to-back launch cost is in "
                                  "dispatch"))
    if fit.page_fault_s is not None:
        L.append("page_fault = " + _q(fit.page_fault_s * 1e6, "us", "m", fit.page_derivation))
        L.append("fresh_alloc_min = " + _q(FRESH_ALLOC_MIN_BYTES / 2**20, "MiB", "glibc"))
        if fit.conv_fresh is not None:
            L.append("conv_fresh_factor = " + _q(fit.conv_fresh[0], "1", "m", fit.conv_fresh[1]))
    for fld in ("cold_after", "cold_read_max", "cold_pack_max", "pack_min_rows"):
        if fld in fit.cold:
            v, der = fit.cold[fld]
            L.append(f"{fld} = " + (_q(v / 2**20, "MiB", "m", der) if fld == "cold_after"
                                    else _q(v, "1", "m", der)))
    if "evicted_dispatch" in fit.evicted:
        for fld in ("evicted_dispatch", "evicted_kind_dispatch"):
            v, der = fit.evicted[fld]
            L.append(f"{fld} = " + _q(v * 1e6, "us", "m", der))
        v, der = fit.evicted["evict_after"]
        L.append("evict_after = " + _q(v / 2**20, "MiB", "m", der))
    L.append("workspace = " + _q(d["workspace"] / 2**30, "GiB", "default", "not measured"))
    # -- raw data (ignored by the loader; kept for plots and audits)
    L += ["", "[measurement]", f'host = "{_esc(host)}"', f'date = "{_esc(date)}"',
          f'method = "{_esc(method)}"', f'blas = "{_esc(ms.info.get("blas", ""))}"',
          f"samples_dropped_for_runqueue_delay = {ms.discarded}",
          "skipped = [" + ", ".join(f'"{_esc(s)}"' for s in ms.skipped) + "]",
          "stream_working_set_bytes = [" + ", ".join(_num(w) for _, w, _ in ms.stream) + "]",
          "stream_kernel = [" + ", ".join(f'"{k}"' for k, _, _ in ms.stream) + "]",
          "stream_seconds = [" + ", ".join(_num(s.median_s) for _, _, s in ms.stream) + "]",
          "gemm_label = [" + ", ".join(f'"{lb}"' for lb, *_ in ms.gemm_points) + "]",
          "gemm_mnk = [" + ", ".join(f"[{_num(M)}, {_num(N)}, {_num(K)}]"
                                     for _, M, N, K, _, _ in ms.gemm_points) + "]",
          "gemm_seconds = [" + ", ".join(_num(s.median_s) for *_, s in ms.gemm_points) + "]",
          # one op reading cold weights: used as cold_read_max (weights a whole model evicts
          # between uses), not as main_read_max (a standalone op re-run reads them warm or as
          # one long stream; see docs/validation/cpu.md)
          "cold_read_bytes_per_s = [" + ", ".join(
              _num(4.0 * n * k / s.median_s) for n, k, s in ms.cold) + "]",
          f'cold_read_note = "{_esc(fit.main_read[1]) if fit.main_read else ""}"',
          "cold_gemm_rows = [" + ", ".join(str(r) for r, _ in ms.pack) + "]",
          "cold_gemm_seconds = [" + ", ".join(_num(x.median_s) for _, x in ms.pack) + "]",
          "vector_ops = [" + ", ".join(f'"{k}"' for k in ms.vector) + "]",
          f"vector_elements = [{ms.vector_sizes[0]}, {ms.vector_sizes[1]}]",
          "vector_seconds = [" + ", ".join(_num(v[3].median_s) for v in ms.vector.values()) + "]",
          "vector_small_seconds = [" + ", ".join(_num(v[3].median_s)
                                                 for v in ms.vector_small.values()) + "]",
          "evict_ops = [" + ", ".join(f'"{k}"' for k in ms.evict_hot) + "]",
          "evict_hot_seconds = [" + ", ".join(_num(v.median_s)
                                              for v in ms.evict_hot.values()) + "]",
          "evict_after_op = [" + ", ".join(f'"{op}"' for op, _, _ in ms.evict) + "]",
          "evict_flush_bytes = [" + ", ".join(_num(f) for _, f, _ in ms.evict) + "]",
          "evict_seconds = [" + ", ".join(_num(x.median_s) for _, _, x in ms.evict) + "]",
          "evict_other_seconds = [" + ", ".join(_num(x.median_s)
                                                for x in ms.evict_other.values()) + "]",
          ""]
    return "\n".join(L)


# -- writing -------------------------------------------------------------------------------------

def check_writable(path: str | os.PathLike[str]) -> Path:
    """Fail early (before minutes of measuring) if ``path`` cannot be written."""
    p = Path(path)
    if p.is_dir():
        raise SpecError(f"output path {str(p)!r} is a directory; give a file name such as "
                        f"{str(p / 'my_machine.toml')!r}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise SpecError(f"cannot write {str(p)!r}: directory {str(parent)!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".check")
    except OSError as e:
        raise SpecError(f"cannot write {str(p)!r}: {e.strerror}") from None
    os.close(fd)
    os.unlink(tmp)
    return p


def write_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file in the same directory and a rename:
    readers see the old file or the complete new one, never half of it."""
    p = check_writable(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a spec is an ordinary file
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p


# -- the entry point -----------------------------------------------------------------------------

def default_backends(device: str = "auto", *, quick: bool = False,
                     notes: list[str] | None = None) -> list[Backend]:
    """PyTorch on ``device`` first (when installed), then numpy (GEMM peak candidates)."""
    plan_time = 0.005 if quick else 0.08
    out: list[Backend] = []
    try:
        import torch
    except ImportError:
        torch = None  # type: ignore[assignment]
        if notes is not None:
            notes.append("PyTorch is not installed: measured with numpy only; skipped bf16/fp16 "
                         "peaks, convolutions and vector-op rates (pip install "
                         "'roofline[torch]' to measure them)")
    if device not in ("auto", "cpu", "cuda"):
        raise SpecError(f"device={device!r}; allowed: auto, cpu, cuda")
    if device == "cuda" and (torch is None or not torch.cuda.is_available()):
        raise SpecError("device='cuda' but no CUDA device is visible to PyTorch")
    if torch is not None:
        dev = "cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) \
            else "cpu"
        out.append(TorchBackend(dev, min_time_s=plan_time, min_reps=3 if quick else 5))
        if dev == "cuda":
            return out
    out.append(NumpyBackend(min_time_s=plan_time, min_reps=3 if quick else 5))
    return out


_LAST = [""]


def last_text() -> str:
    """The TOML text of the latest ``measure`` in this process (what ``-o`` would write)."""
    return _LAST[0]


@A.checked(output=A.optional(A.path), device=A.choice("auto", "cpu", "cuda"), quick=A.flag,
           progress=A.progress, backends=A.optional(A.seq(A.anything, what="backends")),
           key=A.optional(A.text), name=A.optional(A.text), date=A.optional(A.iso_date),
           host=A.optional(A.text), threads=A.optional(A.count(1, 4096)))
def measure(output: str | os.PathLike[str] | None = None, *, device: str = "auto",
            quick: bool = False, progress: bool | TextIO = True,
            backends: list[Backend] | None = None, key: str | None = None,
            name: str | None = None, date: str | None = None,
            host: str | None = None, threads: int | None = None) -> Hardware:
    """Measure this machine and return its hardware spec (numbers carry "measured" provenance
    and the spec carries its fitted ``[efficiency]`` model for the default preset).

    ``output``: also write the spec there (atomically; checked for writability first).
    ``device``: "auto" (CUDA when PyTorch sees one, else CPU), "cpu" or "cuda".
    ``quick``: tiny sizes and few repetitions (seconds; for tests, not for predictions).
    ``progress``: True for stderr lines, False for silence, or a text stream.
    ``backends``: inject benchmark backends (e.g. ``FakeBackend``) instead of real ones.
    ``threads``: compute threads for PyTorch and the BLAS pools during the run (default: as
    configured); the spec records the count.
    """
    out: TextIO | None = sys.stderr if progress is True else (progress or None)  # type: ignore[assignment]
    if output is not None:
        check_writable(output)
    notes: list[str] = []
    bes = backends if backends is not None else default_backends(device, quick=quick,
                                                                 notes=notes)
    for n in notes:
        if out is not None:
            print(f"roofline measure: {n}", file=out)
    plan = plan_for(bes[0].kind, quick)
    with thread_limit(threads):
        ms = run_plan(plan, bes, out)
    ms.skipped[:0] = notes
    text = spec_toml(ms, key=key, name=name, date=date, host=host)
    _LAST[0] = text
    hw = parse_hardware(tomllib.loads(text), origin=str(output) if output else "<measured>")
    from ..engine.presets import spec_efficiency

    spec_efficiency(hw)  # validate the fitted table now, not at the first solve
    if output is not None:
        write_atomic(output, text)
        if out is not None:
            print(f"roofline measure: wrote {output}", file=out)
    return hw

