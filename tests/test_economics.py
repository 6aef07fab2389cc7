"""Money, energy, carbon and failures (issue 13): each formula against a hand calculation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import roofline as rl
from roofline.analysis import data as econ_data
from roofline.analysis.economics import check_economics
from roofline.analysis.power import binding_utilisation, power_activity, power_model
from roofline.analysis.reliability import daly_interval, daly_wallclock, young_interval
from roofline.errors import SourceError, SpecError, UnknownNameError

# Llama 3 405B: 419 unexpected interruptions in 54 days on 16,384 GPUs
LAMBDA_H = 419 / (16384 * 54 * 24)  # = 1.973e-5 per GPU-hour


# -- data: sources are mandatory ---------------------------------------------------------------

def test_loader_refuses_a_number_or_a_quote_without_source_or_date():
    doc = {"sources": {}, "parts": {"x": {"on_demand": [
        {"provider": "P", "date": "2026", "price": {"value": 1.0, "unit": "USD/h"}}]}}}
    with pytest.raises(SourceError, match="source"):
        econ_data.parse_prices(doc, "t")
    doc["parts"]["x"]["on_demand"][0] = {"provider": "P", "price": {
        "value": 1.0, "unit": "USD/h", "source": "page"}}
    with pytest.raises(SourceError, match="date"):
        econ_data.parse_prices(doc, "t")
    ok = econ_data.parse_prices({"sources": {"s": "a page"}, "parts": {"x": {"on_demand": [
        {"provider": "P", "date": "2026-01", "price": {"value": 3.6, "unit": "USD/h",
                                                       "source": "s"}}],
        "no_purchase": "not sold", "single_provider": "P only"}}}, "t")
    assert ok["x"].quotes[0].usd_per_s == pytest.approx(0.001)  # 3.6 $/h / 3600
    assert ok["x"].quotes[0].provenance.source == "a page"


def test_every_zoo_price_and_region_has_a_source_and_date():
    for key in rl.list_hardware():
        pp = econ_data.part_prices(key)
        for q in pp.quotes:
            assert q.provenance.source and q.date and q.usd_per_hour > 0
    regions = econ_data.regions()
    assert len([r for r in regions.values() if not r.assumed]) >= 12
    for r in regions.values():
        assert r.provenance["intensity"].source and 2000 < r.year < 2030
    # the data file's numbers come through: Ember 2023 France 56 g/kWh
    assert rl.region("france").g_per_kwh == pytest.approx(56)


def test_default_price_is_the_median_of_the_quotes():
    # H100 SXM quotes: Oracle 80/8 = 10.00, AWS 55.04/8 = 6.88, GCP 10.9791, Lambda 4.29,
    # RunPod 3.99, Nebius 3.85, Modal 3.9492, GMI 2.00, Akash 2.71; the middle of nine: 3.99
    assert rl.price_quotes("H100").usd_per_hour == pytest.approx(3.99)
    assert rl.price_quotes("L40").usd_per_hour is None  # no public quote in our sources


# -- power model ---------------------------------------------------------------------------------

def test_power_model_idle_plus_dynamic_times_activity():
    # H100: measured idle 142.5 W (gpu-burn #114: 145 and 140 W in P0), peak = TDP 700 W;
    # at a = 0.5: 142.5 + 557.5 × 0.5 = 421.25 W
    pm = power_model(rl.hardware("H100"))
    assert pm.idle_measured and "measured idle 142.5 W" in pm.source and "gpu-burn" in pm.source
    assert pm.power_w(0.5) == pytest.approx(421.25)
    assert pm.power_w(0.0) == pytest.approx(142.5) and pm.power_w(2.0) == pytest.approx(700.0)
    # L40: no published idle in our sources: TDP fallback, idle 30 % of 300 W = 90 W
    pl = power_model(rl.hardware("L40"))
    assert not pl.idle_measured and "TDP fallback" in pl.source
    assert pl.power_w(0.5) == pytest.approx(90 + 210 * 0.5)
    # L4: measured 27 W, the median of 32, 27 and 26 W in P0 with a model held at 0 %
    pl = power_model(rl.hardware("L4"))
    assert pl.idle_measured and "#655" in pl.source
    assert pl.power_w(0.5) == pytest.approx(27 + 45 * 0.5)
    assert binding_utilisation(0.2, 0.8) == pytest.approx(0.8)
    assert binding_utilisation(0.3, math.nan) == pytest.approx(0.3)


def test_power_activity_weighs_compute_and_memory():
    # weights fitted in data/economics/power.toml: w_c 1.63, w_m 0.49
    assert power_activity(0.1, 0.8) == pytest.approx(1.63 * 0.1 + 0.49 * 0.8)  # 0.555
    assert power_activity(0.003, 0.79) == pytest.approx(1.63 * 0.003 + 0.49 * 0.79)
    assert power_activity(0.5, 0.9) == 1.0  # capped: the board is at its power limit
    assert power_activity(0.2) == pytest.approx(0.326)  # MBU unknown (training): MFU alone
    assert math.isnan(power_activity(math.nan, math.nan))
    assert power_activity(np.float32(0.1), np.float32(0.8)) == pytest.approx(0.555, rel=1e-6)
    arr = power_activity(np.array([0.1, np.nan, 0.0]), np.array([0.8, np.nan, 0.5]))
    assert arr[0] == pytest.approx(0.555) and math.isnan(arr[1]) and arr[2] == pytest.approx(0.245)


def test_solve_energy_is_the_power_model_times_latency():
    r = rl.solve("resnet50", "A100", batch=8)
    a = min(1.0, 1.63 * r.mfu + 0.49 * r.mbu)
    # A100 80GB: measured idle 60.7 W (PeerRead #40), peak = TDP 400 W
    assert r.energy == pytest.approx((60.7 + (400 - 60.7) * a) * r.latency)


def test_mlsysim_preset_energy_per_inference():
    # mlsysim 0.1.1 Engine.solve, ResNet-50 / A100 / batch 1 / fp16: 0.0688 J
    # = 400 W × (0.3 + 0.7 × MFU 2.42 %) × 0.5426 ms
    r = rl.solve("resnet50", "A100", batch=1, preset="mlsysim")
    assert r.energy == pytest.approx(0.0688, rel=5e-3)
    assert r.energy == pytest.approx(400 * (0.3 + 0.7 * r.mfu) * r.latency)


# -- cost, energy, carbon of results ------------------------------------------------------------

def test_serve_cost_energy_carbon_by_hand():
    s = rl.serve("llama-3.1-8b", "H100", batch=16, price_per_hour=2.0, region="france", pue=1.2)
    # cost: 1 device × 2 $/h / (tokens/s × 3600 s/h) × 1e6
    assert s.cost_per_million_output_tokens == pytest.approx(2.0 / (s.tokens_per_s * 3600) * 1e6)
    a = min(1.0, 1.63 * s.mfu + 0.49 * s.mbu)
    e_tok = (142.5 + 557.5 * a) * 1.2 / s.tokens_per_s  # J per output token, with PUE 1.2
    assert s.energy_per_output_token == pytest.approx(e_tok)
    # France 56 gCO2e/kWh = 56e-3 kg / 3.6e6 J
    assert s.carbon_per_million_output_tokens == pytest.approx(e_tok * 1e6 * 56e-3 / 3.6e6)
    assert s.to_dict()["region"] == "france" and "cost" in str(s)


def test_missing_price_and_region_are_none_with_a_reason():
    s = rl.serve("llama-3.2-1b", "L40", batch=4)
    assert s.cost_per_million_output_tokens is None
    assert "no public price" in s.economics.price_source
    assert s.carbon_per_million_output_tokens is None
    assert any("region" in r for r in s.economics.reasons)
    assert s.energy_per_output_token > 0


def test_bad_economics_input_is_an_error_naming_the_argument():
    with pytest.raises(SpecError, match="price_per_hour"):
        rl.serve("llama-3.1-8b", "H100", price_per_hour=-1.0)
    with pytest.raises(SpecError, match="pue"):
        rl.solve("resnet50", "A100", pue=0.9)
    with pytest.raises(UnknownNameError, match="Known regions: .*france"):
        rl.serve("llama-3.1-8b", "H100", region="atlantis")
    for u in (0.0, 1.5, -0.1):
        with pytest.raises(SpecError, match="utilisation"):
            rl.tco("H100", devices=8, utilisation=u)
    with pytest.raises(SpecError, match="price_per_hour"):
        check_economics(price_per_hour=float("nan"))


def test_train_cost_energy_carbon_of_the_whole_run():
    t = rl.train("llama-3.1-8b", "dgx-h100", nodes=2, global_batch=64, seq_len=4096, tp=2,
                 price_per_hour=3.0, region="germany")
    tokens = 1e11
    hours = tokens / t.tokens_per_s / 3600
    assert t.cost_to_train(tokens) == pytest.approx(hours * 16 * 3.0)  # 16 GPUs × 3 $/h
    e = hours * 3600 * t.power_w * 1.15  # facility J at the hyperscale PUE 1.15
    assert t.energy_to_train(tokens) == pytest.approx(e)
    assert t.carbon_to_train(tokens) == pytest.approx(e * 381e-3 / 3.6e6)  # Germany 381 g/kWh
    # power_w: 16 × (142.5 + 557.5 × min(1, 1.63 × MFU)) + 2 nodes × the DGX node overhead
    a = min(1.0, 1.63 * t.mfu)
    assert t.power_w == pytest.approx(16 * (142.5 + 557.5 * a) + t.other_power_w)


# -- reliability ---------------------------------------------------------------------------------

def test_young_and_daly_by_hand():
    assert young_interval(60, 3600) == pytest.approx(math.sqrt(2 * 60 * 3600))  # 657.3 s
    # Daly: √(2δM)·[1 + √(δ/2M)/3 + (δ/2M)/9] − δ, δ=60, M=3600: x = 60/7200
    x = 60 / 7200
    assert daly_interval(60, 3600) == pytest.approx(
        math.sqrt(2 * 60 * 3600) * (1 + math.sqrt(x) / 3 + x / 9) - 60)
    assert daly_interval(8000, 3600) == 3600  # δ ≥ 2M: checkpoint every MTBF
    # wall-clock M·e^{R/M}·(e^{(τ+δ)/M} − 1)·W/τ
    assert daly_wallclock(1e5, 600, 60, 300, 3600) == pytest.approx(
        3600 * math.exp(300 / 3600) * (math.exp(660 / 3600) - 1) * 1e5 / 600)


def test_fleet_reliability_from_the_llama3_rate():
    r = rl.reliability(devices=256, job_hours=720, checkpoint_s=60)
    m = 3600 / (256 * LAMBDA_H)  # job MTBF, s (≈ 198 h)
    assert r.mtbf_s == pytest.approx(m)
    assert r.interval_s == pytest.approx(daly_interval(60, m))
    wall = daly_wallclock(720 * 3600, r.interval_s, 60, 300, m)
    assert r.wallclock_s == pytest.approx(wall)
    assert r.expected_failures == pytest.approx(wall / m)
    assert r.goodput == pytest.approx(720 * 3600 / wall)
    assert r.p_any_failure == pytest.approx(1 - math.exp(-wall / m))
    y = rl.reliability(devices=256, job_hours=720, checkpoint_s=60, method="young")
    assert y.interval_s == pytest.approx(math.sqrt(2 * 60 * m))
    with pytest.raises(SpecError, match="devices"):
        rl.reliability(devices=0, job_hours=1, checkpoint_s=1)
    with pytest.raises(SpecError, match="checkpoint_s"):
        rl.reliability(devices=8, job_hours=1, checkpoint_s=-1)


def test_training_checkpoint_size_and_write_time():
    t = rl.train("llama-3.1-8b", "dgx-h100", nodes=2, global_batch=64, seq_len=4096, tp=2)
    rel = t.reliability(1e11)
    params = rl.model("llama-3.1-8b").params
    assert rel.checkpoint_bytes == pytest.approx(14 * params)  # 2 + 4 + 4 + 4 B/param
    # ZeRO-1: all 16 ranks write; min(2 TB/s Llama 3 storage, 16 × 64 GB/s PCIe Gen5)
    assert rel.checkpoint_s == pytest.approx(14 * params / min(2e12, 16 * 64e9))
    assert rel.work_s == pytest.approx(t.time_to_train(1e11))


# -- TCO and placement ------------------------------------------------------------------------

def test_tco_by_hand():
    c = rl.tco("H100", devices=1024, years=3, utilisation=0.6, region="us-east")
    capex = 1024 * 30000  # street estimate $30,000 (prices.toml)
    # H100: measured idle 142.5 W, peak = TDP 700 W, at activity 0.6; facility kWh at PUE 1.15
    kwh = 1024 * (142.5 + 557.5 * 0.6) * 3 * 365 * 24 * 1.15 / 1000
    assert c.capex_usd == pytest.approx(capex) and c.capex_period_usd == pytest.approx(capex)
    assert c.energy_usd == pytest.approx(kwh * 0.0892)  # Virginia industrial 8.92 ¢/kWh
    assert c.maintenance_usd == pytest.approx(capex * 0.05 * 3)
    assert c.total_usd == pytest.approx(capex + kwh * 0.0892 + capex * 0.15)
    assert c.carbon_kg == pytest.approx(kwh * 0.401)  # PJM, 401 g/kWh (Electricity Maps 2023)
    assert c.embodied_carbon_kg == pytest.approx(1024 * 1312 / 8)  # NVIDIA HGX H100 PCF
    l4 = rl.tco("L4", devices=2, utilisation=0.5, unit_price=2500)
    assert l4.embodied_carbon_kg is None and any("embodied" in r for r in l4.reasons)
    a100 = rl.tco("a100-sxm4-40gb", devices=8, utilisation=0.5)
    assert a100.embodied_carbon_kg == pytest.approx(8 * 318)  # Chien et al. 2023, per GPU
    none = rl.tco("L40", devices=2, utilisation=0.5)
    assert none.total_usd is None and "unit_price" in none.reasons[0]
    assert "no list price" in none.reasons[0]  # the data file's reason is carried
    assert rl.tco("L40", devices=2, utilisation=0.5, unit_price=3000).total_usd > 0


def test_placement_ranks_regions():
    p = rl.place(1e12, by="carbon")  # 1 TJ
    assert p.best == "quebec"  # 20 g/kWh, the lowest in grids.toml
    assert dict(p.ranking)["india"] == pytest.approx(1e12 * 713e-3 / 3.6e6)
    c = rl.place(1e12, by="cost")
    assert c.best == "us-texas"  # 6.60 ¢/kWh, the cheapest published price
    assert "france" in c.left_out
