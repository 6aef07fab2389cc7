"""What runs the micro-benchmarks: numpy, PyTorch (CPU or CUDA), or injected fake timings.

Every backend answers the same few questions with a ``Sample`` (median and spread of seconds
per call); ``measure`` turns the answers into ceilings and a fitted model and never touches a
framework itself. That is what lets the GPU logic run in tests on a CPU: a ``FakeBackend``
with ``kind="gpu"`` answers from a known "true" machine.

Benchmarks (fp32 unless said; FLOPs from ``roofline.ops`` formulas, bytes read + written):

- ``gemm(dtype, m, n, k)``: ``[m, k] @ [k, n]``.
- ``conv(batch, c_in, hw, c_out, kernel, stride)``: 2-D convolution, padding ``kernel // 2``.
- ``sdpa(batch, heads, q_len, kv_len, head_dim)``: fused scaled-dot-product attention,
  causal when ``q_len == kv_len``.
- ``stream(kernel, n)``: STREAM copy ``c = a``, scale ``c = s·a``, add ``c = a + b``,
  triad ``c = a + s·b`` on length-``n`` arrays, output preallocated (no page faults).
- ``vector(op, n)``: relu, gelu_tanh, silu, softmax (rows of 1024), layernorm (rows of 1024),
  batchnorm (inference, 64 channels), maxpool (3×3, stride 2, 64 channels) on ``n`` input
  elements.
- ``cold_gemv(n, k, pool_bytes, rows=1)``: ``x[rows, k] @ W[k, n]`` cycling through enough
  distinct W to fill ``pool_bytes`` (more than the last-level cache), so every call reads its
  weights from main memory, as the layers of a model do: seconds per call. With rows >= 2..8
  the BLAS leaves its matrix-vector path and repacks W first (measured as the difference).
- ``tiny()``: one framework call on a one-element tensor: the fixed per-op cost.
- ``tiny_class(op_class)``: one call of an op of that class (``TINY_CLASSES``: attention,
  embedding, movement) on a minimal input: that class's fixed per-op cost.
- ``fresh(n)``: ``a + b`` into a newly allocated output (page faults of fresh memory).
- ``conv_fresh_bytes(batch, c_in, hw, c_out)``: bytes of fresh memory one 3×3 convolution
  call maps (minor page faults × 4 KiB, counted by the OS over repeated calls); with an output
  above 32 MiB everything it allocates is freshly mapped, so this is the output plus the
  framework's temporaries (oneDNN computes into a blocked copy of the output and reorders it
  into PyTorch's layout). 3×3, because PyTorch sends some 1×1 convolutions on one thread to
  another path without that copy.
- ``after_flush(op, flush_bytes, other=False)``: one call of a small op (``EVICT_OPS``:
  LayerNorm over 4 × 1024, a one-element add, a 3×3 convolution on 8 × 8 × 8, attention over
  8 keys) timed right after an ``a + b`` that moves ``flush_bytes`` (reads + writes); 0:
  back-to-back calls. ``other``: a tiny op of another kind runs between the two (it reloads
  the framework's common code, not the op's own). On a CPU the differences are the fixed
  costs an op pays when earlier ops evicted that code and data from the private caches.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .timing import Sample, time_after, time_call

__all__ = ["Backend", "NumpyBackend", "TorchBackend", "FakeBackend", "FakeMachine",
           "STREAM_ARRAYS", "VECTOR_OPS", "TINY_CLASSES", "EVICT_OPS", "blas_info"]

#: STREAM kernel -> (arrays touched, arrays read); bytes per element = arrays touched × 4
STREAM_ARRAYS = {"copy": (2, 1), "scale": (2, 1), "add": (3, 2), "triad": (3, 2)}
VECTOR_OPS = ("relu", "gelu_tanh", "silu", "softmax", "layernorm", "batchnorm", "maxpool")
#: op classes whose fixed per-call cost is measured by a call on a minimal input
TINY_CLASSES = ("attention", "embedding", "movement")
#: small ops timed hot and right after a cache-evicting op (fixed cost of an evicted call)
EVICT_OPS = ("layernorm", "add", "conv", "sdpa")


class Backend(Protocol):
    name: str  #: "numpy", "torch-cpu", "torch-cuda", "fake-cpu", ...
    kind: str  #: "cpu" or "gpu" (the hardware kind the spec gets)
    dtypes: tuple[str, ...]  #: GEMM dtypes it can run

    def gemm(self, dtype: str, m: int, n: int, k: int) -> Sample: ...
    def conv(self, batch: int, c_in: int, hw: int, c_out: int, kernel: int,
             stride: int) -> Sample: ...
    def sdpa(self, batch: int, heads: int, q_len: int, kv_len: int,
             head_dim: int) -> Sample: ...
    def stream(self, kernel: str, n: int) -> Sample: ...
    def cold_gemv(self, n: int, k: int, pool_bytes: int, rows: int = 1) -> Sample: ...
    def vector(self, op: str, n: int) -> Sample: ...
    def tiny(self) -> Sample: ...
    def tiny_class(self, op_class: str) -> Sample: ...
    def fresh(self, n: int) -> Sample: ...
    def conv_fresh_bytes(self, batch: int, c_in: int, hw: int, c_out: int) -> float: ...
    def after_flush(self, op: str, flush_bytes: int, other: bool = False) -> Sample: ...
    def info(self) -> dict[str, str]: ...


def blas_info() -> str:
    """The BLAS/OpenMP libraries numpy and torch loaded (threadpoolctl), one line; '' if absent."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ""
    parts = []
    for d in threadpool_info():
        parts.append(f"{d.get('internal_api')} {d.get('version')} "
                     f"({d.get('architecture', d.get('threading_layer', ''))}, "
                     f"{d.get('num_threads')} threads, {os.path.basename(d.get('filepath', ''))})")
    env = [f"{k}={os.environ[k]}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                           "OMP_NUM_THREADS", "MKL_NUM_THREADS")
           if k in os.environ]
    return "; ".join(parts + env)


