"""α-β collectives (ops/collectives.py) against hand calculations and NCCL's conventions; the
cluster-group functions (vectorised, used by training) against the one-call ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline.errors import SpecError
from roofline.ops import collectives as C
from roofline.ops.xp import SCALAR


def test_ring_all_reduce_hand() -> None:
    # 1 GB over 8 ranks at 100 GB/s: 2·7/8·1e9/100e9 = 0.0175 s; + 2·7·5 us = 70 us
    assert C.all_reduce(1e9, 8, 100e9) == pytest.approx(0.0175)
    assert C.all_reduce(1e9, 8, 100e9, 5e-6) == pytest.approx(0.0175 + 70e-6)
    assert C.all_reduce(1e9, 8, 100e9, link_efficiency=0.5) == pytest.approx(0.035)


def test_trivial_cases() -> None:
    assert C.all_reduce(1e9, 1, 100e9, 1e-3) == 0.0
    assert C.all_reduce(0, 8, 100e9, 1e-3) == 0.0
    assert C.send_recv(0, 1e9) == 0.0


def test_tree_and_auto() -> None:
    # tiny message, p = 64: ring latency 2·63·α, tree 2·6·α
    a = 1e-6
    assert C.all_reduce(8, 64, 1e9, a, algorithm="ring") == pytest.approx(126e-6, rel=1e-3)
    assert C.all_reduce(8, 64, 1e9, a, algorithm="tree") == pytest.approx(12e-6, rel=1e-2)
    assert C.all_reduce(8, 64, 1e9, a, algorithm="auto") == C.all_reduce(8, 64, 1e9, a,
                                                                          algorithm="tree")
    with pytest.raises(SpecError, match="algorithm"):
        C.all_reduce(8, 64, 1e9, a, algorithm="butterfly")


@pytest.mark.parametrize("p", [2, 8, 64])
def test_nccl_busbw_equals_link_bandwidth(p: int) -> None:
    """NCCL: busbw = algbw × factor, factor 2(p−1)/p for all-reduce, (p−1)/p for all-gather;
    with α = 0 a ring's busbw is exactly the link bandwidth."""
    n, bw = 4e9, 200e9
    for name, f in (("all_reduce", C.all_reduce), ("all_gather", C.all_gather),
                    ("reduce_scatter", C.reduce_scatter), ("all_to_all", C.all_to_all)):
        algbw = n / f(n, p, bw)
        assert algbw * C.bus_factor(name, p) == pytest.approx(bw)
    assert C.bus_factor("all_reduce", 8) == pytest.approx(1.75)


def test_one_pass_and_p2p() -> None:
    # all-gather of a 1 GB output over 4 ranks at 50 GB/s: 3/4 · 1e9/50e9 = 15 ms, + 3 α
    assert C.all_gather(1e9, 4, 50e9, 1e-6) == pytest.approx(0.015 + 3e-6)
    assert C.reduce_scatter(1e9, 4, 50e9) == pytest.approx(0.015)
    assert C.send_recv(1e9, 50e9, 1e-6) == pytest.approx(0.02 + 1e-6)


def test_hierarchical_hand() -> None:
    # 1 GB, 8 inside at 300 GB/s, 16 across at 25 GB/s:
    # RS inside 7/8·1e9/300e9 + AR across 2·15/16·(1e9/8)/25e9 + AG inside 7/8·1e9/300e9
    want = 2 * 7 / 8 * 1e9 / 300e9 + 2 * 15 / 16 * 1.25e8 / 25e9
    assert C.hierarchical_all_reduce(1e9, 8, 16, 300e9, 25e9) == pytest.approx(want)


@pytest.mark.parametrize("kw", [dict(n=-1.0), dict(p=0), dict(bw=0.0), dict(eff=1.5)])
def test_bad_arguments(kw: dict[str, float]) -> None:
    args = dict(n=1e6, p=4, bw=1e9, eff=1.0) | kw
    with pytest.raises(SpecError):
        C.all_reduce(args["n"], int(args["p"]), args["bw"], link_efficiency=args["eff"])


LINKS = C.Links(domain=8, up_bw=300e9, up_alpha=2e-6, out_bw=25e9, out_alpha=6e-6)


