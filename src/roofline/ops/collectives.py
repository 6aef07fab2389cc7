"""Collective communication time with the α-β (latency-bandwidth) model.

Conventions (as NCCL's performance notes): ``n`` is the size of the user buffer in bytes;
``bw`` is the link bandwidth per direction per rank (bytes/s) — what a ring pushes through
each rank's link at once; ``alpha`` is the per-step latency (s). NCCL reports an
*algorithm bandwidth* ``algbw = n / t`` and a *bus bandwidth* ``busbw = algbw × factor``,
factor = 2(p−1)/p for all-reduce and (p−1)/p for all-gather / reduce-scatter / all-to-all,
so busbw is comparable to the link bandwidth. ``link_efficiency`` is the fraction of the
link bandwidth busbw reaches (a fitted factor, kept as data by the caller).

| collective     | ring time                                   |
|----------------|---------------------------------------------|
| all-reduce     | 2(p−1)·α + 2(p−1)/p · n/bw                  |
| reduce-scatter | (p−1)·α + (p−1)/p · n/bw    (n = full input) |
| all-gather     | (p−1)·α + (p−1)/p · n/bw    (n = full output)|
| all-to-all     | (p−1)·α + (p−1)/p · n/bw    (n = bytes each rank holds) |
| send/recv      | α + n/bw                                    |
| one-shot AR    | α + (p−1)·n/bw      (switched fabric, α per call) |
| two-shot AR    | 2α + 2(p−1)/p · n/bw (switched fabric)       |

A tree all-reduce (NCCL's double binary tree) takes 2⌈log₂p⌉·α + 2·n/bw·(p−1)/p: fewer
latency steps, the same bandwidth term; ``algorithm="auto"`` takes the faster. A
hierarchical all-reduce over ``p_inner`` ranks on a fast link and ``p_outer`` groups on a slow
one does reduce-scatter inside, all-reduce of n/p_inner across, all-gather inside.

References: Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication
Operations in MPICH"; NCCL tests PERFORMANCE.md (algbw vs busbw).
"""

from __future__ import annotations

import math

from ..errors import SpecError

__all__ = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv",
           "hierarchical_all_reduce", "one_shot_all_reduce", "two_shot_all_reduce",
           "bus_factor", "COLLECTIVES"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")


def _check(n: float, p: int, bw: float, alpha: float, eff: float) -> None:
    if not (n >= 0 and math.isfinite(n)):
        raise SpecError(f"collective size must be >= 0 bytes, got {n!r}")
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise SpecError(f"collective ranks must be a positive integer, got {p!r}")
    if not bw > 0:
        raise SpecError(f"link bandwidth must be > 0 bytes/s, got {bw!r}")
    if not alpha >= 0:
        raise SpecError(f"link latency must be >= 0 s, got {alpha!r}")
    if not 0 < eff <= 1:
        raise SpecError(f"link_efficiency must be in (0, 1], got {eff!r}")


def bus_factor(collective: str, p: int) -> float:
    """NCCL's busbw / algbw factor."""
    if p <= 1:
        return 0.0
    if collective == "all_reduce":
        return 2 * (p - 1) / p
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (p - 1) / p
    if collective == "send_recv":
        return 1.0
    raise SpecError(f"unknown collective {collective!r}; known: {', '.join(COLLECTIVES)}")


def all_reduce(n: float, p: int, bw: float, alpha: float = 0.0, *,
               link_efficiency: float = 1.0, algorithm: str = "ring") -> float:
    """Seconds to all-reduce ``n`` bytes over ``p`` ranks."""
    _check(n, p, bw, alpha, link_efficiency)
    if p == 1 or n == 0:
        return 0.0
    beta = n / (bw * link_efficiency) * 2 * (p - 1) / p
    ring = 2 * (p - 1) * alpha + beta
    tree = 2 * math.ceil(math.log2(p)) * alpha + beta
    if algorithm == "ring":
        return ring
    if algorithm == "tree":
        return tree
    if algorithm == "auto":
        return min(ring, tree)
    raise SpecError(f"algorithm={algorithm!r}; allowed: ring, tree, auto")


