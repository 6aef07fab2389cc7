"""NCCL's ring / tree topology search replayed (ops/nccl_search.py, data/presets/nccl.toml
[search]) against hand derivations from NCCL v2.26.2-1 src/graph/search.cc / connect.cc and
against NCCL's own logs (the channel counts it printed, the tuner estimates it printed); the
per-channel caps and the tree-pattern factor the tuner applies with them (ops/nccl.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline.errors import SpecError
from roofline.ops.nccl import NCCL_PROTOCOLS, channel_caps, nccl_best, nccl_latency, nccl_time
from roofline.ops.nccl_search import comm_channels, search_ring
from roofline.ops.xp import SCALAR
from roofline.specs.nccl import tuner_for
from roofline.specs.resolve import cluster, hardware

US = 1e-6
SM80_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
SM90_INTRA = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
SM90_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
              1.2, 0.24, 0.12)
SM100_INTRA = (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0)


def test_one_node_by_hand_and_the_logs() -> None:
    """One NVSwitch node: channels at speed s = floor(NVLink / s); walk down while the next
    speed is over 0.49 of the best; double at half the speed (ncclTopoDupChannels); the
    communicator runs twice the search's."""
    # H100: 18 x 20.6 = 370.8; 60 -> 6 (360), 50 -> 7 (350), 40 -> 9 (360), 30 -> 12 (360, not
    # better), 24 / 60 < 0.49 stops: 6 x 60; doubled (60 >= 50) to 12 x 30; communicator 24
    assert search_ring(SM90_INTRA, 18 * 20.6, 90) == (12, 30.0)
    assert comm_channels(12, 90, 1, 30.0) == 24
    # A100: 12 x 20 = 240; 40 -> 6 x 40 = 240 reaches the GPU's total: done; doubled (cc 80) to
    # 12 x 20; communicator 24 -- NVIDIA/nccl-tests #100's log: 'Channel 23/24'
    assert search_ring(SM80_INTRA, 12 * 20.0, 80) == (12, 20.0)
    assert comm_channels(12, 80, 1, 20.0) == 24
    # H800: 8 x 20.6 = 164.8; 40 -> 4 (160) is the best; doubled (4 channels, not more than 4)
    # to 8 x 20; communicator 16 -- NVIDIA/nccl #892's log: '16 coll channels'
    assert search_ring(SM90_INTRA, 8 * 20.6, 90) == (8, 20.0)
    assert comm_channels(8, 90, 1, 20.0) == 16
    # B200 / B300: 18 x 40 = 720; 90 -> 8 x 90 = 720: done; doubled to 16 x 45; communicator 32
    assert search_ring(SM100_INTRA, 18 * 40.0, 100) == (16, 45.0)
    assert comm_channels(16, 100, 1, 45.0) == 32


def test_across_nodes_by_hand_and_the_logs() -> None:
    """One NIC per GPU: at speed s each NIC path (min of PCIe and the NIC) carries
    floor(path / s) channels, and each GPU's NVLink (1 - 1/8) of them."""
    # H100, 8x 400 Gb/s: path min(48 PCIe Gen5, 50) = 48; 48 -> min(floor(370.8 / 42), 8) = 8,
    # 8 x 48 = 384 >= 370.8: done; no doubling (cc > 80, 48 < 50, 8 > 4); communicator 16 --
    # NVIDIA/nccl #1453 ('Channel 00/16', 3 nodes) and nccl-tests #319 (16 trees, 2 nodes)
    assert search_ring(SM90_INTER, 18 * 20.6, 90, nics=8, nic_path=48.0) == (8, 48.0)
    assert comm_channels(8, 90, 2, 48.0) == 16
    # H800 with 8x 100 Gb/s: 12 -> 8 x 12 = 96; 6 -> 16 x 6 = 96 (not better); 8 x 12, no
    # doubling under 25 GB/s; communicator 16, not doubled again (12 <= 45)
    assert search_ring(SM90_INTER, 8 * 20.6, 90, nics=8, nic_path=12.5) == (8, 12.0)
    assert comm_channels(8, 90, 2, 12.0) == 16
    # Hopper across nodes with few fast channels: doubled again while under 16 above 45 GB/s
    assert comm_channels(4, 90, 2, 48.0) == 16 and comm_channels(4, 80, 2, 48.0) == 8
    assert comm_channels(4, 90, 1, 48.0) == 8 and comm_channels(40, 90, 1, 20.0) == 64


