"""NCCL's tuner model (ops/nccl.py, constants in data/presets/nccl.toml) against hand
calculations from NCCL v2.26.2-1 src/graph/tuning.cc, and the algorithm switch points nccl-tests
#309 reports; the cluster groups that use it (ops/collectives.py, ``Links.nccl``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline.errors import SpecError
from roofline.ops import collectives as coll
from roofline.ops.nccl import (
    nccl_best,
    nccl_channels,
    nccl_choice,
    nccl_latency,
    nccl_time,
    nvls_chunk,
    nvls_fill_bytes,
)
from roofline.ops.xp import SCALAR
from roofline.specs.nccl import nccl_version, tuner_for
from roofline.specs.resolve import cluster

US = 1e-6
KIB, MIB = 2.0**10, 2.0**20


@pytest.fixture(scope="module")
def h100():
    return tuner_for(cluster("dgx-h100"))


def test_tables_follow_the_cluster(h100) -> None:
    assert nccl_version() == "v2.26.2-1"
    assert h100.nvlink and h100.ll_max_one_node == pytest.approx(141e9)
    assert h100.net_overhead_s == pytest.approx(1 * US)
    a100 = tuner_for(cluster("dgx-a100"))  # AMD Rome hosts: the AMD rows
    assert a100.ll_max_one_node == pytest.approx(87.7e9)
    assert a100.ll_max_more_nodes == pytest.approx(19.0e9)
    assert a100.net_overhead_s == pytest.approx(2 * US)
    assert tuner_for(cluster("gb200-nvl72")).ll_max_one_node == pytest.approx(282e9)
    assert tuner_for(cluster("tpu-v5p-pod")) is None  # NCCL does not run there


def test_latencies_by_hand(h100) -> None:
    # one node of 8, ring LL: baseLat 6.6 + 2(8-1) steps x 0.6 (NVLink)
    assert nccl_latency("all_reduce", "ring", "LL", 8, 1, h100, SCALAR) == pytest.approx(15.0 * US)
    # ring Simple: 8.4 + 14 x 3.4
    assert nccl_latency("all_reduce", "ring", "Simple", 8, 1, h100, SCALAR) == \
        pytest.approx(56.0 * US)
    # reduce-scatter ring LL: 6.6 + 7 x 0.6
    assert nccl_latency("reduce_scatter", "ring", "LL", 8, 1, h100, SCALAR) == \
        pytest.approx(10.8 * US)
    # NVLS: hwLat[NVLINK][NVLS][Simple] = 25 us, no base
    assert nccl_latency("all_reduce", "nvls", "Simple", 8, 1, h100, SCALAR) == \
        pytest.approx(25 * US)
    # 2 nodes of 8, tree LL: 6.8 + 2((8-1) x 0.6 + log2(2) x 5.0) = 25.2
    assert nccl_latency("all_reduce", "tree", "LL", 16, 2, h100, SCALAR) == \
        pytest.approx(25.2 * US)
    # 32 nodes of 8: 6.8 + 2(4.2 + 5 x 5.0) = 65.2
    assert nccl_latency("all_reduce", "tree", "LL", 256, 32, h100, SCALAR) == \
        pytest.approx(65.2 * US)
    # 2 nodes, ring Simple: 8.4 + (30 - 2) x max(3.4, 3 x 1.0) + 2 x 14
    assert nccl_latency("all_reduce", "ring", "Simple", 16, 2, h100, SCALAR) == \
        pytest.approx((8.4 + 28 * 3.4 + 28) * US)
    # ring LL on 2 nodes: the intra step is the net overhead 1.0 (> 0.6): 6.6 + 28 + 2 x 2.7
    assert nccl_latency("all_reduce", "ring", "LL", 16, 2, h100, SCALAR) == \
        pytest.approx((6.6 + 28 * 1.0 + 2 * 2.7) * US)
    # NVLSTree on 2 nodes: 25 + 2 x 1 x 14
    assert nccl_latency("all_reduce", "nvls_tree", "Simple", 16, 2, h100, SCALAR) == \
        pytest.approx(53 * US)
    # one rank per node (4 nodes): the tree's network latency stands in (LL 5.0): 6.6 + 6 x 5
    assert nccl_latency("all_reduce", "ring", "LL", 4, 4, h100, SCALAR) == \
        pytest.approx(36.6 * US)
    # CollNet Direct, 4 nodes of 8: 2 (1 x 3.7 + 7 x 0.4) + 31; Chain: 2 x 7 x 2.8 + 30
    assert nccl_latency("all_reduce", "collnet_direct", "Simple", 32, 4, h100, SCALAR) == \
        pytest.approx((2 * (3.7 + 2.8) + 31) * US)
    assert nccl_latency("all_reduce", "collnet_chain", "Simple", 32, 4, h100, SCALAR) == \
        pytest.approx((2 * 7 * 2.8 + 30) * US)


def test_protocol_bandwidths_by_hand(h100) -> None:
    bus = 315e9
    n = 2**20
    # ring LL, one node: min(141, 0.5 x 315) = 141 GB/s bus, algbw = 141 x 8/14
    t = nccl_time("all_reduce", "ring", "LL", n, 8, 1, bus, h100, SCALAR)
    assert t == pytest.approx(15 * US + n / (141e9 * 8 / 14))
    # LL128: 0.92 x 315
    t = nccl_time("all_reduce", "ring", "LL128", n, 8, 1, bus, h100, SCALAR)
    assert t == pytest.approx((14 + 14 * 1.9) * US + n / (0.92 * bus * 8 / 14))
    # tree LL, 2 nodes: min(315 x 0.92, 8 channels x 41.4) / 3.8 (under the 2-node cap of 39
    # GB/s? no: 76 > 39) -> 39, x 0.85 across nodes on Hopper (the TREE pattern); algbw = bus / 2,
    # x the correction at 1 MiB (log2(2^20 / 64) = 14: LL 0.5)
    t = nccl_time("all_reduce", "tree", "LL", n, 16, 2, bus, h100, SCALAR)
    assert t == pytest.approx(25.2 * US + n / (0.85 * 0.5 * 39e9 * 0.5))
    # the scalar plan agrees (tree only)
    assert nccl_best("all_reduce", float(n), 16, 2, bus, h100, SCALAR, algorithms=("tree",)) \
        == pytest.approx(float(nccl_best("all_reduce", np.array([n]), 16, 2, bus, h100,
                                         algorithms=("tree",))[0]))
    # LL128 is NVLink-only: a PCIe node has no LL128 (and a copy does not share the scalar
    # path's cached candidates)
    pci = replace(h100, nvlink=False)
    assert pci.plans is not h100.plans
    assert nccl_best("all_reduce", 2.0**22, 8, 1, bus, pci, SCALAR) > \
        nccl_best("all_reduce", 2.0**22, 8, 1, bus, h100, SCALAR)
    assert nccl_time("all_reduce", "ring", "LL128", n, 8, 1, bus, pci, SCALAR) == float("inf")
    # NVLS runs Simple only; a tree has no reduce-scatter
    assert nccl_time("all_reduce", "nvls", "LL", n, 8, 1, bus, h100, SCALAR) == float("inf")
    assert nccl_time("reduce_scatter", "tree", "Simple", n, 8, 1, bus, h100, SCALAR) == \
        float("inf")


def test_ring_plateau_by_hand(h100) -> None:
    """ncclTopoGetAlgoTime (v2.26.2 tuning.cc): a ring all-reduce under Simple across nodes
    pays 1.4 x its latency (Hopper) once n / (channels x p) >= 64, channels the communicator's
    across nodes (16 on DGX H100 nodes: tests/test_nccl_search.py); not on one node, not LL /
    LL128, not reduce-scatter, not below 64 x 16 x p bytes."""
    assert h100.ring_plateau == pytest.approx(1.4) and h100.ring_plateau_channels == 16
    assert tuner_for(cluster("dgx-a100")).ring_plateau == pytest.approx(1.4)
    bus = 280e9
    lat = (8.4 + 28 * 3.4 + 28) * US  # 2 nodes of 8, ring Simple (test_latencies_by_hand)
    n = 2.0**30
    t = nccl_time("all_reduce", "ring", "Simple", n, 16, 2, bus, h100, SCALAR)
    assert t == pytest.approx(1.4 * lat + n / (bus * 16 / 30))
    # 64 x 16 x 16 = 16384 bytes is the first size with the plateau; one byte less has none
    for m, k in ((16384.0, 1.4), (16383.0, 1.0)):
        t = nccl_time("all_reduce", "ring", "Simple", m, 16, 2, bus, h100, SCALAR)
        assert t == pytest.approx(k * lat + m / (bus * 16 / 30))
    one = (8.4 + 14 * 3.4) * US  # one node: none
    assert nccl_time("all_reduce", "ring", "Simple", n, 8, 1, 315e9, h100, SCALAR) == \
        pytest.approx(one + n / (315e9 * 8 / 14))
    ll = (6.6 + 28 * 1.0 + 2 * 2.7) * US  # LL: none (bandwidth min(0.5 x 280, 39 on 2 nodes))
    assert nccl_time("all_reduce", "ring", "LL", n, 16, 2, bus, h100, SCALAR) == \
        pytest.approx(ll + n / (39e9 * 16 / 30))
    rs = nccl_latency("reduce_scatter", "ring", "Simple", 16, 2, h100, SCALAR)
    assert nccl_time("reduce_scatter", "ring", "Simple", n, 16, 2, bus, h100, SCALAR) == \
        pytest.approx(rs + n / (bus * 16 / 15))
    # the scalar (rl.train) and vectorised paths agree, on both sides of the threshold
    for m in (16383.0, 16384.0, n):
        s = nccl_best("all_reduce", m, 16, 2, bus, h100, SCALAR, algorithms=("ring",))
        v = nccl_best("all_reduce", np.array([m]), 16, 2, bus, h100, algorithms=("ring",))
        assert s == pytest.approx(float(v[0]))
    assert nccl_best("all_reduce", n, 16, 2, bus, h100, SCALAR, algorithms=("ring",)) == \
        pytest.approx(1.4 * lat + n / (bus * 16 / 30))


def test_run_channels_by_hand(h100) -> None:
    """topoGetAlgoInfo (v2.26.2 enqueue.cc): one channel fewer while n < nc x threads x
    threshold; LL 512 threads x 8 B (x p for the ring), LL128 640 x 8 B, Simple 512 x 64 B."""
    assert nccl_channels("tree", "LL", 65536, 16, 32, h100) == 16  # 65536 / 4096
    assert nccl_channels("tree", "LL", 65535, 16, 32, h100) == 15
    assert nccl_channels("tree", "LL", 64, 16, 32, h100) == 1  # at least one
    assert nccl_channels("ring", "LL", 2**20, 16, 32, h100) == 16  # 2^20 / (4096 x 16)
    assert nccl_channels("tree", "LL128", 2**20, 64, 32, h100) == 32  # 204, the 32 it has
    assert nccl_channels("ring", "Simple", 2**20, 8, 64, h100) == 32  # 2^20 / 32768
    assert nccl_channels("nvls", "Simple", 64, 8, 32, h100) == 16  # NVLS: its 16 on Hopper
    with pytest.raises(SpecError, match="channels=0"):
        nccl_channels("ring", "LL", 2**20, 8, 0, h100)
    with pytest.raises(SpecError, match="collnet_direct"):
        nccl_channels("collnet_direct", "Simple", 2**20, 8, 32, h100)


def test_single_node_switch_point_as_nccl_tests_309(h100) -> None:
    """nccl-tests #309 (8x H100, NCCL 2.26.2): 'ring LL' from 8 B to 1 MB, 'NVLS Simple' from
    2 MB up."""
    nvls = 0.61 * 450e9
    for n in (8, 2**10, 2**16, 2**20):
        assert nccl_choice("all_reduce", n, 8, 1, 315e9, h100, nvls)[:2] == ("ring", "LL"), n
    for n in (2**21, 2**24, 2**30, 2**34):
        assert nccl_choice("all_reduce", n, 8, 1, 315e9, h100, nvls)[:2] == ("nvls", "Simple"), n
    # without NVLS the ring moves to LL128 then Simple as the message grows
    protos = [nccl_choice("all_reduce", n, 8, 1, 315e9, h100)[1] for n in (2**10, 2**22, 2**32)]
    assert protos == ["LL", "LL128", "Simple"]


def test_best_is_the_minimum_and_vectorises(h100) -> None:
    n = np.array([8.0, 2.0**16, 2.0**20, 2.0**26, 2.0**32])
    p = np.array([16.0, 16.0, 32.0, 32.0, 64.0])
    o = p / 8
    v = nccl_best("all_reduce", n, p, o, 280e9, h100, np, nvls_tree_bw=np.full(5, 274.5e9))
    for i in range(5):
        s = nccl_best("all_reduce", n[i], p[i], o[i], 280e9, h100, SCALAR,
                      nvls_tree_bw=274.5e9)
        assert v[i] == pytest.approx(s, rel=1e-12)
        # the pick is the tuner's fastest (its own time); the seconds are the pick's, with
        # the NVLSTree pipeline's fill when NVLSTree wins
        pick = min(((nccl_time("all_reduce", a, pr, n[i], p[i], o[i],
                               274.5e9 if a == "nvls_tree" else 280e9, h100, SCALAR), a, pr)
                    for a in ("ring", "tree", "nvls_tree") for pr in ("LL", "LL128", "Simple")),
                   key=lambda x: x[0])
        want = nccl_time("all_reduce", pick[1], pick[2], n[i], p[i], o[i],
                         274.5e9 if pick[1] == "nvls_tree" else 280e9, h100, SCALAR, fill=True)
        assert s == pytest.approx(want, rel=1e-12)
        assert (s > pick[0]) == (pick[1] == "nvls_tree")


def test_vector_results_are_cached_on_content_not_identity(h100) -> None:
    # best_parallelism asks the same arrays again on every warm call: the answer is kept per
    # input contents; a changed value, shape or restriction is a new entry, and a caller
    # writing into what it got cannot change what the next caller gets
    from roofline.ops.nccl import _vector_best

    n = np.array([8.0, 2.0**20, 2.0**30])
    p = np.array([8.0, 16.0, 64.0])
    o = np.array([1.0, 2.0, 8.0])
    want = _vector_best("all_reduce", n, p, o, 280e9, h100, 450e9, 0.0, None)
    first = nccl_best("all_reduce", n, p, o, 280e9, h100, np, nvls_bw=450e9)
    np.testing.assert_array_equal(first, want)
    first[:] = -1.0
    again = nccl_best("all_reduce", n.copy(), p.copy(), o.copy(), 280e9, h100, np,
                      nvls_bw=450e9)
    np.testing.assert_array_equal(again, want)
    n2 = n.copy()
    n2[1] *= 4
    moved = nccl_best("all_reduce", n2, p, o, 280e9, h100, np, nvls_bw=450e9)
    assert moved[1] > want[1] and moved[0] == want[0]
    ring = nccl_best("all_reduce", n, p, o, 280e9, h100, np, nvls_bw=450e9,
                     algorithms=("ring",))
    np.testing.assert_array_equal(
        ring, _vector_best("all_reduce", n, p, o, 280e9, h100, 450e9, 0.0, ("ring",)))
    assert ring[1] > want[1]  # the tree wins 1 MiB across two nodes: restricted, a new entry
    assert nccl_best("all_reduce", n[:2], p[:2], o[:2], 280e9, h100, np).shape == (2,)


def test_scalar_group_answers_are_kept_per_call(h100) -> None:
    # rl.train asks the same group calls on every warm call: the scalar answer is kept on the
    # tuner per (collective, bytes, ranks, stride, links, algorithms); each equals the vector
    # path's, and another value of any of them is a new entry with its own answer
    from roofline.ops.nccl import NcclTuner

    lk = replace(coll.Links(domain=8, up_bw=315e9, up_alpha=2e-6, out_bw=35e9, out_alpha=6e-6,
                            nvls_bw=274.5e9), nccl=replace(h100))
    assert isinstance(lk.nccl, NcclTuner) and not lk.nccl.scalars
    calls = [("all_reduce", 2.0**20, 8, 1), ("all_reduce", 2.0**20, 64, 8),
             ("reduce_scatter", 2.0**30, 64, 8), ("all_gather", 3e9, 16, 8)]
    first = [coll.group_nccl(c, n, p, s, lk, SCALAR) for c, n, p, s in calls]
    assert len(lk.nccl.scalars) == 4
    again = [coll.group_nccl(c, n, p, s, lk, SCALAR) for c, n, p, s in calls]
    assert again == first and len(lk.nccl.scalars) == 4
    for (c, n, p, s), t in zip(calls, first):
        assert t == pytest.approx(float(coll.group_nccl(c, np.array([n]), np.array([p]), s,
                                                        lk, np)[0]), rel=1e-12)
    slow = replace(lk, out_bw=lk.out_bw / 4)  # the same tuner, slower NICs: a new entry
    assert coll.group_nccl("all_reduce", 2.0**30, 64, 8, slow, SCALAR) > \
        coll.group_nccl("all_reduce", 2.0**30, 64, 8, lk, SCALAR)
    ring = coll.group_nccl("all_reduce", 2.0**20, 64, 8, lk, SCALAR, ("ring",))
    assert ring >= first[1] and len(lk.nccl.scalars) == 7


def test_groups_use_the_tuner_when_links_carry_it(h100) -> None:
    base = coll.Links(domain=8, up_bw=315e9, up_alpha=2e-6, out_bw=35e9, out_alpha=6e-6,
                      nvls_bw=274.5e9)
    lk = replace(base, nccl=h100)
    # one node, 8 B: the ring LL's 15 us + 8 B at 141 x 8/14 GB/s (the α model: 2 x 2 us of NVLS)
    assert coll.group_all_reduce(8.0, 8, 1, lk, SCALAR) == \
        pytest.approx(15 * US + 8 / (141e9 * 8 / 14), rel=1e-9)
    assert coll.group_all_reduce(8.0, 8, 1, base, SCALAR) == pytest.approx(4 * US, rel=1e-4)
    # 4 GiB: NVLS at 274.5 GB/s + 25 us, plus the pipeline's fill: 2 loops of 16 channels x
    # 8 heads x 128 KiB = 32 MiB
    n = 2.0**32
    assert coll.group_all_reduce(n, 8, 1, lk, SCALAR) == \
        pytest.approx(25 * US + (n + 32 * MIB) / 274.5e9)
    # forced ring: Simple, 56 us + 2 x 7/8 n at 315
    assert coll.group_ring_all_reduce(n, 8, 1, lk, SCALAR) == \
        pytest.approx(56 * US + 1.75 * n / 315e9)
    # reduce-scatter: ring Simple 8.4 + 7 x 3.4 + 7/8 n / 315 (NVLS's n / 274.5 is slower)
    assert coll.group_reduce_scatter(n, 8, 1, lk, SCALAR) == \
        pytest.approx(32.2 * US + 0.875 * n / 315e9)
    # 2 nodes: NVLSTree n / min(274.5, 8 x 35) + 53 us, and the same 32 MiB of fill
    assert coll.group_nvls_all_reduce(n, 16, 1, lk, SCALAR) == \
        pytest.approx(53 * US + (n + 32 * MIB) / 274.5e9)
    # a DP group with one rank per node has no NVLS
    assert coll.group_nvls_all_reduce(n, 4, 8, lk, SCALAR) == float("inf")
    # vectorised over configurations = one at a time
    ns = np.array([8.0, 2.0**20, 2.0**32, 2.0**24, 2.0**28])
    ps = np.array([8.0, 16.0, 64.0, 8.0, 16.0])
    vec = coll.group_all_reduce(ns, ps, 1, lk, np)
    one = [coll.group_all_reduce(float(a), int(b), 1, lk, SCALAR) for a, b in zip(ns, ps)]
    assert np.allclose(vec, one, rtol=1e-12)
    assert coll.group_all_reduce(0.0, 8, 1, lk, SCALAR) == 0.0
    assert coll.group_all_reduce(8.0, 1, 1, lk, SCALAR) == 0.0


def test_bad_names_are_refused(h100) -> None:
    with pytest.raises(SpecError, match="protocol"):
        nccl_latency("all_reduce", "ring", "ll", 8, 1, h100, SCALAR)
    with pytest.raises(SpecError, match="algorithm"):
        nccl_latency("all_reduce", "pat", "Simple", 8, 1, h100, SCALAR)
    with pytest.raises(SpecError, match="collective"):
        nccl_time("broadcast", "ring", "LL", 8, 8, 1, 1e9, h100, SCALAR)
    lk = coll.Links(domain=8, up_bw=1e9, up_alpha=0, out_bw=1e9, out_alpha=0)
    with pytest.raises(SpecError, match="tuner"):
        coll.group_nccl("all_reduce", 8.0, 8, 1, lk, SCALAR)


def test_loader_refuses_an_unsourced_or_malformed_row() -> None:
    from roofline.specs.nccl import _values

    src = {"tuning": "NCCL"}
    assert _values({"values": [1, 2, 3], "unit": "us", "source": "tuning"}, "x", src) == \
        pytest.approx((1e-6, 2e-6, 3e-6))
    with pytest.raises(SpecError, match="source"):
        _values({"values": [1, 2, 3], "unit": "us", "source": "elsewhere"}, "x", src)
    with pytest.raises(SpecError, match="3 numbers"):
        _values({"values": [1, 2], "unit": "us", "source": "tuning"}, "x", src)
    with pytest.raises(SpecError, match="unit"):
        _values({"values": [1, 2, 3], "unit": "ms", "source": "tuning"}, "x", src)


def test_collnet_direct_by_hand_not_validated() -> None:
    """CollNet Direct (IB SHARP) is modelled from the tuner's latency and NCCL's developer's rule
    of thumb for its bandwidth (NVIDIA/nccl #320: ~20 GB/s per NIC; on DGX A100 ~80 GB/s algbw
    with 4 NICs, ~110 with 8, NVLink then binding) — not validated against a run."""
    a100 = tuner_for(cluster("dgx-a100"))
    lk = coll.Links(domain=8, up_bw=300e9 * 0.7, up_alpha=2e-6, out_bw=20e9, out_alpha=6e-6,
                    nccl=a100)
    n = 2.0**32
    t = coll.group_collnet_all_reduce(n, 32, 1, lk, SCALAR)  # 4 nodes of 8
    lat = (2 * (1 * 3.7 + 7 * 0.4) + 31) * US
    assert t == pytest.approx(lat + n / min(8 * 20e9, 210e9 / 2))
    assert n / (t - lat) / 1e9 == pytest.approx(105, abs=0.5)  # the developer's "~110"
    four = replace(lk, out_bw=10e9)  # 4 NICs per 8 GPUs: 80 GB/s per node
    assert n / (coll.group_collnet_all_reduce(n, 32, 1, four, SCALAR) - lat) == \
        pytest.approx(80e9)
    assert coll.group_collnet_all_reduce(n, 8, 1, lk, SCALAR) == float("inf")  # one node
    # never the automatic choice
    assert coll.group_all_reduce(n, 32, 1, lk, SCALAR) != t


def test_nvls_chunk_follows_nccls_cuts_by_hand(h100) -> None:
    """calcCollChunking (NCCL v2.26.2 src/enqueue.cc) on one H100 node: U = 16 NVLS channels x
    8 heads = 128; the 128 KiB chunk is cut to 64 KiB below 64·U·c = 1 GiB, to 32 KiB below
    8·U·64 KiB = 64 MiB, to 16 KiB below 2·U·32 KiB = 8 MiB."""
    assert (h100.nvls_channels, h100.nvls_chunk_bytes, h100.nvls_max_heads) == (16, 128 * KIB, 32)
    want = {2.0**32: 128, 2.0**30: 128, 2.0**29: 64, 2.0**26: 64, 2.0**24: 32, 2.0**23: 32,
            2.0**21: 16, 8.0: 16}
    got = {n: nvls_chunk("nvls", n, 8, 1, h100, SCALAR) / KIB for n in want}
    assert got == want
    np.testing.assert_array_equal(nvls_chunk("nvls", np.array(list(want)), 8, 1, h100) / KIB,
                                  list(want.values()))
    # NVLSTree on 2 nodes: 128 KiB; below 4·U·c = 64 MiB 64 KiB; below 1·U·64 KiB = 8 MiB
    # 32 KiB (the 256 / 128 KiB cuts only shrink larger chunks)
    tree = {2.0**28: 128, 2.0**26: 128, 2.0**24: 64, 2.0**23: 64, 2.0**20: 32}
    assert {n: nvls_chunk("nvls_tree", n, 8, 2, h100, SCALAR) / KIB for n in tree} == tree
    # from 4 nodes NVLSTree's chunk is capped at 64 KiB: 16 MiB keeps 64 KiB (4·U·64 KiB =
    # 32 MiB only cuts chunks above 64 KiB), under 8 MiB 32 KiB
    four = {2.0**28: 64, 2.0**24: 64, 2.0**22: 32}
    assert {n: nvls_chunk("nvls_tree", n, 8, 4, h100, SCALAR) / KIB for n in four} == four
    with pytest.raises(SpecError, match="nvls_chunk"):
        nvls_chunk("ring", 2.0**20, 8, 1, h100, SCALAR)
    # Blackwell runs 32 NVLS channels (NVLS_NCHANNELS_SM100)
    assert tuner_for(cluster("gb200-nvl72")).nvls_channels == 32


def test_nvls_fill_by_hand(h100) -> None:
    """The fill: d loops of U·chunk bytes, or of n under one loop (d = 2 shipped)."""
    d = h100.nvls_fill_loops
    assert d == pytest.approx(2.0)
    # 16 MiB on one node: chunk 32 KiB, a loop 128 x 32 KiB = 4 MiB: 2 x 4 MiB
    assert nvls_fill_bytes("nvls", 2.0**24, 8, 1, h100, SCALAR) == pytest.approx(8 * MIB)
    # 1 MiB: chunk 16 KiB, a loop 2 MiB > n: the fill is 2 x the message itself
    assert nvls_fill_bytes("nvls", 2.0**20, 8, 1, h100, SCALAR) == pytest.approx(2 * MIB)
    # 4 heads (a group of 4 in the node): U = 64, 16 MiB: 64 KiB then 8·64·64 KiB = 32 MiB >
    # 16 MiB -> 32 KiB; 2·64·32 KiB = 4 MiB <= 16 MiB: stays; 2 x 64 x 32 KiB = 4 MiB
    assert nvls_fill_bytes("nvls", 2.0**24, 4, 1, h100, SCALAR) == pytest.approx(4 * MIB)
    # 72 GPUs in one domain: heads capped at 32 (NCCL_MAX_NVLS_ARITY); GB200: 32 channels
    gb = tuner_for(cluster("gb200-nvl72"))
    # 512 MiB: U = 1024, 64 KiB (512 MiB < 64·U·128 KiB = 8 GiB; not < 8·U·64 KiB = 512 MiB)
    assert nvls_fill_bytes("nvls", 2.0**29, 72, 1, gb, SCALAR) == pytest.approx(2 * 64 * MIB)
    # 2 nodes NVLSTree, 16 MiB: chunk 64 KiB, 2 x 128 x 64 KiB = 16 MiB
    assert nvls_fill_bytes("nvls_tree", 2.0**24, 16, 2, h100, SCALAR) == pytest.approx(16 * MIB)
    # other algorithms have none modelled; no fill when d = 0
    assert nvls_fill_bytes("ring", 2.0**24, 8, 1, h100, SCALAR) == 0.0
    assert nvls_fill_bytes("nvls", 2.0**24, 8, 1, replace(h100, nvls_fill_loops=0.0),
                           SCALAR) == 0.0
    # vectorised = scalar
    ns = np.array([2.0**20, 2.0**24, 2.0**29])
    ps = np.array([8.0, 16.0, 8.0])
    os_ = np.array([1.0, 2.0, 1.0])
    for a in ("nvls", "nvls_tree"):
        vec = nvls_fill_bytes(a, ns, ps, os_, h100)
        one = [nvls_fill_bytes(a, float(x), float(y), float(z), h100, SCALAR)
               for x, y, z in zip(ns, ps, os_)]
        np.testing.assert_allclose(vec, one, rtol=1e-12)


def test_the_tuner_picks_without_the_fill_the_run_pays_it(h100) -> None:
    """2 MiB on one H100 node: the tuner prices NVLS at 25 us + 2 MiB / 274.5 GB/s = 32.6 us
    against the ring LL's 15 us + 2 MiB / (141 x 8/14 GB/s) = 41.0 us and runs NVLS (as #309
    logs); the run then pays the fill, 2 x 2 MiB (a loop, 128 x 16 KiB, is the whole message):
    25 us + 6 MiB / 274.5 GB/s = 47.9 us, slower than the ring LL it passed over."""
    nv = 274.5e9
    n = 2.0**21
    a, pr, s = nccl_choice("all_reduce", n, 8, 1, 315e9, h100, nv)
    assert (a, pr) == ("nvls", "Simple")
    assert s == pytest.approx(25 * US + 3 * n / nv, rel=1e-12)
    assert s * 1e6 == pytest.approx(47.9, abs=0.05)
    ring_ll = nccl_time("all_reduce", "ring", "LL", n, 8, 1, 315e9, h100, SCALAR)
    assert ring_ll == pytest.approx(15 * US + n / (141e9 * 8 / 14), rel=1e-12)
    assert nccl_time("all_reduce", "nvls", "Simple", n, 8, 1, nv, h100, SCALAR) < ring_ll < s
    # nccl_best (both paths) gives the same seconds
    assert nccl_best("all_reduce", n, 8, 1, 315e9, h100, SCALAR, nvls_bw=nv) == \
        pytest.approx(s, rel=1e-12)
    assert nccl_best("all_reduce", np.array([n, 2.0**32]), 8, 1, 315e9, h100, np,
                     nvls_bw=nv)[0] == pytest.approx(s, rel=1e-12)
