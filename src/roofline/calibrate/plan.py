"""What ``measure`` runs: the benchmark plan per device kind (full or quick) and the FLOPs and
bytes each vector benchmark moves."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecError
from ..ops import cost, op_class
from .backends import VECTOR_OPS

__all__ = ["MeasurePlan", "measure_plan", "vector_cost", "FRESH_ALLOC_MIN_BYTES"]

#: glibc's malloc serves requests of at least M_MMAP_THRESHOLD with a fresh mmap; its dynamic
#: threshold is capped at DEFAULT_MMAP_THRESHOLD_MAX = 32 MiB on 64-bit systems (mallopt(3))
FRESH_ALLOC_MIN_BYTES = 32 * 2**20
_FP32 = 4


def vector_cost(op: str, n: int) -> tuple[float, float, str]:
    """(FLOPs, bytes read + written, op class) of a ``Backend.vector`` benchmark on about ``n``
    fp32 elements, from the formula registry (the ops the benchmark runs, at its shapes):
    elementwise on n; softmax and LayerNorm (no affine parameters: ``F.layer_norm(x, (1024,))``)
    over rows of 1024; inference BatchNorm over 64 channels (weight, bias and running
    statistics read); 3×3 max-pool, stride 2, padding 1, over 64 channels of side √(n/64)."""
    f32 = dict(act_bytes=_FP32)
    if op in ("relu", "gelu_tanh", "silu"):
        c = cost("elementwise", batch=1, elements=n, op=op, **f32)
    elif op == "softmax":
        c = cost("softmax", batch=1, elements=max(1, n // 1024) * 1024, **f32)
    elif op == "layernorm":
        c = cost("norm", batch=1, elements=max(1, n // 1024) * 1024, features=1024,
                 variant="layernorm", affine=False, weight_bytes=_FP32, **f32)
    elif op == "batchnorm":
        c = cost("norm", batch=1, elements=max(1, n // 64) * 64, features=64,
                 variant="batchnorm", weight_bytes=_FP32, **f32)
    elif op == "maxpool":
        side = max(4, int(math.sqrt(n / 64)))
        c = cost("pool", batch=1, channels=64, spatial=(side, side), kernel=3, stride=2,
                 padding=1, mode="max", **f32)
    else:
        raise SpecError(f"vector op {op!r}; allowed: {', '.join(VECTOR_OPS)}")
    return c.flops, c.bytes, op_class(_KIND[op])


_KIND = {"relu": "elementwise", "gelu_tanh": "elementwise", "silu": "elementwise",
         "softmax": "softmax", "layernorm": "norm", "batchnorm": "norm", "maxpool": "pool"}


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


def measure_plan(kind: str, quick: bool = False) -> MeasurePlan:
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
