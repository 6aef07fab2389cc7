"""Unhappy paths found by the session-31 audit ("never a silent wrong number"): each test failed
before its fix."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError


def test_simulate_serving_refuses_requests_longer_than_the_context() -> None:
    # rl.serve calls prompt + output past max_position_embeddings infeasible; the simulation
    # used to price such requests (its step tables are read at capped lengths) and print a TTFT
    w = rl.Workload(prompt=rl.lengths("fixed", 200_000), output=rl.lengths("fixed", 10), rate=1)
    with pytest.raises(SpecError, match="max_position_embeddings=131072"):
        rl.simulate_serving("llama-3.1-8b", "H100", workload=w, requests=20)
    assert not rl.serve("llama-3.1-8b", "H100", prompt_len=200_000, output_len=10).feasible


def test_simulate_serving_context_edge_is_the_serve_rule() -> None:
    # prompt + output = context + 1 is servable (the last token is not fed back), as in serve
    cap = 131_072
    ok = rl.Workload(prompt=rl.lengths("fixed", cap - 9), output=rl.lengths("fixed", 10),
                     rate=0.01)
    assert rl.serve("llama-3.1-8b", "H100", prompt_len=cap - 9, output_len=10).feasible
    sim = rl.simulate_serving("llama-3.1-8b", "H100", workload=ok, requests=2)
    assert sim.rejected == 0
    over = rl.Workload(prompt=rl.lengths("fixed", cap - 8), output=rl.lengths("fixed", 10),
                       rate=0.01)
    assert not rl.serve("llama-3.1-8b", "H100", prompt_len=cap - 8, output_len=10).feasible
    with pytest.raises(SpecError, match="1 of 1 requests|2 of 2 requests"):
        rl.simulate_serving("llama-3.1-8b", "H100", workload=over, requests=2)


def _plan(hw: str, prompt: int, **kw):  # type: ignore[no-untyped-def]
    w = rl.Workload(prompt=rl.lengths("fixed", prompt), output=rl.lengths("fixed", 50), rate=2)
    return rl.plan_serving("llama-3.1-8b", hw, devices=2, workload=w,
                           slo=rl.SLO(ttft_p99=2.0, tpot_p99=0.05), requests=100,
                           max_simulations=1, max_tp=2, pp_options=(1,),
                           chunk_sizes=(2048,), disaggregated=False, **kw)


def test_plan_serving_default_precisions_on_a_part_without_bf16() -> None:
    # V100 has fp16 but no bf16 (or fp8): the default search used bf16 only, refused every
    # layout and blamed "no layout meets the TPOT target even at batch 1"
    plan = _plan("V100", 1000)
    assert plan.best is not None
    assert "fp16" in plan.best.layout and "bf16" not in plan.best.layout
    assert len(plan.infeasible) == 0


def test_plan_serving_says_why_nothing_runs() -> None:
    # every layout refused for a reason that is not memory: the reason is the one given, not
    # "does not fit", and the note names it rather than a TPOT shortfall
    plan = _plan("V100", 1000, precisions=[("bf16", "bf16")])
    reasons = [str(r) for r in plan.infeasible["reason"]]
    assert reasons and all(r.startswith("cannot run: ") and "no bf16 peak" in r
                           for r in reasons)
    assert any("no bf16 peak" in n for n in plan.notes)
    assert not any("TPOT target" in n for n in plan.notes)
    over = _plan("H100", 200_000, precisions=[("bf16", "bf16")])
    assert any("max_position_embeddings=131072" in n for n in over.notes)
