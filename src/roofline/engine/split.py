"""Totals at many batches (a sweep) where the closed form does not cover every op.

A time model leaves its closed form (engine/core.py ``TimeModel.nonlinear``) as soon as one op's
time is not a maximum of lines in B: a matmul with fewer than one row, a constant FLOP part of a
matmul whose rows grow (a 1/B term), or whole waves of tiles (a matmul at its GEMV floor keeps
the closed form, with a breakpoint of its own, but counts as odd here too: priced op by op, it
is exact). Those terms belong to the op alone, so the total splits exactly into

    Σ over the other ops (the closed form of their own, lines.envelope)
    + Σ over the distinct odd ops (op by op, ``TimeModel.ops``) × how often each occurs

— a decoder on a tile part has a handful of distinct matmul shapes repeated over its layers,
where the op-by-op sum prices every op at every batch. Both halves are
views of the model's own per-op arrays (no op is re-priced), so each op's numbers are the
model's; the totals equal the op-by-op sum up to the order of the additions (tested).
Terms that couple ops (cold weights, evicted dispatch) or page faults keep the op-by-op sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ManySplit", "many_split", "odd_ops"]


def odd_ops(tm: Any) -> np.ndarray:
    """[n] bool: the ops of ``tm`` whose own time is not a maximum of lines in B (the op-local
    entries of ``TimeModel.nonlinear``)."""
    m1 = tm.graph.gemm[0]
    is_c = tm.graph.is_compute
    odd = is_c & ((m1 < 1) | (tm.inv_c1 > tm.inv_cap))
    odd = odd | ((tm.C0[0] != 0) & (tm.inv_c1 != 0))  # (no 0 × inf on an absurd spec)
    if tm.waves is not None:
        odd[tm.waves.idx] = True
    return np.asarray(odd)


class ManySplit:
    """The split of one time model: ``rest`` (a closed-form view of the other ops, or None),
    ``odd`` (a view of one op per distinct odd op) and ``counts`` (how often each occurs)."""

    __slots__ = ("rest", "odd", "counts")

    def __init__(self, rest: Any, odd: Any, counts: np.ndarray) -> None:
        self.rest, self.odd, self.counts = rest, odd, counts

    def totals_many(self, B: np.ndarray) -> np.ndarray:
        """[10, b] totals (``core.TOTALS`` rows) at batches ``B``."""
        o = self.odd.ops(B)
        c = self.counts
        cbt = np.where(o.compute_bound, o.t_kernel - o.fill, 0.0)
        out = np.stack([o.time @ c, o.t_bound @ c, o.t_compute @ c, o.t_memory @ c,
                        o.overhead @ c, o.flops @ c, o.bytes @ c, cbt @ c,
                        o.act_bytes.max(-1), o.fill @ c])
        if self.rest is not None:
            r = self.rest.totals_many(B)
            out[:8] += r[:8]
            out[8] = np.maximum(out[8], r[8])
            out[9] += r[9]
        return out


def many_split(tm: Any) -> ManySplit | None:
    """The ManySplit of ``tm``, or None where the op-by-op sum stays (terms that couple ops,
    page faults, ops without a kernel, non-finite rates, or no odd op)."""
    if tm.fault is not None or tm.cold is not None or tm.prev is not None or not tm.all_have \
            or not tm.finite:  # (non-finite rates: summed op by op, as TimeModel.nonlinear)
        return None
    odd = odd_ops(tm)
    if not odd.any():
        return None
    oi = np.flatnonzero(odd)
    # one op per distinct odd op: every per-op array the evaluation reads, and its wave shape
    shape_id = np.full(len(odd), -1.0)
    if tm.waves is not None:
        shape_id[tm.waves.idx] = tm.waves.inv
    disp = np.broadcast_to(np.asarray(tm.disp, dtype=np.float64), odd.shape)
    key = np.vstack([tm.C0[:, oi], tm.C1[:, oi], tm.moved[0][oi], tm.moved[1][oi],
                     tm.inv_c0[oi], tm.inv_c1[oi], tm.inv_cap[oi], tm.inv_bound[oi], disp[oi],
                     shape_id[oi]])
    _, first, counts = np.unique(key.T, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first)
    reps = oi[first[order]]
    rest_idx = np.flatnonzero(~odd)
    rest = _view(tm, rest_idx, closed=True) if len(rest_idx) else None
    return ManySplit(rest, _view(tm, reps, closed=False), counts[order].astype(np.float64))


def _view(tm: Any, sel: np.ndarray, closed: bool) -> Any:
    """A TimeModel of ops ``sel`` of ``tm`` alone, sharing its per-op numbers (sliced, never
    re-priced). ``closed``: the ops have the closed form (no odd op among them)."""
    from .core import TimeModel

    v = object.__new__(TimeModel)
    for a in TimeModel.__slots__:
        object.__setattr__(v, a, getattr(tm, a))
    v.C0, v.C1 = tm.C0[:, sel], tm.C1[:, sel]
    v.moved = (tm.moved[0][sel], tm.moved[1][sel])
    for a in ("inv_c0", "inv_c1", "inv_cap", "inv_bound", "has"):
        setattr(v, a, getattr(tm, a)[sel])
    if np.ndim(tm.disp):
        v.disp = tm.disp[sel]
    v._split, v.many, v._memo, v._env, v._env_arr = None, False, None, None, None
    fl = None if tm.floor is None else tm.floor[sel]
    v.floor = fl if fl is not None and fl.any() else None
    v.waves = None if closed else _waves_of(tm.waves, sel)
    v.nonlinear = () if closed else tm.nonlinear
    v.envelope_ok = closed
    v.set_sums()
    return v


def _waves_of(w: Any, sel: np.ndarray) -> Any:
    """WaveOps ``w`` restricted to the ops ``sel`` (positions renumbered), or None."""
    if w is None:
        return None
    at = {int(i): j for j, i in enumerate(w.idx.tolist())}
    pos = [p for p, i in enumerate(sel.tolist()) if i in at]
    if not pos:
        return None
    out = object.__new__(type(w))
    for a in type(w).__slots__:
        object.__setattr__(out, a, getattr(w, a))
    out.idx = np.array(pos, dtype=np.intp)
    keep = [at[int(sel[p])] for p in pos]
    out.inv = w.inv[keep]
    if hasattr(w, "mem_op"):  # WaveOps: each op's memory factor follows it
        out.mem_op = w.mem_op[keep]
    return out
