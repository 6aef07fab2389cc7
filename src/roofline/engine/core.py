"""Price a graph on hardware: per-op roofline, efficiency and overhead, vectorised.

Shapes: ``h`` hardware × ``b`` batches × ``n`` ops. Every array op below broadcasts over all
three, so one call prices a whole sweep.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import numpy as np

from ..graphs.graph import Graph, Q
from ..specs.hardware import Hardware
from .presets import (
    Efficiency,
    class_vector_fractions,
    cold_weight_seconds,
    compute_class_scales,
    evicted_dispatch_seconds,
    fresh_output_seconds,
    gemm_coefficients,
    previous_kernel,
)

__all__ = ["price", "Plan", "plan_for"]

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
    # matmul ceiling: gemm_max, times the board's sustained fraction (power-capped parts; the
    # bound preset keeps the datasheet peak)
    models = [e.gemm_model(dtype) for e in effs]  # (gemm_max, a, b, c) for this dtype
    gmax = _col([m[0] * (1.0 if e.is_bound else hw.sustained(dtype))
                 for m, e, hw in zip(models, effs, hws)])
    ga, gb, gc = (_col([m[i] for m in models]) for i in (1, 2, 3))
    M = np.maximum(graph.gemm[0][None, None, :] * B, 1.0)
    N = np.maximum(graph.gemm[1][None, None, :], 1.0)
    K = np.maximum(graph.gemm[2][None, None, :], 1.0)
    abc = gemm_coefficients(graph.classes, list(effs), dtype)  # measured: own a, b, c for convs
    if abc is not None:
        ga, gb, gc = abc
    gemm_eff = gmax / (1.0 + ga / M + gb / N + gc / K)
    scale = compute_class_scales(graph.classes, list(effs))  # measured: conv/attention
    if scale is not None:
        gemm_eff = gemm_eff * scale
    bound_mode = np.array([e.is_bound for e in effs]).reshape(-1, 1, 1)
    vec_rate = np.where(bound_mode, peak, vpeak * _col([e.vector_max for e in effs]))
    cvm = class_vector_fractions(graph.classes, list(effs))  # measured specs: rate per class
    if cvm is not None:
        vec_rate = np.where(bound_mode, peak, vpeak * cvm)
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
    mr = _col([e.main_read_fraction for e in effs])  # = memory_max unless measured
    t_m = main_bytes / (bw * mr) + act_bytes / (act_bw * mm)
    cold = cold_weight_seconds(graph.classes, q[_WR][None], total_bytes, M, bw, list(effs))
    if cold is not None:  # measured CPU specs: weights evicted between uses in a whole model
        t_m = t_m + cold[0]
    t_kernel = np.maximum(t_c, t_m)
    if cold is not None:
        t_kernel = t_kernel + cold[1]
    fault = fresh_output_seconds(q[_AW][None], list(effs),  # measured CPU specs: page faults
                                 np.array([c == "conv" for c in graph.classes]))
    if fault is not None:
        # while an op faults its output in page by page, its compute and its memory stream no
        # longer overlap: both add up (docs/measure.md)
        t_kernel = t_kernel + fault + np.where(fault > 0, np.minimum(t_c, t_m), 0.0)

    gap = _col([e.kernel_gap for e in effs])
    disp = np.stack([np.broadcast_to(e.dispatch_per_op(graph.classes), (len(graph),))
                     for e in effs])[:, None, :]  # [h, 1, n]: per-class host dispatch
    evicted = evicted_dispatch_seconds(total_bytes, previous_kernel(graph.kinds,
                                                                    _has_kernel(graph)),
                                       list(effs))
    if evicted is not None:  # measured CPU specs: the previous op evicted the private caches
        disp = disp + evicted
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


def _has_kernel(graph: Graph) -> np.ndarray:
    """[n] bool: ops that launch something (any FLOPs or bytes at some batch)."""
    return np.asarray(((graph.c0 != 0) | (graph.c1 != 0)).any(0))


class Plan:
    """Per-(graph, hardware, efficiency) constants for fast single solves.

    Everything that does not depend on the batch is folded into per-op coefficients once;
    ``evaluate(B)`` is then about twenty vector operations over the ops. It computes exactly
    what ``price`` computes (a test checks they agree).
    """

    __slots__ = ("hw", "eff", "C0", "C1", "peak", "bw", "inv_c0", "inv_c1", "inv_cap",
                 "levels", "inv_bw_mm", "mm", "has", "all_have", "aw", "fast", "A0", "A1", "A2",
                 "a_sums", "use_a2", "_env", "inv_bw_main", "envelope_ok", "disp", "cold",
                 "prev")

    def __init__(self, graph: Graph, hw: Hardware, eff: Efficiency) -> None:
        c0, c1 = graph.c0, graph.c1
        self.hw, self.eff = hw, eff
        self.disp = eff.dispatch_per_op(graph.classes)  # scalar, or per op by class
        # rows: flops, main-memory bytes (weights, KV), activation bytes
        self.C0 = np.stack([c0[_F], c0[_WR] + c0[_KR] + c0[_KW] + c0[_WW], c0[_AR] + c0[_AW]])
        self.C1 = np.stack([c1[_F], c1[_WR] + c1[_KR] + c1[_KW] + c1[_WW], c1[_AR] + c1[_AW]])
        dtype = graph.precision.compute
        self.peak = hw.peak_flops_per_s.get(dtype, math.nan)
        self.bw = hw.memory_bytes_per_s
        is_c = graph.is_compute
        vpeak = hw.peak_flops_per_s.get("fp32", self.peak)
        rate_vec = self.peak if eff.is_bound else vpeak * eff.vector_max
        cvm = class_vector_fractions(graph.classes, [eff])  # measured specs: rate per class
        if cvm is not None and not eff.is_bound:
            rate_vec = vpeak * cvm[0, 0]
        # written activation bytes (c0, c1), for page faults of fresh outputs (measured CPUs)
        self.aw = ((c0[_AW], c1[_AW], np.array([c == "conv" for c in graph.classes]))
                   if eff.page_fault > 0 else None)
        # weight bytes (c0, c1) and GEMM rows per sample, for cold-weight terms (measured CPUs)
        self.cold = ((c0[_WR], c1[_WR], graph.gemm[0], graph.classes) if eff.has_cold
                     else None)
        # the op before each op, for the evicted-dispatch term (measured CPUs)
        self.prev = (previous_kernel(graph.kinds, _has_kernel(graph))
                     if eff.evicted_dispatch > 0 or eff.evicted_kind_dispatch > 0 else None)
        N = np.maximum(graph.gemm[1], 1.0)
        K = np.maximum(graph.gemm[2], 1.0)
        m1 = graph.gemm[0]
        gmax, ga_, gb_, gc_ = eff.gemm_model(dtype)
        gpk = self.peak * gmax * (1.0 if eff.is_bound else hw.sustained(dtype))
        scale = compute_class_scales(graph.classes, [eff])  # measured: conv/attention
        if scale is not None:
            gpk = gpk * scale[0, 0]
        # seconds per FLOP: compute ops (1 + a/M + b/N + c/K)/(peak·gemm_max) with M = m1·B
        # clamped to >= 1, i.e. a/M = min(a/(m1·B), a); other ops 1/vector rate
        ga: float | np.ndarray = ga_
        gb: float | np.ndarray = gb_
        gc: float | np.ndarray = gc_
        abc = gemm_coefficients(graph.classes, [eff], dtype)  # measured: own a, b, c for convs
        if abc is not None:
            ga, gb, gc = (x[0, 0] for x in abc)
        self.inv_c0 = np.where(is_c, (1.0 + gb / N + gc / K) / gpk, 1 / rate_vec)
        with np.errstate(divide="ignore"):
            a_m1 = np.where(m1 > 0, ga / np.where(m1 > 0, m1, 1.0), 0.0)
        self.inv_c1 = np.where(is_c, a_m1 / gpk, 0.0)
        self.inv_cap = np.where(is_c, ga / gpk, 0.0)
        self.mm = eff.memory_max
        self.inv_bw_mm = 1.0 / (self.bw * eff.memory_max)
        self.inv_bw_main = 1.0 / (self.bw * eff.main_read_fraction)  # weights/KV (measured)
        self.levels = [(lvl.capacity_bytes * eff.cache_fraction, lvl.bytes_per_s)
                       for lvl in hw.memory[1:]
                       if not math.isnan(lvl.bytes_per_s) and eff.cache_fraction > 0
                       and lvl.bytes_per_s > self.bw]
        self.levels.sort(key=lambda cl: cl[1])  # slowest first: a faster level that fits wins
        self.has = (self.C0 + self.C1).sum(0) > 0
        self.all_have = bool(self.has.all())
        # Fast path: with no on-chip level in play and M = m1·B >= 1 for every matmul-class op
        # at every B >= 1, each of these rows is affine in (1, B, 1/B):
        #   flops, bytes, flops/peak, bytes/bw, t_memory, t_compute
        # (t_compute = flops·(inv_c0 + inv_c1/B)), so a solve needs few vector operations.
        self.fast = (not self.levels and self.aw is None and self.cold is None
                     and self.prev is None
                     and bool(np.all((m1 >= 1) | ~is_c)) and self.all_have
                     and not eff.main_read_max)
        f0, f1 = self.C0[0], self.C1[0]
        b0, b1 = self.C0[1] + self.C0[2], self.C1[1] + self.C1[2]
        # rows 0-3 are summed in closed form; rows 2-6 are needed per op
        self.A0 = np.stack([f0, b0, f0 / self.peak, b0 / self.bw, b0 * self.inv_bw_mm,
                            f0 * self.inv_c0 + f1 * self.inv_c1, self.C0[2]])
        self.A1 = np.stack([f1, b1, f1 / self.peak, b1 / self.bw, b1 * self.inv_bw_mm,
                            f1 * self.inv_c0, self.C1[2]])
        self.A2 = np.zeros_like(self.A0)
        self.A2[5] = f0 * self.inv_c1
        self.use_a2 = bool(self.A2.any())
        self.a_sums = tuple(tuple(a.sum(1).tolist()) for a in (self.A0, self.A1, self.A2))
        self._env: tuple[list[float], list[tuple[float, ...]]] | None = None
        # the closed form also covers on-chip levels and a separate weight-read bandwidth;
        # page faults, cold weights (steps in bytes) and M < 1 (MoE experts): the direct path
        self.envelope_ok = (self.aw is None and self.cold is None and self.prev is None
                            and bool(np.all((m1 >= 1) | ~is_c)) and self.all_have
                            and not self.use_a2)

    #: rows of the work matrix ``evaluate`` returns
    ROWS = ("time", "t_bound", "t_compute", "t_memory", "overhead", "flops", "bytes",
            "t_compute_bound", "act_bytes", "t_kernel")

    def evaluate(self, batch: float) -> tuple[np.ndarray, np.ndarray]:
        """Per-op arrays at ``batch`` as one [10, n] matrix (rows: ``ROWS``) and the
        compute-bound mask. Written with ``out=`` to keep a solve to a few microseconds."""
        B = float(batch)
        X = self.C0 + self.C1 * B
        flops, main_b, act_b = X
        W = np.empty((10, X.shape[1]))
        W[5] = flops
        W[8] = act_b
        tb = np.add(main_b, act_b, out=W[6])
        np.maximum(flops / self.peak, tb / self.bw, out=W[1])
        inv = np.minimum(self.inv_c1 / B, self.inv_cap)
        inv += self.inv_c0
        tc = np.multiply(flops, inv, out=W[2])
        if self.levels:
            act_bw = np.full_like(act_b, self.bw)
            for cap, lbw in self.levels:
                act_bw = np.where(act_b <= cap, lbw, act_bw)
            tm = np.add(main_b * self.inv_bw_main, act_b / (act_bw * self.mm), out=W[3])
        elif self.eff.main_read_max:
            tm = np.add(main_b * self.inv_bw_main, act_b * self.inv_bw_mm, out=W[3])
        else:
            tm = np.multiply(tb, self.inv_bw_mm, out=W[3])
        pack = None
        if self.cold is not None:
            w0, w1, m1, classes = self.cold
            extra = cold_weight_seconds(classes, (w0 + w1 * B)[None, None],
                                        (main_b + act_b)[None, None],
                                        np.maximum(m1 * B, 1.0)[None, None],
                                        np.array([self.bw]), [self.eff])
            if extra is not None:
                tm += extra[0][0, 0]
                pack = extra[1][0, 0]
        tk = np.maximum(tc, tm, out=W[9])
        if pack is not None:
            tk += pack
        if self.aw is not None:
            fault = fresh_output_seconds(self.aw[0] + self.aw[1] * B, [self.eff], self.aw[2])
            if fault is not None:
                f = fault[0] if fault.ndim > 1 else fault
                tk += f + np.where(f > 0, np.minimum(tc, tm), 0.0)
        disp = self.disp
        if self.prev is not None:
            ev = evicted_dispatch_seconds(tb[None, None], self.prev, [self.eff])
            if ev is not None:
                disp = disp + ev[0, 0]
        t_op = self._launch(tk, W[0], disp)
        if not self.all_have:
            t_op *= self.has
            tk *= self.has
        np.subtract(t_op, tk, out=W[4])
        cb = tc >= tm
        np.multiply(tk, cb, out=W[7])
        return W, cb

    def _launch(self, t_kernel: np.ndarray, out: np.ndarray,
                disp: float | np.ndarray | None = None) -> np.ndarray:
        """Per-op time with launch costs: kernel + dispatch on a synchronous device (CPU),
        else max(kernel + gap, dispatch) (the host enqueues ahead of an async device)."""
        e = self.eff
        d = self.disp if disp is None else disp
        if e.synchronous:
            return np.add(t_kernel, d, out=out)
        np.add(t_kernel, e.kernel_gap, out=out)
        return np.maximum(out, d, out=out)

    def fast_totals(self, batch: float) -> list[float]:
        """The same totals as ``totals(evaluate(B))`` through the affine rows (fast path)."""
        B = float(batch)
        X = self.A0 + self.A1 * B
        if self.use_a2:
            X += self.A2 / B
        W = np.empty((4, X.shape[1]))
        np.maximum(X[2], X[3], out=W[0])  # roofline bound per op
        tk = np.maximum(X[5], X[4], out=W[2])
        self._launch(tk, W[1])
        np.multiply(tk, X[5] >= X[4], out=W[3])
        bound, time, kern, cbt = W.sum(1).tolist()
        s0, s1, s2 = self.a_sums
        flops = s0[0] + s1[0] * B + s2[0] / B
        byts = s0[1] + s1[1] * B + s2[1] / B
        t_m = s0[4] + s1[4] * B + s2[4] / B
        t_c = s0[5] + s1[5] * B + s2[5] / B
        live = float(X[6].max())
        return [time, bound, t_c, t_m, time - kern, flops, byts, cbt, live]

    def _envelope(self) -> tuple[list[float], list[tuple[float, ...]]]:
        """Piecewise-linear closed form of the per-op sums as functions of B.

        Every per-op time is a max of lines in B: t_compute = p0 + p1·B, t_memory = q0 + q1·B
        (its line changes where the op's activations, ab0 + ab1·B, stop fitting an on-chip
        level), the bound's two roofs and the launch floor. Each sum over ops is therefore
        piecewise linear, with breakpoints where two of an op's lines cross or a level stops
        fitting. Between consecutive breakpoints the active line of every op is fixed, so the
        sums there are one intercept and one slope each; a solve is a bisection plus a few
        float operations. The candidate breakpoints are a superset (every level choice is
        crossed with every line), which only splits intervals further.
        """
        e = self.eff
        p0, p1 = self.A0[5], self.A1[5]
        c0_, c1_ = self.A0[2], self.A1[2]
        m0, m1 = self.A0[3], self.A1[3]
        mb0, mb1, ab0, ab1 = self.C0[1], self.C1[1], self.C0[2], self.C1[2]
        inv_main = self.inv_bw_main
        inv_acts = [1.0 / (self.bw * self.mm)] + [1.0 / (lbw * self.mm) for _, lbw in self.levels]
        with np.errstate(divide="ignore", invalid="ignore"):
            cands = [(m0 - c0_) / (c1_ - m1)]
            for inv_a in inv_acts:
                q0, q1 = mb0 * inv_main + ab0 * inv_a, mb1 * inv_main + ab1 * inv_a
                cands.append((q0 - p0) / (p1 - q1))
                if not e.synchronous:
                    cands.append((self.disp - e.kernel_gap - q0) / q1)
            if not e.synchronous:
                cands.append((self.disp - e.kernel_gap - p0) / p1)
            cands += [(cap - ab0) / ab1 for cap, _ in self.levels]
        bp = np.concatenate(cands)
        bp = np.unique(bp[np.isfinite(bp) & (bp > 1.0)])
        edges = np.concatenate([[1.0], bp])
        samples = np.concatenate([(edges[:-1] + edges[1:]) / 2, [edges[-1] * 2 + 1]])
        Bs = samples[:, None]
        act = ab0 + ab1 * Bs
        act_bw = np.full_like(act, self.bw)
        for cap, lbw in self.levels:  # as evaluate(): the fastest level that holds them
            act_bw = np.where(act <= cap, lbw, act_bw)
        inv_a = 1.0 / (act_bw * self.mm)
        q0, q1 = mb0 * inv_main + ab0 * inv_a, mb1 * inv_main + ab1 * inv_a  # [K, n]
        tc, tm = p0 + p1 * Bs, q0 + q1 * Bs
        cb = tc >= tm
        k_i = np.where(cb, p0, q0)  # t_kernel line per interval and op
        k_s = np.where(cb, p1, q1)
        bc = (c0_ + c1_ * Bs) >= (m0 + m1 * Bs)
        b_i, b_s = np.where(bc, c0_, m0), np.where(bc, c1_, m1)
        if e.synchronous:
            t_i, t_s = k_i + self.disp, k_s
        else:
            floor = (k_i + k_s * Bs + e.kernel_gap) < self.disp
            t_i = np.where(floor, self.disp, k_i + e.kernel_gap)
            t_s = np.where(floor, 0.0, k_s)
        cbt_i, cbt_s = np.where(cb, p0, 0.0), np.where(cb, p1, 0.0)
        rows = np.stack([b_i, b_s, t_i, t_s, k_i, k_s, cbt_i, cbt_s,
                         q0 + 0 * Bs, q1 + 0 * Bs]).sum(2).T  # [K, 10]
        return edges.tolist(), [tuple(r) for r in rows.tolist()]

    def envelope_totals(self, batch: float) -> list[float] | None:
        """The totals of ``totals(evaluate(B))`` from the closed form; None when B sits on a
        breakpoint (where a tie could flip a compute/memory label)."""
        if self._env is None:
            self._env = self._envelope()
        edges, rows = self._env
        B = float(batch)
        k = bisect.bisect_right(edges, B) - 1
        if k < 0 or (k > 0 and B == edges[k]):
            return None
        b_i, b_s, t_i, t_s, k_i, k_s, c_i, c_s, m_i, m_s = rows[k]
        time = t_i + t_s * B
        kern = k_i + k_s * B
        s0, s1, _ = self.a_sums
        live = float((self.C0[2] + self.C1[2] * B).max())
        return [time, b_i + b_s * B, s0[5] + s1[5] * B, m_i + m_s * B, time - kern,
                s0[0] + s1[0] * B, s0[1] + s1[1] * B, c_i + c_s * B, live]

    def totals_many(self, batches: np.ndarray) -> np.ndarray:
        """[9, b] totals (the order of ``totals``) for many batches at once: the closed form
        where it applies, a direct evaluation for batches on a breakpoint."""
        B = np.asarray(batches, dtype=np.float64)
        out = np.empty((9, len(B)))
        if self.envelope_ok:
            if self._env is None:
                self._env = self._envelope()
            edges = np.asarray(self._env[0])
            rows = np.asarray(self._env[1])  # [K, 10]
            k = np.searchsorted(edges, B, side="right") - 1
            r = rows[np.maximum(k, 0)]
            time = r[:, 2] + r[:, 3] * B
            kern = r[:, 4] + r[:, 5] * B
            s0, s1, _ = self.a_sums
            out[0], out[1] = time, r[:, 0] + r[:, 1] * B
            out[2], out[3] = s0[5] + s1[5] * B, r[:, 8] + r[:, 9] * B
            out[4] = time - kern
            out[5], out[6] = s0[0] + s1[0] * B, s0[1] + s1[1] * B
            out[7] = r[:, 6] + r[:, 7] * B
            out[8] = (self.C0[2][None, :] + self.C1[2][None, :] * B[:, None]).max(1) \
                if self.C0.shape[1] else 0.0
            redo = np.flatnonzero((k < 0) | ((k > 0) & (B == edges[np.maximum(k, 0)])))
        else:
            redo = np.arange(len(B))
        for i in redo:
            W, _ = self.evaluate(B[i])
            out[:, i] = self.totals(W)
        return out

    @staticmethod
    def totals(W: np.ndarray) -> list[float]:
        """time, bound, compute, memory, overhead, flops, bytes, time in compute-bound ops,
        peak live activation bytes."""
        out: list[float] = W[:8].sum(1).tolist()
        out.append(float(W[8].max()) if W.shape[1] else 0.0)
        return out


def plan_for(graph: Graph, hw: Hardware, eff: Efficiency) -> Plan:
    """The cached Plan of (graph, hw, eff); the cache lives on the graph."""
    cache = graph.meta.setdefault("_plans", {})
    key = (id(hw), eff.label, id(eff))
    hit = cache.get(key)
    if hit is not None and hit.hw is hw and hit.eff is eff:
        return hit  # type: ignore[no-any-return]
    p = Plan(graph, hw, eff)
    cache[key] = p
    return p
