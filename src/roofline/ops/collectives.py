"""Collective communication time with the α-β (latency-bandwidth) model — the one collectives
module: serving's tensor/pipeline parallelism and training's data/tensor/pipeline/expert
parallelism all price their collectives here.

Conventions (as NCCL's performance notes): ``n`` is the size of the user buffer in bytes;
``bw`` is the link bandwidth per direction per rank (bytes/s) — what a ring pushes through
each rank's link at once; ``alpha`` is a latency (s). NCCL reports an *algorithm bandwidth*
``algbw = n / t`` and a *bus bandwidth* ``busbw = algbw × factor``, factor = 2(p−1)/p for
all-reduce and (p−1)/p for all-gather / reduce-scatter / all-to-all, so busbw is comparable to
the link bandwidth. ``link_efficiency`` is the fraction of the link bandwidth busbw reaches (a
fitted factor, kept as data by the caller).

**The α convention** (``latency=``), both named, both used:

- ``"step"`` (default): α is paid once per *ring step* — a ring all-reduce has 2(p−1) steps,
  so it pays 2(p−1)·α (Thakur, Rabenseifner & Gropp 2005, §4: ring = 2(p−1)·α + 2(p−1)/p·n·β).
  α is then a per-hop latency, as a cluster spec's link latency is (``Cluster.scale_up_latency_s``,
  ``scale_out_latency_s``). Training uses it.
- ``"call"``: α is paid once per *collective call*, whatever p: t = α + (the bandwidth term).
  α is then the whole fixed cost of a call as measured end to end (kernel launch, handshake,
  synchronisation), fitted per serving engine and group size
  (``data/presets/serving.toml`` ``allreduce_alpha`` + ``allreduce_alpha_per_rank``·(p − 2), from
  published all-reduce microbenchmarks). Serving uses it.

NCCL's own tuner carries both terms — a base latency per call plus a hardware latency per
ring step (NVIDIA NCCL, ``src/graph/tuning.cc``: ``baseLat`` and ``hwLat`` × steps); each of our
two conventions keeps the term that dominates where it is fitted (one fitted per-call number for
NVLink-sized serving groups; per-hop link latencies for training's large rings). Unifying them
would move published numbers, so both stay, explicitly.

| collective     | ring time, ``latency="step"``               | ``latency="call"``      |
|----------------|---------------------------------------------|-------------------------|
| all-reduce     | 2(p−1)·α + 2(p−1)/p · n/bw                  | α + 2(p−1)/p · n/bw     |
| reduce-scatter | (p−1)·α + (p−1)/p · n/bw    (n = full input) | α + (p−1)/p · n/bw      |
| all-gather     | (p−1)·α + (p−1)/p · n/bw    (n = full output)| α + (p−1)/p · n/bw      |
| all-to-all     | (p−1)·α + (p−1)/p · n/bw    (n = bytes each rank holds) | α + (p−1)/p · n/bw |
| send/recv      | α + n/bw                                    | α + n/bw                |
| one-shot AR    | α + (p−1)·n/bw      (switched fabric, one step) |                     |
| two-shot AR    | 2α + 2(p−1)/p · n/bw (switched fabric, two steps) |                   |
| NVLS AR        | 2α + n/bw_nvls      (in-switch reduction, two steps) |                  |
| NVLS RS / AG   | 2α + n/bw_nvls      (the busier direction carries n) |                  |

A tree all-reduce (NCCL's double binary tree) takes 2⌈log₂p⌉·α + 2·n/bw·(p−1)/p: fewer
latency steps, the same bandwidth term. An **NVLS** all-reduce (NVLink SHARP: the NVSwitch
reduces in the switch, NVSwitch gen 3 and later, H100/H200/B200 HGX) takes 2α + n/bw_nvls: each
rank pushes its n bytes into the switch and pulls the n reduced bytes back (two steps), so the
bytes per rank no longer grow with 2(p−1)/p; ``bw_nvls`` is the *algorithm* bandwidth NVLS
reaches per rank (a measured fraction of the link bandwidth, kept on the cluster spec:
``[scale_up] nvls``). ``algorithm="auto"`` takes the fastest algorithm the fabric has, as NCCL's
tuner picks one per call (NVIDIA NCCL ``src/graph/tuning.cc``: a time per algorithm, the
smallest wins). A
hierarchical all-reduce over ``p_inner`` ranks on a fast link and ``p_outer`` groups on a slow
one does reduce-scatter inside, all-reduce of n/p_inner across, all-gather inside.

**On a cluster** (``Links``, ``group_*``): the same formulas, vectorised over configurations
(``xp=numpy``, or ``xp=ops.xp.SCALAR`` for one), for a group of ``p`` ranks spaced ``stride``
apart in Megatron-LM's rank order (tensor-parallel ranks adjacent, then data-parallel —
expert-parallel groups are slices of it —, pipeline stages outermost). The group touches ``outer``
scale-up domains (NVLink/ICI) with ``inner`` of its ranks in each (``ops.placement``: counted
from a domain boundary; where the shares are uneven — NVL72, EP 16 spaced 8 apart: 9 and 7 —
the fewest bind the scale-out bandwidth, the most the all-to-all's scale-up share). A group
inside one domain runs a ring on the scale-up link; one rank per domain, a ring on the
scale-out link (each rank drives its own NIC); otherwise NCCL's ring over the whole
group, pipelined, at the slower of the scale-up link and the domain's inner NICs together (not
the three-phase ``hierarchical_all_reduce``, whose phases run one after the other). An
all-reduce also prices the tree and, with in-switch reduction, NVLS / NVLS-tree, and takes the
fastest (``group_all_reduce``).
Reduce-scatter and all-gather are half the corresponding *ring* all-reduce (a ring all-reduce is
exactly reduce-scatter + all-gather); only the all-reduce itself takes NVLS. NCCL (2.18+) has
NVLS reduce-scatter / all-gather too (``nvls_one_pass``; ``algorithm="nvls"|"auto"`` on
``reduce_scatter`` / ``all_gather``), but its busier direction carries the whole n bytes where
the ring's carries (p−1)/p·n, so it is the slower of the two for large messages (measured on
8× H100: NVIDIA/nccl #1047, #1083) and NCCL's tuner runs the ring (LL protocol) for small ones
(its NVLS latency, 23 µs on NVLink, exceeds the ring's: NVIDIA/nccl src/graph/tuning.cc
``hwLat``); the groups therefore keep the ring for both. An all-to-all sends each peer its
share on the link that reaches it, the slowest rank binding (``group_all_to_all``).

**NCCL's latencies** (``Links.nccl``, ``ops.nccl``): on a cluster NCCL runs on, the links carry
NCCL's tuner constants (``specs.nccl.tuner_for``; NVIDIA NCCL v2.26.2 ``src/graph/tuning.cc``)
and the all-reduce / reduce-scatter / all-gather groups price each algorithm under each protocol
(LL, LL128, Simple) with the tuner's own latency per call instead of the per-step α, the
fastest winning (``group_nccl``): the ring with LL for small messages, NVLS from ~2 MB on one
H100 node, as NCCL picks them.

References: Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1) (the α-β ring, per-step latency); NCCL tests PERFORMANCE.md
(algbw vs busbw); NVIDIA NCCL src/graph/tuning.cc (base latency per call + latency per step);
NVLS measured: docs/validation/collectives.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SpecError
from .nccl import NcclTuner, nccl_best, nccl_choice, nccl_latency
from .placement import group_placement, group_split

__all__ = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv",
           "hierarchical_all_reduce", "one_shot_all_reduce", "two_shot_all_reduce",
           "nvls_all_reduce", "nvls_one_pass", "ALGORITHMS", "ONE_PASS_ALGORITHMS",
           "group_ring_all_reduce",
           "bus_factor", "COLLECTIVES", "LATENCY_CONVENTIONS", "Links", "group_split",
           "group_placement",
           "group_all_reduce", "group_nvls_all_reduce", "group_reduce_scatter",
           "group_all_gather", "group_all_to_all",
           "group_send_recv", "group_dispatch", "group_nccl", "group_nccl_choice",
           "group_collnet_all_reduce"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
#: all-reduce algorithms (``auto``: the fastest the fabric has)
ALGORITHMS = ("ring", "tree", "nvls", "auto")
#: reduce-scatter / all-gather algorithms (NCCL has no tree for them)
ONE_PASS_ALGORITHMS = ("ring", "nvls", "auto")
#: where α is paid: once per ring step (Thakur et al. 2005) or once per collective call
LATENCY_CONVENTIONS = ("step", "call")
Arr = Any


# -- the two formulas every collective here is made of ------------------------------------------

# Plain arithmetic, so one function serves Python floats and numpy arrays alike; p >= 1 (a
# group of one rank gives exactly 0).

def _ring_all_reduce(n: Arr, p: Arr, bw: Arr, alpha: Arr) -> Arr:
    """2(p−1)·α + 2(p−1)/p · n/bw; ``bw`` already times the link efficiency."""
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n / bw


def _one_pass_time(n: Arr, p: Arr, bw: Arr, alpha: Arr) -> Arr:
    """(p−1)·α + (p−1)/p · n/bw: reduce-scatter, all-gather, all-to-all."""
    return (p - 1) * alpha + (p - 1) / p * n / bw


def _latency(latency: str) -> bool:
    """True for the per-call convention."""
    if latency == "step":
        return False
    if latency == "call":
        return True
    raise SpecError(f"latency={latency!r}; allowed: {', '.join(LATENCY_CONVENTIONS)} "
                    "(α per ring step, or once per collective call)")


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
               link_efficiency: float = 1.0, algorithm: str = "ring",
               latency: str = "step", nvls_bw: float = 0.0) -> float:
    """Seconds to all-reduce ``n`` bytes over ``p`` ranks (``latency``: where α is paid, see the
    module docstring). ``nvls_bw``: the NVLS algorithm bandwidth per rank (bytes/s, already
    measured, not times ``link_efficiency``), 0 where the fabric has no in-switch reduction;
    ``algorithm="nvls"`` needs it, ``"auto"`` uses it when given."""
    _check(n, p, bw, alpha, link_efficiency)
    if algorithm not in ALGORITHMS:
        raise SpecError(f"algorithm={algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
    if not (nvls_bw >= 0 and math.isfinite(nvls_bw)):
        raise SpecError(f"nvls_bw must be >= 0 bytes/s (0: no NVLink SHARP), got {nvls_bw!r}")
    if algorithm == "nvls" and not nvls_bw:
        raise SpecError("algorithm='nvls' needs nvls_bw > 0 (a fabric with in-switch "
                        "reduction: NVSwitch gen 3 or later)")
    per_call = _latency(latency)
    if p == 1 or n == 0:
        return 0.0
    bw_e = bw * link_efficiency
    nvls = nvls_all_reduce(n, p, nvls_bw, alpha) if nvls_bw else math.inf
    if algorithm == "nvls":
        return nvls
    if per_call:  # one α, and the ring's (= the tree's) bandwidth term
        t = alpha + _ring_all_reduce(n, p, bw_e, 0.0)
        return min(t, nvls) if algorithm == "auto" else t
    ring = _ring_all_reduce(n, p, bw_e, alpha)
    if algorithm == "ring":
        return ring
    tree = 2 * math.ceil(math.log2(p)) * alpha + _ring_all_reduce(n, p, bw_e, 0.0)
    if algorithm == "tree":
        return tree
    return min(ring, tree, nvls)


def nvls_all_reduce(n: float, p: int, nvls_bw: float, alpha: float = 0.0) -> float:
    """Seconds for an NVLS (NVLink SHARP, in-switch reduction) all-reduce of ``n`` bytes over
    ``p`` ranks of one NVSwitch domain: every rank writes its n bytes into the switch, which
    reduces them, and reads the n reduced bytes back by multicast — two steps, n bytes each way
    per rank whatever p: t = 2α + n / nvls_bw, ``nvls_bw`` the measured algorithm bandwidth
    (``busbw = algbw·2(p−1)/p`` as nccl-tests prints it)."""
    _check(n, p, nvls_bw if nvls_bw else 1.0, alpha, 1.0)
    if not nvls_bw > 0:
        raise SpecError(f"nvls_bw must be > 0 bytes/s, got {nvls_bw!r}")
    if p == 1 or n == 0:
        return 0.0
    return 2 * alpha + n / nvls_bw


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


def nvls_one_pass(n: float, p: int, nvls_bw: float, alpha: float = 0.0) -> float:
    """Seconds for an NVLS reduce-scatter (of an ``n``-byte input) or all-gather (into an
    ``n``-byte output) over ``p`` ranks of one NVSwitch domain. The bytes, as NCCL's developer
    counts them (NVIDIA/nccl issue #1083, S. Jeaugey, 2023-11-21): reduce-scatter sends n and
    receives n/p per rank, all-gather sends n/p and receives n (the switch multicasts), so the
    busier direction carries n bytes, as an NVLS all-reduce's does: t = 2α + n / nvls_bw with
    the all-reduce's measured ``nvls_bw``. The ring moves (p−1)/p·n each way, so at the same
    link rate NVLS is the slower of the two for large messages (measured: NVIDIA/nccl #1047,
    8× H100 reduce-scatter, ring faster than NVLS)."""
    return nvls_all_reduce(n, p, nvls_bw, alpha)


def _one_pass(n: float, p: int, bw: float, alpha: float, eff: float, latency: str,
              algorithm: str = "ring", nvls_bw: float = 0.0) -> float:
    _check(n, p, bw, alpha, eff)
    per_call = _latency(latency)
    if algorithm not in ONE_PASS_ALGORITHMS:
        raise SpecError(f"algorithm={algorithm!r}; allowed: {', '.join(ONE_PASS_ALGORITHMS)}")
    if not (nvls_bw >= 0 and math.isfinite(nvls_bw)):
        raise SpecError(f"nvls_bw must be >= 0 bytes/s (0: no NVLink SHARP), got {nvls_bw!r}")
    if algorithm == "nvls" and not nvls_bw:
        raise SpecError("algorithm='nvls' needs nvls_bw > 0 (a fabric with in-switch "
                        "reduction: NVSwitch gen 3 or later)")
    if p == 1 or n == 0:
        return 0.0
    nvls = nvls_one_pass(n, p, nvls_bw, alpha) if nvls_bw else math.inf
    if algorithm == "nvls":
        return nvls
    if per_call:
        ring = alpha + _one_pass_time(n, p, bw * eff, 0.0)
    else:
        ring = _one_pass_time(n, p, bw * eff, alpha)
    return min(ring, nvls) if algorithm == "auto" else ring


def all_gather(n: float, p: int, bw: float, alpha: float = 0.0, *,
               link_efficiency: float = 1.0, latency: str = "step", algorithm: str = "ring",
               nvls_bw: float = 0.0) -> float:
    """Seconds to all-gather into an ``n``-byte output on each of ``p`` ranks (``algorithm``:
    ``"ring"``, ``"nvls"`` (needs ``nvls_bw``, see ``nvls_one_pass``) or ``"auto"``, the
    faster)."""
    return _one_pass(n, p, bw, alpha, link_efficiency, latency, algorithm, nvls_bw)


def reduce_scatter(n: float, p: int, bw: float, alpha: float = 0.0, *,
                   link_efficiency: float = 1.0, latency: str = "step", algorithm: str = "ring",
                   nvls_bw: float = 0.0) -> float:
    """Seconds to reduce-scatter an ``n``-byte input (each rank keeps n/p); ``algorithm`` as
    ``all_gather``."""
    return _one_pass(n, p, bw, alpha, link_efficiency, latency, algorithm, nvls_bw)


def all_to_all(n: float, p: int, bw: float, alpha: float = 0.0, *,
               link_efficiency: float = 1.0, latency: str = "step") -> float:
    """Seconds for an all-to-all where each rank holds ``n`` bytes and keeps 1/p of them."""
    return _one_pass(n, p, bw, alpha, link_efficiency, latency)


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


# -- on a cluster: groups of ranks over two link levels, vectorised ------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class Links:
    """Effective link numbers of a cluster (bandwidth already times the link efficiency)."""

    domain: int  #: devices per scale-up domain
    up_bw: float  #: scale-up bytes/s per device per direction × efficiency
    up_alpha: float  #: s per ring step (``latency="step"``)
    out_bw: float  #: scale-out bytes/s per device per direction × efficiency
    out_alpha: float  #: s per ring step
    #: NVLS all-reduce algorithm bandwidth per device inside a scale-up domain (bytes/s; 0:
    #: the fabric has no in-switch reduction)
    nvls_bw: float = 0.0
    #: NCCL's tuner constants (``ops.nccl``): with them the all-reduce, reduce-scatter and
    #: all-gather groups pay NCCL's latencies per algorithm and protocol (LL / LL128 / Simple)
    #: instead of ``up_alpha`` / ``out_alpha`` per step; None: the per-step α model
    nccl: NcclTuner | None = None


def _ring_bw(inner: Arr, outer: Arr, links: Links, xp: Any) -> Arr:
    """The bandwidth a ring over the group reaches per rank: the scale-up link inside one
    domain; across domains the slower of the scale-up link and the domain's ``inner`` NICs
    together (NCCL's rings cross each domain boundary once per channel, the channels spread
    over the NICs, so a domain's boundary carries the whole ring stream once over its inner
    NICs: 2(p−1)/p·n / (inner·bw_out))."""
    return xp.where(outer > 1, xp.minimum(links.up_bw, inner * links.out_bw), links.up_bw)


def group_ring_all_reduce(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Seconds to ring-all-reduce ``n`` bytes over ``p`` ranks spaced ``stride`` apart, as
    NCCL's ring runs it (pipelined, not reduce-scatter / all-reduce / all-gather one after the
    other): 2(p−1) steps, 2(o−1) of them across domains (α_out) and the rest inside (α_up), and
    2(p−1)/p · n at ``_ring_bw`` (NCCL src/graph/tuning.cc prices the ring's steps so:
    ``(nsteps − nInterSteps)·intraLat + nInterSteps·interLat``). A group with one rank per
    domain is a ring on the NICs; one inside a domain, a ring on the scale-up link."""
    if links.nccl is not None:
        return group_nccl("all_reduce", n, p, stride, links, xp, ("ring",))
    n = xp.asarray(n, dtype=float)
    p = xp.asarray(p, dtype=float)
    inner, outer = group_split(p, stride, links.domain, xp)
    lat = 2 * (p - outer) * links.up_alpha + 2 * (outer - 1) * links.out_alpha
    t = lat + 2 * (p - 1) / p * n / _ring_bw(inner, outer, links, xp)
    return xp.where((p > 1) & (n > 0), t, 0.0)


def group_all_reduce(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Seconds to all-reduce ``n`` bytes over ``p`` ranks spaced ``stride`` apart: the fastest
    of the algorithms NCCL's tuner prices (src/graph/tuning.cc: a time per algorithm, the
    smallest wins), each on the group's links:

    - the ring (``group_ring_all_reduce``);
    - across domains, the tree (a chain inside, a double binary tree across: 2((i−1)·α_up +
      ⌈log₂o⌉·α_out) latency, i the fullest domain's ranks; ``_tree_bw``: the ring's
      bandwidth, on exactly two domains min(bw_up, 2·i·bw_out), i the emptiest's, as with
      NCCL's tuner) — its latency grows with log o, the
      ring's with p;
    - on a fabric with in-switch reduction (``links.nvls_bw``) and ≥ 2 ranks per domain, NVLS
      inside one domain (2α_up + n/nvls_bw) and NVLS-tree across domains: NVLS inside, each of
      the i ranks carries its n/i across a tree of the o domains on its own NIC, pipelined:
      2α_up + 2⌈log₂o⌉·α_out + n / min(nvls_bw, i·bw_out / k), k = 1 on two domains (each
      shard crosses once each way), 2 beyond (the double binary tree sends it twice; the
      tuner halves NVLS-tree's inter-node bandwidth beyond 2 nodes).

    With ``links.nccl`` (NCCL's tuner constants) each algorithm pays the tuner's latency under
    each protocol and the fastest (algorithm, protocol) wins (``group_nccl``)."""
    if links.nccl is not None:
        return group_nccl("all_reduce", n, p, stride, links, xp)
    n = xp.asarray(n, dtype=float)
    p = xp.asarray(p, dtype=float)
    inner, most, outer = group_placement(p, stride, links.domain, xp)
    ring = group_ring_all_reduce(n, p, stride, links, xp)
    tree = 2 * ((most - 1) * links.up_alpha + xp.ceil(xp.log2(outer)) * links.out_alpha) \
        + 2 * (p - 1) / p * n / _tree_bw(inner, outer, links, xp)
    t = xp.where(outer > 1, xp.minimum(ring, tree), ring)
    if links.nvls_bw:
        t = xp.where(inner > 1, xp.minimum(t, _nvls_tree(n, inner, outer, links, xp)), t)
    return xp.where((p > 1) & (n > 0), t, 0.0)


def _tree_bw(inner: Arr, outer: Arr, links: Links, xp: Any) -> Arr:
    """The tree's Simple bus bandwidth (NCCL's tuner): the ring's, except on exactly two
    domains, where each node's double binary tree sends n once across and receives n once
    (two trees, each moving n/2 up and n/2 down through the one link between the two nodes)
    where the ring sends 2(p−1)/p·n: the tree's bus bandwidth there is min(bw_up, 2·i·bw_out).
    NCCL's search prices it so (``ncclTopoCompute`` pass 2 raises the tree's intra speed up to
    twice its inter speed; the tuner takes that intra speed on two nodes: v2.26.2
    ``src/graph/search.cc``, ``tuning.cc``), and nccl-tests on two nodes print a busbw above
    the NICs' (NVIDIA/nccl-tests #196, S. Jeaugey)."""
    return xp.where(outer == 2, xp.minimum(links.up_bw, 2 * inner * links.out_bw),
                    _ring_bw(inner, outer, links, xp))


def _nvls_tree_bw(inner: Arr, outer: Arr, links: Links, xp: Any) -> Arr:
    k = xp.where(outer > 2, 2.0, 1.0)
    return xp.where(outer > 1, xp.minimum(links.nvls_bw, inner * links.out_bw / k),
                    links.nvls_bw)


def _nvls_tree(n: Arr, inner: Arr, outer: Arr, links: Links, xp: Any) -> Arr:
    log_o = xp.ceil(xp.log2(outer))
    return 2 * links.up_alpha + 2 * log_o * links.out_alpha \
        + n / _nvls_tree_bw(inner, outer, links, xp)


def group_nccl(collective: str, n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np,
               algorithms: tuple[str, ...] | None = None) -> Arr:
    """A group's collective as NCCL's tuner prices it (``ops.nccl.nccl_best``): the ring's
    Simple bus bandwidth is ``_ring_bw``, the tree's ``_tree_bw``; NVLS (one domain, ≥ 2 ranks
    in it) runs at ``links.nvls_bw``, NVLSTree across domains at ``_nvls_tree_bw``; the
    tuner's latencies replace the per-step α. ``algorithms``: restrict the choice (NCCL_ALGO)."""
    if links.nccl is None:
        raise SpecError("group_nccl needs links.nccl (NCCL's tuner constants: "
                        "specs.nccl.tuner_for(cluster))")
    if xp is not np:  # one configuration (rl.train): plain floats, no array calls
        n, p = float(n), float(p)
        if p <= 1 or n <= 0:
            return 0.0
        # kept per call on the tuner: rl.train asks the same few calls on every warm call
        memo = links.nccl.scalars
        key = (collective, n, p, stride, links.domain, links.up_bw, links.out_bw,
               links.nvls_bw, algorithms)
        hit = memo.get(key)
        if hit is not None:
            return hit
        o, ring, nv, nvt, tree = _nccl_bws(p, stride, links)
        if len(memo) > 4096:
            memo.clear()
        hit = memo[key] = nccl_best(collective, n, p, o, ring, links.nccl, xp, nvls_bw=nv,
                                    nvls_tree_bw=nvt, algorithms=algorithms, tree_bw=tree)
        return hit
    n = xp.asarray(n, dtype=float)
    p = xp.asarray(p, dtype=float)
    inner, outer = group_split(p, stride, links.domain, xp)
    nv = links.nvls_bw
    nvls = xp.where(inner > 1, nv, 0.0) if nv else 0.0
    nvls_tree = xp.where(inner > 1, _nvls_tree_bw(inner, outer, links, xp), 0.0) if nv else 0.0
    t = nccl_best(collective, n, xp.maximum(p, 2.0), outer, _ring_bw(inner, outer, links, xp),
                  links.nccl, xp, nvls_bw=nvls, nvls_tree_bw=nvls_tree, algorithms=algorithms,
                  tree_bw=_tree_bw(inner, outer, links, xp))
    return xp.where((p > 1) & (n > 0), t, 0.0)


def _nccl_bws(p: float, stride: float,
              links: Links) -> tuple[float, float, float, float, float]:
    """One group's (domains, ring Simple bus bandwidth, NVLS and NVLSTree algorithm
    bandwidths or 0, the tree's Simple bus bandwidth) as ``group_nccl`` gives them to the
    tuner (scalar: the same ``_ring_bw`` / ``_nvls_tree_bw`` / ``_tree_bw``)."""
    from .xp import SCALAR

    i, o = group_split(p, stride, links.domain, SCALAR)
    nv = links.nvls_bw if i > 1 else 0.0
    nvt = _nvls_tree_bw(i, o, links, SCALAR) if nv else 0.0
    return o, _ring_bw(i, o, links, SCALAR), nv, nvt, _tree_bw(i, o, links, SCALAR)


def group_nccl_choice(collective: str, n: float, p: int, stride: int,
                      links: Links) -> tuple[str, str, float]:
    """(algorithm, protocol, seconds) NCCL's tuner runs for one group's call
    (``ops.nccl.nccl_choice`` on the bandwidths ``group_nccl`` uses; needs ``links.nccl``)."""
    if links.nccl is None:
        raise SpecError("group_nccl_choice needs links.nccl (NCCL's tuner constants)")
    o, ring, nv, nvt, tree = _nccl_bws(float(p), float(stride), links)
    return nccl_choice(collective, float(n), p, int(o), ring, links.nccl, nv, nvt, tree)


def group_collnet_all_reduce(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Seconds for a CollNet Direct all-reduce (SHARP: the InfiniBand switches reduce; NCCL's
    NCCL_COLLNET_ENABLE=1 with the SHARP plugin) across domains — **not validated**: no
    published nccl-tests run with CollNet and its numbers was found, and ``group_all_reduce``
    never picks it. The latency is NCCL's tuner's (``ops.nccl``: 2(min(1, i−1)·h + 0.4 µs·(i−1))
    + the network's 31 µs); the algorithm bandwidth follows NCCL's developer's rule of thumb
    (NVIDIA/nccl #320, S. Jeaugey, 2023-01-03: each node's data crosses its NICs once each way,
    so ~the node's NIC rate, until NVLink, which carries about twice the data inside the node,
    binds): min(i·bw_out, bw_up / 2). Infinite inside one domain (nothing to reduce in the
    network)."""
    if links.nccl is None:
        raise SpecError("group_collnet_all_reduce needs links.nccl (NCCL's tuner constants)")
    n = xp.asarray(n, dtype=float)
    p = xp.asarray(p, dtype=float)
    inner, outer = group_split(p, stride, links.domain, xp)
    lat = nccl_latency("all_reduce", "collnet_direct", "Simple", xp.maximum(p, 2.0),
                       xp.maximum(outer, 1.0), links.nccl, xp)
    bw = xp.minimum(inner * links.out_bw, links.up_bw / 2)
    t = xp.where(outer > 1, lat + n / bw, math.inf)
    return xp.where((p > 1) & (n > 0), t, 0.0)


def group_nvls_all_reduce(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Seconds for the NVLS (one domain) or NVLS-tree (across domains) all-reduce alone, the
    one ``group_all_reduce`` weighs (NCCL_ALGO=NVLS / NVLSTree); needs ``links.nvls_bw`` and
    ≥ 2 ranks per domain."""
    if not links.nvls_bw:
        raise SpecError("group_nvls_all_reduce needs links.nvls_bw > 0 (a fabric with "
                        "in-switch reduction)")
    if links.nccl is not None:  # infinite where a domain holds one rank (no NVLS there)
        return group_nccl("all_reduce", n, p, stride, links, xp, ("nvls", "nvls_tree"))
    n = xp.asarray(n, dtype=float)
    p = xp.asarray(p, dtype=float)
    inner, outer = group_split(p, stride, links.domain, xp)
    t = xp.where(inner > 1, _nvls_tree(n, inner, outer, links, xp), math.inf)
    return xp.where((p > 1) & (n > 0), t, 0.0)


def group_reduce_scatter(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Half of the group ring all-reduce (n = the full input): the ring also on an NVLS fabric,
    as NCCL runs it (module docstring; docs/validation/collectives.md). With ``links.nccl``:
    the tuner's ring under the three protocols, or NVLS where the tuner prices it faster."""
    if links.nccl is not None:
        return group_nccl("reduce_scatter", n, p, stride, links, xp)
    return 0.5 * group_ring_all_reduce(n, p, stride, links, xp)


def group_all_gather(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Half of the group ring all-reduce (n = the full output; the ring, as
    ``group_reduce_scatter``)."""
    if links.nccl is not None:
        return group_nccl("all_gather", n, p, stride, links, xp)
    return 0.5 * group_ring_all_reduce(n, p, stride, links, xp)


def group_all_to_all(n: Arr, p: Arr, stride: Arr, links: Links, xp: Any = np) -> Arr:
    """Each rank holds ``n`` bytes and sends n/p to each of the p ranks (itself included). Inside
    one domain: (p−1)·α + (p−1)/p · n/bw at the scale-up link. A group over o > 1 domains: a
    rank sends (j−1)/p · n to the j − 1 peers in its domain over the scale-up link and
    (p−j)/p · n to the others over the scale-out link, both at once; the slowest rank binds:
    the one in the fullest domain (j = most) for the scale-up share, the one in the emptiest
    (j = fewest) for the scale-out share (``ops.placement``; equal shares: j = p/o):
    max((most−1)·α_up + (most−1)/p · n/bw_up, (p−fewest)·α_out + (p−fewest)/p · n/bw_out).

    Not the NCCL tuner's prices (``links.nccl``), which the all-gather and reduce-scatter use:
    NCCL has no all-to-all collective; PyTorch and nccl-tests (``src/alltoall.cu``) issue one
    ncclSend and one ncclRecv per peer inside a group call, which NCCL runs as point-to-point
    transfers, outside the tuner's (collective × algorithm × protocol) table (``ops.nccl``
    prices all_reduce / reduce_scatter / all_gather only); its ring and tree latencies, and the
    ring's bandwidth (one crossing of each domain boundary per channel), describe a different
    schedule, so the per-peer α and the per-rank link stay."""
    n = xp.asarray(n, dtype=float)
    p = xp.asarray(p, dtype=float)
    fewest, most, outer = group_placement(p, stride, links.domain, xp)
    t_up = (most - 1) * links.up_alpha + (most - 1) / p * n / links.up_bw
    t_out = (p - fewest) * links.out_alpha + (p - fewest) / p * n / links.out_bw
    t = xp.where(outer > 1, xp.maximum(t_up, t_out), _one_pass_time(n, p, links.up_bw,
                                                                   links.up_alpha))
    return xp.where((p > 1) & (n > 0), t, 0.0)


def group_dispatch(rank_bytes: Arr, domain_bytes: Arr, p: Arr, stride: Arr, links: Links,
                   xp: Any = np) -> Arr:
    """An MoE token dispatch (or combine) over ``p`` ranks spaced ``stride`` apart, as DeepEP's
    normal kernels run it (deepseek-ai/DeepEP README: "forwarding data from NVLink domain to
    RDMA domain"): a token crosses the scale-out link once per remote domain holding one of its
    experts (``domain_bytes``: the rank's tokens × distinct domains per token × bytes per
    token) and is forwarded inside the domain to each rank holding one (``rank_bytes``: × distinct
    ranks per token); the two stages pipeline, the slower binds:
    max((o−1)·α_out + (o−1)/o · domain_bytes/bw_out, (i−1)·α_up + (p−1)/p · rank_bytes/bw_up)
    for o domains and i ranks in the fullest one (``ops.placement``). Inside one domain this is
    ``group_all_to_all`` of ``rank_bytes``."""
    rank_bytes = xp.asarray(rank_bytes, dtype=float)
    p = xp.asarray(p, dtype=float)
    _, inner, outer = group_placement(p, stride, links.domain, xp)
    t_up = (inner - 1) * links.up_alpha + (p - 1) / p * rank_bytes / links.up_bw
    t_out = xp.where(outer > 1, (outer - 1) * links.out_alpha
                     + (outer - 1) / outer * domain_bytes / links.out_bw, 0.0)
    return xp.where((p > 1) & (rank_bytes > 0), xp.maximum(t_up, t_out), 0.0)


def group_send_recv(n: Arr, cross_domain: Arr, links: Links, xp: Any = np) -> Arr:
    """Point-to-point: α + n/bw on the scale-out link if ``cross_domain`` else scale-up."""
    n = xp.asarray(n, dtype=float)
    bw = xp.where(cross_domain, links.out_bw, links.up_bw)
    alpha = xp.where(cross_domain, links.out_alpha, links.up_alpha)
    return xp.where(n > 0, alpha + n / bw, 0.0)

