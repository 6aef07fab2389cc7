"""rl.simulate_serving: queueing theory where closed forms exist, Little's law, agreement with
rl.serve at vanishing load, capacity bounds, request mixes and bad input."""

import math

import numpy as np
import pytest

import roofline as rl
from roofline.analysis.queueing import erlang_c, md1_wait, replicas_for, tail_latency
from roofline.analysis.stepcost import step_costs
from roofline.errors import RooflineError

M, HW = "llama-3.1-8b", "H100"


@pytest.fixture(scope="module")
def costs_512():
    return step_costs(M, HW, max_tokens=2048 + 64, ref_prompts=(512,))


def test_md1_pollaczek_khinchine_batch_one():
    # batch-1 deterministic service (fixed lengths, max_concurrency=1) under Poisson arrivals
    # is M/D/1: mean wait = ρ·s / (2(1 − ρ)); at ρ = 0.5 that is s/2
    s = rl.serve(M, HW, batch=1, prompt_len=512, output_len=64).e2e_latency
    lam = 0.5 / s
    wl = rl.Workload(prompt=512, output=64, rate=lam)
    sim = rl.simulate_serving(M, HW, workload=wl, requests=100_000, max_concurrency=1,
                              chunk_size=None, seed=3)
    assert md1_wait(lam, s) == pytest.approx(s / 2)
    assert sim.queue_delay.mean == pytest.approx(md1_wait(lam, s), rel=0.03)
    # the service itself is serve's end-to-end latency: e2e − wait is constant
    svc = sim._raw["done"] - sim._raw["admit"]
    assert svc.max() - svc.min() < 1e-9 * s + 1e-12
    assert svc.mean() == pytest.approx(s, rel=1e-3)
    assert sim.mean_in_system == pytest.approx(sim.littles_rhs, rel=0.02)


@pytest.mark.parametrize("rate,conc,chunk,policy", [
    (2.0, 64, 2048, "dynamic"), (30.0, 256, 2048, "dynamic"), (30.0, 32, None, "reserve"),
    (200.0, 256, 1024, "dynamic")])
def test_littles_law_every_run(rate, conc, chunk, policy):
    wl = rl.Workload(prompt=rl.lengths("lognormal", mean=1500, sigma=0.9, max=6000),
                     output=rl.lengths("uniform", 32, 600), rate=rate)
    sim = rl.simulate_serving(M, HW, workload=wl, requests=4000, max_concurrency=conc,
                              chunk_size=chunk, kv_policy=policy, seed=5)
    # mean in system (the scheduler's waiting + running, integrated over time) = λ·W
    assert sim.mean_in_system == pytest.approx(sim.littles_rhs, rel=0.02)


def test_vanishing_load_ttft_is_serve_unloaded(costs_512):
    s = rl.serve(M, HW, batch=1, prompt_len=512, output_len=64)
    wl = rl.Workload(prompt=512, output=64, rate=0.01 / s.e2e_latency)
    sim = rl.simulate_serving(M, HW, workload=wl, requests=500, max_concurrency=64, seed=2)
    assert sim.ttft.p50 == pytest.approx(s.ttft, rel=1e-3)
    assert sim.tpot.p50 == pytest.approx(s.tpot, rel=1e-3)
    assert sim.queue_delay.p99 == 0.0
    assert not sim.overloaded


def test_step_costs_reproduce_serve(costs_512):
    c = costs_512
    # a decode-only step: serve's step at the same batch and context (prompt P: context P+1)
    for b, P in ((1, 512), (8, 1024), (64, 300)):
        ref = rl.serve(M, HW, batch=b, prompt_len=P, output_len=2).tpot
        assert c.decode_time(b, b * (P + 1)) == pytest.approx(ref, rel=0.01)
    assert c.prefill_time(512) == pytest.approx(c.ttft_ref[512], rel=1e-3)
    # a mixed step costs at least its decode step and at least its prefill alone
    d = c.decode_time(32, 32 * 1000)
    assert c.step_time(32, 32 * 1000, [(1024, 0)]) >= max(d, c.prefill_time(1024)) * 0.999


def test_throughput_never_exceeds_decode_rate_at_kv_capacity_batch():
    wl = rl.Workload(prompt=2048, output=1024, rate=500.0)  # far beyond capacity
    sim = rl.simulate_serving(M, HW, workload=wl, requests=3000, max_concurrency=4000,
                              chunk_size=8192, seed=1)
    c = step_costs(M, HW, max_tokens=8192 + 4000, ref_prompts=(2048,))
    bmax = c.kv_capacity_batch(2048 + 1024)
    # steady-state decode rate at that batch, contexts as short as they get (P+1)
    cap = bmax / c.decode_time(bmax, bmax * 2049)
    assert sim.overloaded
    assert math.isinf(sim.ttft.p99) and math.isinf(sim.e2e.p99)
    assert sim.throughput_tokens_per_s <= cap
    assert sim.goodput == 0.0 or sim.slo is None


