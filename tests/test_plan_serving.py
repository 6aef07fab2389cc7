"""rl.plan_serving: the search, the frontier, sizing by simulation, bad input."""

import math

import numpy as np
import pytest

import roofline as rl
from roofline.errors import RooflineError

M, HW = "llama-3.1-8b", "H100"


@pytest.fixture(scope="module")
def plan():
    wl = rl.Workload(prompt=rl.lengths("lognormal", mean=1500, sigma=0.7, max=6000),
                     output=rl.lengths("uniform", 100, 400), rate=30.0)
    slo = rl.SLO(ttft_p99=1.0, tpot_p99=0.030)
    return rl.plan_serving(M, HW, devices=16, workload=wl, slo=slo, requests=1500)


def test_pareto_rows_are_non_dominated(plan):
    P, L = plan.pareto, plan.layouts
    assert 0 < len(P) <= len(L)
    x, y = P["tokens_per_s_per_user"], P["tokens_per_s_per_device"]
    X, Y = L["tokens_per_s_per_user"], L["tokens_per_s_per_device"]
    for i in range(len(P)):
        dominated = (X >= x[i]) & (Y >= y[i]) & ((X > x[i]) | (Y > y[i]))
        assert not dominated.any(), P[i]
    # and every layout point not on the frontier is dominated by one that is
    on = set(zip(x.tolist(), y.tolist()))
    for i in range(len(L)):
        if (X[i], Y[i]) in on:
            continue
        assert ((x >= X[i]) & (y >= Y[i])).any()


def test_best_meets_the_slo_in_its_own_simulation(plan):
    b = plan.best
    assert b is not None
    s = b.sim
    assert s.meets(plan.slo) and not s.overloaded
    assert s.ttft.p99 <= 1.0 and s.tpot.p99 <= 0.030
    assert b.devices <= 16 and b.devices == s.devices
    assert s.rate == pytest.approx(30.0)
    assert "fewest devices" in b.why
    # no passing simulation used fewer devices
    sims = plan.simulated
    ok = sims["meets_slo"].astype(bool)
    assert sims["devices"][ok].min() == b.devices
    assert b.cross_check is not None and b.cross_check.stable
    assert math.isfinite(b.cross_check.p99)


def test_infeasible_layouts_are_listed_with_reasons():
    wl = rl.Workload(prompt=8000, output=200, rate=2.0)
    p = rl.plan_serving("llama-3.1-70b", "H100", devices=8, workload=wl,
                        slo=rl.SLO(ttft_p99=0.5, tpot_p99=0.05), disaggregated=False,
                        precisions=(("bf16", "bf16"),), pp_options=(1,), requests=300)
    reasons = dict(zip(p.infeasible["layout"], p.infeasible["reason"]))
    assert "does not fit" in reasons["tp1 bf16"]  # 141 GB of weights on an 80 GB device
    # an 8000-token prompt takes > 0.5 s to prefill on 2 H100s even alone
    assert "SLO impossible even unloaded" in reasons["tp2 bf16"]
    for lay, why in reasons.items():
        assert why, lay


def test_plan_is_reported_as_data(plan):
    d = plan.to_dict()
    assert d["best"]["devices"] == plan.best.devices
    assert len(d["pareto"]) == len(plan.pareto)
    assert "Serving plan" in str(plan)


