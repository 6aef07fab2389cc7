"""Price a graph on hardware: per-op roofline, efficiency and overhead, vectorised.

Shapes: ``h`` hardware × ``b`` batches × ``n`` ops. Every array op below broadcasts over all
three, so one call prices a whole sweep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..graphs.graph import Q, Graph
from ..specs.hardware import Hardware
from .presets import Efficiency

__all__ = ["price"]

_F, _WR, _AR, _AW, _KR, _KW, _WW = (Q[k] for k in (
    "flops", "weight_bytes_read", "act_bytes_read", "act_bytes_written", "kv_bytes_read",
    "kv_bytes_written", "weight_bytes_written"))


def _col(values: Sequence[float]) -> np.ndarray:
    """[h] -> [h, 1, 1] for broadcasting against [h, b, n]."""
    return np.asarray(values, dtype=np.float64).reshape(-1, 1, 1)


def price(graph: Graph, hws: Sequence[Hardware], effs: Sequence[Efficiency],
          batches: np.ndarray, *, keep_ops: bool = False) -> dict[str, np.ndarray]:
    """Price ``graph`` at every (hardware, batch). Returns totals as [h, b] arrays and, with
    ``keep_ops``, per-op arrays [h, b, n]. Hardware lacking the compute dtype gives NaN."""
    dtype = graph.precision.compute
    B = np.asarray(batches, dtype=np.float64).reshape(1, -1, 1)  # [1, b, 1]
    q = graph.c0[:, None, :] + graph.c1[:, None, :] * B[0][None]  # [Q, b, n]
    flops = q[_F][None]  # [1, b, n]
    main_bytes = (q[_WR] + q[_KR] + q[_KW] + q[_WW])[None]
    act_bytes = (q[_AR] + q[_AW])[None]
    total_bytes = main_bytes + act_bytes
    is_c = graph.is_compute[None, None, :]
    has_kernel = (flops + total_bytes) > 0

    peak = _col([hw.peak_flops_per_s.get(dtype, math.nan) for hw in hws])
    vpeak = _col([hw.peak_flops_per_s.get("fp32", hw.peak_flops_per_s.get(dtype, math.nan))
                  for hw in hws])
    bw = _col([hw.memory_bytes_per_s for hw in hws])

    # -- pure roofline
    t_bound_op = np.maximum(flops / peak, total_bytes / bw)

    # -- estimate
    gmax = _col([e.gemm_max for e in effs])
    ga, gb, gc = (_col([getattr(e, f) for e in effs]) for f in ("gemm_a", "gemm_b", "gemm_c"))
    M = np.maximum(graph.gemm[0][None, None, :] * B, 1.0)
    N = np.maximum(graph.gemm[1][None, None, :], 1.0)
    K = np.maximum(graph.gemm[2][None, None, :], 1.0)
    gemm_eff = gmax / (1.0 + ga / M + gb / N + gc / K)
    bound_mode = np.array([e.is_bound for e in effs]).reshape(-1, 1, 1)
    vec_rate = np.where(bound_mode, peak, vpeak * _col([e.vector_max for e in effs]))
    rate = np.where(is_c, peak * gemm_eff, vec_rate)
    t_c = flops / rate

    mm = _col([e.memory_max for e in effs])
    act_bw = bw * np.ones_like(act_bytes)  # [h, b, n]
    for lvl in range(1, max(len(hw.memory) for hw in hws)):
        cap = _col([hw.memory[lvl].capacity_bytes * e.cache_fraction if lvl < len(hw.memory)
                    and not math.isnan(hw.memory[lvl].bytes_per_s) else 0.0
                    for hw, e in zip(hws, effs)])
        lbw = _col([hw.memory[lvl].bytes_per_s if lvl < len(hw.memory) and
                    not math.isnan(hw.memory[lvl].bytes_per_s) else 0.0 for hw in hws])
        fits = (act_bytes <= cap) & (lbw > act_bw)
        act_bw = np.where(fits, lbw, act_bw)
    t_m = main_bytes / (bw * mm) + act_bytes / (act_bw * mm)
    t_kernel = np.maximum(t_c, t_m)

    gap = _col([e.kernel_gap for e in effs])
    disp = _col([e.dispatch for e in effs])
    sync = np.array([e.synchronous for e in effs]).reshape(-1, 1, 1)
    t_op = np.where(sync, t_kernel + disp, np.maximum(t_kernel + gap, disp))
    t_op = np.where(has_kernel, t_op, 0.0)
    overhead = t_op - np.where(has_kernel, t_kernel, 0.0)

    compute_bound = t_c >= t_m
    out = {
        "latency": t_op.sum(-1),
        "latency_bound": t_bound_op.sum(-1),
        "t_compute": t_c.sum(-1),
        "t_memory": t_m.sum(-1),
        "t_overhead": overhead.sum(-1),
        "t_compute_bound_ops": np.where(compute_bound, t_kernel, 0.0).sum(-1),
        "t_memory_bound_ops": np.where(compute_bound, 0.0, t_kernel).sum(-1),
        "flops": np.broadcast_to(flops.sum(-1), t_op.shape[:2]),
        "bytes": np.broadcast_to(total_bytes.sum(-1), t_op.shape[:2]),
        "peak": peak[:, :, 0] * np.ones((1, B.shape[1])),
        "bandwidth": bw[:, :, 0] * np.ones((1, B.shape[1])),
    }
    if keep_ops:
        shape = t_op.shape
        out.update(
            op_time=t_op, op_t_compute=np.broadcast_to(t_c, shape),
            op_t_memory=np.broadcast_to(t_m, shape), op_t_bound=np.broadcast_to(t_bound_op, shape),
            op_overhead=overhead, op_compute_bound=np.broadcast_to(compute_bound, shape),
            op_q=q,
        )
    return out