def test_clusters_carry_the_replay() -> None:
    h100 = tuner_for(cluster("dgx-h100"))
    assert h100.search_one == (12, pytest.approx(30e9)) and h100.comm_one == 24
    assert h100.search_nodes == (8, pytest.approx(48e9)) and h100.comm_nodes == 16
    assert h100.ring_plateau_channels == 16  # the plateau's test takes the communicator's
    a100 = tuner_for(cluster("dgx-a100"))  # 8x HDR 200 Gb/s: path min(24 Gen4, 25)
    assert a100.search_one == (12, pytest.approx(20e9)) and a100.search_nodes[0] == 8
    assert a100.tree_pattern == 1.0 and h100.tree_pattern == pytest.approx(0.85)
    # off NVLink the search is not replayed: no caps, the plateau at MAXCHANNELS
    pci = tuner_for(replace(cluster("dgx-h100", 2), device=hardware("h100-pcie")))
    assert pci.search_one == (0, 0.0) and pci.ring_plateau_channels == 64
    assert all(c == float("inf") for c in channel_caps(2.0, pci, SCALAR))
    # nor with a NIC slower than the slowest speed the search tries (0.12 GB/s): no error
    slow = tuner_for(replace(cluster("dgx-h100", 2), scale_out_bytes_per_s=0.05e9))
    assert slow.search_one == (0, 0.0) and slow.ring_plateau_channels == 64
    # NVL72: NCCL's node is the NVLink domain (MNNVL), 72 GPUs with a NIC each. Across racks
    # at 48: min(floor(720 / (48 x 71/72)) = 15, 72 x 1) = 15, 15 x 48 = 720 reaches the
    # GPU's total: done; no doubling (cc > 80, 48 < 50, 15 > 4); communicator 30
    nvl = tuner_for(cluster("gb200-nvl72", 36))
    assert nvl.search_one == (16, pytest.approx(45e9))
    assert nvl.search_nodes == (15, pytest.approx(48e9)) and nvl.comm_nodes == 30


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_caps_scalar_plan_agrees_with_the_array_path(nodes: int) -> None:
    """rl.train's scalar plan (_make_plan) and the vectorised nccl_time apply the same caps and
    0.85: per algorithm, the scalar best equals the array best and the least of nccl_time over
    the protocols, at bus bandwidths where the caps bind (900 GB/s) and where they do not."""
    h100 = tuner_for(cluster("dgx-h100"))
    p = 8 * nodes
    for bus in (100e9, 500e9, 900e9):
        for n in 2.0 ** np.arange(6, 35, 2):
            for a in ("ring", "tree"):
                times = [float(nccl_time("all_reduce", a, pr, n, p, nodes, bus, h100, SCALAR))
                         for pr in NCCL_PROTOCOLS]
                s = nccl_best("all_reduce", n, p, nodes, bus, h100, SCALAR, algorithms=(a,))
                v = nccl_best("all_reduce", np.array([n]), p, nodes, bus, h100, algorithms=(a,))
                assert s == pytest.approx(float(v[0]), rel=1e-12) == pytest.approx(min(times))


