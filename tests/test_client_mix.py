"""simulate_serving(client=True) and plan_serving(client=True): each request of a mix priced as
serve(client=True) prices a batch of one (engine/client.request_client), checked against a hand
calculation from the factors of data/presets/client.toml and the H100's host link."""

import numpy as np
import pytest

import roofline as rl
from roofline.analysis import plan as plan_mod
from roofline.analysis.stepcost import step_costs
from roofline.engine.client import request_client
from roofline.errors import RooflineError

FLOOR, STACK, HOST = 1.80e-3, 0.6116e9, 64e9  # client.toml floor and transport; H100 PCIe Gen5
PER_TOKEN = 4.0 / STACK + 4.0 / HOST  # 4 B of text through the stack + a 4 B id on the link
P, N = 512, 64


def test_request_client_by_hand() -> None:
    h100 = rl.hardware("H100")
    ttft, tpot = request_client(P, N, h100)
    assert ttft == pytest.approx(FLOOR + P * PER_TOKEN, rel=1e-9)  # 1.80 ms + 3.39 µs
    assert tpot == pytest.approx(N * PER_TOKEN / (N - 1), rel=1e-9)  # 6.7 ns per step
    # one output token: it comes with the prefill, no decode step to spread over
    assert request_client(P, 1, h100) == pytest.approx((FLOOR + (P + 1) * PER_TOKEN, 0.0))
    a, b = request_client(np.array([P, 2 * P]), np.array([N, 1]), h100)
    assert a == pytest.approx([FLOOR + P * PER_TOKEN, FLOOR + (2 * P + 1) * PER_TOKEN])
    assert b == pytest.approx([N * PER_TOKEN / (N - 1), 0.0])


@pytest.fixture(scope="module")
def costs():
    return step_costs("llama-3.1-8b", "H100", max_tokens=2048 + 256, ref_prompts=(P,))


def test_simulate_serving_client_by_hand(costs) -> None:
    wl = rl.Workload(prompt=P, output=N, rate=4.0)
    kw = dict(workload=wl, requests=60, costs=costs, seed=3)
    dev = rl.simulate_serving("llama-3.1-8b", "H100", **kw)
    cli = rl.simulate_serving("llama-3.1-8b", "H100", client=True, **kw)
    d_ttft, d_tpot = FLOOR + P * PER_TOKEN, N * PER_TOKEN / (N - 1)
    # fixed lengths: every request gains the same, so every percentile moves by it
    for k in ("mean", "p50", "p99", "max"):
        assert getattr(cli.ttft, k) - getattr(dev.ttft, k) == pytest.approx(d_ttft, rel=1e-6)
        assert getattr(cli.tpot, k) - getattr(dev.tpot, k) == pytest.approx(d_tpot, rel=1e-4)
        assert getattr(cli.e2e, k) - getattr(dev.e2e, k) == \
            pytest.approx(d_ttft + (N - 1) * d_tpot, rel=1e-6)
    # the device timeline is unchanged
    assert cli.throughput_tokens_per_s == dev.throughput_tokens_per_s
    assert (cli.queue_delay, cli.mean_batch, cli.iterations) == \
        (dev.queue_delay, dev.mean_batch, dev.iterations)
    assert cli.littles_rhs == dev.littles_rhs
    assert any(n.startswith("client=True") for n in cli.notes)
    assert not any("client" in n for n in dev.notes)


def test_one_request_matches_serve_at_batch_one(costs) -> None:
    """A lone request gains what serve(client=True) adds to a batch of one."""
    wl = rl.Workload(prompt=P, output=N, rate=1.0)
    kw = dict(workload=wl, requests=1, costs=costs)
    dev = rl.simulate_serving("llama-3.1-8b", "H100", **kw)
    cli = rl.simulate_serving("llama-3.1-8b", "H100", client=True, **kw)
    s0 = rl.serve("llama-3.1-8b", "H100", batch=1, prompt_len=P, output_len=N)
    s1 = rl.serve("llama-3.1-8b", "H100", batch=1, prompt_len=P, output_len=N, client=True)
    assert cli.ttft.p50 - dev.ttft.p50 == pytest.approx(s1.ttft - s0.ttft, rel=1e-6)
    assert cli.tpot.p50 - dev.tpot.p50 == pytest.approx(s1.tpot - s0.tpot, rel=1e-3)
    assert cli.e2e.p50 - dev.e2e.p50 == pytest.approx(s1.client_time, rel=1e-6)


def test_plan_serving_client_checks_and_frontier(costs) -> None:
    """The unloaded SLO check and the frontier's TPOT carry the client's additions."""
    ct, cp = request_client(P, N, rl.hardware("H100"))
    dev_ttft = costs.prefill_time(P)
    slo = rl.SLO(ttft_p99=dev_ttft + ct / 2)  # met device-side, not with the 2 ms floor
    assert plan_mod._why_not(costs, slo, P, P + N / 2) == ""
    assert "SLO impossible even unloaded: TTFT" in plan_mod._why_not(costs, slo, P, P + N / 2,
                                                                     (ct, cp))
    a = plan_mod._frontier([costs], rl.hardware("H100"), P, N, False)
    b = plan_mod._frontier([costs], rl.hardware("H100"), P, N, False, cp)
    assert [q.conc for q in a] == [q.conc for q in b]
    assert [q.tpot + cp for q in a] == pytest.approx([q.tpot for q in b], rel=1e-12)
    assert [q.rate for q in a] == [q.rate for q in b]  # throughput stays device-side


def test_plan_serving_simulates_as_a_client(monkeypatch, costs) -> None:
    seen = []
    real = plan_mod.simulate_serving

    def spy(*a, **kw):
        seen.append(kw["client"])
        return real(*a, **kw)

    monkeypatch.setattr(plan_mod, "simulate_serving", spy)
    wl = rl.Workload(prompt=P, output=N, rate=2.0)
    p = rl.plan_serving("llama-3.1-8b", "H100", devices=1, workload=wl,
                        slo=rl.SLO(ttft_p99=1.0, tpot_p99=0.05), precisions=[("bf16", "bf16")],
                        max_tp=1, pp_options=(1,), chunk_sizes=(2048,), disaggregated=False,
                        requests=60, max_simulations=1, client=True)
    assert seen and all(seen)
    assert p.best is not None and p.best.sim.ttft.p50 > FLOOR


def test_client_argument_rule() -> None:
    wl = rl.Workload(prompt=P, output=N, rate=1.0)
    with pytest.raises(RooflineError, match="client must be True or False, got 'yes'"):
        rl.simulate_serving("llama-3.1-8b", "H100", workload=wl, client="yes")
    with pytest.raises(RooflineError, match="client must be True or False, got 1"):
        rl.plan_serving("llama-3.1-8b", "H100", devices=1, workload=wl, slo=rl.SLO(ttft_p99=1.0),
                        client=1)
