"""simulate_serving's arguments that were silently ignored in some combination: each is now
either honoured or refused with a RooflineError naming it (docs/planning.md, "Scheduler")."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import RooflineError

M, HW = "llama-3.1-8b", "H100"
WL = rl.Workload(prompt=512, output=32, rate=4.0)


def _sim(wl=WL, **kw):
    return rl.simulate_serving(M, HW, workload=wl, requests=40, seed=0, **kw)


def test_max_batched_tokens_beside_a_different_chunk_size_is_refused():
    """Under chunked prefill the chunk is the step's budget (vLLM's max_num_batched_tokens):
    a max_batched_tokens beside it was ignored; now refused, naming both and the rule."""
    for kw in ({"max_batched_tokens": 300}, {"chunk_size": 1024, "max_batched_tokens": 4096}):
        with pytest.raises(RooflineError, match=r"max_batched_tokens=\d+ with chunk_size=\d+") \
                as e:
            _sim(**kw)
        assert "chunk_size=None" in str(e.value)


def test_max_batched_tokens_equal_to_the_chunk_is_the_same_budget():
    a, b = _sim(chunk_size=1024), _sim(chunk_size=1024, max_batched_tokens=1024)
    assert (a.ttft.p50, a.tpot.p50, a.iterations) == (b.ttft.p50, b.tpot.p50, b.iterations)


def test_max_batched_tokens_is_the_budget_of_whole_prompt_steps():
    """chunk_size=None: max_batched_tokens bounds a step's prompts (default 8192). A 600-token
    budget holds one 512-token prompt a step, 8192 holds many: under a burst, more steps and
    a later first token for the queued ones."""
    burst = rl.Workload(prompt=512, output=32, rate=1000.0)
    small = _sim(burst, chunk_size=None, max_batched_tokens=600)
    dflt = _sim(burst, chunk_size=None)
    big = _sim(burst, chunk_size=None, max_batched_tokens=8192)
    assert (dflt.ttft.p99, dflt.iterations) == (big.ttft.p99, big.iterations)
    assert small.iterations > big.iterations
    assert small.ttft.p99 > big.ttft.p99


def test_kv_link_without_prefill_workers_is_refused():
    """kv_link_bytes_per_s prices the prefill-to-decode KV transfer; an aggregated simulation
    has none and ignored it. Now refused, naming the argument, its value and what it needs."""
    with pytest.raises(RooflineError, match=r"kv_link_bytes_per_s=1e\+10 .*prefill_replicas="):
        _sim(kv_link_bytes_per_s=10e9)
    d = _sim(kv_link_bytes_per_s=10e9, prefill_replicas=1)
    assert any("KV transfer over 10 GB/s" in n for n in d.notes)


def test_plan_refuses_a_kv_link_with_nothing_disaggregated():
    with pytest.raises(RooflineError, match=r"kv_link_bytes_per_s=1e\+10 .*disaggregated=False"):
        rl.plan_serving(M, HW, devices=2, workload=WL, slo=rl.SLO(ttft_p99=2.0, tpot_p99=0.1),
                        disaggregated=False, kv_link_bytes_per_s=10e9, requests=50,
                        max_simulations=1, chunk_sizes=(2048,))


def test_plan_passes_its_kv_link_to_disaggregated_layouts_only():
    """plan_serving with a link: its aggregated sizing simulations are priced (no transfer)
    and not refused by simulate_serving's rule."""
    p = rl.plan_serving(M, HW, devices=2, workload=WL, slo=rl.SLO(ttft_p99=2.0, tpot_p99=0.1),
                        kv_link_bytes_per_s=10e9, requests=50, max_simulations=2,
                        chunk_sizes=(2048,))
    assert p.best is not None