def test_overload_verdict_and_stable_run():
    wl = rl.Workload(prompt=1024, output=256, rate=1.0)
    ok = rl.simulate_serving(M, HW, workload=wl, requests=2000, max_concurrency=64, seed=4,
                             slo=rl.SLO(ttft_p99=1.0, tpot_p99=0.05))
    assert not ok.overloaded and math.isfinite(ok.ttft.p99) and ok.meets()
    assert ok.goodput == pytest.approx(1.0, rel=0.1)  # every request meets it: ≈ the rate
    bad = rl.simulate_serving(M, HW, workload=wl.with_rate(200.0), requests=2000,
                              max_concurrency=8, seed=4)
    assert bad.overloaded and "waiting for admission grew" in bad.overload_reason
    assert not math.isfinite(bad.queue_delay.p99)


def test_kv_pressure_preempts_dynamic_not_reserve():
    wl = rl.Workload(prompt=4000, output=4000, rate=20.0)
    dyn = rl.simulate_serving("llama-3.1-70b", "H100", tp=2, workload=wl, requests=300,
                              max_concurrency=1024, chunk_size=8192, kv_policy="dynamic", seed=1)
    res = rl.simulate_serving("llama-3.1-70b", "H100", tp=2, workload=wl, requests=300,
                              max_concurrency=1024, chunk_size=8192, kv_policy="reserve", seed=1)
    assert dyn.preemptions > 0
    assert res.preemptions == 0
    for s in (dyn, res):
        assert s.mean_in_system == pytest.approx(s.littles_rhs, rel=0.02)


def test_disaggregated_ttft_includes_kv_transfer():
    wl = rl.Workload(prompt=2048, output=64, rate=0.05)
    d = rl.simulate_serving(M, HW, workload=wl, requests=100, replicas=1, prefill_replicas=1,
                            kv_link_bytes_per_s=10e9, seed=0)
    a = rl.simulate_serving(M, HW, workload=wl, requests=100, seed=0)
    c = step_costs(M, HW, max_tokens=2048 + 256, ref_prompts=(2048,))
    xfer = 2048 * c.kv_bytes_per_token / 10e9  # 2048 tokens × 131,072 B / 10 GB/s = 26.8 ms
    assert c.kv_bytes_per_token == pytest.approx(2 * 32 * 8 * 128 * 2)
    assert d.ttft.p50 == pytest.approx(a.ttft.p50 + xfer, rel=1e-3)
    assert d.devices == 2


def test_request_mixes_are_seeded_and_reproducible():
    p = rl.lengths("lognormal", mean=3000, sigma=0.8, max=8192)
    wl = rl.Workload(prompt=p, output=rl.lengths("fixed", 2048), rate=40.0)
    a, b = wl.sample(5000, seed=7), wl.sample(5000, seed=7)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(wl.sample(5000, seed=8)[1], a[1])
    t, isl, osl = a
    assert isl.max() <= 8192 and isl.min() >= 1 and (osl == 2048).all()
    assert np.all(np.diff(t) > 0)
    assert 1 / np.diff(t).mean() == pytest.approx(40.0, rel=0.05)
    # untruncated lognormal mean 3000: truncation at 8192 removes the upper tail
    assert isl.mean() == pytest.approx(p.mean(), rel=0.03)
    assert p.mean() < 3000
    u = rl.lengths("uniform", 100, 200).sample(20000, np.random.default_rng(0))
    assert u.min() == 100 and u.max() == 200 and u.mean() == pytest.approx(150, rel=0.01)
    e = rl.lengths("empirical", [10, 20, 30], weights=[1, 0, 1])
    assert set(e.sample(1000, np.random.default_rng(0)).tolist()) == {10, 30}
    assert e.mean() == 20
    tr = rl.Workload(trace=[(100, 10, 0.0), (200, 20, 0.5), (300, 30, 0.5)])
    t, isl, osl = tr.sample(None)
    assert isl.tolist() == [100, 200, 300] and t.tolist() == [0.0, 0.5, 0.5]