def test_vectorised_matches_scalar_reference() -> None:
    n = 2e9
    # a group inside one domain: a ring on NVLink
    assert C.group_all_reduce(n, 8, 1, LINKS) == pytest.approx(C.all_reduce(n, 8, 300e9, 2e-6))
    # one rank per domain (stride 8): the faster of a ring and a tree on the NICs
    assert C.group_all_reduce(n, 16, 8, LINKS) == pytest.approx(
        C.all_reduce(n, 16, 25e9, 6e-6, algorithm="auto"))
    assert C.group_ring_all_reduce(n, 16, 8, LINKS) == pytest.approx(
        C.all_reduce(n, 16, 25e9, 6e-6))
    # 2 per domain (stride 4) × 32 domains: NCCL's pipelined ring, 2·63 steps of which 2·31
    # cross domains, at min(300, 2 × 25) = 50 GB/s (the two ranks' NICs together)
    ring = 2 * 32 * 2e-6 + 2 * 31 * 6e-6 + 2 * 63 / 64 * n / 50e9
    assert C.group_ring_all_reduce(n, 64, 4, LINKS) == pytest.approx(ring)
    assert C.group_reduce_scatter(n, 64, 4, LINKS) == pytest.approx(ring / 2)
    # the tree: a chain of 2 inside, ⌈log₂32⌉ = 5 levels across, the ring's bandwidth
    tree = 2 * (1 * 2e-6 + 5 * 6e-6) + 2 * 63 / 64 * n / 50e9
    assert C.group_all_reduce(n, 64, 4, LINKS) == pytest.approx(min(ring, tree))
    assert tree < ring
    # the pipelined ring is faster than the three phases one after the other
    assert ring < C.hierarchical_all_reduce(n, 2, 32, 300e9, 25e9, 2e-6, 6e-6)
    assert C.group_all_to_all(n, 8, 1, LINKS) == pytest.approx(C.all_to_all(n, 8, 300e9, 2e-6))
    # 16 ranks on two domains of 8: 7/16 of the bytes to the rank's own node's peers over the
    # scale-up link (7 latencies), 8/16 to the other node's over the scale-out link (8); the
    # slower binds (session 31: every byte was priced at the scale-out link before)
    a2a = max(7 * 2e-6 + 7 / 16 * n / 300e9, 8 * 6e-6 + 8 / 16 * n / 25e9)
    assert C.group_all_to_all(n, 16, 1, LINKS) == pytest.approx(a2a)
    assert a2a < C.all_to_all(n, 16, 25e9, 6e-6)
    assert C.group_send_recv(n, True, LINKS) == pytest.approx(C.send_recv(n, 25e9, 6e-6))


def test_vectorised_arrays_equal_scalar_path() -> None:
    n = np.array([1e6, 1e9, 3e9, 0.0])
    p = np.array([1.0, 8.0, 64.0, 4.0])
    s = np.array([1.0, 1.0, 2.0, 8.0])
    arr = C.group_all_reduce(n, p, s, LINKS)
    for i in range(4):
        one = C.group_all_reduce(float(n[i]), float(p[i]), float(s[i]), LINKS, SCALAR)
        assert math.isclose(arr[i], one, rel_tol=1e-12, abs_tol=0.0)
    assert arr[0] == 0.0 and arr[3] == 0.0


def test_per_call_latency_convention_hand() -> None:
    # serving's convention: α once per call, whatever p. 1 GB over 8 ranks at 100 GB/s:
    # 2·7/8·1e9/100e9 = 0.0175 s, + 5 us once (not 2·7·5 us = 70 us per ring step)
    assert C.all_reduce(1e9, 8, 100e9, 5e-6, latency="call") == pytest.approx(0.0175 + 5e-6)
    # all-gather of 1 GB over 4 ranks at 50 GB/s: 3/4·1e9/50e9 = 15 ms, + 1 us once
    assert C.all_gather(1e9, 4, 50e9, 1e-6, latency="call") == pytest.approx(0.015 + 1e-6)
    assert C.reduce_scatter(1e9, 4, 50e9, 1e-6, latency="call") == pytest.approx(0.015 + 1e-6)
    assert C.all_to_all(1e9, 4, 50e9, 1e-6, latency="call") == pytest.approx(0.015 + 1e-6)
    # the two conventions agree when α = 0, and on one rank nothing moves
    assert C.all_reduce(1e9, 8, 100e9, 0.0, latency="call") == C.all_reduce(1e9, 8, 100e9)
    assert C.all_reduce(1e9, 1, 100e9, 5e-6, latency="call") == 0.0
    with pytest.raises(SpecError, match="latency='hop'.*step, call"):
        C.all_reduce(1e9, 8, 100e9, latency="hop")