@dataclass
class _Timed:
    """Shared timing settings for real backends."""

    min_time_s: float = 0.05
    min_reps: int = 5
    sync: Callable[[], object] | None = None

    def _time(self, fn: Callable[[], object], *, inner: int = 1) -> Sample:
        return time_call(fn, min_time_s=self.min_time_s, min_reps=self.min_reps, inner=inner,
                         sync=self.sync)

    def _inner(self, expected_s: float) -> int:
        """Calls per sample so that one sample lasts ≥ ~20 µs (clock and schedstat reads)."""
        return max(1, min(1000, int(20e-6 / max(expected_s, 1e-9))))


def _per_call(s: Sample, count: int) -> Sample:
    return Sample(median_s=s.median_s / count, p10_s=s.p10_s / count, p90_s=s.p90_s / count,
                  n=s.n, discarded=s.discarded)


class NumpyBackend(_Timed):
    """numpy only: fp64/fp32 GEMM through its BLAS, single-threaded STREAM, call overhead."""

    name: str = "numpy"
    kind: str = "cpu"
    dtypes: tuple[str, ...] = ("fp64", "fp32")

    def __init__(self, *, min_time_s: float = 0.05, min_reps: int = 5) -> None:
        super().__init__(min_time_s=min_time_s, min_reps=min_reps)
        import numpy as np

        self.np = np
        self._rng = np.random.default_rng(0)

    def gemm(self, dtype: str, m: int, n: int, k: int) -> Sample:
        np = self.np
        dt = {"fp64": np.float64, "fp32": np.float32}[dtype]
        a = self._rng.standard_normal((m, k)).astype(dt)
        b = self._rng.standard_normal((k, n)).astype(dt)
        c = np.empty((m, n), dt)
        return self._time(lambda: np.matmul(a, b, out=c),
                          inner=self._inner(2 * m * n * k / 5e10))

    def conv(self, batch: int, c_in: int, hw: int, c_out: int, kernel: int,
             stride: int) -> Sample:
        raise NotImplementedError("numpy has no convolution")

    def sdpa(self, batch: int, heads: int, q_len: int, kv_len: int, head_dim: int) -> Sample:
        raise NotImplementedError("numpy has no fused attention")

    def stream(self, kernel: str, n: int) -> Sample:
        np = self.np
        a, b, c = (np.full(n, v, np.float32) for v in (1.0, 2.0, 0.0))
        s = np.float32(3.0)
        fns: dict[str, Callable[[], object]] = {
            "copy": lambda: np.copyto(c, a), "scale": lambda: np.multiply(a, s, out=c),
            "add": lambda: np.add(a, b, out=c),
            # numpy has no fused triad: two passes (counted as one by STREAM, so slower here)
            "triad": lambda: (np.multiply(b, s, out=c), np.add(c, a, out=c)),
        }
        return self._time(fns[kernel], inner=self._inner(n * 12 / 2e10))

    def cold_gemv(self, n: int, k: int, pool_bytes: int, rows: int = 1) -> Sample:
        np = self.np
        count = max(2, math.ceil(pool_bytes / (4 * n * k)))
        ws = [self._rng.standard_normal((k, n), dtype=np.float32) for _ in range(count)]
        x = self._rng.standard_normal((rows, k)).astype(np.float32)
        s = self._time(lambda: [x @ w for w in ws])
        return _per_call(s, count)

    def vector(self, op: str, n: int) -> Sample:
        raise NotImplementedError("vector ops are measured through PyTorch")

    def tiny(self) -> Sample:
        np = self.np
        a = np.ones(1, np.float32)
        c = np.empty(1, np.float32)
        return self._time(lambda: np.add(a, a, out=c), inner=200)

    def tiny_class(self, op_class: str) -> Sample:
        raise NotImplementedError("per-class call costs are measured through PyTorch")

    def conv_fresh_bytes(self, batch: int, c_in: int, hw: int, c_out: int) -> float:
        raise NotImplementedError("convolutions are measured through PyTorch")

    def after_flush(self, op: str, flush_bytes: int, other: bool = False) -> Sample:
        raise NotImplementedError("evicted call costs are measured through PyTorch")

    def fresh(self, n: int) -> Sample:
        np = self.np
        a = np.ones(n, np.float32)
        return self._time(lambda: a + a)

    def info(self) -> dict[str, str]:
        return {"framework": f"numpy {self.np.__version__}", "threads": "1 (numpy ufuncs)",
                "blas": blas_info()}