def test_caps_by_hand() -> None:
    """perChMax*Bws x the search's channels (Hopper: 8 across nodes, 12 on one node)."""
    h100 = tuner_for(cluster("dgx-h100"))
    r128, tree, t128 = channel_caps(np.array([1.0, 2.0, 4.0]), h100)
    assert r128 == pytest.approx(np.array([12, 8, 8]) * 36.7e9)
    assert tree == pytest.approx(np.array([12 * 38.7, 8 * 41.4, 8 * 36.0]) * 1e9)
    assert t128 == pytest.approx(np.array([12 * 36.7, 8 * 36.7, 8 * 29.0]) * 1e9)
    # 4 nodes, tree LL128 at 1 MiB: min(280 x 0.92, 288) = 257.6 -> x 120/128 = 241.5 -> the
    # cap 8 x 29 = 232 -> x 0.85 (TREE pattern) = 197.2; algbw / 2 x 0.6 (LL128 at 2^20)
    n = 2.0**20
    lat = float(nccl_latency("all_reduce", "tree", "LL128", 32, 4, h100, SCALAR))
    t = nccl_time("all_reduce", "tree", "LL128", n, 32, 4, 280e9, h100, SCALAR)
    assert t == pytest.approx(lat + n / (0.5 * 0.85 * 232e9 * 0.6))
    # one node, the ring LL128's cap (12 x 36.7 = 440) is above 0.92 x 315: not binding
    t1 = nccl_time("all_reduce", "ring", "LL128", n, 8, 1, 315e9, h100, SCALAR)
    assert t1 == pytest.approx((14 + 14 * 1.9) * US + n / (0.92 * 315e9 * 8 / 14))


def test_nccl_1453_printed_estimates() -> None:
    """NCCL's own estimates (NVIDIA/nccl #1453, 3 nodes of 8 H100, NCCL_DEBUG_SUBSYS=COLL):
    tree LL 25.874907 us at 4096 B and 26.549810 us at 8192 B. By hand: latency 6.8 + 2 (7 x 0.6
    + 1 x 5.0) = 25.2 us; bandwidth min(., 20.4 (Intel, > 2 nodes)) x 0.85 x 0.5 x 0.7 (LL at
    2^6 and 2^7 x 64 B) = 6.069 GB/s. Without the 0.85 it would be 25.77 / 26.35 us."""
    h100 = tuner_for(cluster("dgx-h100"))
    for n, printed in ((4096.0, 25.874907), (8192.0, 26.549810)):
        t = nccl_time("all_reduce", "tree", "LL", n, 24, 3, 384e9, h100, SCALAR)
        assert t / US == pytest.approx(printed, abs=1e-5)
        assert t / US == pytest.approx(25.2 + n / (20.4e9 * 0.85 * 0.5 * 0.7) / US)


def test_bad_inputs_name_the_argument() -> None:
    with pytest.raises(SpecError, match="nvlink=0"):
        search_ring(SM90_INTRA, 0.0, 90)
    with pytest.raises(SpecError, match="nic_path=0"):
        search_ring(SM90_INTER, 370.8, 90, nics=8, nic_path=0.0)
    with pytest.raises(SpecError, match="search_channels=0"):
        comm_channels(0, 90, 1, 30.0)


SM80_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0,
              3.0, 2.4, 1.2, 0.24, 0.12)