def test_serving_all_reduce_is_the_per_call_collective() -> None:
    """Serving's NCCL path (engine 'eager') is ops.collectives with latency='call' (one module,
    one formula): α(p) = allreduce_alpha + allreduce_alpha_per_rank·(p − 2), floored by the link
    latency."""
    import roofline as rl
    from roofline.scenarios.serving import allreduce_time
    from roofline.scenarios.serving.plan import serving_factors

    hw, f = rl.hardware("H100"), serving_factors("eager")
    lk = hw.scale_up_link
    assert lk is not None and not f.allreduce_custom
    n, p = 8 * 4096 * 2.0, 8
    alpha = max(lk.latency_s if math.isfinite(lk.latency_s) else 0.0,
                f.allreduce_alpha + f.allreduce_alpha_per_rank * (p - 2))
    want = alpha + 2 * (p - 1) / p * n / (lk.bytes_per_s * f.allreduce_efficiency)
    assert allreduce_time(n, p, hw, f) == pytest.approx(want, rel=1e-12)


def test_nvls_all_reduce_hand() -> None:
    # 4 GiB at an NVLS algbw of 274.5 GB/s: 4294967296 / 274.5e9 = 15.646 ms, + 2 α (2 us each)
    n = 4294967296
    assert C.nvls_all_reduce(n, 8, 274.5e9, 2e-6) == pytest.approx(n / 274.5e9 + 4e-6)
    assert C.nvls_all_reduce(n, 1, 274.5e9) == 0.0
    # the bytes per rank do not grow with p: the same time at 4 and 8 ranks
    assert C.nvls_all_reduce(n, 4, 274.5e9) == C.nvls_all_reduce(n, 8, 274.5e9)
    # auto: the faster of ring, tree and NVLS; large messages on 8 ranks -> NVLS
    ring = C.all_reduce(n, 8, 450e9, 2e-6, link_efficiency=0.7)
    auto = C.all_reduce(n, 8, 450e9, 2e-6, link_efficiency=0.7, algorithm="auto",
                        nvls_bw=274.5e9)
    assert auto == pytest.approx(C.nvls_all_reduce(n, 8, 274.5e9, 2e-6)) and auto < ring
    # 2 ranks: the ring moves n bytes per rank at 315 GB/s, faster than NVLS at 274.5
    assert C.all_reduce(n, 2, 450e9, link_efficiency=0.7, algorithm="auto",
                        nvls_bw=274.5e9) == pytest.approx(C.all_reduce(n, 2, 450e9,
                                                                      link_efficiency=0.7))
    with pytest.raises(SpecError, match="nvls_bw"):
        C.all_reduce(n, 8, 450e9, algorithm="nvls")


def test_group_all_reduce_takes_nvls_inside_a_domain_only_for_all_reduce() -> None:
    ring = C.Links(domain=8, up_bw=315e9, up_alpha=2e-6, out_bw=35e9, out_alpha=6e-6)
    nv = C.Links(domain=8, up_bw=315e9, up_alpha=2e-6, out_bw=35e9, out_alpha=6e-6,
                 nvls_bw=274.5e9)
    n = 1e9
    # one node, 8 ranks: NVLS 2α + n/bw_nvls
    assert C.group_all_reduce(n, 8, 1, nv, SCALAR) == pytest.approx(4e-6 + n / 274.5e9)
    # 16 ranks over 2 nodes: NVLS-tree, each of the 8 ranks' shard once across on its NIC,
    # pipelined with NVLS: n / min(274.5, 8 × 35) GB/s + 2 α_up + 2 · 1 level · α_out
    assert C.group_all_reduce(n, 16, 1, nv, SCALAR) == pytest.approx(
        4e-6 + 12e-6 + n / 274.5e9)
    # 32 ranks over 4 nodes: the tree sends each shard twice: n / min(274.5, 8 × 35 / 2);
    # the tree's 2(p−1)/p · n at min(315, 8 × 35) = 280 GB/s is faster, so NVLS gains nothing
    # there (as measured: NVIDIA/nccl #1221, docs/validation/collectives.md)
    nvls_tree = 4e-6 + 2 * 2 * 6e-6 + n / 140e9
    tree = 2 * (7 * 2e-6 + 2 * 6e-6) + 2 * 31 / 32 * n / 280e9
    assert tree < nvls_tree
    assert C.group_all_reduce(n, 32, 1, nv, SCALAR) == pytest.approx(tree)
    # reduce-scatter / all-gather stay half the ring all-reduce
    assert C.group_reduce_scatter(n, 8, 1, nv, SCALAR) == \
        pytest.approx(0.5 * C.group_all_reduce(n, 8, 1, ring, SCALAR))
    assert C.group_all_gather(n, 8, 1, nv) == pytest.approx(C.group_all_gather(n, 8, 1, ring))
    # the vectorised path agrees with the scalar one
    vec = C.group_all_reduce(np.array([n, n]), np.array([8.0, 16.0]), np.ones(2), nv)
    assert vec[0] == pytest.approx(C.group_all_reduce(n, 8, 1, nv, SCALAR))
    assert vec[1] == pytest.approx(C.group_all_reduce(n, 16, 1, nv, SCALAR))


