"""The time model: each op's time as data, built once per (graph, hardware, efficiency).

For op i at batch B (its costs are ``c0 + c1·B``; see graphs/graph.py):

    compute    t_c = flops · (inv_c0 + min(inv_c1 / B, inv_cap))      (matmul-class ops: the
               GEMM model 1/e = (1 + a/M + b/N + c/K)/max with M = m1·B clamped to >= 1, and
               never below the GEMV floor gemm.gemv of the peak (the cap); other ops:
               1 / vector rate)
    memory     t_m = main bytes / (bw · main_read) + act bytes / (bw_level · memory.max)
               where bw_level is the fastest on-chip level whose usable share holds the op's
               activations, else main memory; under weight streaming (Hardware.execution)
               the weight bytes are charged at the weight store's bandwidth instead of bw
    bound      t_b = max(flops / peak, main bytes / bw + act bytes / bw_level)
               (the roofline of the same memory levels, at their peak bandwidths, and of the
               peak — or of a faster rate a fitted factor above 1 claims: an estimate never
               undercuts its bound, issue 11)
    kernel     t_k = max(t_c, t_m)  (+ the CPU terms below)
    op         t   = launch(t_k): t_k + dispatch (synchronous device) or
               max(t_k + kernel_gap, dispatch) (lines.launch_lines)

Terms that are not straight lines in B are listed in ``TimeModel.nonlinear``: page faults and
cold weights (steps in bytes), evicted dispatch (steps in the bytes other ops move), GEMM rows
below one (MoE experts: M = m1·B < 1), a constant FLOP part of a matmul whose M grows with B
(a 1/B term) and whole waves of tiles (engine/tiles.py: a step in B). Without them every
per-op time is a maximum of lines in B, and every total is piecewise linear:
``lines.envelope`` gives it in closed form, and a solve is a bisection. A matmul at its GEMV
floor (the cap, ``inv_c1 / B > inv_cap``) keeps the closed form: its compute time is one line
below B* = inv_c1 / inv_cap (flops at the floor rate) and another above it, so B* is one more
breakpoint (``TimeModel.floor``).

Everyone evaluates this object: ``solve`` (``totals_at``), ``sweep`` (``totals_many``), serving
(``ops`` at two contexts -> lines in S, summed by ``lines.sum_max_int``), training (``ops`` over
micro-batches) and ``price`` (many hardware at once).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from .._cache import make_room
from .._frozen import fast_init
from ..graphs.graph import Graph, Q
from ..specs.hardware import Hardware, spec_key
from .attention import attention_rates
from .efficiency import Efficiency
from .lines import all_finite, launch, quiet, quiet_sub
from .tiles import streamed, wave_ops, wave_split

__all__ = ["TimeModel", "Totals", "OpTimes", "TOTALS", "time_model", "price"]

_F, _WR, _AR, _AW, _KR, _KW, _WW = (Q[k] for k in (
    "flops", "weight_bytes_read", "act_bytes_read", "act_bytes_written", "kv_bytes_read",
    "kv_bytes_written", "weight_bytes_written"))

#: bytes per page faulted in when an op writes a freshly mapped output
PAGE_BYTES = 4096
_PACKED = ("matmul", "conv")


@fast_init()  # one per solve: the frozen init's stores were ~1 µs (roofline/_frozen.py)
@dataclass(frozen=True, slots=True)
class Totals:
    """Sums over a graph's ops at one batch (s, FLOP, B)."""

    latency: float  #: Σ op time (kernels and launch)
    latency_bound: float  #: Σ op bound (the pure roofline of the same memory levels)
    t_compute: float  #: Σ compute time (with efficiencies)
    t_memory: float  #: Σ memory time (with efficiencies)
    t_overhead: float  #: Σ (op time − kernel time): launch and dispatch
    flops: float
    bytes: float
    t_compute_bound_ops: float  #: Σ kernel time, less fill, of ops whose compute exceeds memory
    live_activation_bytes: float  #: the largest activation bytes of one op
    #: Σ the fixed per-kernel fill of tiled matmuls (engine/tiles.py) not hidden under memory:
    #: latency that does not scale with work, a share of its own (not compute, not launch)
    t_fill: float = 0.0

    @property
    def t_kernel(self) -> float:
        return self.latency - self.t_overhead

    @property
    def t_memory_bound_ops(self) -> float:
        return self.latency - self.t_overhead - self.t_compute_bound_ops - self.t_fill

    @property
    def finite(self) -> bool:
        return all(math.isfinite(getattr(self, f)) for f in TOTALS)


