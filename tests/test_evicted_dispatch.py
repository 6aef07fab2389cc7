"""Evicted dispatch of measured CPU specs: an op whose framework code earlier ops evicted from
the private caches pays a measured extra fixed cost. Hand-checked pricing, Plan = price,
neutral defaults, and measure recovering a known machine's values."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.calibrate.backends import FakeBackend, FakeMachine
from roofline.calibrate.measure import derive, measure_plan, run_plan
from roofline.engine.core import previous_kernel, price
from roofline.engine.core import time_model as engine_plan
from roofline.engine.efficiency import flat_efficiency
from roofline.engine.presets import (
    BOUND,
    default_tables,
    for_runtime,
)
from roofline.errors import SpecError
from roofline.graphs.graph import GraphBuilder
from roofline.specs import precision
from roofline.specs.hardware import Hardware, MemoryLevel

HW = Hardware(key="evict-t", name="evict-t", kind="cpu", peak_flops_per_s={"fp32": 1e15},
              memory=(MemoryLevel(name="DRAM", capacity_bytes=1e10, bytes_per_s=10e9),))
ON = flat_efficiency(evicted_dispatch=10e-6, evicted_kind_dispatch=30e-6, evict_after=1e6,
                     dispatch=1e-6, synchronous=True, label="evict")
OFF = flat_efficiency(dispatch=1e-6, synchronous=True, label="no-evict")


def _graph():
    """A (4 MB linear), N1 (small norm), a view, E (small elementwise), N2 (small norm)."""
    b = GraphBuilder("g", "forward", precision("fp32"))
    b.add("linear", "A", tokens=1, d_in=1000, d_out=1000)
    b.add("norm", "N1", elements=1000, features=1000, variant="layernorm")
    b.add("view", "V")
    b.add("elementwise", "E", elements=1000, op="relu")
    b.add("norm", "N2", elements=1000, features=1000, variant="layernorm")
    return b.build()


def test_look_back_indices_skip_views_and_wrap() -> None:
    g = _graph()
    has = np.array([True, True, False, True, True])
    prev, same = previous_kernel(g.kinds, has)
    n = 5
    # A follows N2 of the previous pass; N1 follows A; E follows N1 (the view is skipped)
    assert list(prev[[0, 1, 3, 4]]) == [4, 0 + n, 1 + n, 3 + n]
    # A and E are alone of their kind (look back to themselves, one pass); N1 looks back to
    # N2 of the previous pass; N2 to N1
    assert list(same[[0, 1, 3, 4]]) == [0, 4, 3, 1 + n]


def test_evicted_dispatch_by_hand() -> None:
    g = _graph()
    on = price(g, [HW], [ON], np.array([1.0]), keep_ops=True)["op_time"][0, 0]
    off = price(g, [HW], [OFF], np.array([1.0]), keep_ops=True)["op_time"][0, 0]
    extra = (on - off) * 1e6
    # A: predecessor N2 is small; the ops since its last call (N1, E, N2) are small: 0.
    # N1: predecessor A moved 4 MB > 1 MB: +10; since the last norm (N2, previous pass),
    #     A moved 4 MB: +30.
    # V: no kernel, no cost. E: predecessor N1 small; alone of its kind, the others (A
    #     among them) moved > 1 MB: +30. N2: predecessor E small; since N1 only E: 0.
    assert extra == pytest.approx([0.0, 40.0, 0.0, 30.0, 0.0], abs=1e-9)


def test_a_standalone_op_pays_nothing() -> None:
    b = GraphBuilder("one", "forward", precision("fp32"))
    b.add("elementwise", "big", elements=10_000_000, op="relu")  # 80 MB per call
    g = b.build()
    on = price(g, [HW], [ON], np.array([1.0]))["latency"]
    off = price(g, [HW], [OFF], np.array([1.0]))["latency"]
    assert on[0, 0] == pytest.approx(off[0, 0])  # its own traffic does not evict its code


@pytest.mark.parametrize("batch", [1.0, 2.0, 7.0, 300.0])
def test_plan_matches_price(batch: float) -> None:
    g = _graph()
    ref = price(g, [HW], [ON], np.array([batch]), keep_ops=True)
    p = engine_plan(g, HW, ON)
    assert not p.envelope_ok and p.nonlinear  # a step in bytes: the direct path
    assert p.evaluate(batch).time == pytest.approx(ref["op_time"][0, 0])
    assert p.totals_many(np.array([batch]))[0, 0] == pytest.approx(ref["latency"][0, 0])


def test_neutral_by_default_and_gone_when_compiled() -> None:
    for e in (BOUND, flat_efficiency(label="none"), *default_tables().values()):
        assert e.evicted is None
    c = for_runtime(ON, "compiled")  # no host dispatch at all
    assert c.evicted is None


@pytest.mark.parametrize("kw", [{"evicted_dispatch": -1e-6}, {"evicted_kind_dispatch": -1.0},
                                {"evict_after": -5.0}])
def test_bad_values_name_the_field(kw: dict[str, float]) -> None:
    with pytest.raises(SpecError, match=next(iter(kw))):
        flat_efficiency(**kw, label="bad")


def test_measure_recovers_the_evicted_costs_of_a_known_machine() -> None:
    m = FakeMachine(evicted_s=15e-6, evicted_kind_s=35e-6, evict_bytes=5e6)
    fit = derive(run_plan(measure_plan("cpu"), [FakeBackend(m)]))
    assert fit.evicted["evicted_dispatch"][0] == pytest.approx(15e-6, rel=1e-6)
    assert fit.evicted["evicted_kind_dispatch"][0] == pytest.approx(35e-6, rel=1e-6)
    # the swept flushes are 1, 2, 4, 8, 16 MiB: 5 MB lies between 4 and 8 MiB
    assert 4 * 2**20 < fit.evicted["evict_after"][0] < 8 * 2**20


def test_no_terms_without_the_benchmark_or_on_a_gpu() -> None:
    assert derive(run_plan(measure_plan("cpu", quick=True), [FakeBackend()])).evicted == {}
    gm = FakeMachine(kind="gpu", page_s=0.0)
    assert derive(run_plan(measure_plan("gpu", quick=True), [FakeBackend(gm)])).evicted == {}
    flat = FakeMachine(evicted_s=0.0, evicted_kind_s=0.0)  # nothing to see: no terms
    assert derive(run_plan(measure_plan("cpu"), [FakeBackend(flat)])).evicted == {}
