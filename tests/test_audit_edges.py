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
