"""ServingSim.time_split: where a request's end-to-end time goes (queue, prefill, KV transfer,
decode-pool queue, decode, client), checked by hand on a lone request and summed to the
end-to-end mean on loaded runs; plan_serving's choices carry it."""
from __future__ import annotations

import math

import pytest

import roofline as rl
from roofline.analysis.simulate import TIME_SPLIT
from roofline.analysis.stepcost import step_costs

M, HW = "llama-3.1-8b", "H100"


@pytest.fixture(scope="module")
def costs():
    return step_costs(M, HW, max_tokens=2048 + 64, ref_prompts=(512,))


def test_lone_request_by_hand(costs) -> None:
    """One request, P = 512 prompt tokens, G = 64 output tokens, alone: no queue; prefill is
    one step of its 512 tokens (costs.prefill_time); decode is G − 1 = 63 steps of batch 1,
    step j (0-based) at context P + 1 + j:
    (G−1)·(lin[1] + slope[1]·(P+1)) + slope[1]·(G−1)(G−2)/2."""
    P, G = 512, 64
    sim = rl.simulate_serving(M, HW, workload=rl.Workload(trace=[(P, G, 0.0)]), requests=None,
                              costs=costs)
    sp = sim.time_split
    assert list(sp) == list(TIME_SPLIT)
    assert sp["queue"] == 0.0 and sp["kv_transfer"] == sp["decode_queue"] == 0.0
    assert sp["client"] == 0.0
    assert sp["prefill"] == pytest.approx(costs.prefill_time(P), rel=1e-12)
    lin1, sl1 = float(costs.lin[1]), float(costs.slope[1])
    dec = (G - 1) * (lin1 + sl1 * (P + 1)) + sl1 * (G - 1) * (G - 2) / 2
    assert sp["decode"] == pytest.approx(dec, rel=1e-12)
    assert sum(sp.values()) == pytest.approx(sim.e2e.mean, rel=1e-12)
    # and the split is what rl.serve prices unloaded: TTFT and (O − 1) TPOTs, to the tables'
    # interpolation
    s = rl.serve(M, HW, batch=1, prompt_len=P, output_len=G)
    assert sp["prefill"] == pytest.approx(s.ttft, rel=1e-3)
    assert sp["decode"] == pytest.approx((G - 1) * s.tpot, rel=1e-2)


@pytest.mark.parametrize("kw", [
    {}, {"chunk_size": None, "kv_policy": "reserve"}, {"client": True},
    {"prefill_replicas": 1, "replicas": 1}])
def test_parts_add_up_to_the_e2e_mean(kw) -> None:
    wl = rl.Workload(prompt=rl.lengths("lognormal", mean=1500, sigma=0.9, max=6000),
                     output=rl.lengths("uniform", 32, 600), rate=8.0)
    sim = rl.simulate_serving(M, HW, workload=wl, requests=3000, seed=5, warmup=20.0, **kw)
    sp = sim.time_split
    assert not sim.overloaded and all(v >= 0 for v in sp.values())
    assert sum(sp.values()) == pytest.approx(sim.e2e.mean, rel=1e-9)
    assert sp["queue"] == pytest.approx(sim.queue_delay.mean, rel=1e-9)
    disagg = "prefill_replicas" in kw
    # TTFT = queue + prefill + transfer (+ the client's share of it)
    assert (sp["kv_transfer"] > 0) == disagg and (sp["decode_queue"] > 0) == disagg
    assert (sp["client"] > 0) == ("client" in kw)
    if "client" not in kw:
        assert sp["queue"] + sp["prefill"] + sp["kv_transfer"] == pytest.approx(
            sim.ttft.mean, rel=1e-9)
    d = sim.to_dict()["time_split"]
    assert d == pytest.approx(sp)
    assert "mean request queue" in str(sim)


def test_overloaded_queue_is_unbounded() -> None:
    wl = rl.Workload(prompt=2048, output=1024, rate=500.0)  # far beyond capacity
    sim = rl.simulate_serving(M, HW, workload=wl, requests=3000, seed=1)
    assert sim.overloaded and math.isinf(sim.e2e.mean)
    assert math.isinf(sim.time_split["queue"]) and sim.to_dict()["time_split"]["queue"] == "inf"
    assert math.isfinite(sim.time_split["decode"]) and sim.time_split["decode"] > 0


def test_plan_choice_carries_the_split() -> None:
    wl = rl.Workload(prompt=rl.lengths("uniform", 500, 1500), output=rl.lengths("uniform", 50, 150),
                     rate=10.0)
    p = rl.plan_serving(M, HW, devices=2, workload=wl, slo=rl.SLO(ttft_p99=1.0, tpot_p99=0.05),
                        requests=1000)
    sp = p.best.sim.time_split
    assert sum(sp.values()) == pytest.approx(p.best.sim.e2e.mean, rel=1e-9)
    assert p.to_dict()["best"]["simulation"]["time_split"] == pytest.approx(sp)


def test_masks_with_holes_and_suffixes() -> None:
    """The measured requests as a slice (a suffix) or a mask with holes (rejected requests)
    give the same means as indexing each part."""
    import numpy as np

    from roofline.analysis.simulate import _time_split

    rng = np.random.default_rng(0)
    n = 1000
    arr = np.sort(rng.random(n)) * 100
    admit = arr + rng.random(n)
    first = admit + rng.random(n)
    done = first + 10 * rng.random(n)
    for m in (np.arange(n) >= 200, (np.arange(n) >= 200) & (np.arange(n) % 7 != 0)):
        sp = _time_split(arr, admit, first, done, None, None, None, m, False)
        assert sp["queue"] == pytest.approx((admit - arr)[m].mean(), rel=1e-12)
        assert sp["prefill"] == pytest.approx((first - admit)[m].mean(), rel=1e-12)
        assert sp["decode"] == pytest.approx((done - first)[m].mean(), rel=1e-12)
    assert all(math.isnan(v) for v in _time_split(arr, admit, first, done, None, None, None,
                                                  np.zeros(n, bool), False).values())


def test_the_printout_says_what_a_missing_time_is():
    """One formatter for the printout's times: ms, 'unbounded' for an overloaded run's inf, and
    'n/a' for the NaN a run with no measured request gets (it printed 'nan ms')."""
    from roofline.analysis.simulate import _ms

    assert _ms(0.01234) == "12.3 ms"
    assert _ms(math.inf) == "unbounded"
    assert _ms(math.nan) == "n/a"
