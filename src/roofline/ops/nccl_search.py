"""The channel count and per-channel bandwidth NCCL's topology search gives the ring and tree
(``search_ring``), and its NVLS graph (``search_nvls``: compared on the validation page, not
priced).

NCCL's tuner prices a ring or tree at ``nChannels × bw`` (the search's channels times the
bandwidth each was found at: ``ncclTopoTuneModel``, v2.26.2 ``src/graph/tuning.cc``), caps it
at ``nChannels × perChMax…Bw`` per protocol, and runs a call on at most the *communicator's*
channels, twice the search's (``ncclTopoPostset``, ``src/graph/connect.cc``). This module
replays the search (``ncclTopoCompute``, ``src/graph/search.cc``) for the two topology classes
the cluster files describe — GPUs joined by an NVSwitch (one node, no network), and the same
nodes with their NICs across nodes (one per GPU, fewer, or more: the cluster's ``nics``) —
with the search's arithmetic only (the routes it tries are not replayed: on a switch every GPU
reaches every other at the full link rate, each NIC carries its own channels, and a NIC on
another GPU's PCIe switch is reached through that GPU, NCCL's PXN path):

- at a speed ``s`` the channels that fit are ⌊B / s⌋, B the GPU's NVLink bandwidth as NCCL
  counts it (links × ``SMxx_NVLINK_BW``, ``src/graph/topo.h``) on one node, or, across nodes,
  NICs × ⌊min(PCIe, NIC) / s⌋ (each NIC path carries its channels; with more NICs than GPUs,
  at most GPUs × ⌊PCIe / s⌋, a GPU's NICs sharing its PCIe path), each GPU's NVLink carrying
  the channels that neither enter nor leave the node at it (at most ⌊B / (s (1 − 1/g))⌋, g
  GPUs per node);
- pass 1 starts at the first speed of the architecture's array not above the path bandwidth
  (``sm90SpeedArrayIntra`` …) and walks down while the next speed is more than 0.49 of the
  best found, keeping a result only if channels × speed beats the best; it stops once
  channels × speed reaches B (``totalBw``); at most ``maxChannels`` (32 for the ring,
  MAXCHANNELS / 2: ``src/init.cc``);
- ``ncclTopoDupChannels`` doubles the channels at half the speed unless the speed is under 25
  GB/s, or (compute capability above 8.0) under 50 GB/s with more than 4 channels;
- pass 2 raises the speed while the channels found still fit;
- the communicator runs twice the search's channels (at most 64), doubled again on Hopper and
  later across nodes while under 16 at a speed above 45 GB/s (``ncclTopoPostset``).

Checked against NCCL's own logs (docs/validation/collectives.md, tests/test_nccl_search.py):
24 channels on an 8-GPU A100 node, 16 on an H800 node, 16 on H100 nodes with eight 400 Gb/s
NICs across 2 and 3 nodes. Not replayed (``specs.nccl.tuner_for`` then gives no caps and
the plateau at MAXCHANNELS): PCIe-only nodes, NICs slower than the slowest speed tried, trees
whose pattern the search changes. An NVL72 rack is one NCCL node (MNNVL fuses the clique's
topology: ``ncclTopoGetSystem``, ``src/graph/topo.cc``), 72 GPUs with a NIC each; not checked
against a log. Nodes with fewer or more NICs than GPUs are replayed with their NIC count and
each NIC's own rate (``Cluster.nics``, ``Cluster.nic_bytes_per_s``); not checked against a
log.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import SpecError

__all__ = ["search_ring", "comm_channels", "search_nvls", "nvls_tuner_bw"]


def _fit(s: float, nvlink: float, nics: int, nic_path: float, gpus: int,
         pcie: float = math.inf) -> int:
    """Channels of speed ``s`` GB/s that fit: ⌊nvlink / s⌋ on one node; across nodes at most
    ``nics`` × ⌊nic_path / s⌋ (each NIC carries its channels), at most min(nics, gpus) ×
    ⌊pcie / s⌋ (NICs beyond one per GPU share their GPU's PCIe path), and a channel enters the
    node at one GPU and leaves at another, so each GPU's NVLink carries (1 − 1/gpus) of the
    channels: at most ⌊nvlink / (s (1 − 1/gpus))⌋."""
    if not nics:
        return math.floor(nvlink / s + 1e-9)
    pci = min(nics, gpus) * math.floor(pcie / s + 1e-9) if math.isfinite(pcie) else nics * \
        math.floor(nic_path / s + 1e-9)
    return min(math.floor(nvlink / (s * (1.0 - 1.0 / gpus)) + 1e-9),
               nics * math.floor(nic_path / s + 1e-9), pci)


def search_ring(speeds: Sequence[float], nvlink: float, cc: int, nics: int = 0,
                nic_path: float = 0.0, gpus: int = 8,
                max_channels: int = 32, pcie: float = math.inf) -> tuple[int, float]:
    """(channels, GB/s per channel) of NCCL's ring search (module docstring): ``speeds`` the
    architecture's speed array (intra-node without ``nics``, inter-node with), ``nvlink`` the
    GPU's NVLink bandwidth as NCCL counts it (GB/s), ``cc`` the compute capability (80, 90,
    100), ``nics`` NICs per node (0: one node), ``nic_path`` GB/s of a GPU's path to its NIC
    (min of PCIe and the NIC), ``gpus`` GPUs per node, ``pcie`` GB/s of a GPU's PCIe path
    (binds where a node has more NICs than GPUs: theirs share it; inf: not given)."""
    if nvlink <= 0 or not speeds or (nics and nic_path <= 0) or nics < 0 or gpus < 2:
        raise SpecError(f"search_ring: nvlink={nvlink!r}, nics={nics!r}, nic_path={nic_path!r}, "
                        f"gpus={gpus!r}; need nvlink > 0, gpus >= 2 and, with NICs, "
                        "nic_path > 0")
    top = nic_path if nics else nvlink  # system->maxBw: the GPU's widest path (to a NIC)
    i = next((k for k, s in enumerate(speeds) if s <= top), len(speeds) - 1)
    best_c, best_s = 0, 0.0
    while True:  # pass 1
        c = min(max_channels, _fit(speeds[i], nvlink, nics, nic_path, gpus, pcie))
        if c >= 1 and c * speeds[i] > best_c * best_s:
            best_c, best_s = c, speeds[i]
        if best_c * best_s >= nvlink:  # graph->nChannels * bwInter >= totalBw
            break
        if i + 1 < len(speeds) and (best_c == 0 or speeds[i + 1] / best_s > 0.49):
            i += 1
        else:
            break
    if best_c == 0:
        raise SpecError(f"search_ring: no channel fits (nvlink={nvlink}, nic_path={nic_path})")
    if best_s >= 25.0 and not (cc > 80 and best_s < 50.0 and best_c > 4):  # ncclTopoDupChannels
        dup = min(2 * best_c, max_channels)
        best_s /= -(-dup // best_c)
        best_c = dup
    j = next((k for k, s in enumerate(speeds) if s <= best_s), len(speeds) - 1)
    while j > 0:  # pass 2: a faster speed with at least the channels found
        j -= 1
        c = min(max_channels, _fit(speeds[j], nvlink, nics, nic_path, gpus, pcie))
        if c < best_c or c * speeds[j] <= best_c * best_s:
            break
        best_c, best_s = c, speeds[j]
    return best_c, best_s


def comm_channels(search_channels: int, cc: int, nodes: int, speed: float) -> int:
    """The communicator's channels for ring / tree calls (``ncclTopoPostset``): twice the
    search's, at most 64, doubled again from compute capability 9.0 across nodes while under 16
    at a per-channel speed above 45 GB/s."""
    if search_channels < 1:
        raise SpecError(f"search_channels={search_channels!r}; at least 1")
    c = min(64, 2 * search_channels)
    if cc >= 90 and nodes > 1 and speed > 45.0 and c < 16:
        c = 2 * c
    return c


def _nvls_fit(s: float, nvlink: float, heads: int) -> int:
    """NVLS channels at per-channel speed ``s`` on the switch: each channel is one head GPU
    pulling from the switch (``ncclTopoSearchTryNvls``: every GPU's NVLink to the NVSwitch
    carries ``s`` each way per channel, the head's twice), so c channels with distinct heads
    load a head GPU with (c + 1) s: c ≤ ⌊nvlink / s⌋ − 1, at most ``heads``."""
    return max(0, min(heads, math.floor(nvlink / s + 1e-9) - 1))


def search_nvls(speeds: Sequence[float], nvlink: float, gpus: int, nics: int = 0,
                nic_path: float = 0.0, max_heads: int = 32) -> tuple[int, float, float]:
    """(channels, bwIntra, bwInter) of NCCL's NVLS graph search (v2.26.2 ``src/graph/
    search.cc``, pattern NVLS): ``speeds`` the architecture's array (intra-node on one node,
    inter-node with ``nics``), ``nvlink`` the GPU's NVLink bandwidth as NCCL counts it (GB/s),
    ``gpus`` per node, ``nics`` per node (0: one node), ``nic_path`` min(PCIe, NIC) GB/s.

    - one node: the channels are forced to min(32, gpus) (``minChannels = maxChannels``); the
      first speed whose channels fit (``_nvls_fit``), starting below the GPU's NVLink and with
      speed × channels ≤ nvlink × gpus / (gpus − 1) (the search's start for non-ring graphs);
    - across nodes: each channel's head is a GPU local to its own NIC (at most min(nics, gpus)
      heads, ``ncclTopoSearchRecNet``); pass 1 walks the inter speeds down from the NIC path
      while the next is over 0.49 of the best, keeping more channels (or more channels ×
      speed), done at min(32, gpus) channels; pass 2 keeps the channels and ``bwIntra`` and
      raises ``bwInter`` while the NIC path allows it and it stays under 2 × ``bwIntra``."""
    if nvlink <= 0 or not speeds or gpus < 2 or nics < 0 or (nics and nic_path <= 0):
        raise SpecError(f"search_nvls: nvlink={nvlink!r}, gpus={gpus!r}, nics={nics!r}, "
                        f"nic_path={nic_path!r}; need nvlink > 0, gpus >= 2 and, with NICs, "
                        "nic_path > 0")
    top = min(max_heads, gpus)
    if not nics:
        total = nvlink * gpus / (gpus - 1)
        for sp in speeds:
            if sp <= nvlink and sp * top <= total + 1e-9 and _nvls_fit(sp, nvlink, top) >= top:
                return top, sp, sp
        raise SpecError(f"search_nvls: no speed fits {top} NVLS channels (nvlink={nvlink})")
    heads = min(top, nics)
    i = next((k for k, sp in enumerate(speeds) if sp <= nic_path), len(speeds) - 1)
    best_c, best_s = 0, 0.0
    while True:  # pass 1
        c = _nvls_fit(speeds[i], nvlink, heads)
        if c > best_c or (c >= 1 and c * speeds[i] > best_c * best_s):
            best_c, best_s = c, speeds[i]
        if best_c == top or best_c * best_s >= nvlink:  # perfect, or totalBw reached
            break
        if i + 1 < len(speeds) and (best_c == 0 or speeds[i + 1] / best_s > 0.49):
            i += 1
        else:
            break
    if best_c == 0:
        raise SpecError(f"search_nvls: no channel fits (nvlink={nvlink}, nic_path={nic_path})")
    inter = best_s
    j = speeds.index(best_s)
    while j > 0 and speeds[j - 1] <= nic_path and inter < 2 * best_s:  # pass 2: bwInter up
        j -= 1
        inter = speeds[j]
    return best_c, best_s, inter


def nvls_tuner_bw(search: tuple[int, float, float], nodes: int) -> float:
    """NCCL's tuner's NVLS (one node) or NVLSTree (across nodes) *algorithm* bandwidth, GB/s,
    from the NVLS graph (``ncclTopoTuneModel``, v2.26.2 ``src/graph/tuning.cc`` lines 251-252,
    293): channels × min(bwIntra, bwInter, or bwInter / 2 beyond two nodes) × 5/6."""
    c, intra, inter = search
    if nodes < 1 or c < 1:
        raise SpecError(f"nvls_tuner_bw: nodes={nodes!r}, channels={c!r}; need both >= 1")
    return c * min(intra, inter if nodes <= 2 else inter / 2) * 5.0 / 6.0
