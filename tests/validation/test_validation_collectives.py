"""NCCL collectives on NVSwitch nodes and an NVL72 rack against published nccl-tests bus
bandwidths (docs/validation/collectives.md).

Tolerance, stated: over the peak NVLS all-reduce cases (4 GiB and more, forced NVLS or NCCL's
default) median |error| of the bus bandwidth ≤ 5 % and every case within 15 %, with the shipped
NVLS fractions (NVLink 4: 0.61, NVLink 5: 0.488); the ring reduce-scatter sweep within 15 %;
the mid-size ramp (the NVL72 sweep below 4 GiB, 1 - 256 MiB across nodes) with the NVLS
pipeline's fill (ops.nccl.nvls_fill_bytes) within 25 %; the latency regime (8 B - 1 MiB across
nodes) within 25 % with NCCL's tuner latencies (ops/nccl.py).
The page's tables are what the code computes today.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from roofline.ops import collectives as coll
from roofline.validation import collectives as v
from roofline.validation import load_cases
from roofline.validation.collectives_nics import nic_figures
from roofline.validation.regenerate import quoted_figures

DOC = Path(__file__).parents[2] / "docs" / "validation" / "collectives.md"


def _coll(c) -> str:
    return c.get("collective", "all_reduce")


def test_nvls_cases_within_tolerance() -> None:
    peak = {c.id for c in v._fit_cases(v.collective_cases())}
    res = [(c, e) for c, _, e in v.collective_errors() if c.id in peak]
    err = np.array([e for _, e in res])
    assert len(err) == 12
    assert np.median(np.abs(err)) <= 0.05, np.round(err, 3)
    assert np.abs(err).max() <= 0.15
    assert (err > 0).any() and (err < 0).any()  # not fitted per case


def test_reduce_scatter_ring_sweep() -> None:
    """8x H100 reduce-scatter, ring, 128 MiB - 8 GiB (NVIDIA/nccl #1047): within 15 %; ours
    is the ring at training's 0.70 of 450 GB/s, the measured busbw climbs to 0.80 of it."""
    rs = [(c, b, e) for c, b, e in v.collective_errors() if c.source == "nccl1047"]
    assert len(rs) == 7
    assert max(abs(e) for _, _, e in rs) <= 0.15
    # hand: 1 GiB over 8 ranks, NCCL's ring Simple latency 8.4 + 7 x 3.4 us + 7/8 of n at
    # 315 GB/s (LL128: 14 + 7 x 1.9 us but 0.92 of the bandwidth); busbw = 7/8 n / t
    c = next(c for c, _, _ in rs if c["bytes"] == 2**30)
    t = (8.4 + 7 * 3.4) * 1e-6 + 0.875 * 2**30 / 315e9
    assert v.predict_busbw(c) == pytest.approx(0.875 * 2**30 / t, rel=1e-9)
    # both grow with the message size (ours through the fixed latency only)
    ours = [b for _, b, _ in sorted(rs, key=lambda r: r[0]["bytes"])]
    meas = [c.value_si for c, _, _ in sorted(rs, key=lambda r: r[0]["bytes"])]
    assert ours == sorted(ours) and meas == sorted(meas)


def test_nvls_reduce_scatter_is_slower_than_the_ring_at_large_sizes() -> None:
    """NCCL's developer: NVLS reduce-scatter sends n, the ring (p-1)/p n (NVIDIA/nccl #1083);
    on the H100 link NVLS gives busbw 274.5 x 7/8 = 240 GB/s (after NCCL's 25 us NVLS latency),
    under the ring's 315 (ours) and 358 (measured, #1047 at 4 GiB): auto takes the ring, as
    NCCL does."""
    c = load_cases("collectives").case("H100 x8 reduce-scatter ring 4 GiB")
    n = 2**32
    nv = v.predict_busbw(replace(c, scenario={**c.scenario, "algorithm": "nvls"}))
    assert nv == pytest.approx(0.875 * n / (25e-6 + n / 274.5e9), rel=1e-9)
    assert nv / 1e9 == pytest.approx(239.8, abs=0.1)
    assert nv < v.predict_busbw(c) < c.value_si
    auto = coll.reduce_scatter(n, 8, 450e9, 2e-6, link_efficiency=0.7, algorithm="auto",
                               nvls_bw=274.5e9)
    assert auto == coll.reduce_scatter(n, 8, 450e9, 2e-6, link_efficiency=0.7)


def test_nvl72_sweep_ramps_with_the_nvls_fill() -> None:
    """A full NVL72 rack (coreweave/nccl-tests #43): the measured busbw ramps from 586 GB/s at
    512 MiB to 839 at 4 GiB. Without the NVLS pipeline's fill ours is flat (over +40 % at
    512 MiB); with it (2 loops of 32 channels x 32 heads x the chunk: 64 KiB below 8 GiB,
    i.e. 128 MiB) the error falls with the size from +16 % and is within 4 % from 4 GiB."""
    sw = sorted([(c["bytes"], c, e) for c, _, e in v.collective_errors()
                 if c.source == "coreweave43"], key=lambda r: r[0])
    errs = [e for _, _, e in sw]
    assert len(errs) == 5 and 0.10 < errs[0] < 0.20
    assert all(a > b for a, b in zip(errs[:3], errs[1:4], strict=True))
    assert max(abs(e) for n, _, e in sw if n >= 2**32) <= 0.04
    c512 = sw[0][1]
    flat = v.predict(c512, v.shipped_nvls() | {"nvls_fill": 0.0}) / c512.value_si - 1
    assert flat > 0.40
    # hand: 512 MiB, NVLS 25 us + (n + 2 x 64 MiB) / (0.488 x 900 GB/s); busbw = 2 71/72 n / t
    n = 2.0**29
    t = 25e-6 + (n + 128 * 2**20) / (0.488 * 900e9)
    assert v.predict_busbw(c512) == pytest.approx(2 * 71 / 72 * n / t, rel=1e-9)


def test_the_ring_alone_was_a_third_too_slow() -> None:
    """Without NVLS the H100 8-GPU all-reduce is the ring at 0.70 of 450 GB/s: busbw 315 GB/s,
    34 % below the published 480 (issue 18, item 5)."""
    c = load_cases("collectives").case("H100 x8 all-reduce (NCCL default: NVLS)")
    n = 4294967296
    # NCCL's ring Simple latency 8.4 + 2(p-1) x 3.4 us, 2(p-1)/p of n at 315 GB/s
    t_ring = (8.4 + 14 * 3.4) * 1e-6 + 1.75 * n / 315e9
    assert v.predict_busbw(c, 0.0) == pytest.approx(1.75 * n / t_ring, rel=1e-9)
    assert 1.75 * n / t_ring / 1e9 == pytest.approx(314.3, abs=0.1)
    # with NVLS: NCCL's 25 us + n at 0.61 · 450 = 274.5 GB/s, and the pipeline's fill, 2 loops
    # of 16 channels x 8 heads x 128 KiB = 32 MiB; busbw = 1.75 n / t = 475.9
    t_nvls = 25e-6 + (n + 2**25) / 274.5e9
    assert v.predict_busbw(c) == pytest.approx(1.75 * n / t_nvls, rel=1e-9)
    assert 1.75 * n / t_nvls / 1e9 == pytest.approx(475.9, abs=0.1)


def _multi_node():
    """The busbw rows across nodes, less nccl-tests #119 (judged on its own below: the one row
    the one NIC efficiency misses by more than 30 %)."""
    return [(c, b, e) for c, b, e in v.collective_errors()
            if c.metric == "busbw" and c["ranks"] > 8
            and c.source not in ("coreweave43", "nccltests119")]


def test_across_nodes_within_tolerance_and_closer_than_the_phased_model() -> None:
    """Multi-node runs (2-128 nodes, 16-1024 GPUs): NCCL's pipelined ring / tree / NVLS-tree
    within 30 %, median within 20 %; the three-phase model the page started from was further
    off on every one (−21 … −52 % on the InfiniBand / RoCE rows, −11 … +30 % on AWS p4d)."""
    mn = _multi_node()
    assert len(mn) == 24
    err = np.array([e for _, _, e in mn])
    assert np.abs(err).max() <= 0.30 and np.median(np.abs(err)) <= 0.20, np.round(err, 3)
    worse = [c.id for c, _, e in mn if abs(e) >= abs(v._previous(c) / c.value_si - 1)]
    assert worse == []


def test_nvls_gains_on_two_nodes_not_on_four() -> None:
    """NVIDIA/nccl #1221: NVLS raises 2-node busbw 330 -> 430 GB/s, on 4 nodes 320 either way;
    ours: NVLS-tree beats the ring / tree on 2 nodes (each shard crosses once), not on 4 (the
    tree crosses twice: n / min(274.5, 8 x 35 / 2) against 2(p-1)/p n at 280 GB/s)."""
    b = {c.id: b for c, b, _ in v.collective_errors()}
    two_on, two_off = b["H100 x16 (2 nodes) all-reduce, NVLS on"], \
        b["H100 x16 (2 nodes) all-reduce, NVLS off"]
    four_on, four_off = b["H100 x32 (4 nodes) all-reduce, NVLS on"], \
        b["H100 x32 (4 nodes) all-reduce, NVLS off"]
    assert two_on > 1.5 * two_off
    assert four_on == pytest.approx(four_off, rel=1e-12)
    # hand: 2 nodes, NVLS-tree n / 274.5 GB/s + NCCL's 25 us + 2 x 14 us, and the fill: 2 loops
    # of 16 channels x 8 heads x 128 KiB = 32 MiB; busbw 2 · 15/16 · n / t
    n = 8589934592
    t = 53e-6 + (n + 2**25) / 274.5e9
    assert two_on == pytest.approx(1.875 * n / t, rel=1e-9)


def test_rank_count_dependence_of_the_ring() -> None:
    """Reduce-scatter on 4 -> 128 nodes (NVIDIA/nccl #1229): measured busbw falls 360 -> 260
    GB/s; ours falls too (the ring's latency, NCCL's (p − o) intra-node and (o − 1) network
    steps, grows with the ranks), by less (277 -> 227; the per-step α model: 279 -> 240): the
    rest of the decline is not modelled (stated)."""
    rs = sorted([(c["ranks"], b, c.value_si) for c, b, _ in v.collective_errors()
                 if c.source == "nccl1229"])
    ours = [b for _, b, _ in rs]
    meas = [m for _, _, m in rs]
    assert ours == sorted(ours, reverse=True) and meas == sorted(meas, reverse=True)
    assert 0.05 < 1 - ours[-1] / ours[0] < 1 - meas[-1] / meas[0]
    alpha = sorted((c["ranks"], v.predict(c, tuner=False)) for c in v.collective_cases()
                   if c.source == "nccl1229")
    assert 1 - alpha[-1][1] / alpha[0][1] < 1 - ours[-1] / ours[0]  # the tuner models more


def test_latency_regime_with_nccls_tuner_latencies() -> None:
    """Tiny messages (time per call) with NCCL's tuner latencies (NCCL v2.26.2 tuning.cc): the
    A100 x256 tree LL 6.8 + 2 (7 x 0.6 + 5 x 5.0) = 65.2 us against 63 (+3.5 %), the H20 2-node
    NVLS-tree 25 + 2 x 14 = 53 us against 47.6 (+11 %); the per-step α model missed both
    (+40 % / −66 %: 88 and 16 us)."""
    lat = {c.id: (c, b, e) for c, b, e in v.collective_errors()
           if c.metric == "time" and c["bytes"] == 8}
    assert len(lat) == 2
    c, b, e = lat["A100 x256 (32 nodes, 4 HDR) all-reduce, 8 B"]
    assert b == pytest.approx(65.2e-6, rel=1e-3) and abs(e) < 0.05  # + 8 B of bandwidth
    assert v.predict(c, tuner=False) == pytest.approx(88e-6, rel=1e-5)
    c, b, e = lat["H20 x16 (2 nodes) NVLS-tree all-reduce, 8 B"]
    assert b == pytest.approx(53e-6, rel=1e-5) and 0 < e < 0.15
    assert v.predict(c, tuner=False) == pytest.approx(16e-6, rel=1e-5)


def _sweep309():
    return [(c, b, e) for c, b, e in v.collective_errors() if c.source == "nccltests309"]


def test_small_messages_across_nodes_nccl_tests_309() -> None:
    """2, 4 and 8 H100 nodes, 64 B - 1 MiB (nccl-tests #309): with the tuner's latencies every
    one within 25 %, median within 10 %; the per-step α model was 19-72 % too fast on each."""
    small = [(c, b, e) for c, b, e in _sweep309() if c.metric == "time" and c["bytes"] <= 2**20]
    assert len(small) == 7
    err = np.array([e for _, _, e in small])
    assert np.abs(err).max() <= 0.25 and np.median(np.abs(err)) <= 0.10, np.round(err, 3)
    for c, _, e in small:
        a = v.predict(c, tuner=False) / c.value_si - 1
        assert abs(e) < abs(a) and a < -0.15, c.id
    # 2 nodes at 64 B: the tree LL, 6.8 + 2 (7 x 0.6 + 1 x 5.0) = 25.2 us (measured 25.29), and
    # 64 B at half the tree LL's 2-node cap of 39 GB/s, x 0.85 across Hopper nodes (the TREE
    # pattern: tests/test_nccl_search.py)
    c = next(c for c, _, _ in small if c["ranks"] == 16 and c["bytes"] == 64)
    assert v.predict(c) == pytest.approx(25.2e-6 + 64 / (0.5 * 0.85 * 39e9), rel=1e-9)


def test_mid_size_ramp_across_nodes_with_the_nvls_fill() -> None:
    """16 MiB on 2 and 4 nodes (nccl-tests #309): without the NVLSTree pipeline's fill ours was
    23-38 % too fast (114 vs 185 us, 201 vs 260); with it the 2-node case is within 10 % and
    the 4-node one +24 % (too slow: its NVLSTree runs at 8 x 35 / 2 = 140 GB/s, training's
    0.70 NIC efficiency, where the 16 GiB run reached ~188); 256 MiB on 2 nodes +24 -> +11 %."""
    mid = {c["ranks"]: (c, e) for c, _, e in _sweep309() if c["bytes"] == 2**24}
    assert set(mid) == {16, 32}
    assert abs(mid[16][1]) <= 0.10 and 0.15 < mid[32][1] < 0.30
    c = mid[16][0]
    before = v.predict(c, v.shipped_nvls() | {"nvls_fill": 0.0}) / c.value_si - 1
    assert before < -0.30
    # hand, 2 nodes: NVLSTree 25 + 2 x 14 us + (n + 2 x 128 x 64 KiB) / 274.5 GB/s = 175.2 us
    t = 53e-6 + (2**24 + 2**24) / 274.5e9
    assert v.predict(c) == pytest.approx(t, rel=1e-9) and t * 1e6 == pytest.approx(175.2, abs=0.1)
    peak = [e for c, _, e in _sweep309() if c["bytes"] >= 2**33]
    assert len(peak) == 3 and max(abs(e) for e in peak) <= 0.25


def test_single_node_choice_as_nccl_tests_309_reports() -> None:
    """#309 on one H100 node (NCCL 2.26.2): ring LL from 8 B to 1 MB, NVLS Simple from 2 MB; the
    tuner on the dgx-h100 links (training's efficiencies, the measured NVLS rate) picks the
    same."""
    from roofline.ops.nccl import nccl_choice
    from roofline.scenarios.training.factors import cluster_links, training_factors
    from roofline.specs.resolve import cluster

    c = cluster("dgx-h100")
    lk = cluster_links(c, training_factors(c.device.kind))
    assert lk.nccl is not None
    pick = {n: nccl_choice("all_reduce", n, 8, 1, lk.up_bw, lk.nccl, lk.nvls_bw)[:2]
            for n in (8, 2**16, 2**20, 2**21, 2**30)}
    assert pick == {8: ("ring", "LL"), 2**16: ("ring", "LL"), 2**20: ("ring", "LL"),
                    2**21: ("nvls", "Simple"), 2**30: ("nvls", "Simple")}


def test_holdout_each_source_predicted_without_itself() -> None:
    rep = v.collectives_holdout()
    assert {p.source for p in rep.per_source} == {"nccl212", "nccl1455", "nccl272", "nccl1374",
                                                   "nccl2140", "coreweave43", "nccltests309"}
    assert rep.loso.n == 19 and rep.loso.median_abs <= 0.05
    # the fit without the shipped NVLink 4 value's source still lands near it
    w = next(p for p in rep.per_source if p.source == "nccl212")
    assert w.fitted_without.values["nvls"] == pytest.approx(0.61, abs=0.03)
    # NVLink 5: without the NVL72 rack the fraction is the B300 node's (483 + its fill) / 900
    w = next(p for p in rep.per_source if p.source == "coreweave43")
    assert w.fitted_without.values["nvls5"] == pytest.approx(0.544, abs=0.002)
    # the fill: the fit on every case lands near the kernel's 2 loops, but the two sources
    # with mid-size cases pull it apart (stated on the page): each predicts the other worse
    # than the shipped 2 does
    assert rep.refit.values["nvls_fill"] == pytest.approx(2.0, abs=0.2)
    fill = {p.source: p.fitted_without.values["nvls_fill"] for p in rep.per_source}
    assert fill["coreweave43"] < 2.0 < 3.5 < fill["nccltests309"]
    for p in rep.per_source:
        if p.source in ("coreweave43", "nccltests309"):
            assert p.held_out.median_abs > p.in_sample.median_abs


def test_page_shows_what_the_code_computes() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert v.collectives_case_table() in text
    assert v.collectives_holdout_table() in text
    assert v.collectives_ramp_table() in text
    assert v.collectives_ring_tree_table() in text
    assert v.collectives_search_table() in text


def test_search_busbw_by_hand() -> None:
    """NCCL's own ring bandwidth: an H100 node's search gives 12 channels x 30 GB/s = 360 GB/s
    bus; at 4 GiB on 8 GPUs the tuner's ring Simple latency 8.4 + 14 x 3.4 us; busbw =
    2 (p-1)/p n / t. Across 4 nodes 8 x 48 = 384 GB/s, the plateau's 1.4 x the latency 8.4 +
    56 x 3.4 + 6 x 14 us."""
    cases = {c.id: c for c in v.collective_cases()}
    n = 2.0**32
    t = (8.4 + 14 * 3.4) * 1e-6 + n / (360e9 * 8 / 14)
    assert v.search_busbw(cases["H100 x8 ring"]) == pytest.approx(14 / 8 * n / t)
    t4 = 1.4 * (8.4 + 56 * 3.4 + 6 * 14) * 1e-6 + 2 * n / (384e9 * 32 / 62)  # 8 GiB
    assert v.search_busbw(cases["H100 x32 (4 nodes) all-reduce, NVLS off"]) == \
        pytest.approx(62 / 32 * 2 * n / t4)
    rows = v.collectives_search_table().splitlines()[2:]
    assert len(rows) == int(v.collectives_figures()["coll.searchbw.n"])


def test_ring_tree_table_by_hand() -> None:
    """The ring / tree rows: the picks NCCL's tuner makes at these sizes (the tree LL at 64 B
    and 64 KiB, LL128 at 1 MiB from 4 nodes), NCCL's run channels by hand (64 KiB tree LL:
    65536 / (512 threads x 8 B) = 16; 1 MiB tree LL128: 1 MiB / (640 x 8) = 204 -> all 16 of
    the communicator's, tests/test_nccl_search.py) and the 2-node 64 KiB row's latency share:
    25.2 us of ours; the replayed search moves it toward the measurement."""
    table = v.collectives_ring_tree_table()
    rows = {r.split(" | ")[0].lstrip("| "): r.split(" | ") for r in table.splitlines()[2:]}
    r = rows["H100 x16 (2 nodes) all-reduce 64 KiB"]
    assert r[2:4] == ["tree / LL", "16 of 16"]
    t = v.predict_time(next(c for c in v.collective_cases() if c.id == r[0].lstrip("| ")))
    assert r[4] == f"{25.2e-6 / t:.0%}"
    assert abs(float(r[7].rstrip("%"))) < abs(float(r[8].rstrip("%")))
    assert rows["H100 x64 (8 nodes) all-reduce 1 MiB"][2:4] == ["tree / LL128", "16 of 16"]
    assert rows["H100 x16 (2 nodes) all-reduce 64 B"][2:5] == ["tree / LL", "1 of 16", "100%"]
    # NVLSTree (2-node 1 MiB, 16 MiB) and the peak rows are not ring / tree rows
    assert "H100 x16 (2 nodes) all-reduce 1 MiB" not in rows
    assert "H100 x16 (2 nodes) all-reduce 256 MiB" not in rows


def test_prose_figures_are_the_codes() -> None:
    """The figures the page's prose quotes are inline markers holding what
    collectives_figures computes today; two by hand from the case table's own numbers."""
    text = DOC.read_text(encoding="utf-8")
    figs = v.collectives_figures()
    used, stale = quoted_figures(text, figs)
    assert len(used) >= 30 and not stale, stale
    errs = {c.id: (b, e) for c, b, e in v.collective_errors()}
    b, e = errs["H100 x4 NVLS"]
    assert figs["coll.x4"] == f"{b / 1e9:.0f}" and figs["coll.x4.err"] == f"{e * 100:+.0f} %"
    small = sorted(abs(e) for c, _, e in v.collective_errors()
                   if c.source == "nccltests309" and c["bytes"] <= 2**20)
    assert figs["coll.small.within"] == f"{small[-1] * 100:.0f} %"


def test_ring_tree_alternative_by_hand() -> None:
    """4 H100 nodes, 16 MiB: the tuner's best ring / tree is the tree LL128, latency 14 + 2 (7 x
    1.25 + 2 x 8.5) = 65.5 us, bus bandwidth min(280 x 0.92 x 120/128, 8 x 29) x 0.85 = 197.2
    GB/s, algbw / 2 x 0.9 (LL128 at 2^24 B); NVLSTree (25 + 2 x 2 x 14 = 81 us) is preferred
    above n / (t - 81 us)."""
    c = next(c for c in v.collective_cases() if c.id == "H100 x32 (4 nodes) all-reduce 16 MiB")
    a, pr, sec, flip = v.ring_tree_alternative(c)
    n = 2.0**24
    t = 65.5e-6 + n / (0.5 * 0.85 * 232e9 * 0.9)
    assert (a, pr) == ("tree", "LL128") and sec == pytest.approx(t)
    assert flip == pytest.approx(n / (t - 81e-6))
    assert v.predict_time(c) > sec  # ours runs NVLSTree (140 GB/s > flip) and pays its fill


def test_fewer_nics_than_gpus_judged() -> None:
    """AWS p4d (8 A100, 4 EFA of 12.5 GB/s; nccl #527, 1 GiB, nothing fitted on it): each GPU
    priced at its share of the node's NICs (6.25 GB/s) is within 20 % on 2, 3 and 4 nodes (the
    2-node row through the tree at twice the ring's bus bandwidth); a NIC per GPU at the NIC's
    own rate would be more than twice too fast on every row."""
    rows = [c for c in v.collective_cases() if c["cluster"] == "aws-p4d"]
    assert [c["ranks"] for c in rows] == [16, 24, 32]
    for c in rows:
        assert abs(v.predict(c) / c.value_si - 1) <= 0.20, c.id
    figs = nic_figures()
    assert all(float(figs[f"coll.p4d.{k}.naive"].strip(" %+")) > 100 for k in (2, 3, 4))
    assert figs["coll.p4d.2.ringtree"].startswith("−")  # the tree at the ring's rate: too slow


def test_three_hdr_nodes_too_slow_nccl_tests_119() -> None:
    """nccl-tests #119 (3 nodes, 8 A100 and 4 HDR of 25 GB/s each: 12.5 GB/s per GPU; two Intel
    Xeon 8358 per node; peak busbw ~96 GB/s at up to 128 MiB): ours is a third too slow, the
    largest miss across nodes. By hand, the ring's bound: 8 GPUs x 12.5 GB/s x 0.70 = 70 GB/s
    bus, less the tuner's ring Simple latency on Intel hosts, (8.4 + 42 x 3.4 + 4 x 14) x 1.4 =
    290.08 us (v2.26.2 tuning.cc: intra steps at max(3.4, 3 x 1 us net overhead), 4 network
    steps of 14 us, the ring's plateau): 2 x 23/24 x 128 MiB / (290.08 us + 2 x 23/24 x 128 MiB
    / 70 GB/s) = 64.88 GB/s. At an efficiency of 1.0 (the NICs' line rate) it is still too
    slow, so the NIC efficiency alone cannot close it."""
    from roofline.validation import collectives_fabric as fab

    c = next(c for c in v.collective_cases() if c.source == "nccltests119")
    assert (c["ranks"], c["nics"], c["scale_out_gbps"], c.get("fabric"), c.get("host")) == \
        (24, 4, 12.5, "ib", "intel")
    ours = v.predict(c)
    bus = 2 * 23 / 24 * 2**27
    lat = (8.4 + 42 * 3.4 + 4 * 14) * 1.4e-6
    assert ours == pytest.approx(bus / (lat + bus / 70e9), rel=1e-6)
    from roofline.ops.collectives import group_nccl_choice

    assert group_nccl_choice("all_reduce", bus * 24 / 46, 24, 1, v.case_links(c))[:2] == \
        ("ring", "Simple")
    assert -0.40 < ours / c.value_si - 1 < -0.30
    assert fab._log_error(c, 1.0) < 0
    assert fab._log_error(c, 0.70) == pytest.approx(np.log(ours / c.value_si))


def test_a_case_host_cpu_sets_the_tuners_host_constants() -> None:
    """``host`` on a case prices it with NCCL's constants for that CPU vendor (v2.26.2
    tuning.cc getNetOverhead: Intel 1 us, AMD 2 us; llMaxBws' rows for 3+ nodes: Intel 20.4,
    AMD 19.0 GB/s); the DGX A100 file's hosts are AMD. An unknown vendor is refused."""
    from dataclasses import replace

    from roofline.errors import SpecError
    from roofline.specs.nccl import tuner_for

    c = next(c for c in v.collective_cases() if c.source == "nccltests119")
    intel = v.case_links(c).nccl
    amd = v.case_links(replace(c, scenario={**c.scenario, "host": "amd"})).nccl
    dgx = v.case_links(replace(c, scenario={k: x for k, x in c.scenario.items()
                                        if k != "host"})).nccl
    assert (intel.net_overhead_s, intel.ll_max_more_nodes) == (1e-6, 20.4e9)
    assert (amd.net_overhead_s, amd.ll_max_more_nodes) == (2e-6, 19.0e9)
    assert dgx == amd  # the cluster's own hosts
    assert intel.search_nodes == amd.search_nodes  # the search does not depend on the CPU
    with pytest.raises(SpecError, match=r"host 'arm'.*'amd', 'intel'"):
        tuner_for(v.case_cluster(c), "arm")


def test_aws_p5_rows_by_hand() -> None:
    """AWS p5 (32 EFA of 12.5 GB/s for 8 H100: 50 GB/s per GPU, the EC2 User Guide's 3,200
    Gb/s; AMD hosts), judged on the p5bench sweep at 8 GiB. By hand, 4 nodes: NCCL's ring
    Simple at training's 0.70 x 8 x 50 = 280 GB/s bus, latency (8.4 + 56 x 6 + 6 x 14) x 1.4 =
    599.76 us (AMD host: intra steps at max(3.4, 3 x 2 us net overhead)): 2 x 31/32 x 8 GiB /
    (599.76 us + 2 x 31/32 x 8 GiB / 280 GB/s) = 277.20 GB/s, ~22 % under the measured 357."""
    from roofline.ops.collectives import group_nccl_choice
    from roofline.specs.resolve import cluster

    c5 = cluster("aws-p5", 2)
    assert (c5.nics, c5.nic_bytes_per_s, c5.scale_out_bytes_per_s) == (32, 12.5e9, 50e9)
    rows = {c["ranks"]: c for c in v.collective_cases() if c.source == "p5bench"}
    assert sorted(rows) == [16, 32, 64, 128, 256]
    c = rows[32]
    bus = 2 * 31 / 32 * 2**33
    t = (8.4 + 56 * 6 + 6 * 14) * 1.4e-6 + bus / 280e9
    assert group_nccl_choice("all_reduce", 2**33, 32, 1, v.case_links(c))[:2] == ("ring", "Simple")
    assert v.predict(c) == pytest.approx(bus / t, rel=1e-9)
    assert v.predict(c) / c.value_si - 1 == pytest.approx(-0.2235, abs=0.001)
    # 2 nodes: NVLSTree (NVLS assumed on p5), faster than the NICs' ring bound of 8 x 50 GB/s
    two = rows[16]
    assert group_nccl_choice("all_reduce", 2**33, 16, 1, v.case_links(two))[0] == "nvls_tree"
    assert v.predict(two) > 400e9


def test_p5bench_versions_are_those_of_the_data_commit() -> None:
    """The p5 sweep's data/nccl_all_reduce.csv is in 4fdb5a4f (tag 10142025, 2025-10-14), whose
    Dockerfile builds NCCL v2.27.7-1 and nccl-tests v2.16.9; 1c00e477 (2025-10-23), which bumped
    them to v2.28.7-1 / v2.17.2, came after the data and does not describe its run."""
    src = load_cases("collectives").sources["p5bench"]
    assert "4fdb5a4f" in src and "v2.27.7-1" in src and "v2.16.9" in src
    assert "builds NCCL v2.28.7-1" not in src


def test_aws_p5_hosts_are_amd() -> None:
    """p5.48xlarge's CPUs are AMD (Karpenter's instance-type table, generated from the EC2 API:
    instance-cpu-manufacturer amd), so NCCL's tuner takes its AMD host constants there
    (v2.26.2 getNetOverhead 2 us; llMaxBws' AMD row, 19.0 GB/s on 3+ nodes); the p4d's Intel
    hosts keep the Intel / other row."""
    from roofline.specs.nccl import tuner_for
    from roofline.specs.resolve import cluster

    p5 = tuner_for(cluster("aws-p5", 4))
    assert p5 is not None and (p5.net_overhead_s, p5.ll_max_more_nodes) == (2e-6, 19.0e9)
    p4d = tuner_for(cluster("aws-p4d", 4))
    assert p4d is not None and p4d.net_overhead_s == 1e-6
