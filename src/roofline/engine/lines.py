"""Sums of maxima of lines: the one helper every consumer of the time model evaluates through.

Each op's time is the maximum of a few straight lines in one variable x (the batch B for a
solve, a sweep and the batch envelope; the context S for serving's sum over decode steps):
its compute line, its memory line and, per the launch rule, a dispatch floor. A total over
ops is then ``Σ_n max_k (a[k, n] + b[k, n]·x)``: convex per op, piecewise linear in sum.

- ``launch_lines``: the launch rule, written once: kernel lines -> time lines;
- ``launch``: the same rule at a point (a kernel time as a line of slope 0);
- ``sum_max_int``: ``Σ_{x=lo}^{hi} max_k (a_k + b_k·x)`` over integers, exactly;
- ``envelope``: the piecewise-linear closed form of ``Σ_n max_k`` over x >= x0 (breakpoints,
  and one intercept and slope per interval), for evaluation at any x by bisection.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

__all__ = ["launch_lines", "launch", "sum_max_int", "sum_max_lines", "max_at", "envelope",
           "crossings", "OpLines", "op_lines", "all_finite", "quiet", "quiet_sub"]

Line = tuple[Any, Any]  #: (intercept, slope), scalars or arrays over ops


def all_finite(*arrays: Any) -> bool:
    """Every value finite (``TimeModel.finite``: its rates; an absurd spec, a peak of 1e-320,
    makes one inf and the result says it is not finite)."""
    return all(bool(np.isfinite(a).all()) for a in arrays)


def quiet(finite: bool) -> Any:
    """A context for arithmetic on a time model's rates: nothing when they are ``finite``,
    else numpy's warnings off (0 × inf, inf − inf give the NaN the result reports)."""
    return contextlib.nullcontext() if finite else np.errstate(
        invalid="ignore", over="ignore", divide="ignore")


def quiet_sub(a: Any, b: Any) -> Any:
    """``a − b`` without numpy's warning for inf − inf (NaN): a non-finite model's path."""
    with np.errstate(invalid="ignore"):
        return a - b


def launch_lines(kernel: Sequence[Line], gap: Any, disp: Any, synchronous: bool) -> list[Line]:
    """The time lines of an op whose kernel time is ``max`` of ``kernel`` lines.

    Synchronous device (CPU): the host dispatch adds to the kernel, ``kernel + dispatch``.
    Asynchronous device (GPU, TPU, accelerator): the host enqueues ahead, so an op takes
    ``max(kernel + gap, dispatch)`` — a kernel shorter than the dispatch leaves the device idle.
    """
    if synchronous:
        return [(a + disp, b) for a, b in kernel]
    a0, b0 = kernel[0]
    return [(a + gap, b) for a, b in kernel] + [(disp + np.zeros_like(a0), np.zeros_like(b0))]


def launch(t_kernel: Any, gap: Any, disp: Any, synchronous: bool) -> Any:
    """``launch_lines`` at one point: the op time of kernel time ``t_kernel``."""
    lines = launch_lines(((t_kernel, 0.0),), gap, disp, synchronous)
    out = lines[0][0]
    for a, _ in lines[1:]:
        out = np.maximum(out, a)
    return out


def max_at(a: Any, b: Any, x: Any) -> Any:
    """``max_k (a[k] + b[k]·x)``: the lines at a point (``x`` broadcasts)."""
    out = a[0] + b[0] * x
    for j in range(1, len(a)):
        out = np.maximum(out, a[j] + b[j] * x, out=out if out.ndim else None)
    return out


