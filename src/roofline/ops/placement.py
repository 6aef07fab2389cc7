"""Where a group of ranks spaced ``stride`` apart lands on scale-up domains.

Ranks are numbered contiguously over domains of ``domain`` devices (rank k sits in domain
k // domain). A group of ``p`` ranks spaced ``stride`` apart is r, r + stride, …,
r + (p − 1)·stride; it is counted as laid out from a domain boundary (the first block of
p·stride ranks, every offset r < stride: all those groups run their collective at once, so the
slowest binds). When the stride divides the domain and the domain's share (domain // stride)
divides p, every domain touched holds the same number of the group's ranks; otherwise the
shares are uneven (NVL72, EP 16 spaced 8 apart: 9 ranks in the first domain, 7 in the second;
DP 12 on 8-GPU nodes: 8 and 4), and ``group_placement`` returns the fewest and the most.

Not counted: a later block of the job that starts part-way into a domain (when p·stride and
the domain divide neither way) can straddle differently; it is priced as the first block.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

Arr = Any

__all__ = ["group_placement", "group_split"]


@functools.lru_cache(maxsize=4096)
def _counted(p: int, stride: int, domain: int) -> tuple[float, float, float]:
    """(fewest, most, domains) by counting every rank of the s groups of the first block."""
    lo, hi, dom = p, 1, 1
    for r in range(stride):
        ranks = r + stride * np.arange(p)
        _, counts = np.unique(ranks // domain, return_counts=True)
        lo, hi, dom = min(lo, int(counts.min())), max(hi, int(counts.max())), max(dom, counts.size)
    return float(lo), float(hi), float(dom)


def group_placement(p: Arr, stride: Arr, domain: int, xp: Any = np) -> tuple[Arr, Arr, Arr]:
    """(fewest ranks any domain holds, most, domains touched) for a group of ``p`` ranks
    spaced ``stride`` apart (module docstring). A stride of a domain or more: one rank per
    domain. A stride dividing the domain (k = domain // stride ranks a full domain holds):
    ⌈p / k⌉ domains, k ranks in each but the last, which holds p mod k when that is not 0.
    Any other stride below the domain: counted rank by rank."""
    if xp is not np:
        p, stride = float(p), float(stride)
        if stride >= domain:
            return 1.0, 1.0, p
        if domain % max(stride, 1.0) == 0:
            k = domain // max(stride, 1.0)
            most = min(p, k)
            rem = p % k
            return (rem if p > k and rem else most), most, float(-(-p // k))
        return _counted(int(p), int(stride), domain)
    p = np.asarray(p, dtype=float)
    stride = np.maximum(np.asarray(stride, dtype=float), 1.0)
    p, stride = np.broadcast_arrays(p, stride)
    k = np.maximum(domain // stride, 1.0)
    most = np.minimum(p, k)
    rem = np.mod(p, k)
    fewest = np.where((p > k) & (rem > 0), rem, most)
    dom = np.ceil(p / k)
    wide = stride >= domain
    fewest, most, dom = (np.where(wide, 1.0, fewest), np.where(wide, 1.0, most),
                         np.where(wide, p, dom))
    odd = ~wide & (np.mod(domain, stride) != 0)
    if odd.any():
        fewest, most, dom = fewest.copy(), most.copy(), dom.copy()
        for pi, si in set(zip(p[odd].tolist(), stride[odd].tolist(), strict=True)):
            at = odd & (p == pi) & (stride == si)
            fewest[at], most[at], dom[at] = _counted(int(pi), int(si), domain)
    return fewest, most, dom


def group_split(p: Arr, stride: Arr, domain: int, xp: Any = np) -> tuple[Arr, Arr]:
    """(inner, outer): the fewest ranks any domain holds (they bind the scale-out bandwidth:
    that domain's boundary carries the group's traffic over that many NICs) and the domains
    the group touches (``group_placement``)."""
    fewest, _, dom = group_placement(p, stride, domain, xp)
    return fewest, dom
