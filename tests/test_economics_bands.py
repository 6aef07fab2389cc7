"""Bands on cost, energy, carbon and water (roofline.analysis.economics, docs/economics.md): the
rate's uncertainty band propagated, the price, PUE and grid held as given."""

from __future__ import annotations

import json
import math

import pytest

import roofline as rl
from roofline.analysis.power import power_activity, power_model


def test_serve_cost_band_is_the_rate_band_inverted():
    s = rl.serve("llama-3.1-8b", "H100", batch=8, prompt_len=512, output_len=128,
                 price_per_hour=2.0, region="us")
    rb = s.uncertainty["tokens_per_s"]
    e = s.economics
    assert e.rate_band == rb
    b = e.uncertainty["cost_per_unit"]
    # 1 device × $2/h / 3600 s / rate: at the rate band's high end the cost is lowest
    assert b.low == pytest.approx(2.0 / 3600 / rb.high)
    assert b.high == pytest.approx(2.0 / 3600 / rb.low)
    assert b.low < e.cost_per_unit < b.high
    assert (b.level, b.cls, b.n) == (rb.level, rb.cls, rb.n)


def test_energy_band_by_hand():
    """E(r') = (N · P(u') + other) · PUE / r', u' = min(1, u · r'/r): the same work at a
    slower rate runs at a lower power activity, so energy per unit grows less than 1/r'."""
    t = rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=2048, region="france")
    e = t.economics
    rb, r, u = t.uncertainty["tokens_per_s"], t.tokens_per_s, power_activity(t.mfu)
    pm = power_model(t._hw)

    def energy(rate: float) -> float:
        up = min(1.0, u * rate / r)
        return (8 * (pm.idle_w + (pm.peak_w - pm.idle_w) * up) + e.other_power_w) * e.pue / rate

    assert energy(r) == pytest.approx(e.energy_per_unit)
    b = e.uncertainty["energy_per_unit"]
    assert (b.low, b.high) == pytest.approx((energy(rb.high), energy(rb.low)))
    # narrower than the time band (idle power alone would scale as 1 / rate)
    assert b.high / b.low < rb.high / rb.low
    c = e.uncertainty["carbon_per_unit"]
    assert (c.low, c.high) == pytest.approx((b.low * e.intensity_kg_per_j,
                                             b.high * e.intensity_kg_per_j))
    w = e.uncertainty["water_per_unit"]
    assert w.high == pytest.approx(b.high / e.pue * e.wue_l_per_j)
    d = json.loads(json.dumps(e.to_dict()))
    assert d["uncertainty"]["energy_per_unit"]["low"] == pytest.approx(b.low)
    assert "80 %:" in "\n".join(e.lines(per=1e9, per_label="1B tokens"))


def test_solve_energy_band_by_hand():
    """r.uncertainty["energy"]: J per batch at the latency band's ends, MFU and MBU scaled by
    L / L' (the same work)."""
    r = rl.solve("resnet50", "A100", batch=8)
    lat = r.uncertainty["latency"]
    pm = power_model(r.hardware_spec())

    def joules(x: float) -> float:
        a = power_activity(r.mfu * r.latency / x, r.mbu * r.latency / x)
        return (pm.idle_w + (pm.peak_w - pm.idle_w) * a) * x

    assert joules(r.latency) == pytest.approx(r.energy)
    b = r.uncertainty["energy"]
    assert (b.low, b.high) == pytest.approx((joules(lat.low), joules(lat.high)))
    assert b.cls == lat.cls and b.n == lat.n
    assert "mJ per batch (80 %:" in str(r)
    assert r.to_dict()["uncertainty"]["energy"]["high"] == pytest.approx(b.high)


def test_no_band_where_the_result_has_none():
    """Preset mlsysim: no rate band, so no band on any figure (and the JSON says so)."""
    m = rl.solve("resnet50", "A100", batch=8, preset="mlsysim", price_per_hour=1.0)
    assert m.economics.rate_band is None and m.economics.uncertainty == {}
    assert "uncertainty" in m.economics.to_dict()


def test_printed_rates_carry_their_bands():
    r = rl.solve("resnet50", "A100", batch=8)
    th = r.uncertainty["throughput"]
    assert f"{th.low:,.1f}–{th.high:,.1f}" in str(r)
    s = rl.serve("llama-3.1-8b", "H100", batch=8, prompt_len=512, output_len=128)
    tb = s.uncertainty["tokens_per_s"]
    assert f"{tb.low:,.0f}–{tb.high:,.0f}" in str(s)
    t = rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=2048)
    kb = t.uncertainty["tokens_per_s"]
    assert f"{kb.low:,.0f}–{kb.high:,.0f}" in str(t).replace("\n    ", " ")
    # the rate band is the time band inverted: low rate × high time = rate × time
    assert math.isclose(kb.low * t.uncertainty["step_time"].high, t.tokens_per_s * t.step_time,
                        rel_tol=1e-9)


def test_training_run_totals_carry_bands():
    """time = tokens / rate; energy, cost = tokens × the per-token band."""
    t = rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=2048,
                 price_per_hour=3.0)
    n = 1e12
    u = t.uncertainty_to_train(n)
    rb = t.uncertainty["tokens_per_s"]
    assert (u["time_to_train"].low, u["time_to_train"].high) == pytest.approx(
        (n / rb.high, n / rb.low))
    assert u["time_to_train"].low < t.time_to_train(n) < u["time_to_train"].high
    # 8 devices × $3/h × hours
    assert u["cost_to_train"].high == pytest.approx(8 * 3.0 * n / rb.low / 3600)
    assert u["gpu_hours"].low == pytest.approx(8 * n / rb.high / 3600)
    e = t.economics.uncertainty["energy_per_unit"]
    assert u["energy_to_train"].low == pytest.approx(e.low * n)
    assert "carbon_to_train" not in u  # no region: no carbon figure, no band
    assert rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=2048,
                    preset="bound").uncertainty_to_train(n) == {}
