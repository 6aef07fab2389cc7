"""The event-driven scheduler against the step-by-step one of test_scheduler_reference on the
paths its seeded mixes do not reach: requests whose KV can never fit (rejected, times inf),
steps larger than the step tables (extrapolated), one slot with whole prompts longer than the
budget (each runs alone), the reserve policy in a decode pool, and a burst at t = 0."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from test_scheduler_reference import step_by_step

import roofline as rl
from roofline.analysis.scheduler import _Replica, run_replica
from roofline.analysis.stepcost import step_costs


@pytest.fixture(scope="module")
def tables():
    # max_tokens 100: chunks of 512 tokens and 900-token prompts step past the tables' end
    return {"full": step_costs("llama-3.1-8b", "H100", max_tokens=1024 + 64,
                               ref_prompts=(64, 300)),
            "short": step_costs("llama-3.1-8b", "H100", max_tokens=100, ref_prompts=(64,))}


CASES = {
    # name: (tables, rate, KV blocks, max_concurrency, budget, chunked, policy, prefill)
    "rejections, chunked, dynamic KV": ("full", 40.0, 40, 32, 512, True, "dynamic", True),
    "rejections, whole prompts, reserved KV": ("full", 40.0, 45, 32, 1024, False, "reserve",
                                               True),
    "rejections, decode pool": ("full", 60.0, 40, 32, 512, True, "dynamic", False),
    "steps past the tables, chunked, KV pressure": ("short", 60.0, 400, 64, 512, True,
                                                    "dynamic", True),
    "steps past the tables, whole prompts, a burst": ("short", 0.0, None, 128, 2048, False,
                                                      "dynamic", True),
    "one slot, whole prompts longer than the budget": ("full", 20.0, None, 1, 128, False,
                                                       "dynamic", True),
    "reserved KV, decode pool": ("full", 80.0, 300, 64, 512, True, "reserve", False),
    "a burst at t = 0, KV pressure": ("full", 0.0, 250, 64, 512, True, "dynamic", True),
    # a 64-token budget keeps long prompts prefilling for several steps, so the newest request
    # the pool preempts is at times one still prefilling (its partial prefill dropped)
    "a prefilling request preempted, chunked, KV pressure": ("full", 20.0, 120, 64, 64, True,
                                                             "dynamic", True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_event_scheduler_equals_step_by_step_on_edge_paths(tables, case, monkeypatch):
    which, rate, blocks, mc, budget, chunked, policy, prefill = CASES[case]
    victims: list[bool] = []  # per preemption: was the victim decoding
    orig = _Replica.preempt_newest

    def spy(self):  # type: ignore[no-untyped-def]
        live = [i for i in self.order if self.live[i]]
        if live:
            victims.append(self.dec[live[-1]])
        return orig(self)

    monkeypatch.setattr(_Replica, "preempt_newest", spy)
    c = tables[which] if blocks is None else replace(tables[which], total_blocks=blocks)
    wl = rl.Workload(prompt=rl.lengths("lognormal", mean=300, sigma=0.8, max=900),
                     output=rl.lengths("uniform", 1, 120), rate=max(rate, 1.0))
    arr, isl, osl = wl.sample(250, 11)
    isl, osl = isl.astype(int), osl.astype(int)
    if "burst" in case:
        arr = np.zeros_like(arr)
    kw = dict(max_concurrency=mc, budget=budget, chunked=chunked, kv_policy=policy,
              prefill=prefill)
    fast = run_replica(arr, isl, osl, c, **kw)
    ref = step_by_step(arr.tolist(), isl.tolist(), osl.tolist(), c, **kw)
    # the case takes the path it names
    if "rejections" in case:
        assert np.isinf(ref["done"]).any() and np.isfinite(ref["done"]).any()
    if "past the tables" in case:
        assert budget + mc > c.n_max and (mc > c.n_max or "KV" in case)
    if "pressure" in case:
        assert ref["preemptions"] > 0
    if "one slot" in case:
        assert (isl > budget).any()
    if "prefilling request preempted" in case:
        assert False in victims and True in victims
    assert (fast["preemptions"], fast["iterations"]) == (ref["preemptions"], ref["iterations"])
    for k in ("admit", "first", "done"):
        np.testing.assert_array_equal(np.isinf(fast[k]), np.isinf(ref[k]), err_msg=k)
        np.testing.assert_allclose(fast[k], ref[k], rtol=1e-9, atol=1e-12, err_msg=k)
    assert fast["area"] == pytest.approx(ref["area"], rel=1e-9)


def test_decode_pool_one_token_outputs_take_no_growth_block(tables):
    """A decode pool's request with a one-token output finishes at admission (its token came
    from the prefill pool): it never decodes, so it takes no block for a next token. Requests
    of 16 tokens (one block each, block-aligned: a decoding one would need a block for its
    next token at once) and one output token, a pool of 10 blocks (watermark 1). Each holds
    its block only while admitted, so every one finishes at its arrival. Before the mend each
    admission counted a growth block for the step, so the 10th found 1 + 1 + 9 > 10: 20 at
    t = 0 stalled the scheduler (RuntimeError); 11 at t = 0 and one at 1 s finished the 10th
    and 11th at 1 s instead of 0 (a silent wrong time)."""
    c = replace(tables["full"], total_blocks=10)
    assert c.block_size == 16
    kw = dict(max_concurrency=64, budget=512, chunked=True, kv_policy="dynamic", prefill=False)
    burst = run_replica(np.zeros(20), np.full(20, 16), np.ones(20, dtype=int), c, **kw)
    np.testing.assert_array_equal(burst["done"], np.zeros(20))
    arr = np.zeros(12)
    arr[-1] = 1.0
    late = run_replica(arr, np.full(12, 16), np.ones(12, dtype=int), c, **kw)
    np.testing.assert_array_equal(late["admit"], arr)
    np.testing.assert_array_equal(late["done"], arr)
    # nor does its admission test ask for that block: A (100 tokens in KV, 7 blocks, 20 out:
    # at most 8 blocks) and B (16 tokens, one out) at t = 0 in 9 blocks: 7 + 1 + watermark 1
    # = 9 fit, so B finishes at once (asking 7 + 1 + 1 + 1 = 10 > 9 held it until A finished)
    c9 = replace(c, total_blocks=9)
    ab = run_replica(np.zeros(2), np.array([100, 16]), np.array([20, 1]), c9, **kw)
    assert ab["done"][1] == 0.0 and 0.0 < ab["done"][0] < math.inf
    assert ab["preemptions"] == 0


@pytest.mark.parametrize("mc, budget, chunked", [(65, 64, True), (1, 0, False)])
def test_run_replica_refuses_a_budget_the_decoding_sequences_fill(tables, mc, budget, chunked):
    """Chunked, each decoding sequence takes one token of the step's budget: with
    max_concurrency > budget, max_concurrency − 1 decoding sequences can leave a partial
    prompt no token (the mixed pass's first chunk would be empty); whole prompts need a budget
    of at least one token. simulate_serving refuses these (and max_concurrency = budget)
    before it calls run_replica; run_replica itself says so too, naming its arguments, rather
    than stalling or pricing an empty chunk. (max_concurrency = budget runs: the
    "prefilling request preempted" case above.)"""
    with pytest.raises(rl.SpecError, match=f"budget={budget}, max_concurrency={mc}"):
        run_replica(np.zeros(2), np.array([100, 16]), np.array([20, 1]), tables["full"],
                    max_concurrency=mc, budget=budget, chunked=chunked)