def crossings(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """x where each pair of lines crosses, per op (NaN/inf where parallel)."""
    out = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(a.shape[0]):
            for j in range(i + 1, a.shape[0]):
                out.append((a[i] - a[j]) / (b[j] - b[i]))
    return out


def sum_max_int(a: Any, b: Any, lo: Any, hi: Any) -> Any:
    """``Σ_{x=lo}^{hi} max_k (a[k] + b[k]·x)`` over integers x, exactly; ``a``, ``b``: [k, ...]
    (the rest broadcasts against ``lo``, ``hi``). Empty ranges (hi < lo) give 0.

    Between consecutive crossings one line dominates, so each integer run between the floors of
    the crossings sums to ``max_k (n·a_k + b_k·Σx)``.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim == 1 and np.ndim(lo) == 0 and np.ndim(hi) == 0:
        return sum_max_lines(tuple(zip(a.tolist(), b.tolist())), float(lo), float(hi))
    lo_ = np.asarray(lo, dtype=np.float64) - 1.0  # segments are (e_j, e_j+1]
    hi_ = np.maximum(np.asarray(hi, dtype=np.float64), lo_)
    shape = np.broadcast_shapes(a.shape[1:], np.shape(lo_), np.shape(hi_))
    cuts = []
    for x in crossings(a, b):
        x = np.where(np.isfinite(x), np.floor(x), lo_)
        cuts.append(np.broadcast_to(np.clip(x, lo_, hi_), shape))
    edges = np.sort(np.stack([np.broadcast_to(lo_, shape)] + cuts +
                             [np.broadcast_to(hi_, shape)]), axis=0)
    total = np.zeros(shape)
    for j in range(edges.shape[0] - 1):
        s, e = edges[j], edges[j + 1]
        n = e - s
        ssum = (e * (e + 1) - s * (s + 1)) / 2.0  # Σ_{x=s+1}^{e} x
        seg = np.max(a * n + b * ssum, axis=0)
        total = total + np.where(n > 0, seg, 0.0)
    return total


def sum_max_lines(lines: tuple[tuple[float, float], ...], lo: float, hi: float) -> float:
    """``sum_max_int`` of one op's ``lines`` ((a, b), ...) on Python floats (a serving call
    sums 1-3 such ops: faster than arrays)."""
    if hi < lo:
        return 0.0
    e0 = lo - 1.0
    edges = [e0, float(hi)]
    for i in range(len(lines)):
        for j in range(i + 1, len(lines)):
            db = lines[j][1] - lines[i][1]
            if db:
                x = math.floor((lines[i][0] - lines[j][0]) / db)
                if e0 < x < hi:
                    edges.append(float(x))
    edges.sort()
    tot = 0.0
    for s, e in itertools.pairwise(edges):
        if e > s:
            n = e - s
            ss = (e * (e + 1) - s * (s + 1)) / 2.0
            tot += max(a * n + b * ss for a, b in lines)
    return tot


def envelope(cands: list[np.ndarray], x0: float,
             lines_at: Any) -> tuple[list[float], dict[str, np.ndarray]]:
    """Closed form of per-op sums of maxima of lines over x >= ``x0``.

    ``cands``: candidate breakpoints (a superset is fine: it only splits intervals further);
    ``lines_at(xs)`` -> ``{row: (((a, b), ...), pick)}``, each a and b broadcastable to
    [K, n]: the lines each op's row takes around sample points ``xs`` [K] (lines may switch at
    a breakpoint, e.g. where activations stop fitting an on-chip level); ``pick`` 0: sum only
    the ops whose first line is the largest (the time of compute-bound ops), None: every op.
    Returns the interval starts and, per row, [K, 2] (intercept, slope) of the row's sum over
    ops on each interval.
    """
    bp = np.concatenate([np.ravel(c) for c in cands]) if cands else np.array([])
    bp = np.unique(bp[np.isfinite(bp) & (bp > x0)])
    edges = np.concatenate([[x0], bp])
    samples = np.concatenate([(edges[:-1] + edges[1:]) / 2, [edges[-1] * 2 + 1]])
    out: dict[str, np.ndarray] = {}
    xs = samples[:, None]
    for name, (lines, pick) in lines_at(samples).items():
        ia, ib = lines[0]
        if len(lines) > 1:  # the line with the largest value at each sample, first on ties
            best = ia + ib * xs
            first: Any = None  # set by the first pass of the loop (len(lines) > 1)
            for aj, bj in lines[1:]:
                vj = aj + bj * xs
                take = vj > best
                ia, ib = np.where(take, aj, ia), np.where(take, bj, ib)
                best = np.where(take, vj, best)
                first = ~take if first is None else first & ~take
            if pick is not None:  # keep only ops whose chosen line is the first one
                ia, ib = np.where(first, ia, 0.0), np.where(first, ib, 0.0)
        shape = (len(samples), np.shape(ia)[-1])
        out[name] = np.stack([np.broadcast_to(ia, shape).sum(-1),
                              np.broadcast_to(ib, shape).sum(-1)], axis=-1)
    return edges.tolist(), out


@dataclass(frozen=True, slots=True)
class OpLines:
    """Each op's rows as lines in a second variable x (serving: the context S), from the time
    model's per-op arrays at x = 1 and x = 2 (costs are affine in x for a fixed batch).
    Each row is (a [k, ..., n], b [k, ..., n]): the op's value is ``max_k (a + b·x)``."""

    time: tuple[np.ndarray, np.ndarray]  #: launch_lines of the kernel lines
    kernel: tuple[np.ndarray, np.ndarray]  #: compute line, memory line (+ serial CPU terms)
    bound: tuple[np.ndarray, np.ndarray]  #: the bound's compute and memory roofs
    flops: tuple[np.ndarray, np.ndarray]
    bytes: tuple[np.ndarray, np.ndarray]
    depends: np.ndarray  #: [n] ops whose time changes with x

    ROWS: ClassVar[tuple[str, ...]] = ("time", "kernel", "bound", "flops", "bytes")