def test_nic_counts_by_hand() -> None:
    """Fewer NICs than GPUs: each NIC carries floor(min(PCIe, NIC) / s) channels; more NICs
    than GPUs: a GPU's NICs share its PCIe path (at most 8 x floor(PCIe / s))."""
    # A100 with 4 HDR NICs (25 GB/s, PCIe Gen4 24): 24 -> 4 x 1 = 96; 20, 18, 15 give less;
    # 12 -> 4 x 2 = 8 x 12 = 96 (not better); 10 / 24 < 0.49 stops: 4 x 24, not doubled
    # (24 < 25); communicator 8. Taken as 8 NICs at 12.5 (the old approximation): 8 x 12
    assert search_ring(SM80_INTER, 240.0, 80, nics=4, nic_path=24.0, pcie=24.0) == (4, 24.0)
    assert comm_channels(4, 80, 2, 24.0) == 8
    assert search_ring(SM80_INTER, 240.0, 80, nics=8, nic_path=12.5) == (8, 12.0)
    # H100 with 32 NICs of 100 Gb/s (12.5 GB/s; AWS p5: 32 network cards, 3,200 Gb/s, Amazon
    # EC2 User Guide "EFA configuration for P5 and P5e instances"):
    # 12 -> min(floor(370.8 / 10.5) = 35, 32 x 1, 8 x floor(48 / 12) = 32) = 32, the search's
    # cap (32), 384 >= 370.8: done
    assert search_ring(SM90_INTER, 370.8, 90, nics=32, nic_path=12.5, pcie=48.0) == (32, 12.0)
    # 16 NICs at 48 on a 1000 GB/s fabric: the 8 PCIe paths bind, 8 x 48 (16 x 48 without)
    assert search_ring(SM90_INTER, 1000.0, 90, nics=16, nic_path=48.0, pcie=48.0) == (8, 48.0)
    assert search_ring(SM90_INTER, 1000.0, 90, nics=16, nic_path=48.0) == (16, 48.0)


def test_clusters_replay_their_nic_count() -> None:
    """tuner_for reads the cluster's NICs and each NIC's rate: 8 A100 with 4 HDR NICs (12.5
    GB/s per GPU, 25 per NIC) search 4 x 24 across nodes, the tree's cap 4 x 23.6 on 2 nodes;
    given as 8 NICs of 12.5 it was 8 x 12 and 8 x 23.6."""
    four = replace(cluster("dgx-a100", 2), scale_out_bytes_per_s=12.5e9, nics_per_node=4)
    t = tuner_for(four)
    assert t.search_nodes == (4, pytest.approx(24e9)) and t.comm_nodes == 8
    assert channel_caps(2.0, t, SCALAR)[1] == pytest.approx(4 * 23.6e9)
    eight = tuner_for(replace(four, nics_per_node=None))
    assert eight.search_nodes == (8, pytest.approx(12e9))
    assert channel_caps(2.0, eight, SCALAR)[1] == pytest.approx(8 * 23.6e9)


def test_tree_pattern_only_on_nvlink_hopper() -> None:
    """0.85 where NCCL's tree search ends on the simple TREE pattern (nccl.toml tree_pattern:
    from compute capability 9.0, on NVLink nodes); not on PCIe-only Hopper nodes, not on
    Ampere; on one node never applied (ops.nccl applies it across nodes only)."""
    h100 = cluster("dgx-h100", 2)
    assert tuner_for(h100).tree_pattern == pytest.approx(0.85)
    assert tuner_for(replace(h100, nics_per_node=4)).tree_pattern == pytest.approx(0.85)
    assert tuner_for(cluster("gb200-nvl72", 36)).tree_pattern == pytest.approx(0.85)
    assert tuner_for(replace(h100, device=hardware("h100-pcie"))).tree_pattern == 1.0
    assert tuner_for(cluster("dgx-a100", 2)).tree_pattern == 1.0
    t = tuner_for(h100)  # one node: the tree's bandwidth without it
    one = nccl_time("all_reduce", "tree", "Simple", 2.0**30, 8, 1, 300e9, t, SCALAR)
    lat = float(nccl_latency("all_reduce", "tree", "Simple", 8, 1, t, SCALAR))
    assert one == pytest.approx(lat + 2.0**30 / (0.5 * min(0.92 * 300e9, 12 * 38.7e9)))