#: the field names of ``Totals``, the row order of ``TimeModel.totals_many``
TOTALS = tuple(f.name for f in fields(Totals))


@dataclass(frozen=True, slots=True)
class OpTimes:
    """Per-op arrays ([n], or [b, n] for many batches) at a batch."""

    time: np.ndarray
    t_bound: np.ndarray
    t_compute: np.ndarray
    t_memory: np.ndarray
    overhead: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    act_bytes: np.ndarray
    t_kernel: np.ndarray
    compute_bound: np.ndarray
    dispatch: np.ndarray  #: host dispatch per op (with evicted-dispatch terms)
    t_bound_compute: np.ndarray  #: flops / peak
    t_bound_memory: np.ndarray  #: the bound's memory roof (same levels, peak bandwidths)
    #: the kernel time that is fixed per-kernel fill (tiled matmuls), not work (``fill_share``)
    fill: np.ndarray

    def totals(self) -> Totals:
        return Totals(*(float(v) for v in self.rows()))

    def rows(self) -> np.ndarray:
        """[10, b] totals in the order of ``TOTALS`` (many batches; [10] at one batch)."""
        cbt = np.where(self.compute_bound, self.t_kernel - self.fill, 0.0).sum(-1)
        live = self.act_bytes.max(-1) if self.act_bytes.shape[-1] else 0.0 * cbt
        return np.stack([self.time.sum(-1), self.t_bound.sum(-1), self.t_compute.sum(-1),
                         self.t_memory.sum(-1), self.overhead.sum(-1), self.flops.sum(-1),
                         self.bytes.sum(-1), cbt, live, self.fill.sum(-1)])


def fill_share(tc: Any, tm: Any, fill: Any) -> tuple[Any, Any]:
    """(compute-bound flag, fill share) of ops with compute seconds ``tc`` (fill included),
    memory seconds ``tm`` and a fixed per-kernel fill ``fill``: an op is compute-bound when its
    work, ``tc − fill``, is at least ``tm``; the fill's share of ``max(tc, tm)`` is what it adds
    above ``max(tc − fill, tm)`` (0 where memory hides it). NaN in, NaN out, never a warning:
    a NaN input gives a NaN share (and the flag False, as any comparison with NaN). An infinite
    time takes the share's limit: an infinite ``tc`` over a finite ``tm`` is compute-bound with
    a share of ``fill``, an infinite ``tm`` over a finite ``tc`` hides it (0), an op without
    fill has none (0); both times infinite under a fill, or an infinite fill: NaN."""
    with np.errstate(invalid="ignore"):  # inf − inf: NaN, resolved below
        work = tc - fill
        share = np.maximum(tc, tm) - np.maximum(work, tm)
    nan = np.isnan(share)
    if nan.any():  # rare: only a non-finite input gets here
        lim = np.where(fill == 0, 0.0, np.where(np.isinf(tm), np.where(np.isinf(tc), np.nan,
                                                                       0.0), fill))
        share = np.where(nan & np.isfinite(fill) & ~np.isnan(tc) & ~np.isnan(tm), lim, share)
    return work >= tm, share


def _has_kernel(graph: Graph) -> np.ndarray:
    """[n] bool: ops that launch something (any FLOPs or bytes at some batch)."""
    return np.asarray(((graph.c0 != 0) | (graph.c1 != 0)).any(0))