def op_lines(o1: Any, o2: Any, gap: float, synchronous: bool, has: np.ndarray,
             rows: Sequence[str] = OpLines.ROWS) -> OpLines:
    """``OpLines`` from the time model's ``OpTimes`` at x = 1 (``o1``) and x = 2 (``o2``).
    The kernel's terms beyond max(compute, memory) (page faults, repacking) and the dispatch are
    taken as they are at x = 1 and x = 2 too; ops without a kernel (``has`` False) are 0.
    ``rows``: the rows to build (the others are left empty)."""

    def line(v1: np.ndarray, v2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = v2 - v1
        return v1 - s, s

    c, m = line(o1.t_compute, o2.t_compute), line(o1.t_memory, o2.t_memory)
    e1 = o1.t_kernel - np.maximum(o1.t_compute, o1.t_memory)  # serial terms (0 off CPUs)
    e2 = o2.t_kernel - np.maximum(o2.t_compute, o2.t_memory)
    ea, eb = line(e1, e2)
    if ea.any() or eb.any():
        kern = ((c[0] + ea, c[1] + eb), (m[0] + ea, m[1] + eb))
    else:
        kern = (c, m)
    h = np.asarray(has, dtype=np.float64)
    shape = c[0].shape

    def stack(ls: Sequence[Line]) -> tuple[np.ndarray, np.ndarray]:
        return (np.stack([np.broadcast_to(a, shape) for a, _ in ls]) * h,
                np.stack([np.broadcast_to(b, shape) for _, b in ls]) * h)

    empty = (np.zeros((0,) + shape), np.zeros((0,) + shape))
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for r in rows:
        if r == "time":
            out[r] = stack(launch_lines(kern, gap, np.asarray(o1.dispatch), synchronous))
        elif r == "kernel":
            out[r] = stack(kern)
        elif r == "bound":
            out[r] = stack((line(o1.t_bound_compute, o2.t_bound_compute),
                            line(o1.t_bound_memory, o2.t_bound_memory)))
        elif r == "flops":
            out[r] = stack([line(o1.flops, o2.flops)])
        elif r == "bytes":
            out[r] = stack([line(o1.bytes, o2.bytes)])
        else:
            raise ValueError(f"unknown row {r!r}; allowed: {', '.join(OpLines.ROWS)}")
    by = o2.bytes - o1.bytes
    dep = (np.abs(c[1]) + np.abs(m[1]) + np.abs(by) + np.abs(eb)) > 0
    while dep.ndim > 1:
        dep = dep.any(0)
    return OpLines(**{r: out.get(r, empty) for r in OpLines.ROWS}, depends=dep)
