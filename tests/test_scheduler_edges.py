"""The event-driven scheduler against the step-by-step one of test_scheduler_reference on the
paths its seeded mixes do not reach: requests whose KV can never fit (rejected, times inf),
steps larger than the step tables (extrapolated), one slot with whole prompts longer than the
budget (each runs alone), the reserve policy in a decode pool, and a burst at t = 0."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_scheduler_reference import step_by_step

import roofline as rl
from roofline.analysis.scheduler import run_replica
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
}


@pytest.mark.parametrize("case", list(CASES))
def test_event_scheduler_equals_step_by_step_on_edge_paths(tables, case):
    which, rate, blocks, mc, budget, chunked, policy, prefill = CASES[case]
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
    assert (fast["preemptions"], fast["iterations"]) == (ref["preemptions"], ref["iterations"])
    for k in ("admit", "first", "done"):
        np.testing.assert_array_equal(np.isinf(fast[k]), np.isinf(ref[k]), err_msg=k)
        np.testing.assert_allclose(fast[k], ref[k], rtol=1e-9, atol=1e-12, err_msg=k)
    assert fast["area"] == pytest.approx(ref["area"], rel=1e-9)
