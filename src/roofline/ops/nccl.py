"""NCCL's own tuner model: a latency and a bandwidth per (algorithm, protocol), the fastest wins.

NCCL prices every algorithm (ring, tree, NVLS, NVLSTree, CollNet) under every protocol (LL,
LL128, Simple) as ``latency + bytes / algorithm bandwidth`` and runs the smallest (NVIDIA NCCL
``src/graph/tuning.cc``: ``ncclTopoTuneModel`` builds the table, ``ncclTopoGetAlgoTime`` reads
it). This module evaluates the same formulas, with the tuner's constants as data
(``data/presets/nccl.toml``, NCCL v2.26.2-1, loaded by ``specs.nccl``) and *our* Simple-protocol
bandwidths (the link times training's fitted efficiency; NVLS at the cluster's measured rate):

- **latency**, per call (s; ``b`` = baseLat, ``h`` = the per-step hwLat on NVLink or PCIe,
  ``net`` the one across nodes, for ``p`` ranks on ``o`` nodes of ``i = p/o`` ranks):
  ring ``b + (s − s_x)·max(h, ovh) + s_x·net`` with ``s`` = 2(p−1) steps for an all-reduce
  (p−1 for reduce-scatter / all-gather), ``s_x`` = 2(o−1) (o−1) of them across nodes and
  ``ovh`` the host's per-step network overhead on multi-node rings (×3 with Simple); tree
  ``b + 2((i−1)·h + ⌊log₂o⌋·net)``; NVLS ``h``; NVLSTree ``h + 2⌊log₂o⌋·net``; CollNet
  (SHARP in the network switches) Direct ``2(min(1, i−1)·h + 0.4 µs·(i−1)) + net``, Chain
  ``2(i−1)·h + net``. With one rank per node the tree's network latency stands in for the
  algorithm's own (the tuner's "ppn = 1" rule);
- **bandwidth**, the *bus* bandwidth of the Simple protocol scaled per protocol as the tuner
  scales it: ring LL ×0.5 capped at ``ll_max``, LL128 ×0.92; tree ×0.92, then LL ×1/3.8
  (capped), LL128 ×7/9 on one node, ×120/128 across; the tree's bandwidth also × the tuner's
  per-size correction (64 B … 256 MiB). A ring's algorithm bandwidth is busbw·p/s, a tree's
  busbw/2 — the time n/algbw is then 2(p−1)/p·n/busbw for the ring, as ``collectives``;
- LL128 needs NVLink (the tuner enables it up to NVB paths), NVLS / NVLSTree / CollNet run
  Simple only; NVLS inside one node, NVLSTree across nodes.

The tuner picks; the run then pays what the tuner does not price. Modelled: the NVLS /
NVLSTree all-reduce **pipeline's fill** (``nvls_fill_bytes``): NCCL runs ``nvls_channels``
channels (16 on Hopper, 32 on Blackwell), each moving its n / channels bytes in loops of
``heads`` chunks (heads = the node's GPUs, at most 32) through the kernel's stages, the chunk
cut with the message size as ``calcCollChunking`` (v2.26.2 ``src/enqueue.cc``) cuts it; the
first loop is ``nvls_fill_loops`` loop-times late, so the time is latency + (n + d·min(U·c,
n)) / algbw, U = channels × heads — a ramp from the mid sizes to the peak, with the tuner's
choice unchanged (``nccl_choice``, ``nccl_best``: the pick by the tuner's own time, the
seconds the pick's with its fill).

Also the tuner's own, with the channel counts of NCCL's topology search replayed per cluster
(``ops.nccl_search``; ``NcclTuner.search_one`` / ``search_nodes`` / ``comm_*``): the ring's
multi-node "plateau" (``ring_plateau_factor``: a Simple ring all-reduce across nodes
pays ``ring_plateau`` × its latency once n / (channels · p) ≥ 64, the communicator's channels;
MAXCHANNELS where the search is not replayed), the per-channel caps (``channel_caps``: ring
LL128, tree, tree LL128 at most the search's channels × ``perChMax*Bws``) and the tree-pattern
factor across nodes (``tree_pattern``, 0.85 from Hopper on NVLink nodes). ``nccl_channels``:
the channels a ring or tree call runs at its size (topoGetAlgoInfo), reported
(docs/validation/collectives.md), not priced. The tree's own bandwidth on exactly two nodes
(``nccl_best(tree_bw=...)``) comes from ``ops.collectives``.

Not modelled: the search's own bandwidth (channels × speed; ours is the link times training's
efficiency, compared on the validation page), the ring and tree's own pipeline fill (none:
every ring link is busy from the first step, the tree's LL / LL128 forward line by line), PAT
(one GPU per node only). All functions
are vectorised over ``n`` / ``p`` (``xp=numpy``) or scalar (``xp=ops.xp.SCALAR``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SpecError

__all__ = ["NcclTuner", "NCCL_ALGORITHMS", "NCCL_PROTOCOLS", "nccl_latency", "nccl_time",
           "nccl_best", "nccl_choice", "nccl_channels", "channel_caps", "ring_plateau_factor"]

#: the tuner's algorithms (NCCL_ALGO names, lower case) and protocols (NCCL_PROTO)
NCCL_ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree")
NCCL_PROTOCOLS = ("LL", "LL128", "Simple")
_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
Arr = Any
Triple = tuple[float, float, float]
#: one candidate of ``_plan``
Plan = tuple[int, float, float, float, float, int, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclTuner:
    """NCCL's tuner constants for one cluster (its GPU architecture, intra-node link and host
    CPU already chosen), SI units: latencies in s, bandwidths in bytes/s."""

    version: str  #: the NCCL release the constants are copied from
    #: baseLat per algorithm (in ``NCCL_ALGORITHMS`` order), [LL, LL128, Simple]
    base: tuple[Triple, ...]
    intra: tuple[Triple, ...]  #: hwLat per step inside a node (NVLink or PCIe row), same order
    net: tuple[Triple, ...]  #: hwLat per step across nodes, same order
    nvlink: bool  #: intra-node link is NVLink (LL128 enabled)
    ring_ll: float
    ring_ll128: float
    tree: float
    tree_ll: float
    tree_ll128_one_node: float
    tree_ll128_nodes: float
    net_overhead_s: float  #: per intra-node ring step on multi-node rings (×3 with Simple)
    ll_max_one_node: float  #: LL bus-bandwidth cap on one node (this architecture), bytes/s
    ll_max_two_nodes: float  #: … on 2 nodes (this host CPU)
    ll_max_more_nodes: float  #: … on more than 2
    tree_correction: tuple[tuple[float, ...], ...]  #: per protocol, 64 B · 2^k, k = 0 …
    nvls_channels: int  #: NVLS channels (CTAs) this architecture runs (NVLS_NCHANNELS_SM90/100)
    nvls_chunk_bytes: float  #: NVLS / NVLSTree chunk before the per-size cuts (nvlsChunkSize)
    nvls_tree_chunk_4_nodes: float  #: NVLSTree's chunk cap from 4 nodes on
    nvls_max_heads: int  #: NVLS heads at most (NCCL_MAX_NVLS_ARITY)
    #: the NVLS / NVLSTree pipeline's fill, in loops of ``nvls_channels × heads × chunk`` bytes
    #: (fitted: docs/validation/collectives.md); 0: none
    nvls_fill_loops: float = 0.0
    #: the ring's "plateau": a multi-node ring all-reduce under Simple has its latency × this
    #: once n / (channels · p) ≥ 64 (ncclTopoGetAlgoTime; 1.4 from Ampere, 1.9 on Volta); 1: off
    ring_plateau: float = 1.0
    #: the channel count in that test: the communicator's across nodes from the replayed
    #: search (``comm_nodes``, ``specs.nccl.tuner_for``); NCCL's MAXCHANNELS, 64, the bound,
    #: where the search is not replayed
    ring_plateau_channels: int = 64
    #: the replayed topology search (``ops.nccl_search``): the ring / tree's channels and
    #: bytes/s per channel on one node and across nodes; (0, 0.0): not replayed
    search_one: tuple[int, float] = (0, 0.0)
    search_nodes: tuple[int, float] = (0, 0.0)
    #: the communicator's ring / tree channels (twice the search's: ncclTopoPostset), one
    #: node and across nodes; 0: unknown (``nccl_channels`` then needs them given)
    comm_one: int = 0
    comm_nodes: int = 0
    #: the tuner's per-channel caps (bytes/s per search channel, [1 node, 2, more]): ring
    #: LL128, tree, tree LL128 (perChMax*Bws); (): none
    per_channel: tuple[Triple, ...] = ()
    #: × the tree's bus bandwidth across nodes (maxTreePattern TREE: 0.85 from Hopper on NVLink
    #: nodes, data/presets/nccl.toml ``tree_pattern``); 1: off
    tree_pattern: float = 1.0
    #: threads per channel of the ring / tree run, per protocol [LL, LL128, Simple]
    run_threads: tuple[int, int, int] = (512, 640, 512)
    #: bytes per thread before NCCL adds a channel, per protocol (the ring LL's × p)
    run_threshold: Triple = (8.0, 8.0, 64.0)
    #: the scalar path's candidates per call shape (``_plan``), kept on the value itself
    plans: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, hash=False,
                                  repr=False)
    #: the vectorised path's results (``nccl_best``), keyed on the inputs' contents
    results: dict[Any, Any] = field(default_factory=dict, init=False, compare=False,
                                    hash=False, repr=False)
    #: the scalar path's answers per group call (``collectives.group_nccl``)
    scalars: dict[Any, Any] = field(default_factory=dict, init=False, compare=False,
                                    hash=False, repr=False)


def _check(collective: str, algorithm: str, protocol: str) -> tuple[int, bool]:
    if collective not in _COLLECTIVES:
        raise SpecError(f"collective={collective!r}; the NCCL tuner model prices "
                        f"{', '.join(_COLLECTIVES)}")
    if algorithm not in NCCL_ALGORITHMS:
        raise SpecError(f"algorithm={algorithm!r}; allowed: {', '.join(NCCL_ALGORITHMS)}")
    if protocol not in NCCL_PROTOCOLS:
        raise SpecError(f"protocol={protocol!r}; allowed: {', '.join(NCCL_PROTOCOLS)}")
    return NCCL_PROTOCOLS.index(protocol), collective == "all_reduce"


def _log2i(x: Arr, xp: Any) -> Arr:
    """⌊log₂ x⌋ for x ≥ 1 (NCCL's log2i)."""
    return -xp.ceil(-(xp.log2(x) + 1e-9))  # floor, from the two functions SCALAR has


def nccl_latency(collective: str, algorithm: str, protocol: str, p: Arr, nodes: Arr,
                 t: NcclTuner, xp: Any = np) -> Arr:
    """The tuner's latency (s) of one call over ``p`` ranks on ``nodes`` nodes (module
    docstring); the formulas of ``ncclTopoTuneModel``."""
    k, ar = _check(collective, algorithm, protocol)
    p = xp.asarray(p, dtype=float)
    o = xp.asarray(nodes, dtype=float)
    i = p / o
    a = NCCL_ALGORITHMS.index(algorithm)
    base, h = t.base[a][k], t.intra[a][k]
    net_alg = t.net[a][k]
    net = xp.where(i == 1, t.net[0][k], net_alg)  # the tree's: "with ppn = 1 latencies are exposed"
    lg = _log2i(o, xp)
    if algorithm == "ring":
        steps = 2 * (p - 1) if ar else p - 1
        cross = xp.where(o > 1, 2 * (o - 1) if ar else o - 1, 0.0)
        ovh = t.net_overhead_s * (3 if protocol == "Simple" else 1)
        h_eff = xp.where(o > 1, xp.maximum(h, ovh), h)
        return base + (steps - cross) * h_eff + cross * net
    if algorithm == "tree":
        return base + (2 * ((i - 1) * h + lg * net) if ar else 0.0)
    if algorithm == "nvls":
        return xp.where(o > 1, h + net, h)
    if algorithm == "nvls_tree":
        return base + h + 2 * lg * net
    if algorithm == "collnet_direct":
        return base + 2 * (xp.minimum(1.0, i - 1) * h + (i - 1) * 0.4e-6) + net
    return base + 2 * (i - 1) * h + net  # collnet_chain


def ring_plateau_factor(collective: str, algorithm: str, protocol: str, n: Arr, p: Arr,
                        o: Arr, t: NcclTuner, xp: Any) -> Arr:
    """The latency multiplier ncclTopoGetAlgoTime (v2.26.2 ``src/graph/tuning.cc``) gives a
    ring all-reduce under Simple across nodes once n / (channels · p) ≥ 64 bytes (the ring's
    "plateau"): ``t.ring_plateau`` there, 1 elsewhere."""
    if algorithm != "ring" or protocol != "Simple" or collective != "all_reduce" \
            or t.ring_plateau == 1.0:
        return xp.where(xp.asarray(n, dtype=float) >= 0, 1.0, 1.0)
    on = (o > 1) & (xp.asarray(n, dtype=float) >= 64.0 * t.ring_plateau_channels * p)
    return xp.where(on, t.ring_plateau, 1.0)


def nccl_channels(algorithm: str, protocol: str, n: float, p: int, channels: int,
                  t: NcclTuner) -> int:
    """The channels a ring or tree call of ``n`` bytes over ``p`` ranks runs on, of the
    communicator's ``channels`` (topoGetAlgoInfo, v2.26.2 ``src/enqueue.cc``): one fewer while
    n < channels × threads × threshold, at least 1 — the largest c ≤ ``channels`` with
    n ≥ c × threads × threshold (threshold × p for the ring LL). NVLS / NVLSTree run their
    ``nvls_channels`` whatever the size (returned as they are); CollNet: not modelled."""
    k, _ = _check("all_reduce", algorithm, protocol)
    if channels < 1:
        raise SpecError(f"channels={channels!r}; a communicator has 1 to 64 (MAXCHANNELS)")
    if algorithm in ("nvls", "nvls_tree"):
        return t.nvls_channels
    if algorithm not in ("ring", "tree"):
        raise SpecError(f"algorithm={algorithm!r}; nccl_channels prices ring, tree, nvls, "
                        "nvls_tree")
    thr = t.run_threshold[k] * (p if algorithm == "ring" and protocol == "LL" else 1)
    return max(1, min(channels, int(n // (t.run_threads[k] * thr))))


def channel_caps(o: Arr, t: NcclTuner, xp: Any = np) -> tuple[Arr, Arr, Arr]:
    """The tuner's per-channel caps on ``o`` nodes, bytes/s of bus bandwidth: the search's
    channels × perChMax (ring LL128, tree, tree LL128; ``ncclTopoTuneModel``), inf where the
    search is not replayed."""
    if not t.per_channel or not t.search_one[0]:
        inf = xp.where(xp.asarray(o, dtype=float) > 0, float("inf"), float("inf"))
        return inf, inf, inf
    o = xp.asarray(o, dtype=float)
    ch = xp.where(o > 1, float(t.search_nodes[0]), float(t.search_one[0]))
    return tuple(ch * xp.where(o > 2, c[2], xp.where(o > 1, c[1], c[0]))  # type: ignore
                 for c in t.per_channel)


def _tree_factor(n: Arr, k: int, t: NcclTuner, xp: Any) -> Arr:
    """treeCorrectionFactor[protocol][log2i(n >> 6)] (1 outside the table)."""
    tbl = np.asarray(t.tree_correction[k])
    q = xp.maximum(xp.asarray(n, dtype=float) / 64.0, 1.0)
    idx = _log2i(q, xp)
    small = xp.asarray(n, dtype=float) < 64
    if xp is np:
        j = np.clip(idx.astype(int), 0, len(tbl) - 1)
        return np.where(small | (idx >= len(tbl)), 1.0, tbl[j])
    return 1.0 if small or idx >= len(tbl) else float(tbl[int(idx)])


def nvls_chunk(algorithm: str, n: Arr, heads: Arr, nodes: Arr, t: NcclTuner,
               xp: Any = np) -> Arr:
    """The chunk (bytes) NCCL's ``calcCollChunking`` (v2.26.2 ``src/enqueue.cc``) gives an
    NVLS or NVLSTree all-reduce of ``n`` bytes: each of the ``nvls_channels`` channels carries
    n / channels in loops of ``heads`` chunks, and the chunk, ``nvls_chunk_bytes`` (128 KiB),
    is cut as the message shrinks against U = channels × heads: NVLS to 64 KiB below 64·U·c,
    32 KiB below 8·U·c, 16 KiB below 2·U·c; NVLSTree (capped at 64 KiB from 4 nodes) to
    256 / 128 / 64 / 32 KiB below 32 / 16 / 4 / 1 · U·c (each test with the chunk so far).
    Not modelled: NVLS across nodes (its 32 KiB cap under 150 GB/s; we run NVLS on one node)."""
    u = t.nvls_channels * xp.asarray(heads, dtype=float)
    n = xp.asarray(n, dtype=float)
    c: Arr = t.nvls_chunk_bytes
    if algorithm == "nvls":
        cuts: tuple[tuple[float, float], ...] = ((64, 65536.0), (8, 32768.0), (2, 16384.0))
    elif algorithm == "nvls_tree":
        c = xp.where(xp.asarray(nodes, dtype=float) >= 4,
                     min(c, t.nvls_tree_chunk_4_nodes), c)
        cuts = ((32, 262144.0), (16, 131072.0), (4, 65536.0), (1, 32768.0))
    else:
        raise SpecError(f"algorithm={algorithm!r}; nvls_chunk prices nvls, nvls_tree")
    for k, cut in cuts:
        c = xp.where((n < k * u * c) & (c > cut), cut, c)
    return c


def nvls_fill_bytes(algorithm: str, n: Arr, p: Arr, nodes: Arr, t: NcclTuner,
                    xp: Any = np) -> Arr:
    """The bytes the NVLS / NVLSTree pipeline's fill adds to an all-reduce of ``n`` bytes
    (0 for the other algorithms): every channel runs its loops of ``heads`` chunks through
    the same stages (scatter into the switch, reduce, NVLSTree's network hops, gather), so
    the first loop is ``nvls_fill_loops`` loop-times late, a loop being U·chunk bytes at the
    algorithm bandwidth, U = channels × heads, heads = min(p / nodes, ``nvls_max_heads``);
    a message under one loop fills with its own n: d · min(U·chunk, n)."""
    if algorithm not in ("nvls", "nvls_tree") or not t.nvls_fill_loops:
        return xp.where(xp.asarray(n, dtype=float) >= 0, 0.0, 0.0)
    heads = xp.minimum(xp.asarray(p, dtype=float) / xp.asarray(nodes, dtype=float),
                       float(t.nvls_max_heads))
    c = nvls_chunk(algorithm, n, heads, nodes, t, xp)
    return t.nvls_fill_loops * xp.minimum(t.nvls_channels * heads * c,
                                          xp.asarray(n, dtype=float))


def nccl_time(collective: str, algorithm: str, protocol: str, n: Arr, p: Arr, nodes: Arr,
              bus_bw: Arr, t: NcclTuner, xp: Any = np, fill: bool = False) -> Arr:
    """Seconds for one (algorithm, protocol) as the tuner prices it: latency + n / algbw;
    ``fill``: plus the NVLS / NVLSTree all-reduce pipeline's fill (``nvls_fill_bytes`` /
    algbw), which the tuner does not count but the run pays (NVLS reduce-scatter / all-gather:
    not modelled, their kernels have other stages).
    ``bus_bw``: the Simple protocol's bus bandwidth for ring / tree (bytes/s, ours), or the
    *algorithm* bandwidth for NVLS / NVLSTree / CollNet (a measured or modelled rate the caller
    gives). Infinite where the tuner does not run the pair (LL128 off NVLink; NVLS / CollNet
    with LL or LL128; a tree for reduce-scatter / all-gather)."""
    k, ar = _check(collective, algorithm, protocol)
    n = xp.asarray(n, dtype=float)
    p = xp.asarray(p, dtype=float)
    o = xp.asarray(nodes, dtype=float)
    simple_only = algorithm not in ("ring", "tree")
    if (simple_only and protocol != "Simple") or (protocol == "LL128" and not t.nvlink) \
            or (algorithm == "tree" and not ar):
        return xp.where(n >= 0, float("inf"), 0.0)
    lat = nccl_latency(collective, algorithm, protocol, p, o, t, xp) \
        * ring_plateau_factor(collective, algorithm, protocol, n, p, o, t, xp)
    ll_max = xp.where(o > 2, t.ll_max_more_nodes,
                      xp.where(o > 1, t.ll_max_two_nodes, t.ll_max_one_node))
    bw = xp.asarray(bus_bw, dtype=float)
    cap_r128, cap_tree, cap_t128 = channel_caps(o, t, xp)
    if algorithm == "ring":
        if protocol == "LL":
            bw = xp.minimum(ll_max, bw * t.ring_ll)
        elif protocol == "LL128":
            bw = xp.minimum(bw * t.ring_ll128, cap_r128)
        steps = 2 * (p - 1) if ar else p - 1
        algbw = bw * p / steps
    elif algorithm == "tree":
        bw = xp.minimum(bw * t.tree, cap_tree)
        if protocol == "LL":
            bw = xp.minimum(bw * t.tree_ll, ll_max)
        elif protocol == "LL128":
            bw = xp.minimum(bw * xp.where(o > 1, t.tree_ll128_nodes, t.tree_ll128_one_node),
                            cap_t128)
        bw = bw * xp.where(o > 1, t.tree_pattern, 1.0)
        algbw = 0.5 * bw * _tree_factor(n, k, t, xp)
    else:
        algbw = bw
        if fill and ar and algorithm in ("nvls", "nvls_tree"):
            n = n + nvls_fill_bytes(algorithm, n, p, o, t, xp)
    return lat + n / algbw


def _candidates(collective: str, nvls: bool, nvls_tree: bool) -> list[tuple[str, str]]:
    algos = ["ring"] + (["tree"] if collective == "all_reduce" else [])
    out = [(a, pr) for a in algos for pr in NCCL_PROTOCOLS]
    if nvls:
        out.append(("nvls", "Simple"))
    if nvls_tree and collective == "all_reduce":
        out.append(("nvls_tree", "Simple"))
    return out


def _any(x: Arr) -> bool:
    return bool(np.any(np.asarray(x) > 0))


def nccl_choice(collective: str, n: float, p: int, nodes: int, ring_bw: float, t: NcclTuner,
                nvls_bw: float = 0.0, nvls_tree_bw: float = 0.0,
                tree_bw: float = 0.0) -> tuple[str, str, float]:
    """(algorithm, protocol, seconds) NCCL's tuner picks for one call (scalar): ring and tree
    under the three protocols, and with in-switch reduction (``nvls_bw`` > 0) NVLS on one node
    or NVLSTree across nodes (``nvls_tree_bw``: its algorithm bandwidth); ``tree_bw``: the tree's
    Simple bus bandwidth where it differs from the ring's (0: the ring's). The pick is the
    tuner's (its own time, without the pipeline's fill); the seconds are what the pick takes,
    the NVLS / NVLSTree fill included (``nccl_time(fill=True)``)."""
    from .xp import SCALAR

    best = ("ring", "Simple", float("inf"))
    bw_best = 0.0
    for a, pr in _candidates(collective, nvls_bw > 0, nvls_tree_bw > 0):
        if (a == "nvls" and nodes > 1) or (a == "nvls_tree" and nodes == 1):
            continue
        bw = ring_bw if a == "ring" or (a == "tree" and tree_bw <= 0) else tree_bw \
            if a == "tree" else (nvls_bw if a == "nvls" else nvls_tree_bw)
        if bw <= 0:
            continue
        s = float(nccl_time(collective, a, pr, n, p, nodes, bw, t, SCALAR))
        if s < best[2]:
            best, bw_best = (a, pr, s), bw
    a, pr, s = best
    if a in ("nvls", "nvls_tree"):
        s = float(nccl_time(collective, a, pr, n, p, nodes, bw_best, t, SCALAR, fill=True))
    return a, pr, s


def nccl_best(collective: str, n: Arr, p: Arr, nodes: Arr, ring_bw: Arr, t: NcclTuner,
              xp: Any = np, nvls_bw: Arr = 0.0, nvls_tree_bw: Arr = 0.0,
              algorithms: tuple[str, ...] | None = None, tree_bw: Arr = 0.0) -> Arr:
    """Seconds of the (algorithm, protocol) the tuner would run — the one its own time makes
    the fastest — with the NVLS / NVLSTree pipeline's fill it pays (vectorised;
    ``algorithms`` restricts the choice, as NCCL_ALGO does; NVLS only where ``nodes`` == 1 and
    ``nvls_bw`` > 0, NVLSTree only across nodes with ``nvls_tree_bw`` > 0; ``tree_bw`` the tree's
    Simple bus bandwidth where > 0, else the ring's)."""
    if xp is not np:  # one configuration: the cached plan (rl.train's scalar path)
        return _scalar_best(collective, float(n), float(p), float(nodes), float(ring_bw), t,
                            float(nvls_bw), float(nvls_tree_bw), algorithms, float(tree_bw))
    key = (collective, algorithms) + tuple(_content(x) for x in (n, p, nodes, ring_bw, nvls_bw,
                                                                  nvls_tree_bw, tree_bw))
    hit = t.results.get(key)
    if hit is None:
        if len(t.results) > 256:
            t.results.clear()
        hit = t.results[key] = _vector_best(collective, n, p, nodes, ring_bw, t, nvls_bw,
                                            nvls_tree_bw, algorithms, tree_bw)
    return hit.copy()


def _content(x: Arr) -> tuple[Any, ...]:
    """A key for one input of ``nccl_best``: its shape and its values' bytes as float64."""
    a = np.asarray(x, dtype=float)
    return a.shape, a.tobytes()


def _vector_best(collective: str, n: Arr, p: Arr, nodes: Arr, ring_bw: Arr, t: NcclTuner,
                 nvls_bw: Arr, nvls_tree_bw: Arr,
                 algorithms: tuple[str, ...] | None, tree_bw: Arr = 0.0) -> Arr:
    """``nccl_best`` on numpy arrays, uncached."""
    xp = np
    o = xp.asarray(nodes, dtype=float)
    inf = float("inf")
    best: Arr = xp.where(o > 0, inf, inf)  # the tuner's time of its pick so far
    took: Arr = best  # what that pick takes (its fill included)
    for a, pr in _candidates(collective, _any(nvls_bw), _any(nvls_tree_bw)):
        if algorithms is not None and a not in algorithms:
            continue
        if a == "nvls":
            ok = (o == 1) & (xp.asarray(nvls_bw, dtype=float) > 0)
            bw = xp.where(ok, nvls_bw, 1.0)
        elif a == "nvls_tree":
            ok = (o > 1) & (xp.asarray(nvls_tree_bw, dtype=float) > 0)
            bw = xp.where(ok, nvls_tree_bw, 1.0)
        else:  # the ring, or the tree at its own bandwidth where given
            tb = xp.asarray(tree_bw, dtype=float)
            ok, bw = True, xp.where(tb > 0, tb, ring_bw) if a == "tree" else ring_bw
        s = xp.where(ok, nccl_time(collective, a, pr, n, p, o, bw, t, xp), inf)
        f = nvls_fill_bytes(a, n, p, xp.maximum(o, 1.0), t, xp) / bw \
            if collective == "all_reduce" and a in ("nvls", "nvls_tree") else 0.0
        win = s < best
        took = xp.where(win, s + f, took)
        best = xp.where(win, s, best)
    return took


def _plan(collective: str, p: float, o: float, t: NcclTuner, nvls: bool, nvls_tree: bool,
          algorithms: tuple[str, ...] | None) -> tuple[Plan, ...]:
    """The candidates of one call shape, each (bandwidth source 0 ring / 1 NVLS / 2 NVLSTree /
    3 tree,
    latency, protocol multiplier, cap, busbw → algbw ratio, tree-correction row or −1, the
    size from which the ring's plateau multiplies the latency or inf,
    ``ring_plateau_factor``): the same arithmetic as ``nccl_time``, with what does not depend
    on the size done once per tuner (``NcclTuner.plans``). The source also says whose
    pipeline fill the pick pays."""
    key = (collective, p, o, nvls, nvls_tree, algorithms)
    hit = t.plans.get(key)
    if hit is None:
        if len(t.plans) > 4096:
            t.plans.clear()
        hit = t.plans[key] = _make_plan(collective, p, o, t, nvls, nvls_tree, algorithms)
    return hit


def _make_plan(collective: str, p: float, o: float, t: NcclTuner, nvls: bool, nvls_tree: bool,
               algorithms: tuple[str, ...] | None) -> tuple[Plan, ...]:
    from .xp import SCALAR

    ar = collective == "all_reduce"
    out = []
    for a, pr in _candidates(collective, nvls and o == 1, nvls_tree and o > 1):
        if algorithms is not None and a not in algorithms:
            continue
        k = NCCL_PROTOCOLS.index(pr)
        if (pr == "LL128" and not t.nvlink):
            continue
        lat = float(nccl_latency(collective, a, pr, p, o, t, SCALAR))
        ll_max = t.ll_max_more_nodes if o > 2 else t.ll_max_two_nodes if o > 1 else \
            t.ll_max_one_node
        inf = float("inf")
        c_r128, c_tree, c_t128 = (float(c) for c in channel_caps(o, t, SCALAR))
        if a == "ring":
            mult, cap = {"LL": (t.ring_ll, ll_max), "LL128": (t.ring_ll128, c_r128)}.get(
                pr, (1.0, inf))
            pl = 64.0 * t.ring_plateau_channels * p if pr == "Simple" and ar and o > 1 \
                and t.ring_plateau != 1.0 else inf
            out.append((0, lat, mult, cap, p / (2 * (p - 1) if ar else p - 1), -1, pl))
        elif a == "tree":
            tll128 = t.tree_ll128_nodes if o > 1 else t.tree_ll128_one_node
            mult, cap = {"LL": (t.tree * t.tree_ll, min(ll_max, c_tree * t.tree_ll)),
                         "LL128": (t.tree * tll128, min(c_t128, c_tree * tll128))}.get(
                pr, (t.tree, c_tree))
            f = t.tree_pattern if o > 1 else 1.0
            mult, cap = mult * f, cap * f
            out.append((3, lat, mult, cap, 0.5, k, inf))
        else:
            out.append((1 if a == "nvls" else 2, lat, 1.0, inf, 1.0, -1, inf))
    return tuple(out)


def _scalar_best(collective: str, n: float, p: float, o: float, ring_bw: float, t: NcclTuner,
                 nvls_bw: float, nvls_tree_bw: float,
                 algorithms: tuple[str, ...] | None, tree_bw: float = 0.0) -> float:
    _check(collective, "ring", "LL")
    bws = (ring_bw, nvls_bw, nvls_tree_bw, tree_bw if tree_bw > 0 else ring_bw)
    best, src_best, bw_best = float("inf"), 0, 1.0
    for src, lat, mult, cap, ratio, tk, pl in _plan(collective, p, o, t, nvls_bw > 0,
                                                nvls_tree_bw > 0, algorithms):
        bw = bws[src]
        if bw <= 0:
            continue
        algbw = min(cap, bw * mult) * ratio
        if tk >= 0 and n >= 64:  # treeCorrectionFactor[protocol][log2i(n >> 6)]
            row = t.tree_correction[tk]
            j = int(math.log2(n / 64.0) + 1e-9)
            algbw *= row[j] if j < len(row) else 1.0
        s = (lat * t.ring_plateau if n >= pl else lat) + n / algbw
        if s < best:
            best, src_best, bw_best = s, src, algbw
    if src_best in (1, 2) and t.nvls_fill_loops and collective == "all_reduce":  # its fill
        key = ("fill", src_best, n, p, o)  # kept with the plans: rl.train asks the same again
        f = t.plans.get(key)
        if f is None:
            from .xp import SCALAR

            a = "nvls" if src_best == 1 else "nvls_tree"
            f = t.plans[key] = float(nvls_fill_bytes(a, n, p, o, t, SCALAR))
        best += f / bw_best
    return best