def one_shot_all_reduce(n: float, p: int, bw: float, alpha: float = 0.0, *,
                        link_efficiency: float = 1.0) -> float:
    """Seconds for a *one-shot* (latency-optimal) all-reduce of ``n`` bytes over ``p`` ranks on a
    switched or fully connected fabric (NVSwitch; TensorRT-LLM's ONESHOT, vLLM's 1-stage custom
    all-reduce): every rank reads the other p−1 ranks' whole buffers over its own link and
    reduces locally — one latency α per *call*, (p−1)·n bytes into each rank:
    t = α + (p−1)·n / (bw·efficiency)."""
    _check(n, p, bw, alpha, link_efficiency)
    if p == 1 or n == 0:
        return 0.0
    return alpha + (p - 1) * n / (bw * link_efficiency)


def two_shot_all_reduce(n: float, p: int, bw: float, alpha: float = 0.0, *,
                        link_efficiency: float = 1.0) -> float:
    """Seconds for a *two-shot* all-reduce (direct reduce-scatter, then all-gather, each in one
    step over a switched fabric; TensorRT-LLM's TWOSHOT): two latencies α per call and the
    bandwidth-optimal 2(p−1)/p·n bytes per rank (the same bytes as a ring):
    t = 2α + 2(p−1)/p · n / (bw·efficiency)."""
    _check(n, p, bw, alpha, link_efficiency)
    if p == 1 or n == 0:
        return 0.0
    return 2 * alpha + 2 * (p - 1) / p * n / (bw * link_efficiency)


def _one_pass(n: float, p: int, bw: float, alpha: float, eff: float) -> float:
    _check(n, p, bw, alpha, eff)
    if p == 1 or n == 0:
        return 0.0
    return (p - 1) * alpha + (p - 1) / p * n / (bw * eff)


def all_gather(n: float, p: int, bw: float, alpha: float = 0.0, *,
               link_efficiency: float = 1.0) -> float:
    """Seconds to all-gather into an ``n``-byte output on each of ``p`` ranks."""
    return _one_pass(n, p, bw, alpha, link_efficiency)


def reduce_scatter(n: float, p: int, bw: float, alpha: float = 0.0, *,
                   link_efficiency: float = 1.0) -> float:
    """Seconds to reduce-scatter an ``n``-byte input (each rank keeps n/p)."""
    return _one_pass(n, p, bw, alpha, link_efficiency)


def all_to_all(n: float, p: int, bw: float, alpha: float = 0.0, *,
               link_efficiency: float = 1.0) -> float:
    """Seconds for an all-to-all where each rank holds ``n`` bytes and keeps 1/p of them."""
    return _one_pass(n, p, bw, alpha, link_efficiency)


def send_recv(n: float, bw: float, alpha: float = 0.0, *, link_efficiency: float = 1.0) -> float:
    """Seconds to send ``n`` bytes point to point."""
    _check(n, 1, bw, alpha, link_efficiency)
    return alpha + n / (bw * link_efficiency) if n else 0.0


def hierarchical_all_reduce(n: float, p_inner: int, p_outer: int, bw_inner: float,
                            bw_outer: float, alpha_inner: float = 0.0, alpha_outer: float = 0.0,
                            *, eff_inner: float = 1.0, eff_outer: float = 1.0) -> float:
    """Two-level all-reduce: reduce-scatter on the fast link, all-reduce of n/p_inner across
    groups on the slow one (each of the p_inner ranks drives its own NIC), all-gather inside."""
    rs = reduce_scatter(n, p_inner, bw_inner, alpha_inner, link_efficiency=eff_inner)
    ar = all_reduce(n / p_inner, p_outer, bw_outer, alpha_outer, link_efficiency=eff_outer)
    ag = all_gather(n, p_inner, bw_inner, alpha_inner, link_efficiency=eff_inner)
    return rs + ar + ag