class _TorchBase(_Timed):
    """A PyTorch device and its tensors (shared by the kernels and the probes below)."""

    def __init__(self, device: str = "cpu", *, min_time_s: float = 0.05,
                 min_reps: int = 5) -> None:
        import torch

        self.torch = torch
        self.device = device
        super().__init__(min_time_s=min_time_s, min_reps=min_reps,
                         sync=torch.cuda.synchronize if device == "cuda" else None)
        self.name: str = f"torch-{device}"
        self.kind: str = "gpu" if device == "cuda" else "cpu"
        self.dtypes: tuple[str, ...] = ("fp64", "fp32", "bf16", "fp16")
        torch.manual_seed(0)

    def _t(self, *shape: int, dtype: Any = None) -> Any:
        torch = self.torch
        return torch.randn(*shape, device=self.device, dtype=dtype or torch.float32)


class _TorchProbes(_TorchBase):
    """Host and memory-system probes on PyTorch: per-call costs (``tiny``, ``tiny_class``),
    fresh memory (``fresh``, ``conv_fresh_bytes``), cold weights (``cold_gemv``) and evicted
    dispatch (``after_flush``)."""

    def cold_gemv(self, n: int, k: int, pool_bytes: int, rows: int = 1) -> Sample:
        torch = self.torch
        count = max(2, math.ceil(pool_bytes / (4 * n * k)))
        ws, x = [self._t(n, k) for _ in range(count)], self._t(rows, k)
        lin = torch.nn.functional.linear
        with torch.inference_mode():
            s = self._time(lambda: [lin(x, w) for w in ws])
        return _per_call(s, count)

    def tiny(self) -> Sample:
        torch = self.torch
        a = self._t(1)
        with torch.inference_mode():
            if self.device == "cuda":
                # launch throughput: 200 back-to-back kernels, one sync per sample
                return self._time(lambda: torch.add(a, a), inner=200)
            return self._time(lambda: torch.add(a, a), inner=200)

    def tiny_class(self, op_class: str) -> Sample:
        torch = self.torch
        fn: Callable[[], object]
        if op_class == "attention":
            q = self._t(1, 1, 1, 8)
            fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q)  # noqa: E731
        elif op_class == "embedding":
            w, idx = self._t(16, 8), torch.zeros(1, 1, dtype=torch.long, device=self.device)
            fn = lambda: torch.nn.functional.embedding(idx, w)  # noqa: E731
        elif op_class == "movement":  # a strided copy into a slice of a preallocated buffer
            src, dst = self._t(2, 1, 8), self._t(2, 4, 8)
            fn = lambda: dst[:, 1:2].copy_(src)  # noqa: E731
        else:
            raise ValueError(f"op class {op_class!r}; allowed: {', '.join(TINY_CLASSES)}")
        with torch.inference_mode():
            return self._time(fn, inner=50)

    def fresh(self, n: int) -> Sample:
        torch = self.torch
        a = self._t(n)
        with torch.inference_mode():
            return self._time(lambda: a + a)

    def conv_fresh_bytes(self, batch: int, c_in: int, hw: int, c_out: int) -> float:
        try:
            import resource
        except ImportError:  # no getrusage: not measurable here
            raise NotImplementedError("page-fault counts need the resource module") from None
        torch = self.torch
        x, w = self._t(batch, c_in, hw, hw), self._t(c_out, c_in, 3, 3)
        conv = torch.nn.functional.conv2d
        calls = 5
        with torch.inference_mode():
            conv(x, w, padding=1)
            conv(x, w, padding=1)
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for _ in range(calls):
                conv(x, w, padding=1)
            f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        return (f1 - f0) * 4096.0 / calls

    def after_flush(self, op: str, flush_bytes: int, other: bool = False) -> Sample:
        torch = self.torch
        F = torch.nn.functional
        fn: Callable[[], object]
        o = self._t(1)
        o2 = self._t(1, 16)
        between: Callable[[], object] = ((lambda: F.layer_norm(o2, (16,))) if op == "add"
                                         else (lambda: torch.add(o, o)))
        if op == "add":
            a = self._t(1)
            fn = lambda: torch.add(a, a)  # noqa: E731
        elif op == "layernorm":
            x = self._t(4, 1024)
            fn = lambda: F.layer_norm(x, (1024,))  # noqa: E731
        elif op == "conv":
            x, w = self._t(1, 8, 8, 8), self._t(8, 8, 3, 3)
            fn = lambda: F.conv2d(x, w, padding=1)  # noqa: E731
        elif op == "sdpa":
            q = self._t(1, 1, 8, 64)
            fn = lambda: F.scaled_dot_product_attention(q, q, q)  # noqa: E731
        else:
            raise ValueError(f"op {op!r}; allowed: {', '.join(EVICT_OPS)}")
        with torch.inference_mode():
            if flush_bytes <= 0:
                return self._time(fn, inner=20)
            n = max(1, flush_bytes // 12)  # a + b -> c: 12 bytes moved per element
            fa, fb, fc = self._t(n), self._t(n), torch.empty(n, device=self.device)

            def flush() -> None:
                torch.add(fa, fb, out=fc)
                if other:
                    between()
            return time_after(fn, flush, min_time_s=self.min_time_s,
                              min_reps=max(self.min_reps, 30))


class TorchBackend(_TorchProbes):
    """PyTorch eager on ``device`` ("cpu" or "cuda"): what the validation workloads run on: the
    compute kernels here (GEMM, convolution, attention, STREAM, vector ops), the probes in
    ``_TorchProbes``."""

    def gemm(self, dtype: str, m: int, n: int, k: int) -> Sample:
        torch = self.torch
        dt = {"fp64": torch.float64, "fp32": torch.float32, "bf16": torch.bfloat16,
              "fp16": torch.float16}[dtype]
        a, b = self._t(m, k, dtype=dt), self._t(k, n, dtype=dt)
        c = torch.empty(m, n, dtype=dt, device=self.device)
        with torch.inference_mode():
            return self._time(lambda: torch.mm(a, b, out=c),
                              inner=self._inner(2 * m * n * k / 5e10))

    def conv(self, batch: int, c_in: int, hw: int, c_out: int, kernel: int,
             stride: int) -> Sample:
        torch = self.torch
        x = self._t(batch, c_in, hw, hw)
        w = self._t(c_out, c_in, kernel, kernel)
        with torch.inference_mode():
            return self._time(lambda: torch.nn.functional.conv2d(x, w, stride=stride,
                                                                 padding=kernel // 2))

    def sdpa(self, batch: int, heads: int, q_len: int, kv_len: int, head_dim: int) -> Sample:
        torch = self.torch
        q = self._t(batch, heads, q_len, head_dim)
        k, v = self._t(batch, heads, kv_len, head_dim), self._t(batch, heads, kv_len, head_dim)
        f = torch.nn.functional.scaled_dot_product_attention
        with torch.inference_mode():
            return self._time(lambda: f(q, k, v, is_causal=q_len == kv_len))

    def stream(self, kernel: str, n: int) -> Sample:
        torch = self.torch
        a, b = self._t(n), self._t(n)
        c = torch.empty(n, device=self.device)
        fns: dict[str, Callable[[], object]] = {
            "copy": lambda: c.copy_(a), "scale": lambda: torch.mul(a, 3.0, out=c),
            "add": lambda: torch.add(a, b, out=c),
            "triad": lambda: torch.add(a, b, alpha=3.0, out=c),
        }
        with torch.inference_mode():
            return self._time(fns[kernel], inner=self._inner(n * 12 / 5e10))

    def vector(self, op: str, n: int) -> Sample:
        torch = self.torch
        F = torch.nn.functional
        fn: Callable[[], object]
        if op == "relu":
            x = self._t(n)
            fn = lambda: torch.relu(x)  # noqa: E731
        elif op == "gelu_tanh":
            x = self._t(n)
            fn = lambda: F.gelu(x, approximate="tanh")  # noqa: E731
        elif op == "silu":
            x = self._t(n)
            fn = lambda: F.silu(x)  # noqa: E731
        elif op == "softmax":
            x = self._t(max(1, n // 1024), 1024)
            fn = lambda: torch.softmax(x, -1)  # noqa: E731
        elif op == "layernorm":
            x = self._t(max(1, n // 1024), 1024)
            fn = lambda: F.layer_norm(x, (1024,))  # noqa: E731
        elif op == "batchnorm":
            x = self._t(1, 64, max(1, n // 64))
            w, b = self._t(64), self._t(64)
            rm, rv = self._t(64), self._t(64).abs()
            fn = lambda: F.batch_norm(x, rm, rv, w, b, False)  # noqa: E731
        elif op == "maxpool":
            side = max(4, int(math.sqrt(n / 64)))
            x = self._t(1, 64, side, side)
            fn = lambda: F.max_pool2d(x, 3, 2, 1)  # noqa: E731
        else:
            raise ValueError(f"vector op {op!r}; allowed: {', '.join(VECTOR_OPS)}")
        with torch.inference_mode():
            return self._time(fn, inner=self._inner(n * 1e-9))

    def info(self) -> dict[str, str]:
        torch = self.torch
        d = {"framework": f"torch {torch.__version__}",
             "threads": str(torch.get_num_threads()), "blas": blas_info()}
        if self.device == "cuda":
            d["device"] = torch.cuda.get_device_name(0)
            d["memory_bytes"] = str(torch.cuda.get_device_properties(0).total_memory)
        return d


# -- fake timings (tests, docs, the GPU path on a CPU) -------------------------------------------

@dataclass(frozen=True, kw_only=True)
class FakeMachine:
    """A known "true" machine whose timings a FakeBackend reports (deterministic)."""

    kind: str = "cpu"
    peaks: dict[str, float] = field(default_factory=lambda: {"fp64": 1.5e11, "fp32": 3.0e11,
                                                             "bf16": 1.5e12})
    gemm_a: float = 12.0  #: true 1/eff = (1 + a/M + b/N + c/K) / gemm_max
    gemm_b: float = 8.0
    gemm_c: float = 16.0
    gemm_max: float = 0.9
    conv_scale: float = 0.8  #: convolutions reach this share of the GEMM efficiency
    attention_scale: float = 0.5  #: fused attention likewise
    #: (capacity bytes, bandwidth B/s), innermost first; the last is main memory
    levels: tuple[tuple[float, float], ...] = ((96e3, 4e11), (4e6, 1.2e11), (48e6, 5e10),
                                               (64e9, 2.8e10))
    vector_flops_per_s: dict[str, float] = field(default_factory=lambda: {
        "relu": 30e9, "gelu_tanh": 7.5e9, "silu": 13e9, "softmax": 12.5e9, "layernorm": 20e9,
        "batchnorm": 8e9, "maxpool": 0.7e9})
    per_call_s: float = 1.0e-6
    #: fixed per-call cost of some op classes, s (others: per_call_s)
    class_call_s: dict[str, float] = field(default_factory=lambda: {
        "norm": 4e-6, "softmax": 2e-6, "attention": 8e-6, "embedding": 2e-6,
        "movement": 1.5e-6})
    cold_read_fraction: float = 0.6  #: of DRAM bandwidth, one op reading cold weights
    #: a GEMM with at least pack_rows rows repacks its cold weights at this fraction of DRAM
    #: bandwidth before computing (matrix-vector products, fewer rows, do not)
    cold_pack_fraction: float = 0.35
    pack_rows: int = 4
    page_s: float = 0.75e-6  #: per 4 KiB page of fresh output ≥ 32 MiB (0 on GPUs)
    #: fresh memory a convolution call maps per byte of its output (output + temporaries)
    conv_fresh: float = 2.0
    #: extra fixed cost of a call after an op that moved more than ``evict_bytes``: common
    #: framework code (reloaded by any op) and the op kind's own (0: none)
    evicted_s: float = 12e-6
    evicted_kind_s: float = 25e-6
    evict_bytes: float = 3e6
    threads: int = 2
    name: str = "fake"


class FakeBackend:
    """Answers every benchmark from a FakeMachine: time = per-call cost + max(compute, bytes)
    on a CPU; max(per-call cost, max(compute, bytes)) on a GPU (launches overlap kernels)."""

    def __init__(self, machine: FakeMachine | None = None) -> None:
        self.m = machine or FakeMachine()
        self.kind = self.m.kind
        self.name = f"fake-{self.kind}"
        self.dtypes = tuple(self.m.peaks)

    def _bw(self, ws: float) -> float:
        for cap, bw in self.m.levels:
            if ws <= cap:
                return bw
        return self.m.levels[-1][1]

    def _s(self, t: float) -> Sample:
        if self.kind == "gpu":  # asynchronous launches: the slower of launch and kernel
            t = max(self.m.per_call_s, t - self.m.per_call_s)
        return Sample(median_s=t, p10_s=t * 0.98, p90_s=t * 1.03, n=9)

    def _gemm_t(self, dtype: str, m: float, n: float, k: float, scale: float = 1.0) -> float:
        mm = self.m
        eff = scale * mm.gemm_max / (1 + mm.gemm_a / m + mm.gemm_b / n + mm.gemm_c / k)
        t_c = 2 * m * n * k / (mm.peaks[dtype] * eff)
        t_m = 4 * (m * k + k * n + m * n) / mm.levels[-1][1]
        return mm.per_call_s + max(t_c, t_m)

    def gemm(self, dtype: str, m: int, n: int, k: int) -> Sample:
        return self._s(self._gemm_t(dtype, m, n, k))

    def conv(self, batch: int, c_in: int, hw: int, c_out: int, kernel: int,
             stride: int) -> Sample:
        ho = (hw + 2 * (kernel // 2) - kernel) // stride + 1
        return self._s(self._gemm_t("fp32", batch * ho * ho, c_out, c_in * kernel * kernel,
                                    self.m.conv_scale))

    def sdpa(self, batch: int, heads: int, q_len: int, kv_len: int, head_dim: int) -> Sample:
        from ..ops.formulas import causal_pairs

        pairs = causal_pairs(q_len, kv_len) if q_len == kv_len else q_len * kv_len
        flops = 4.0 * batch * heads * pairs * head_dim
        m, n, k = batch * heads * q_len, kv_len, head_dim
        eff = self.m.attention_scale * self.m.gemm_max / (
            1 + self.m.gemm_a / m + self.m.gemm_b / n + self.m.gemm_c / k)
        return self._s(self.m.per_call_s + flops / (self.m.peaks["fp32"] * eff))

    def stream(self, kernel: str, n: int) -> Sample:
        arrays = STREAM_ARRAYS[kernel][0]
        ws = arrays * 4 * n
        return self._s(self.m.per_call_s + ws / self._bw(ws))

    def vector(self, op: str, n: int) -> Sample:
        from .plan import vector_cost

        flops, byts, cls = vector_cost(op, n)
        fixed = self.m.class_call_s.get(cls, self.m.per_call_s)
        return self._s(fixed + max(flops / self.m.vector_flops_per_s[op], byts / self._bw(byts)))

    def cold_gemv(self, n: int, k: int, pool_bytes: int, rows: int = 1) -> Sample:
        main = self.m.levels[-1][1]
        w = 4.0 * n * k
        t = max(self._gemm_t("fp32", rows, n, k) - self.m.per_call_s,
                w / (main * self.m.cold_read_fraction))
        if rows >= self.m.pack_rows:  # the weight matrix is repacked first, in series
            t += w / (main * self.m.cold_pack_fraction)
        return self._s(self.m.per_call_s + t)

    def tiny(self) -> Sample:
        return self._s(self.m.per_call_s)

    def tiny_class(self, op_class: str) -> Sample:
        return self._s(self.m.class_call_s.get(op_class, self.m.per_call_s))

    def fresh(self, n: int) -> Sample:
        base = self.stream("add", n).median_s
        extra = self.m.page_s * math.ceil(4 * n / 4096) if 4 * n >= 32 * 2**20 else 0.0
        return self._s(base + extra)

    def conv_fresh_bytes(self, batch: int, c_in: int, hw: int, c_out: int) -> float:
        if self.kind != "cpu":
            raise NotImplementedError("page faults are measured on CPUs")
        return self.m.conv_fresh * 4.0 * batch * c_out * hw * hw

    def after_flush(self, op: str, flush_bytes: int, other: bool = False) -> Sample:
        if op not in EVICT_OPS:
            raise ValueError(f"op {op!r}; allowed: {', '.join(EVICT_OPS)}")
        cls = {"layernorm": "norm", "sdpa": "attention"}.get(op, "")
        t = self.m.class_call_s.get(cls, self.m.per_call_s)
        if self.kind == "cpu" and flush_bytes > self.m.evict_bytes:
            t += self.m.evicted_kind_s + (0.0 if other else self.m.evicted_s)
        return self._s(t)

    def info(self) -> dict[str, str]:
        return {"framework": "fake timings (FakeMachine)", "threads": str(self.m.threads),
                "blas": "none (injected timings)", "device": f"{self.m.name} {self.kind}",
                "memory_bytes": str(self.m.levels[-1][0])}