def test_nvls_reduce_scatter_and_all_gather_hand() -> None:
    """NVLS reduce-scatter / all-gather: the busier direction carries n bytes (NVIDIA/nccl
    #1083), so t = 2α + n / nvls_bw, the all-reduce's; the ring's (p−1)α + (p−1)/p · n/bw."""
    n = 2**30
    assert C.nvls_one_pass(n, 8, 274.5e9, 2e-6) == pytest.approx(4e-6 + n / 274.5e9)
    for f in (C.reduce_scatter, C.all_gather):
        nv = f(n, 8, 450e9, 2e-6, link_efficiency=0.7, algorithm="nvls", nvls_bw=274.5e9)
        assert nv == pytest.approx(4e-6 + n / 274.5e9)
        ring = f(n, 8, 450e9, 2e-6, link_efficiency=0.7)
        assert ring == pytest.approx(7 * 2e-6 + 7 / 8 * n / 315e9)
        # large message: the ring is faster; a 64 KiB one: NVLS's 2 steps beat the ring's 7
        assert f(n, 8, 450e9, 2e-6, link_efficiency=0.7, algorithm="auto",
                 nvls_bw=274.5e9) == ring
        small = f(65536, 8, 450e9, 2e-6, link_efficiency=0.7, algorithm="auto",
                  nvls_bw=274.5e9)
        assert small == pytest.approx(4e-6 + 65536 / 274.5e9)
        with pytest.raises(SpecError, match="nvls_bw"):
            f(n, 8, 450e9, algorithm="nvls")
        with pytest.raises(SpecError, match="algorithm"):
            f(n, 8, 450e9, algorithm="tree")
    # the groups keep the ring on an NVLS fabric (NCCL's choice, module docstring)
    nv_links = C.Links(domain=8, up_bw=315e9, up_alpha=2e-6, out_bw=35e9, out_alpha=6e-6,
                       nvls_bw=274.5e9)
    assert C.group_reduce_scatter(65536.0, 8, 1, nv_links, SCALAR) == \
        pytest.approx(7 * 2e-6 + 7 / 8 * 65536 / 315e9)


def test_alpha_model_two_domain_tree_by_hand() -> None:
    """The per-step α model (no NCCL tuner) prices the tree on exactly two domains as NCCL's
    path does (``_tree_bw``): each node's two trees send n across and receive n, so the tree's
    bus bandwidth is min(bw_up, 2·i·bw_out) = min(300, 2 × 8 × 25) = 300 GB/s, where the ring's
    is min(300, 8 × 25) = 200; from three domains on the tree runs at the ring's."""
    n = 2e9
    tree = 2 * (7 * 2e-6 + 1 * 6e-6) + 2 * 15 / 16 * n / 300e9
    ring = 2 * 14 * 2e-6 + 2 * 1 * 6e-6 + 2 * 15 / 16 * n / 200e9
    assert C.group_ring_all_reduce(n, 16, 1, LINKS) == pytest.approx(ring)
    assert C.group_all_reduce(n, 16, 1, LINKS) == pytest.approx(tree) and tree < ring
    tree3 = 2 * (7 * 2e-6 + 2 * 6e-6) + 2 * 23 / 24 * n / 200e9  # ⌈log₂3⌉ = 2 levels
    assert C.group_all_reduce(n, 24, 1, LINKS, SCALAR) == pytest.approx(
        min(tree3, C.group_ring_all_reduce(n, 24, 1, LINKS, SCALAR)))