def test_seed_tail_latency_model():
    # M/M/1 (c=1): P(wait) = ρ; wait ~ ρ·Exp(μ(1−ρ)); λ=0.5, s=1: p99 wait = ln(0.5/0.01)/0.5
    tl = tail_latency(0.5, 1.0, 1)
    assert tl.p_wait == pytest.approx(0.5)
    assert tl.p99 == pytest.approx(math.log(50) / 0.5 + 1.0)
    assert tl.p50 == pytest.approx(1.0)  # P(wait) = 0.5 ≤ 0.5: median wait 0
    # Erlang C, c=2, a=1: (a²/2!)/(1−ρ) / (1 + a + a²/2/(1−ρ)) = 1/(1+1+1) = 1/3
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    # Kingman: deterministic service halves the wait
    assert tail_latency(0.5, 1.0, 1, service_cv=0.0).wait_mean == pytest.approx(
        tail_latency(0.5, 1.0, 1).wait_mean / 2)
    assert tail_latency(2.0, 1.0, 1).stable is False
    # mlsysim 0.1.1 TailLatencyModel, run 2026-12-01 (docs/planning.md): 8 req/s on one 100 ms
    # server: p50 335.0018 ms, p99 2291.0133 ms; 30 req/s on 4 servers, cv 0.5: p50
    # 101.16826 ms, p99 345.66970 ms
    assert tail_latency(8.0, 0.1, 1).p50 == pytest.approx(0.3350018, rel=1e-6)
    assert tail_latency(8.0, 0.1, 1).p99 == pytest.approx(2.2910133, rel=1e-6)
    t4 = tail_latency(30.0, 0.1, 4, service_cv=0.5)
    assert (t4.p50, t4.p99) == (pytest.approx(0.10116826, rel=1e-6),
                                pytest.approx(0.34566970, rel=1e-6))
    n = replicas_for(10.0, 1.0, 3.0)
    assert tail_latency(10.0, 1.0, n).p99 <= 3.0 < tail_latency(10.0, 1.0, n - 1).p99
    assert replicas_for(10.0, 4.0, 3.0) == 0


@pytest.mark.parametrize("call,field", [
    (lambda: rl.Workload(prompt=10, output=10, rate=0), "rate"),
    (lambda: rl.Workload(prompt=10, output=10, rate=-1.0), "rate"),
    (lambda: rl.SLO(ttft_p99=0), "ttft_p99"),
    (lambda: rl.SLO(tpot_p99=-0.1), "tpot_p99"),
    (lambda: rl.lengths("uniform", 500, 100), "max"),
    (lambda: rl.lengths("lognormal", mean=3000, sigma=0.8, min=9000, max=8192), "max"),
    (lambda: rl.Workload(trace=[(10, 10, 1.0), (10, 10, 0.5)]), "time-ordered"),
    (lambda: rl.lengths("gamma", 3), "gamma"),
    (lambda: rl.simulate_serving(M, HW, workload=rl.Workload(prompt=10, output=10, rate=1.0),
                                 tp=2, replicas=4, devices=4), "devices"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(RooflineError, match=field):
        call()


def test_mlsysim_preset_simulates_with_its_own_memory_model():
    """preset="mlsysim" counts weights and the prompt's KV cache only (no activations, no
    workspace: scenarios/serving/mlsysim.py): the step tables take those terms as 0 and its
    KV per prompt token; simulate_serving and plan_serving run with it (they raised KeyError)."""
    c = step_costs(M, HW, max_tokens=2048 + 64, ref_prompts=(512,), preset="mlsysim")
    cfg = rl.model(M).config
    # Llama 3.1 8B, fp16: K and V × 32 layers × 8 KV heads × 128 dims × 2 bytes = 131,072 B
    assert c.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == \
        2 * cfg.n_layers * cfg.n_kv_heads * (cfg.d_model // cfg.n_heads) * 2
    assert c.kv_budget_bytes == pytest.approx(rl.hardware(HW).memory_capacity_bytes
                                              - c.weights_bytes)
    wl = rl.Workload(prompt=512, output=64, rate=2.0)
    s = rl.simulate_serving(M, HW, workload=wl, requests=100, preset="mlsysim")
    assert not s.overloaded and s.tpot.p50 > 0 and s.uncertainty == {}
    p = rl.plan_serving(M, HW, devices=2, workload=wl, slo=rl.SLO(ttft_p99=2.0, tpot_p99=0.1),
                        preset="mlsysim", requests=100, max_simulations=2,
                        disaggregated=False, chunk_sizes=(2048,))
    assert p.best is not None and p.best.sim.tpot.p99 > 0 and p.best.sim.uncertainty == {}