def previous_kernel(kinds: tuple[str, ...], has_kernel: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Where each op's evicted-dispatch terms look back to, as indices into the graph's ops
    repeated twice (a graph runs pass after pass, so the first op follows the last), with op
    i at ``i + n``: (its predecessor, the last earlier op of its kind). Ops without a kernel
    (views) are skipped; an op alone of its kind looks back one whole pass, to itself."""
    n = len(kinds)
    idx = np.flatnonzero(has_kernel)
    if len(idx) == 0:
        return np.arange(n), np.arange(n)
    pos = np.searchsorted(idx, np.arange(n), side="left") - 1  # -1 wraps to the last one
    before = idx[pos]
    prev = np.where(before < np.arange(n), before + n, before)
    j = np.arange(n)
    last: dict[str, int] = {}
    for i in np.concatenate([idx, idx]).tolist():  # the second pass sees the first's last op
        if kinds[i] in last:
            j[i] = last[kinds[i]]
        last[kinds[i]] = i
    same = np.where(j < np.arange(n), j + n, j)
    return prev, same


def _upper_lines(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lines (a + b·B) among ``a``, ``b`` that are the largest somewhere at B >= 1 (a
    superset: those no other line beats at B = 1 and in slope), so that the largest
    activation bytes of one op at many batches is a max over a few lines, not every op."""
    if len(a) == 0:
        return a, b
    at1 = a + b
    order = np.lexsort((-at1, -b))  # steepest first, then the highest at B = 1
    keep, best = [], -np.inf
    for i in order.tolist():
        if at1[i] > best:
            keep.append(i)
            best = at1[i]
    return a[keep], b[keep]


class TimeModel:
    """Each op's time on one (hardware, efficiency) as data; see the module docstring."""

    __slots__ = ("graph", "hw", "eff", "C0", "C1", "peak", "bw", "inv_c0", "inv_c1", "inv_cap",
                 "levels", "inv_main", "inv_act", "disp", "gap", "sync", "has", "all_have",
                 "fault", "cold", "prev", "nonlinear", "a_sums", "_env", "_env_arr", "envelope_ok",
                 "live0", "live1", "live_lines", "inv_bound", "finite",
                 "ridge_effective", "moved", "waves", "_memo", "_split", "many", "floor")

    def __init__(self, graph: Graph, hw: Hardware, eff: Efficiency) -> None:
        c0, c1 = graph.c0, graph.c1
        self.graph, self.hw, self.eff = graph, hw, eff
        classes = graph.classes
        # rows: flops, main-memory bytes (weights, KV), activation bytes
        self.C0 = np.stack([c0[_F], c0[_WR] + c0[_KR] + c0[_KW] + c0[_WW], c0[_AR] + c0[_AW]])
        self.C1 = np.stack([c1[_F], c1[_WR] + c1[_KR] + c1[_KW] + c1[_WW], c1[_AR] + c1[_AW]])
        #: bytes each op moves (c0, c1), as reported; the pricing rows above may differ
        self.moved = (self.C0[1] + self.C0[2], self.C1[1] + self.C1[2])
        dtype = graph.precision.compute
        self.peak = hw.peak_flops_per_s.get(dtype, math.nan)
        self.bw = hw.memory_bytes_per_s
        ws = hw.weight_stream_bytes_per_s
        if ws is not None:
            # weight streaming: the weights come over the weight store's link, not from main
            # memory. Their bytes are priced at bw / ws main-memory bytes each, so that every
            # main-memory term (estimate, bound, envelope) charges weights / ws exactly
            k = self.bw / ws
            self.C0[1] = self.C0[1] + (k - 1.0) * (c0[_WR] + c0[_WW])
            self.C1[1] = self.C1[1] + (k - 1.0) * (c1[_WR] + c1[_WW])
        self._compute_lines(graph, hw, eff, dtype)
        #: GPU matmuls priced in whole waves of tiles (engine/tiles.py), precomputed once
        self.waves = wave_ops(graph, hw, eff, dtype, self.peak)
        # the bound's compute roof: the peak, or the faster rate a fitted factor above 1 claims
        # (a measured bf16 GEMM model fitted against a peak below its asymptote), so that no
        # estimate undercuts its bound
        with np.errstate(divide="ignore"):
            self.inv_bound = np.minimum(1.0 / self.peak, self.inv_c0)
        mem = eff.memory
        self.inv_main = 1.0 / (self.bw * mem.main_read_fraction)  # weights/KV
        self.inv_act = 1.0 / (self.bw * mem.max)
        self.finite: bool = self.finite and all_finite(self.inv_main, self.inv_act, 1 / self.bw)
        cf = mem.cache_fraction
        #: on-chip levels activations may use: (usable bytes, peak bytes/s), slowest first
        self.levels = sorted([(lvl.capacity_bytes * cf, lvl.bytes_per_s) for lvl in hw.memory[1:]
                              if cf and not math.isnan(lvl.bytes_per_s)
                              and lvl.bytes_per_s > self.bw], key=lambda cl: cl[1])
        self.disp = eff.dispatch_per_op(classes)  # scalar, or per op by class
        self.gap, self.sync = eff.launch.kernel_gap, eff.launch.synchronous
        self.has = (self.C0 + self.C1).sum(0) > 0
        self.all_have = bool(self.has.all())
        pf, cw, ev = eff.page_faults, eff.cold, eff.evicted
        self.fault = (c0[_AW], c1[_AW], np.array([c == "conv" for c in classes]), pf) \
            if pf is not None else None
        self.cold = (c0[_WR], c1[_WR], graph.gemm[0],
                     np.array([c in _PACKED for c in classes]), cw) if cw is not None else None
        self.prev = (previous_kernel(graph.kinds, _has_kernel(graph)), ev) \
            if ev is not None else None
        m1 = graph.gemm[0]
        nl = [t for x, t in ((pf, "page faults (steps in bytes)"),
                             (cw, "cold weights (a step in the bytes other ops move)"),
                             (ev, "evicted dispatch (a step in the bytes earlier ops move)"),
                             (None if self.finite else 1, "non-finite rates (NaN lines drop)"))
              if x is not None]
        if not bool(np.all((m1 >= 1) | ~graph.is_compute)):
            nl.append("GEMM rows below one (M = m1·B clamped to 1)")
        floor = graph.is_compute & (self.inv_c1 > self.inv_cap) & (m1 >= 1)
        #: [n] bool: matmuls at their GEMV floor below some batch (a breakpoint of the closed
        #: form at inv_c1 / inv_cap, not a term off it), or None where no op has one
        self.floor = floor if bool(floor.any()) else None
        if bool(((self.C0[0] != 0) & (self.inv_c1 != 0)).any()):  # (no 0 × inf)
            nl.append("constant FLOPs of a matmul whose rows grow with B (a 1/B term)")
        if self.waves is not None:
            nl.append("whole waves of matmul tiles (a step in B)")
        self.nonlinear = tuple(nl)
        self.envelope_ok = not nl and self.all_have
        self.set_sums()
        self._env: tuple[list[float], list[tuple[float, ...]]] | None = None
        #: totals per batch where whole waves keep the closed form off (computed once each)
        self._memo: dict[float, Totals] | None = {} if self.waves is not None else None
        self._env_arr: tuple[np.ndarray, np.ndarray] | None = None
        self.ridge_effective = self.peak * eff.gemm_for(dtype).max * eff.clock_of(dtype) * (
            1.0 if eff.is_bound else hw.sustained(dtype)) / (self.bw * mem.max)
        self._split: Any = False  # ``split``, built on first use (a sweep never needs it)
        #: totals_many's split (engine/split.py), built on its first use; False: none applies
        self.many: Any = None

    @property
    def split(self) -> Any:
        """The other ops' closed form + each distinct wave op once (tiles.WaveSplit), or None."""
        if self._split is False:
            self._split = wave_split(self) if self.waves is not None else None
        return self._split

    def set_sums(self) -> None:
        """Closed-form sums (FLOPs, bytes, compute s, the activations' upper lines)."""
        with quiet(self.finite):  # 0 × inf on an absurd spec: NaN sums, without warnings
            self.a_sums = (float(self.C0[0].sum()), float(self.C1[0].sum()),
                           float(self.moved[0].sum()), float(self.moved[1].sum()),
                           float((self.C0[0] * self.inv_c0 + self.C1[0] * self.inv_c1).sum()),
                           float((self.C1[0] * self.inv_c0).sum()))
        self.live0, self.live1 = _upper_lines(self.C0[2], self.C1[2])
        #: the same lines as floats: a scalar max over 1-3 lines is faster without numpy
        self.live_lines = tuple(zip(self.live0.tolist(), self.live1.tolist()))

    def _compute_lines(self, graph: Graph, hw: Hardware, eff: Efficiency, dtype: str) -> None:
        """Seconds per FLOP: matmul-class ops ``(1 + a/M + b/N + c/K)/(peak·max·clock)`` with
        M = m1·B clamped to >= 1, i.e. a/M = min(a/(m1·B), a) (``clock``: the part's clock
        ratio, Efficiency.clock); other ops 1/vector rate."""
        classes = graph.classes
        is_c = graph.is_compute
        g = eff.gemm_for(dtype)
        vpeak = hw.peak_flops_per_s.get("fp32", self.peak)
        if eff.is_bound:
            rate_vec: float | np.ndarray = self.peak
        elif eff.vector.has_classes:
            rate_vec = vpeak * np.array([eff.vector.of(c) for c in classes])
        else:
            rate_vec = vpeak * eff.vector.max
        # the part's clock over the one the factors were fitted at (Efficiency.clock)
        clk = eff.clock_of(dtype)
        gpk: float | np.ndarray = self.peak * g.max * clk * (1.0 if eff.is_bound
                                                             else hw.sustained(dtype))
        conv = np.array([c == "conv" for c in classes])
        if eff.conv.scale != 1.0 or eff.attention.scale != 1.0:
            att = np.array([c == "attention" for c in classes])
            gpk = gpk * np.where(conv, eff.conv.scale, np.where(att, eff.attention.scale, 1.0))
        ga: float | np.ndarray = g.a
        gb: float | np.ndarray = g.b
        gc: float | np.ndarray = g.c
        if eff.conv.has_shape:
            ca, cb, cc = eff.conv.abc(g)
            ga, gb, gc = np.where(conv, ca, g.a), np.where(conv, cb, g.b), np.where(conv, cc, g.c)
        if eff.attention.measured and not eff.is_bound:
            gpk, ga, gb, gc = attention_rates(graph, hw, eff, dtype, self.peak, gpk, ga, gb, gc)
        N = np.maximum(graph.gemm[1], 1.0)
        K = np.maximum(graph.gemm[2], 1.0)
        m1 = graph.gemm[0]
        # an absurd spec (a peak of 1e-320) gives inf here, and the result says it is not finite
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            gpk_a = np.asarray(gpk, dtype=np.float64)
            self.inv_c0 = np.where(is_c, (1.0 + gb / N + gc / K) / gpk_a,
                                   1.0 / np.asarray(rate_vec, dtype=np.float64))
            a_m1 = np.where(m1 > 0, ga / np.where(m1 > 0, m1, 1.0), 0.0)
            self.inv_c1 = np.where(is_c, a_m1 / gpk_a, 0.0)
            self.inv_cap = np.where(is_c, ga / gpk_a, 0.0)
            self.finite = all_finite(self.inv_c0, self.inv_c1, self.inv_cap)  # quiet() if not
            # the GEMV floor: seconds per FLOP never above 1 / (peak · gemv), through the cap
            # of the M penalty (a/M <= the room between the N, K part and the floor)
            gv = g.gemv * clk * (1.0 if eff.is_bound else hw.sustained(dtype))
            if gv > 0 and not eff.is_bound:
                room = np.maximum(1.0 / (self.peak * gv) - self.inv_c0, 0.0)
                self.inv_cap = np.where(is_c, np.minimum(self.inv_cap, room), self.inv_cap)

    # -- per op, at any batch (or many: B of shape [b] gives [b, n]) ---------------------------
    def ops(self, batch: Any) -> OpTimes:
        B = np.asarray(batch, dtype=np.float64)
        Bc = B[..., None] if B.ndim else B
        flops = self.C0[0] + self.C1[0] * Bc
        main_b = self.C0[1] + self.C1[1] * Bc
        act_b = self.C0[2] + self.C1[2] * Bc
        tb = self.moved[0] + self.moved[1] * Bc  # reported bytes (main_b may be re-priced)
        tc = flops * (np.minimum(self.inv_c1 / Bc, self.inv_cap) + self.inv_c0)
        fill: Any = 0.0
        if self.waves is not None:
            w = self.waves
            tc[..., w.idx] = w.seconds(Bc, tc[..., w.idx])
            fill = np.zeros(tc.shape)
            fill[..., w.idx] = w.fills(Bc)
        inv_a: Any = self.inv_act
        inv_ab: Any = 1.0 / self.bw
        for cap, lbw in self.levels:  # the fastest level that holds the activations wins
            fits = act_b <= cap
            inv_a = np.where(fits, self.inv_act * self.bw / lbw, inv_a)
            inv_ab = np.where(fits, 1.0 / lbw, inv_ab)
        tm = streamed(main_b * self.inv_main + act_b * inv_a, self.waves, Bc)
        b_c, b_m = flops * self.inv_bound, main_b / self.bw + act_b * inv_ab
        bound = np.maximum(b_c, b_m)
        pack = None
        if self.cold is not None:
            extra, pack = self._cold(Bc, tb)
            tm = tm + extra
        tk = np.maximum(tc, tm)
        cb, fs = fill_share(tc, tm, fill)
        if pack is not None:
            tk = tk + pack
        if self.fault is not None:
            f = self._faults(Bc)
            # while an op faults its output in page by page, its compute and its memory stream
            # no longer overlap: both add up (docs/measure.md)
            tk = tk + f + np.where(f > 0, np.minimum(tc, tm), 0.0)
        disp = self.disp
        if self.prev is not None:
            disp = disp + self._evicted(tb)
        t_op = launch(tk, self.gap, disp, self.sync)
        if not self.all_have:
            t_op = t_op * self.has
            tk = tk * self.has
            fs = fs * self.has
        shape = t_op.shape

        def full(x: Any) -> Any:  # arrays of this call already [.., n] are kept as they are
            return x if type(x) is np.ndarray and x.shape == shape and x is not self.disp \
                else np.broadcast_to(x, shape)  # (the model's own dispatch: a read-only view)

        return OpTimes(time=t_op, t_bound=full(bound), t_compute=full(tc), t_memory=full(tm),
                       overhead=t_op - tk if self.finite else quiet_sub(t_op, tk),
                       flops=full(flops), bytes=full(tb),
                       act_bytes=full(act_b), t_kernel=tk, compute_bound=full(cb),
                       dispatch=full(disp), t_bound_compute=full(b_c), t_bound_memory=full(b_m),
                       fill=full(fs))

    def select(self, ot: OpTimes, idx: Any) -> OpTimes:
        """``ot`` restricted to ops ``idx`` (last axis)."""
        return OpTimes(**{f.name: getattr(ot, f.name)[..., idx] for f in fields(OpTimes)})

    def evaluate(self, batch: float) -> OpTimes:
        """Per-op arrays [n] at one batch."""
        return self.ops(float(batch))

    # -- CPU terms (measured specs) ------------------------------------------------------------
    def _cold(self, B: Any, op_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cold weights: extra read seconds (t_memory) and repacking seconds (kernel). An op's
        weights are cold when the other ops move more than ``after`` bytes per pass."""
        w0, w1, m1, packed, cw = self.cold  # type: ignore[misc]
        w = w0 + w1 * B
        other = op_bytes.sum(-1, keepdims=True) - op_bytes
        cold = (other > cw.after) & (w > 0)
        read = np.zeros_like(op_bytes)
        if cw.read_max is not None:
            read = np.where(cold, w * (1.0 / (self.bw * cw.read_max) - self.inv_main), 0.0)
        pack = np.zeros_like(op_bytes)
        if cw.pack_max is not None:
            pk = cold & packed & (np.maximum(m1 * B, 1.0) >= cw.pack_min_rows)
            pack = np.where(pk, w / (self.bw * cw.pack_max), 0.0)
        return read, pack

    def _faults(self, B: Any) -> np.ndarray:
        """Page-fault time of the fresh memory an op maps, ``seconds · ceil(bytes / 4096)``,
        when it is at least ``fresh_min``: its output, and for convolutions ``conv_factor``
        times that (output + temporaries)."""
        aw0, aw1, conv, pf = self.fault  # type: ignore[misc]
        fresh = aw0 + aw1 * B
        if pf.conv_factor is not None:
            fresh = np.where(conv, fresh * pf.conv_factor, fresh)
        pages = np.ceil(fresh / PAGE_BYTES)
        return np.where((fresh >= pf.fresh_min) & (fresh > 0), pf.seconds * pages, 0.0)

    def _evicted(self, op_bytes: np.ndarray) -> np.ndarray:
        """Extra host seconds per op whose framework code other ops evicted: ``dispatch`` when
        its predecessor (another op) moved more than ``after`` bytes, ``kind_dispatch`` when the
        ops since the last op of its kind (that op excluded) did. An op re-run back to back (a
        one-op graph) pays neither: its own traffic does not evict its code."""
        (prev, same), ev = self.prev  # type: ignore[misc]
        n = op_bytes.shape[-1]
        S = np.concatenate([np.zeros(op_bytes.shape[:-1] + (1,)),
                            np.cumsum(np.concatenate([op_bytes, op_bytes], -1), -1)], -1)
        end = S[..., n:2 * n]  # bytes before op i of the second pass
        itself = (prev % n) == np.arange(n)
        moved_prev = np.where(itself, 0.0, end - S[..., prev])
        moved_kind = end - S[..., same + 1]
        return (np.where(moved_prev > ev.after, ev.dispatch, 0.0)
                + np.where(moved_kind > ev.after, ev.kind_dispatch, 0.0))

    # -- totals ----------------------------------------------------------------------------------
    def _envelope(self) -> tuple[list[float], list[tuple[float, ...]]]:
        """The closed form (engine/closed_form.py); sets ``_env_arr`` too."""
        from .closed_form import envelope_of

        edges, table = envelope_of(self)
        self._env_arr = (np.asarray(edges), table)
        return edges, [tuple(r) for r in table.tolist()]

    def _segment(self, B: float) -> tuple[float, ...] | None:
        """The closed form's row (intercepts and slopes of the sums) for the segment holding
        batch ``B``; None where the closed form does not apply (then evaluate directly)."""
        if not self.envelope_ok:
            return None
        if self._env is None:
            self._env = self._envelope()
        edges, rows = self._env
        k = bisect.bisect_right(edges, B) - 1
        # on a breakpoint a tie could flip a compute/memory label: evaluate directly
        return rows[k] if k >= 0 and not (k > 0 and B == edges[k]) else None

    def totals_at(self, batch: float) -> Totals:
        """Totals at one batch: the closed form where it applies, else the direct sum."""
        B = float(batch)
        row = self._segment(B)
        if row is None:
            return self._direct(B)
        b_i, b_s, t_i, t_s, k_i, k_s, c_i, c_s, m_i, m_s = row[:10]
        time = t_i + t_s * B
        f0, f1, y0, y1, tc0, tc1 = self.a_sums
        if self.floor is not None:  # Σ compute seconds per segment (the floors' B*)
            tc0, tc1 = row[10], row[11]
        live = max([a + b * B for a, b in self.live_lines]) if self.live_lines else 0.0
        return Totals(time, b_i + b_s * B, tc0 + tc1 * B, m_i + m_s * B,
                      time - (k_i + k_s * B), f0 + f1 * B, y0 + y1 * B, c_i + c_s * B, live,
                      0.0)  # (no fill: tiled matmuls keep the closed form off)

    def latency_at(self, batch: float) -> float:
        """``totals_at(batch).latency`` alone (the closed form's time row: a bisection and two
        float operations, for callers that need only the sum of op times)."""
        B = float(batch)
        row = self._segment(B)
        return self._direct(B).latency if row is None else row[2] + row[3] * B

    def _direct(self, B: float) -> Totals:
        """Totals op by op at ``B``; with whole waves (a step in B) kept per batch."""
        memo = self._memo
        if memo is None:
            return self.evaluate(B).totals()
        hit = memo.get(B)
        if hit is None:
            hit = self.evaluate(B).totals() if self.split is None else self.split.totals(B)
            make_room(memo, 256)
            memo[B] = hit
        return hit

    def _segments(self, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The closed form's rows for many batches, and the indices of the batches to evaluate
        directly (below the first segment, or on a breakpoint — ``_segment`` for one)."""
        if self._env is None:
            self._env = self._envelope()
        assert self._env_arr is not None
        edges, table = self._env_arr
        k = np.searchsorted(edges, B, side="right") - 1
        redo = np.flatnonzero((k < 0) | ((k > 0) & (B == edges[np.maximum(k, 0)])))
        return table[np.maximum(k, 0)], redo

    def latency_many(self, batches: Any) -> np.ndarray:
        """``totals_many(batches)[0]`` alone: Σ op time at many batches."""
        B = np.asarray(batches, dtype=np.float64)
        if not self.envelope_ok:
            return self.ops(B).time.sum(-1)
        r, redo = self._segments(B)
        out = r[:, 2] + r[:, 3] * B
        if len(redo):
            out[redo] = self.ops(B[redo]).time.sum(-1)
        return out

    def totals_many(self, batches: Any) -> np.ndarray:
        """[10, b] totals (rows: ``TOTALS``) for many batches at once. Off the closed form,
        the ops whose own time is not a maximum of lines in B are summed directly, once per
        distinct op, and the others by their closed form (engine/split.py) where that applies."""
        B = np.asarray(batches, dtype=np.float64)
        if not self.envelope_ok:
            if self.many is None:
                from .split import many_split

                self.many = many_split(self) or False
            return self.many.totals_many(B) if self.many else self.ops(B).rows()
        r, redo = self._segments(B)
        time = r[:, 2] + r[:, 3] * B
        f0, f1, y0, y1, tc0, tc1 = self.a_sums
        # Σ compute seconds: per segment where GEMV floors add breakpoints
        tc = tc0 + tc1 * B if self.floor is None else r[:, 10] + r[:, 11] * B
        out = np.stack([time, r[:, 0] + r[:, 1] * B, tc, r[:, 8] + r[:, 9] * B,
                        time - (r[:, 4] + r[:, 5] * B), f0 + f1 * B, y0 + y1 * B,
                        r[:, 6] + r[:, 7] * B,
                        (self.live0[None, :] + self.live1[None, :] * B[:, None]).max(1)
                        if self.C0.shape[1] else 0.0 * B, 0.0 * B])
        if len(redo):
            out[:, redo] = self.ops(B[redo]).rows()
        return out


def time_model(graph: Graph, hw: Hardware, eff: Efficiency) -> TimeModel:
    """The cached TimeModel of (graph, hw, eff). The cache lives on the graph and keys on the
    hardware's content (``spec_key``) and the efficiency's value, never on identities."""
    cache = graph.meta.setdefault("_time_models", {})
    key = (spec_key(hw), eff)
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    tm = TimeModel(graph, hw, eff)
    make_room(cache, 64)
    cache[key] = tm
    return tm


def price(graph: Graph, hws: Sequence[Hardware], effs: Sequence[Efficiency],
          batches: Any, *, keep_ops: bool = False) -> dict[str, np.ndarray]:
    """``graph`` on every (hardware, batch): the time model of each hardware, stacked.
    Totals as [h, b] arrays (``TOTALS`` names, and ``latency``'s parts by binding resource);
    with ``keep_ops`` per-op arrays [h, b, n] too (``op_<OpTimes field>``, ``op_q`` the cost
    rows). Hardware lacking the compute dtype gives NaN."""
    B = np.asarray(batches, dtype=np.float64).ravel()
    per = [time_model(graph, hw, e).ops(B) for hw, e in zip(hws, effs)]
    out: dict[str, np.ndarray] = {}
    rows = np.stack([ot.rows() for ot in per])  # [h, 10, b]
    for i, name in enumerate(TOTALS):
        out[name] = rows[:, i]
    out["t_memory_bound_ops"] = (out["latency"] - out["t_overhead"] - out["t_compute_bound_ops"]
                                 - out["t_fill"])
    out["peak"] = np.array([[hw.peak_flops_per_s.get(graph.precision.compute, math.nan)]
                            for hw in hws]) * np.ones((1, len(B)))
    out["bandwidth"] = np.array([[hw.memory_bytes_per_s] for hw in hws]) * np.ones((1, len(B)))
    if keep_ops:
        for f in fields(OpTimes):
            out[f"op_{f.name}"] = np.stack([getattr(ot, f.name) for ot in per])
        out["op_q"] = graph.c0[:, None, :] + graph.c1[:, None, :] * B[None, :, None]
    return out
