"""The event-driven scheduler against the step-by-step one of test_scheduler_reference on the
paths its seeded mixes do not reach: requests whose KV can never fit (rejected, times inf),
steps larger than the step tables (extrapolated), one slot with whole prompts longer than the
budget (each runs alone), the reserve policy in a decode pool, a burst at t = 0, a last request
that leaves at admission (a decode pool's one-token output, a rejection) with nothing else left,
prefill-first steps (vLLM V0 without chunked prefill: the prompts alone in their step) and
multi-step scheduling (decode steps in blocks of k)."""

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
    # vLLM V0 without chunked prefill (the profile's prefill_first): a step with prompts runs
    # them alone, the decoding sequences wait
    "prefill first, whole prompts, KV pressure": ("full", 60.0, 300, 64, 1024, False,
                                                  "dynamic", True),
    "prefill first, whole prompts, reserved KV": ("full", 40.0, 600, 32, 1024, False,
                                                  "reserve", True),
    # vLLM V0's multi-step scheduling (scheduler_steps k): decode steps in blocks of k, the
    # scheduler acting between blocks, or inside one where the KV blocks run out
    "multi-step (k = 4), prefill first, KV pressure": ("full", 60.0, 300, 64, 1024, False,
                                                       "dynamic", True),
    "multi-step (k = 3), chunked, KV pressure": ("full", 60.0, 400, 64, 512, True, "dynamic",
                                                 True),
    "multi-step (k = 8), decode pool, KV pressure": ("full", 80.0, 250, 64, 512, True,
                                                     "dynamic", False),
    "multi-step (k = 4), reserved KV": ("full", 40.0, 600, 32, 1024, False, "reserve", True),
    # the last request arrives after the rest have finished and leaves at admission: the
    # driver's stop when nothing is left to run (one-token outputs in a decode pool finish at
    # admission; a prompt larger than the pool is rejected)
    "the last requests finish at admission, decode pool": ("full", 60.0, 250, 64, 512, True,
                                                           "dynamic", False),
    "the last request rejected, whole prompts": ("full", 20.0, 70, 32, 1024, False, "dynamic",
                                                 True),
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
    if "prefill first" in case:
        c = replace(c, prefill_first=True)
    if "multi-step" in case:
        c = replace(c, host=replace(c.host, scheduler_steps=float(case.split("k = ")[1][0])))
    if "the last request" in case:  # a gap of 1,000 s: the rest have finished by then
        arr[-3:] = arr[-4] + 1000.0
        if "admission" in case:
            osl[-3:] = 1
        else:
            arr[-1] += 1000.0
            isl[-1] = c.block_size * c.total_blocks  # more blocks than the whole pool
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
    if "prefill first" in case:  # the rule moves the times
        other = run_replica(arr, isl, osl, replace(c, prefill_first=False), **kw)
        assert not np.array_equal(other["first"], fast["first"])
    if "multi-step" in case:  # the blocks move the times
        other = run_replica(arr, isl, osl, replace(c, host=replace(c.host, scheduler_steps=1.0)),
                            **kw)
        assert not np.array_equal(other["done"], fast["done"])
    if "finish at admission" in case:
        np.testing.assert_array_equal(ref["done"][-3:], arr[-3:])
    if "last request rejected" in case:
        assert np.isinf(ref["done"][-1]) and np.isfinite(ref["done"][:-1]).all()
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


def test_event_scheduler_equals_step_by_step_on_random_small_mixes(tables):
    """Drawn, not chosen: 80 seeded small mixes (1-60 requests; bursts, arrivals tied to the
    same instant, block sizes 1 to 16, block-aligned prompts, pools from a few requests' worth
    up, one-token outputs, either policy, decode pools, prefill first, multi-step), each against the
    step-by-step scheduler. The closed-form runs stop at every event (an admission, a
    preemption, a finish, an arrival) the one-step loop would act on, or they drift apart."""
    import random

    base = tables["full"]
    paths = {"preempted": 0, "rejected": 0}
    for t in range(80):
        rng = random.Random(t)
        n = rng.randint(1, 60)
        bs = rng.choice([1, 2, 4, 16])
        chunked = rng.random() < 0.5
        mc = rng.randint(1, 32)
        budget = rng.randint(mc, mc + 300) if chunked else rng.randint(1, 400)
        isl = [rng.randint(1, 250) for _ in range(n)]
        if rng.random() < 0.3:
            isl = [max(bs, x // bs * bs) for x in isl]
        osl = [rng.randint(1, rng.choice([1, 2, 5, 40, 120])) for _ in range(n)]
        gaps = [rng.expovariate(rng.choice([1.0, 10.0, 50.0, 300.0])) for _ in range(n)]
        mode = rng.random()
        if mode < 0.2:
            gaps = [0.0] * n
        elif mode < 0.4:
            gaps = [g if rng.random() < 0.5 else 0.0 for g in gaps]
        arr = np.cumsum(gaps)
        per = -(-max(a + b for a, b in zip(isl, osl)) // bs)
        blocks = rng.choice([base.total_blocks, rng.randint(2, 8) * per,
                             rng.randint(3, 40) * 16 // bs])
        c = replace(base, block_size=bs, total_blocks=blocks,
                    prefill_first=rng.random() < 0.3,
                    host=replace(base.host, scheduler_steps=rng.choice([1.0, 1.0, 2.0, 4.0, 8.0])))
        kw = dict(max_concurrency=mc, budget=budget, chunked=chunked,
                  kv_policy=rng.choice(["dynamic", "reserve"]), prefill=rng.random() < 0.75)
        fast = run_replica(arr, np.array(isl), np.array(osl), c, **kw)
        ref = step_by_step(arr.tolist(), isl, osl, c, **kw)
        what = f"mix {t}: {kw}, block {bs}, {blocks} blocks"
        assert (fast["preemptions"], fast["iterations"]) == (ref["preemptions"],
                                                             ref["iterations"]), what
        for k in ("admit", "first", "done"):
            np.testing.assert_array_equal(np.isinf(fast[k]), np.isinf(ref[k]), err_msg=what)
            np.testing.assert_allclose(fast[k], ref[k], rtol=1e-9, atol=1e-12, err_msg=what)
        assert fast["area"] == pytest.approx(ref["area"], rel=1e-9), what
        paths["preempted"] += ref["preemptions"] > 0
        paths["rejected"] += bool(np.isinf(ref["done"]).any())
    # the draws reach the rare paths, several times each
    assert paths["preempted"] >= 5 and paths["rejected"] >= 5, paths
