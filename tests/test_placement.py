"""Strided groups over scale-up domains, counted by hand (``ops.placement``)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.ops import collectives as C
from roofline.ops.xp import SCALAR

NVL72 = C.Links(domain=72, up_bw=900e9, up_alpha=3e-6, out_bw=50e9, out_alpha=8e-6)
LINKS = C.Links(domain=8, up_bw=300e9, up_alpha=2e-6, out_bw=25e9, out_alpha=6e-6)


def test_uneven_shares_counted_by_hand() -> None:
    # NVL72, EP 16 spaced 8 apart: ranks r, r+8, ..., r+120; domain 0 (ranks 0-71) holds
    # r + 8j for j = 0..8 (r + 64 ≤ 71 for every r < 8): 9 ranks; domain 1 the other 7
    assert C.group_placement(16, 8, 72, SCALAR) == (7.0, 9.0, 2.0)
    assert C.group_split(16, 8, 72, SCALAR) == (7.0, 2.0)  # was (1, 16): one rank a domain
    # DP 12 on 8-GPU nodes: ranks 0-7 and 8-11
    assert C.group_placement(12, 1, 8, SCALAR) == (4.0, 8.0, 2.0)
    # a stride that does not divide the domain: 8 ranks spaced 16 apart on 72; r = 0:
    # 0, 16, 32, 48, 64 | 80, 96, 112 (5 + 3); r = 8: 8, ..., 56 | 72, ..., 120 (4 + 4)
    assert C.group_placement(8, 16, 72, SCALAR) == (3.0, 5.0, 2.0)
    # even shares as before: 64 ranks spaced 4 on 8-GPU nodes, 2 a node over 32 nodes;
    # a stride of a whole domain: one rank a domain; inside one domain
    assert C.group_placement(64, 4, 8, SCALAR) == (2.0, 2.0, 32.0)
    assert C.group_placement(4, 8, 8, SCALAR) == (1.0, 1.0, 4.0)
    assert C.group_placement(4, 2, 8, SCALAR) == (4.0, 4.0, 1.0)


def test_vectorised_placement_equals_scalar() -> None:
    p = np.array([16.0, 12.0, 8.0, 64.0, 4.0, 4.0, 1.0])
    s = np.array([8.0, 1.0, 16.0, 4.0, 8.0, 2.0, 1.0])
    arr = C.group_placement(p, s, 72)
    for k in range(p.size):
        assert tuple(a[k] for a in arr) == C.group_placement(p[k], s[k], 72, SCALAR)


def test_all_to_all_uneven_binds_on_the_slowest_rank() -> None:
    n = 1e9
    # 9 + 7: a rank of the 9 sends 8/16 of n over NVLink (8 peers), a rank of the 7 sends 9/16
    # over the scale-out link (9 peers): each binds its own link
    t = max(8 * 3e-6 + 8 / 16 * n / 900e9, 9 * 8e-6 + 9 / 16 * n / 50e9)
    assert C.group_all_to_all(n, 16, 8, NVL72) == pytest.approx(t)
    assert C.group_all_to_all(n, 16, 8, NVL72, SCALAR) == pytest.approx(t)
    # before: one rank a domain, 15/16 of n over the scale-out link
    assert t < 15 * 8e-6 + 15 / 16 * n / 50e9
    # DP 12 on nodes of 8: the 4-rank node's ranks send 8/12 over InfiniBand
    t12 = max(7 * 2e-6 + 7 / 12 * n / 300e9, 8 * 6e-6 + 8 / 12 * n / 25e9)
    assert C.group_all_to_all(n, 12, 1, LINKS) == pytest.approx(t12)


def test_ring_uneven_binds_on_the_emptiest_domain() -> None:
    n = 1e9
    # all-gather of 12 ranks on 8 + 4: 12 steps, 2 crossing; the 4-rank node's boundary
    # carries the ring over its 4 NICs: min(300, 4 × 25) = 100 GB/s
    ring = 2 * 10 * 2e-6 + 2 * 1 * 6e-6 + 2 * 11 / 12 * n / 100e9
    assert C.group_ring_all_reduce(n, 12, 1, LINKS) == pytest.approx(ring)
    assert C.group_all_gather(n, 12, 1, LINKS) == pytest.approx(ring / 2)