def test_plot(plan, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    ax = plan.plot(path=str(tmp_path / "f.png"))
    assert (tmp_path / "f.png").stat().st_size > 1000
    assert ax.get_xlabel().startswith("output tokens/s per user")


@pytest.mark.parametrize("kw,field", [
    ({"devices": 0}, "devices"),
    ({"devices": 8, "workload": "x"}, "workload"),
    ({"devices": 8, "slo": None}, "slo"),
    ({"devices": 8, "precisions": [("bf16",)]}, "precisions"),
    ({"devices": 8, "precisions": [("bf16", "fp8", 4)]}, "precisions"),
    ({"devices": 8, "max_tp": 0}, "max_tp"),
    ({"devices": 8, "pp_options": (0,)}, "pp_options"),
    ({"devices": 8, "chunk_sizes": (-5,)}, "chunk_sizes"),
    ({"devices": 8, "requests": 0}, "requests"),
    ({"devices": 8, "max_simulations": 0}, "max_simulations"),
    ({"devices": 8, "kv_policy": "lru"}, "kv_policy"),
    ({"devices": 8, "ep_options": (2,)}, "ep"),
])
def test_bad_input(kw, field):
    wl = rl.Workload(prompt=100, output=10, rate=1.0)
    args = {"workload": wl, "slo": rl.SLO(ttft_p99=1.0)} | kw
    with pytest.raises(RooflineError, match=field):
        rl.plan_serving(M, HW, **args)


def test_frontier_points_follow_the_closed_form(plan):
    # per-user tokens/s is 1/TPOT, per-device tokens/s = requests/s × mean output / devices
    L = plan.layouts
    np.testing.assert_allclose(L["tokens_per_s_per_user"], 1e3 / L["tpot_ms"], rtol=1e-9)


def test_no_layout_fits_says_by_how_much():
    wl = rl.Workload(prompt=1024, output=256, rate=500.0)
    p = rl.plan_serving(M, HW, devices=1, workload=wl, slo=rl.SLO(ttft_p99=1.0, tpot_p99=0.03),
                        requests=300)
    assert p.best is None
    assert "would be needed" in p.notes[-1] and "no layout meets the SLO" in str(p)


def test_weight_only_quantisation_is_searched(plan):
    layouts = set(plan.layouts["layout"])
    # bf16 compute over int4 weights with an fp8 KV cache, next to bf16 and fp8; int8
    # weight-only is dominated by fp8 on an fp8 part and searched only where asked
    for lab in ("tp1 bf16 wint4/kv fp8", "tp2 bf16 wint4/kv fp8", "tp1 fp8", "tp1 bf16"):
        assert lab in layouts, lab
    assert not any("wint8" in x for x in layouts)
    # int4 weights: a quarter of the bf16 weight bytes, half of fp8's: at batch 1 it decodes
    # fastest
    L = plan.layouts.where(plan.layouts["max_concurrency"] == 1)
    t = dict(zip(L["layout"], L["tpot_ms"]))
    assert t["tp1 bf16 wint4/kv fp8"] < t["tp1 fp8"] < t["tp1 bf16/kv fp8"]


def test_weight_only_int8_where_the_part_has_no_fp8():
    from roofline.analysis.plan import PRECISIONS_NO_FP8

    assert ("bf16", "bf16", "int8") in PRECISIONS_NO_FP8
    wl = rl.Workload(prompt=512, output=64, rate=2.0)
    p = rl.plan_serving(M, "A100", devices=1, workload=wl, slo=rl.SLO(tpot_p99=0.05),
                        requests=200, disaggregated=False, max_simulations=2)
    lay = set(p.layouts["layout"])
    assert {"tp1 bf16", "tp1 bf16 wint8", "tp1 bf16 wint4"} <= lay


def test_expert_parallelism_is_searched_for_moe():
    wl = rl.Workload(prompt=rl.lengths("lognormal", mean=1000, sigma=0.6, max=3000),
                     output=rl.lengths("uniform", 50, 300), rate=20.0)
    slo = rl.SLO(ttft_p99=1.0, tpot_p99=0.05)
    p = rl.plan_serving("mixtral-8x7b", "H100", devices=4, max_tp=2, pp_options=(1,),
                        precisions=[("fp8", "fp8")], workload=wl, slo=slo, requests=800,
                        disaggregated=False, max_simulations=4)
    layouts = set(p.layouts["layout"])
    assert {"tp1 ep2 fp8", "tp1 ep4 fp8", "tp2 fp8"} <= layouts
    # the closed-form frontier of an ep layout counts all its devices
    L = p.layouts.where(p.layouts["layout"] == "tp1 ep4 fp8")
    c1 = rl.serve("mixtral-8x7b", "H100", ep=4, batch=1, precision="fp8", kv_precision="fp8")
    assert c1.devices == 4
    assert float(L["tokens_per_s_per_device"][0]) <= 1.0 / c1.tpot / 4 * 1.05
    assert p.best is not None and p.best.sim.meets()
    assert p.best.devices == p.best.replicas * p.best.tp * p.best.pp * p.best.ep
    with pytest.raises(RooflineError, match="ep_options"):
        rl.plan_serving("mixtral-8x7b", "H100", devices=4, workload=wl, slo=slo,
                        ep_options=(3,))
