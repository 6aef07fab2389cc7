"""Cold-weight terms of measured CPU specs: hand-checked pricing, Plan = price, neutral
defaults, and the measure step recovering a known machine's values."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.calibrate.backends import FakeBackend, FakeMachine
from roofline.calibrate.measure import derive, measure_plan, run_plan
from roofline.engine.core import price
from roofline.engine.core import time_model as engine_plan
from roofline.engine.efficiency import flat_efficiency
from roofline.engine.presets import BOUND, default_tables
from roofline.errors import SpecError
from roofline.graphs.graph import GraphBuilder
from roofline.specs import precision
from roofline.specs.hardware import Hardware, MemoryLevel

HW = Hardware(key="cold-t", name="cold-t", kind="cpu", peak_flops_per_s={"fp32": 1e15},
              memory=(MemoryLevel(name="DRAM", capacity_bytes=1e10, bytes_per_s=10e9),))
EFF = flat_efficiency(cold_after=5e6, cold_read_max=0.5, cold_pack_max=0.25, pack_min_rows=4,
                      synchronous=True, label="cold")


def _two_linears():
    b = GraphBuilder("g", "forward", precision("fp32"))
    # 4 MB of weights each; tokens = rows per sample
    b.add("linear", "a", tokens=1, d_in=1000, d_out=1000)
    b.add("linear", "b", tokens=1, d_in=1000, d_out=1000)
    return b.build()


def test_cold_terms_by_hand() -> None:
    g = _two_linears()
    out = price(g, [HW], [EFF], np.array([1.0, 8.0]), keep_ops=True)["op_time"][0]
    # batch 1: each op's other op moves 4e6 + 8000 B < cold_after 5e6: warm, weights at
    # 10 GB/s: (4e6 + 8000) / 1e10 = 400.8 us
    assert out[0, 0] == pytest.approx(4.008e6 / 1e10)
    # batch 8: the other op moves 4e6 + 8·8000 = 4.064e6 B: still warm -> (4e6 + 64000)/1e10
    assert out[1, 0] == pytest.approx(4.064e6 / 1e10)
    e2 = flat_efficiency(cold_after=4e6, cold_read_max=0.5, cold_pack_max=0.25, pack_min_rows=4,
                         synchronous=True, label="cold2")
    out = price(g, [HW], [e2], np.array([1.0, 8.0]), keep_ops=True)["op_time"][0]
    # batch 1, now cold (4.008e6 > 4e6), M = 1 < 4 rows: weights at 0.5 x 10 GB/s = 800 us,
    # activations 8000 B at 10 GB/s = 0.8 us; no repacking
    assert out[0, 0] == pytest.approx(4e6 / 5e9 + 8000 / 1e10)
    # batch 8, M = 8 >= 4: the same read (64000 B of activations) plus repacking 4e6 B at
    # 0.25 x 10 GB/s = 1.6 ms, in series
    assert out[1, 0] == pytest.approx(4e6 / 5e9 + 64000 / 1e10 + 4e6 / 2.5e9)


def test_a_single_op_is_never_cold() -> None:
    b = GraphBuilder("one", "forward", precision("fp32"))
    b.add("linear", "a", tokens=1, d_in=1000, d_out=1000)
    g = b.build()
    on = price(g, [HW], [EFF], np.array([8.0]))["latency"]
    off_eff = flat_efficiency(synchronous=True, label="off")
    off = price(g, [HW], [off_eff], np.array([8.0]))["latency"]
    assert on[0, 0] == pytest.approx(off[0, 0])  # nothing else moves bytes between its calls


@pytest.mark.parametrize("batch", [1.0, 3.0, 4.0, 8.0, 64.0])
def test_plan_matches_price_with_cold_terms(batch: float) -> None:
    e = flat_efficiency(cold_after=4e6, cold_read_max=0.5, cold_pack_max=0.25, pack_min_rows=4,
                        synchronous=True, dispatch=2e-6, label="cold3")
    g = _two_linears()
    ref = price(g, [HW], [e], np.array([batch]), keep_ops=True)
    p = engine_plan(g, HW, e)
    assert not p.envelope_ok and p.nonlinear  # the closed form cannot express the step
    assert p.evaluate(batch).time == pytest.approx(ref["op_time"][0, 0])
    assert p.totals_many(np.array([batch]))[0, 0] == pytest.approx(ref["latency"][0, 0])


def test_neutral_by_default() -> None:
    assert BOUND.cold is None and flat_efficiency(label="none").cold is None
    assert all(e.cold is None for e in default_tables().values())


@pytest.mark.parametrize("kw", [{"cold_pack_max": 1.5}, {"cold_read_max": -0.1},
                                {"pack_min_rows": 0.5}, {"cold_after": -1.0}])
def test_bad_values_name_the_field(kw: dict[str, float]) -> None:
    with pytest.raises(SpecError, match=next(iter(kw))):
        flat_efficiency(**kw, label="bad")


def test_measure_recovers_the_cold_terms_of_a_known_machine() -> None:
    m = FakeMachine(cold_pack_fraction=0.3, pack_rows=4, cold_read_fraction=0.7)
    fit = derive(run_plan(measure_plan("cpu"), [FakeBackend(m)]))
    assert fit.cold["cold_pack_max"][0] == pytest.approx(0.3, rel=0.02)
    assert fit.cold["pack_min_rows"][0] == 4
    assert fit.cold["cold_read_max"][0] == pytest.approx(0.7, rel=0.02)
    # the LLC plateau ends at the largest swept working set at its bandwidth, below 48 MB
    assert 16 * 2**20 <= fit.cold["cold_after"][0] <= 48e6


def test_gpu_plan_has_no_cold_terms() -> None:
    gm = FakeMachine(kind="gpu", page_s=0.0)
    fit = derive(run_plan(measure_plan("gpu", quick=True), [FakeBackend(gm)]))
    assert fit.cold == {}


def test_quick_plan_sets_no_cold_terms() -> None:
    # the quick plan's 1 MiB weight pool stays in cache, so it cannot see cold weights
    fit = derive(run_plan(measure_plan("cpu", quick=True), [FakeBackend()]))
    assert fit.cold == {}