def test_two_node_tree_by_hand() -> None:
    """On exactly two nodes the tree's Simple bus bandwidth is min(bw_up, 2 i bw_out) (each
    node's two trees send n across and receive n; the ring sends 2(p-1)/p n); from three nodes
    on it is the ring's, min(bw_up, i bw_out). AWS p4d, 8 A100 and 4 EFA of 12.5 GB/s: i bw_out
    = 8 x 6.25 x the scale-out efficiency."""
    from roofline.ops.collectives import _nccl_bws, group_nccl, group_nccl_choice
    from roofline.scenarios.training.factors import cluster_links, training_factors

    c = cluster("aws-p4d", 2)
    links = cluster_links(c, training_factors(c.device.kind, c.device.key))
    o, ring, _, _, tree = _nccl_bws(16.0, 1.0, links)
    assert o == 2 and ring == pytest.approx(8 * links.out_bw)
    assert tree == pytest.approx(min(links.up_bw, 2 * 8 * links.out_bw)) == pytest.approx(2 * ring)
    n = 2.0**30
    a, pr, t = group_nccl_choice("all_reduce", n, 16, 1, links)
    assert (a, pr) == ("tree", "Simple")
    # 1 GiB is past the correction table (1 there); A100: no 0.85; the tree cap 4 x 23.6 GB/s
    lat = float(nccl_latency("all_reduce", "tree", "Simple", 16, 2, links.nccl, SCALAR))
    assert t == pytest.approx(lat + n / (0.5 * min(0.92 * tree, 4 * 23.6e9)))
    assert group_nccl("all_reduce", n, 16, 1, links, SCALAR) == pytest.approx(t)
    v = group_nccl("all_reduce", np.array([n, n]), np.array([16.0, 24.0]), 1,
                   replace(links, nccl=replace(links.nccl)))
    assert float(v[0]) == pytest.approx(t)
    three = cluster_links(cluster("aws-p4d", 3), training_factors(c.device.kind, c.device.key))
    assert _nccl_bws(24.0, 1.0, three)[4] == _nccl_bws(24.0, 1.0, three)[1]


def test_nvls_search_by_hand() -> None:
    """NCCL's NVLS graph: c channels with distinct heads load a head GPU's NVLink with
    (c + 1) x speed. H100 (18 x 20.6 = 370.8): one node forces 8 channels: 50 -> 9 x 50 = 450
    too much, 40 -> 360 fits: 8 x 40, NVLS 8 x 40 x 5/6 = 266.7 GB/s. Across nodes (8 NICs,
    path 48): 48 -> 6 channels, 45 -> 7, 42 -> 7 (no better), 40 -> 8 (done); pass 2 raises
    bwInter 42, 45, 48: (8, 40, 48); NVLSTree 8 x min(40, 48) x 5/6 = 266.7 on 2 nodes,
    8 x min(40, 24) x 5/6 = 160 beyond. NVL72: 32 heads, 33 x 20 = 660 <= 720: 32 x 20."""
    from roofline.ops.nccl_search import nvls_tuner_bw, search_nvls
    from roofline.specs.nccl import nvls_search_for

    one = search_nvls(SM90_INTRA, 370.8, 8)
    assert one == (8, 40.0, 40.0) and nvls_tuner_bw(one, 1) == pytest.approx(800 / 3)
    x = search_nvls(SM90_INTER, 370.8, 8, nics=8, nic_path=48.0)
    assert x == (8, 40.0, 48.0)
    assert nvls_tuner_bw(x, 2) == pytest.approx(800 / 3) and nvls_tuner_bw(x, 4) == 160.0
    assert search_nvls(SM100_INTRA, 720.0, 72) == (32, 20.0, 20.0)
    assert search_nvls(SM90_INTER, 370.8, 8, nics=4, nic_path=48.0)[0] == 4  # 4 heads
    assert nvls_search_for(cluster("dgx-h100")) == (one, x)
    assert nvls_search_for(cluster("dgx-a100")) is None  # no NVLS before Hopper
    with pytest.raises(SpecError, match="nic_path"):
        search_nvls(SM90_INTER, 370.8, 8, nics=8)
    with pytest.raises(SpecError, match="nodes=0"):
        nvls_tuner_bw(x, 0)
