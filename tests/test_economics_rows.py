"""Economics carried by the row-producing scenarios: serve_sweep, serving_capacity,
best_parallelism, plan_serving — each checked against a hand calculation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError
from roofline.scenarios.serving import serve_sweep

PJM = 401e-3 / 3.6e6  # us-east, 401 gCO2e/kWh -> kg per J


def test_serve_sweep_cost_energy_carbon_by_hand():
    r = serve_sweep("llama-3.1-8b", ["H100", "L40"], batch=[1, 64], context=[1024, 4096],
                    tp=2, price_per_hour=2.0, region="us-east", pue=1.2)
    tps, a = r["tokens_per_s"][0], r["power_activity"][0]
    # 2 devices × 2 $/h / 3600 s / tokens/s × 1e6
    assert np.allclose(r["usd_per_million_tokens"][0], 2 * 2.0 / 3600 / tps * 1e6)
    # H100: measured idle 142.5 W + (700 − 142.5) × a per device, × 2 devices × PUE 1.2 / tok/s
    e = 2 * (142.5 + 557.5 * a) * 1.2 / tps
    assert np.allclose(r["energy_per_token"][0], e)
    assert np.allclose(r["carbon_per_million_tokens"][0], e * 1e6 * PJM)
    assert r["price_per_hour"][0] == pytest.approx(2.0)


def test_serve_sweep_without_price_or_region_is_nan_and_says_why():
    r = serve_sweep("llama-3.1-8b", ["H100", "L40"], batch=[4], context=[512])
    assert r["price_per_hour"][0] == pytest.approx(rl.price_quotes("H100").usd_per_hour)
    assert np.isfinite(r["usd_per_million_tokens"][0]).all()
    assert np.isnan(r["usd_per_million_tokens"][1]).all()  # L40: no public price
    assert "no price" in r["economics_note"][1] and "no region" in r["economics_note"][0]
    assert np.isnan(r["carbon_per_million_tokens"]).all()
    assert (r["energy_per_token"] > 0).all()
    with pytest.raises(SpecError, match="price_per_hour"):
        serve_sweep("llama-3.1-8b", "H100", batch=[1], context=[8], price_per_hour=-1)


def test_serve_sweep_utilisation_is_serves_decode_mbu():
    r = serve_sweep("llama-3.1-8b", "H100", batch=[1, 64], context=[1024])
    for i, b in enumerate((1, 64)):
        s = rl.serve("llama-3.1-8b", "H100", batch=b, prompt_len=1024, output_len=2)
        assert r["utilisation"][0, 0, i, 0] == pytest.approx(max(s.mbu, 0), rel=1e-3)
        # the power activity min(1, 1.63 MFU + 0.49 MBU), with the decode step's MFU by hand:
        # 2 × 8.03e9 params × batch FLOPs (+ ~3 % attention at 1024) / (TPOT × 989.4 TFLOP/s)
        mfu = 2 * 8.03e9 * b / (r["tpot"][0, 0, i, 0] * 989.4e12)
        assert r["power_activity"][0, 0, i, 0] == pytest.approx(
            min(1.0, 1.63 * mfu + 0.49 * s.mbu), rel=0.02)


def test_serving_capacity_prices_its_output_tokens():
    from roofline.scenarios.serving import serving_capacity

    c = serving_capacity("llama-3.1-8b", "H100", prompt_len=512, output_len=128, ttft_slo=0.5,
                         tpot_slo=0.05, price_per_hour=3.0, region="us-east", pue=1.2)
    assert c.rate_per_s > 0
    # one device at 3 $/h producing rate × 128 tokens/s
    assert c.cost_per_million_output_tokens == pytest.approx(3.0 / 3600 / c.tokens_per_s * 1e6)
    u = c.economics.utilisation
    assert 0 < u <= 1
    e = (210 + 490 * u) * 1.2 / c.tokens_per_s
    assert c.energy_per_output_token == pytest.approx(e)
    assert c.carbon_per_million_output_tokens == pytest.approx(e * 1e6 * PJM)
    assert c.to_dict()["economics"]["cost_per_unit"] == pytest.approx(
        c.cost_per_million_output_tokens / 1e6)
    none = serving_capacity("llama-3.2-1b", "L40", prompt_len=128, output_len=32,
                            ttft_slo=1.0, tpot_slo=0.1)
    assert none.cost_per_million_output_tokens is None
    assert "no public price" in none.economics.price_source
    assert math.isfinite(none.energy_per_output_token)


def test_cards_show_cost_energy_carbon_or_why_not():
    from roofline.report.notebook import summary_pairs

    s = rl.serve("llama-3.1-8b", "H100", batch=8, price_per_hour=2.0, region="france")
    rows = dict(summary_pairs(s))
    assert f"${s.cost_per_million_output_tokens:,.4g} per 1M output tokens" in rows["cost"]
    assert f"{s.energy_per_output_token:,.4g} J per output token" in rows["energy"]
    assert "France" in rows["carbon"] and "cost" in s._repr_html_()
    r = rl.solve("resnet50", "L40", batch=8)  # no public price for the L40
    rows = dict(summary_pairs(r))
    assert rows["cost"].startswith("no price") and "no region" in rows["carbon"]
    assert f"{r.economics.energy_per_unit:,.4g} J per sample" in rows["energy"]
    t = rl.train("llama-3.2-1b", "dgx-h100", nodes=1, global_batch=64, seq_len=2048)
    rows = dict(summary_pairs(t))
    assert f"${t.economics.cost_per_unit * 1e6:,.4g} per 1M tokens" in rows["cost"]


def test_cli_json_always_carries_economics(capsys):
    import json

    from roofline.cli import main

    assert main(["solve", "resnet50", "L40", "--batch", "4", "--format", "json"]) == 0
    e = json.loads(capsys.readouterr().out)["economics"]
    assert e["cost_per_unit"] is None and e["carbon_per_unit"] is None
    assert any("no public price" in r for r in e["reasons"]) and e["energy_per_unit"] > 0
    assert main(["serve", "llama-3.2-1b", "H100", "--batch", "2", "--region", "us-west",
                 "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["economics"]["carbon_per_unit"] == pytest.approx(
        d["economics"]["energy_per_unit"] * 123e-3 / 3.6e6)


def test_best_parallelism_rows_carry_train_economics():
    kw = dict(global_batch=64, seq_len=2048, top=6)
    t = rl.best_parallelism("llama-3.2-1b", "dgx-h100", nodes=1, price_per_hour=2.0,
                            region="us-east", pue=1.2, **kw)
    for i in range(len(t)):
        row = t[i]
        r = rl.train("llama-3.2-1b", "dgx-h100", nodes=1, tp=row["tp"], pp=row["pp"],
                     micro_batch=row["micro_batch"], interleave=row["interleave"],
                     recompute=row["recompute"], zero=row["zero"], price_per_hour=2.0,
                     region="us-east", pue=1.2, **{k: kw[k] for k in ("global_batch",
                                                                      "seq_len")})
        # the same split priced by rl.train: the same cost, energy and carbon per token
        assert row["usd_per_million_tokens"] == pytest.approx(r.economics.cost_per_unit * 1e6)
        assert row["energy_per_token"] == pytest.approx(r.economics.energy_per_unit, rel=1e-6)
        assert row["carbon_per_million_tokens"] == pytest.approx(
            r.economics.carbon_per_unit * 1e6, rel=1e-6)
    # 8 devices × 2 $/h / 3600 / tokens/s × 1e6, by hand on the first row
    assert t[0]["usd_per_million_tokens"] == pytest.approx(8 * 2.0 / 3600 / t[0]["tokens_per_s"]
                                                           * 1e6)
    plain = rl.best_parallelism("llama-3.2-1b", "dgx-h100", nodes=1, **kw)
    assert np.isnan(plain["carbon_per_million_tokens"]).all()
    assert "no region" in plain.notes[0] and "no region" in plain.head(2).notes[0]


def test_plan_serving_rows_carry_cost_energy_carbon():
    wl = rl.Workload(prompt=64, output=256, rate=5.0)
    p = rl.plan_serving("llama-3.1-8b", "H100", devices=4, workload=wl,
                        slo=rl.SLO(ttft_p99=2.0, tpot_p99=0.05), precisions=(("bf16", "bf16"),),
                        pp_options=(1,), requests=200, max_simulations=2, price_per_hour=2.0,
                        region="us-east", pue=1.2)
    L = p.layouts
    tpd, u = L["tokens_per_s_per_device"], L["utilisation"]
    assert ((u > 0) & (u <= 1)).all()
    assert np.allclose(L["usd_per_million_tokens"], 2.0 / 3600 / tpd * 1e6)
    e = (142.5 + 557.5 * u) * 1.2 / tpd  # u: the power activity (H100 idle 142.5 W, TDP 700)
    assert np.allclose(L["energy_per_token"], e)
    assert np.allclose(L["carbon_per_million_tokens"], e * 1e6 * PJM)
    assert "usd_per_million_tokens" in p.pareto.columns and p.pareto.notes == L.notes
    # the closed-form power activity of the aggregated tp1, C=1 point (short prompts: mostly a
    # batch-1 decode step) sits just under the one from rl.serve's decode MFU and MBU there:
    # it leaves out the activation traffic and spreads the bytes over the whole step (launch
    # and overheads included), where serve divides by the device's busy time only
    sel = [i for i in range(len(L)) if L["mode"][i] == "aggregated" and L["layout"][i]
           .startswith("tp1") and L["max_concurrency"][i] == 1]
    s = rl.serve("llama-3.1-8b", "H100", batch=1, prompt_len=64, output_len=256)
    a = min(1.0, 1.63 * s.mfu + 0.49 * s.mbu)
    assert 0.75 * a < u[sel[0]] < a


@pytest.mark.parametrize("kw, match", [
    (dict(price_per_hour=-1.0), "price_per_hour"),
    (dict(pue=0.8), "pue"),
    (dict(region="atlantis"), "Known regions"),
])
def test_row_scenarios_refuse_bad_economics_input(kw, match):
    from roofline.scenarios.serving import serving_capacity

    calls = [
        lambda: serve_sweep("llama-3.1-8b", "H100", batch=[1], context=[8], **kw),
        lambda: serving_capacity("llama-3.2-1b", "H100", prompt_len=64, output_len=8,
                                 ttft_slo=1.0, tpot_slo=0.1, **kw),
        lambda: rl.best_parallelism("llama-3.2-1b", "dgx-h100", nodes=1, global_batch=8,
                                    seq_len=512, **kw),
        lambda: rl.plan_serving("llama-3.2-1b", "H100", devices=1,
                                workload=rl.Workload(prompt=64, output=8, rate=1.0),
                                slo=rl.SLO(ttft_p99=1.0, tpot_p99=0.1), **kw),
        lambda: rl.train("llama-3.2-1b", "dgx-h100", nodes=1, global_batch=8, seq_len=512,
                         **kw),
        lambda: rl.tco("H100", devices=8, utilisation=0.5,
                       **{k: v for k, v in kw.items() if k != "price_per_hour"}
                       or {"unit_price": -1.0}),
    ]
    for call in calls:
        with pytest.raises(RooflineError, match=match if "price" not in match else
                           "price_per_hour|unit_price"):
            call()
