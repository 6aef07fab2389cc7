"""Collectives of a parallel training step on a cluster, vectorised over configurations.

Same α-β formulas and NCCL conventions as ``ops/collectives.py`` (which is the scalar,
validated reference; tests check these against it), written with numpy so one call prices
thousands of (tp, pp, dp, ...) candidates.

Rank layout (Megatron-LM's default order): tensor-parallel ranks are adjacent, then
data-parallel (expert-parallel groups are slices of it), then pipeline stages outermost. A group
of ``p`` ranks spaced ``stride`` apart has ``inner`` members inside one scale-up domain
(NVLink/ICI) and ``outer = p / inner`` domains to cross on the scale-out network:
``inner = min(p, domain // stride)`` when the stride fits in a domain, else 1.

Algorithms: a group inside one domain runs a ring on the scale-up link; a group spread over
domains with one rank per domain runs a ring on the scale-out link (each rank drives its own
NIC); otherwise the hierarchical all-reduce (reduce-scatter inside, all-reduce of n/inner
across, all-gather inside). Reduce-scatter and all-gather are priced as half of the
corresponding all-reduce (a ring all-reduce is exactly reduce-scatter + all-gather).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Links", "group_split", "all_reduce", "reduce_scatter", "all_gather", "all_to_all",
           "send_recv", "SCALAR"]

Arr = Any


class _Scalar:
    """numpy's few array functions used here, for plain Python floats (one configuration is
    ~10× faster priced this way than as length-1 arrays)."""

    @staticmethod
    def where(c: Any, a: Any, b: Any) -> Any:
        return a if c else b

    maximum = staticmethod(max)
    minimum = staticmethod(min)

    @staticmethod
    def asarray(x: Any, dtype: Any = None) -> Any:
        return bool(x) if dtype is bool else float(x)

    @staticmethod
    def mod(a: Any, b: Any) -> Any:
        return a % b

    @staticmethod
    def ones_like(x: Any, dtype: Any = None) -> float:
        return 1.0

    @staticmethod
    def zeros_like(x: Any, dtype: Any = None) -> float:
        return 0.0


#: pass as ``xp`` to price one configuration with Python floats
SCALAR: Any = _Scalar()


@dataclass(frozen=True, slots=True, kw_only=True)
class Links:
    """Effective link numbers of a cluster (bandwidth already times the link efficiency)."""

    domain: int  #: devices per scale-up domain
    up_bw: float  #: scale-up bytes/s per device per direction × efficiency
    up_alpha: float  #: s per step
    out_bw: float  #: scale-out bytes/s per device per direction × efficiency
    out_alpha: float  #: s per step


def group_split(p: Arr, stride: Arr, domain: int, xp: Any = np) -> tuple[Arr, Arr]:
    """(inner, outer) ranks of a group of ``p`` ranks spaced ``stride`` apart."""
    p = xp.asarray(p, dtype=float)
    stride = xp.asarray(stride, dtype=float)
    fits = stride <= domain
    inner = xp.where(fits, xp.minimum(p, xp.maximum(domain // xp.maximum(stride, 1), 1)), 1.0)
    inner = xp.maximum(inner, 1.0)
    # inner must divide p; round down to a divisor (p and domain are powers of two in practice)
    inner = xp.where(xp.mod(p, inner) == 0, inner, 1.0)
    return inner, p / inner


def _ring_ar(n: Arr, p: Arr, bw: float, alpha: float, xp: Any = np) -> Arr:
    return xp.where(p > 1, 2 * (p - 1) * alpha + 2 * (p - 1) / xp.maximum(p, 1) * n / bw, 0.0)


def all_reduce(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Seconds to all-reduce ``n`` bytes over ``p`` ranks spaced ``stride`` apart."""
    n = xp.asarray(n, dtype=float)
    inner, outer = group_split(p, stride, links.domain, xp)
    # ring on one level, or hierarchical: RS inside + AR(n/inner) across + AG inside
    inside = _ring_ar(n, inner, links.up_bw, links.up_alpha, xp)
    across = _ring_ar(n / inner, outer, links.out_bw, links.out_alpha, xp)
    return xp.where((p > 1) & (n > 0), inside + across, 0.0)


def reduce_scatter(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Half of the all-reduce (n = the full input)."""
    return 0.5 * all_reduce(n, p, stride, links, xp)


def all_gather(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Half of the all-reduce (n = the full output)."""
    return 0.5 * all_reduce(n, p, stride, links, xp)


def all_to_all(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Each rank holds ``n`` bytes and keeps 1/p: (p−1)·α + (p−1)/p · n/bw, on the slowest
    level the group spans (an all-to-all crosses every pair, so the scale-out link binds as soon
    as the group leaves one domain)."""
    n = xp.asarray(n, dtype=float)
    p = xp.asarray(p, dtype=float)
    inner, outer = group_split(p, stride, links.domain, xp)
    bw = xp.where(outer > 1, links.out_bw, links.up_bw)
    alpha = xp.where(outer > 1, links.out_alpha, links.up_alpha)
    return xp.where((p > 1) & (n > 0), (p - 1) * alpha + (p - 1) / xp.maximum(p, 1) * n / bw,
                    0.0)


def send_recv(n: Arr, cross_domain: Arr, links: Links, xp: Any = np) -> Arr:
    """Point-to-point: α + n/bw on the scale-out link if ``cross_domain`` else scale-up."""
    n = xp.asarray(n, dtype=float)
    bw = xp.where(cross_domain, links.out_bw, links.up_bw)
    alpha = xp.where(cross_domain, links.out_alpha, links.up_alpha)
    return xp.where(n > 0, alpha + n / bw, 0.0)
