"""The engine's host time per sequence per step (``seq_overhead``) and per pipeline stage
(``step_overhead``), checked by hand in every step-cost path: rl.serve (decode, prefill,
speculative), serve_sweep, the step tables (analysis/stepcost) and the scheduler."""

from dataclasses import replace

import numpy as np
import pytest

import roofline as rl
from roofline.analysis.stepcost import HOST_FACTORS, step_costs, with_host
from roofline.scenarios.serving import serve_sweep
from roofline.scenarios.serving.plan import host_prefill, host_step, serving_factors

H = 150e-6  # s per sequence per step (the order of vLLM V0's, lambda_vllm)
M, HW = "llama-3.1-8b", "H100"


def _pair(**extra):
    base = replace(serving_factors("vllm"), **dict.fromkeys(HOST_FACTORS, 0.0))
    return base, replace(base, **extra)


def test_host_functions_by_hand():
    f = replace(serving_factors("vllm"), step_overhead=1e-3, layer_overhead=100e-6,
                request_overhead=2e-3, seq_overhead=H)
    # 2 stages of 40 layers, 64 sequences: 2 × 1 ms + 80 × 100 µs + 64 × 150 µs = 19.6 ms
    assert host_step(f, 80, 64, 2) == pytest.approx(2e-3 + 8e-3 + 9.6e-3, rel=1e-12)
    # a prefill call of 8 prompts: 2 ms + 8 ms + 1.2 ms
    assert host_prefill(f, 80, 8) == pytest.approx(2e-3 + 8e-3 + 1.2e-3, rel=1e-12)
    # arrays of sequences (serve_sweep's batch axis)
    np.testing.assert_allclose(host_step(f, 32, np.array([1.0, 10.0])),
                               1e-3 + 3.2e-3 + H * np.array([1.0, 10.0]), rtol=1e-12)


@pytest.mark.parametrize("B", [1, 16, 96])
def test_serve_decode_and_prefill_add_h_per_sequence(B):
    f0, f1 = _pair(seq_overhead=H)
    kw = dict(batch=B, prompt_len=512, output_len=65)
    a, b = rl.serve(M, HW, engine=f0, **kw), rl.serve(M, HW, engine=f1, **kw)
    assert b.tpot - a.tpot == pytest.approx(B * H, rel=1e-9)
    assert b.ttft - a.ttft == pytest.approx(B * H, rel=1e-9)  # each samples a first token
    assert b.e2e_latency - a.e2e_latency == pytest.approx(B * H * 65, rel=1e-9)
    assert b.phase_seconds["step_overhead"] - a.phase_seconds["step_overhead"] == \
        pytest.approx(B * H * 65, rel=1e-9)


def test_step_overhead_is_per_pipeline_stage():
    f0, f1 = _pair(step_overhead=7e-3, seq_overhead=H)
    kw = dict(batch=8, prompt_len=256, output_len=33, tp=2, pp=2)
    a, b = rl.serve("llama-3.1-70b", "H100", engine=f0, **kw), \
        rl.serve("llama-3.1-70b", "H100", engine=f1, **kw)
    # 2 stages × 7 ms + 8 sequences × 150 µs per step
    assert b.tpot - a.tpot == pytest.approx(2 * 7e-3 + 8 * H, rel=1e-9)


def test_serve_sweep_agrees_with_serve():
    f0, f1 = _pair(seq_overhead=H, layer_overhead=50e-6)
    Bs, P = [1, 7, 64], 300
    sw0 = serve_sweep(M, HW, batch=Bs, context=[P + 1], engine=f0)["tpot"][0, 0, :, 0]
    sw1 = serve_sweep(M, HW, batch=Bs, context=[P + 1], engine=f1)["tpot"][0, 0, :, 0]
    np.testing.assert_allclose(sw1 - sw0, 32 * 50e-6 + H * np.array(Bs), rtol=1e-9)
    for j, B in enumerate(Bs):
        s = rl.serve(M, HW, batch=B, prompt_len=P, output_len=2, engine=f1)
        assert sw1[j] == pytest.approx(s.tpot, rel=1e-9)


def test_speculative_adds_h_per_step_of_each_iteration():
    f0, f1 = _pair(seq_overhead=H)
    kw = dict(batch=4, prompt_len=128, output_len=129, draft="llama-3.2-1b", draft_len=4,
              acceptance=0.7)
    a, b = rl.serve(M, HW, engine=f0, **kw), rl.serve(M, HW, engine=f1, **kw)
    E = (1 - 0.7 ** 5) / (1 - 0.7)  # tokens per target step
    iters = 128 / E
    # every iteration: 4 draft steps + 1 verification, each 4 sequences × 150 µs
    assert (b.tpot - a.tpot) * 128 == pytest.approx(iters * 5 * 4 * H, rel=1e-9)


def test_step_tables_match_serve_and_swap_host():
    f0, f1 = _pair(seq_overhead=H, layer_overhead=80e-6, request_overhead=1e-3)
    c0 = step_costs(M, HW, engine=f0, max_tokens=2048, ref_prompts=(512,))
    c1 = step_costs(M, HW, engine=f1, max_tokens=2048, ref_prompts=(512,))
    host1 = 32 * 80e-6
    for b in (1, 10, 100):
        assert c1.decode_time(b, 0) - c0.decode_time(b, 0) == pytest.approx(host1 + b * H,
                                                                           rel=1e-9)
    # a mixed step: 10 decoding, two prefill chunks -> 12 sequences' host time
    ch = [(200, 0), (100, 50)]
    assert c1.step_time(10, 5000, ch) - c0.step_time(10, 5000, ch) == \
        pytest.approx(host1 + 12 * H, rel=1e-9)
    # a lone prompt: serve's TTFT (request overhead, layers, its one sequence)
    s = rl.serve(M, HW, batch=1, prompt_len=512, output_len=128, engine=f1)
    assert c1.prefill_time(512) - c0.prefill_time(512) == pytest.approx(1e-3 + host1 + H,
                                                                        rel=1e-9)
    assert c1.prefill_time(512) == pytest.approx(s.ttft, rel=1e-3)  # (pre is interpolated)
    assert c1.ttft_ref[512] == pytest.approx(s.ttft, rel=1e-12)
    assert c1.tpot_ref == pytest.approx(s.tpot, rel=1e-12)
    # swapping the host terms equals building with them
    sw = with_host(c0, f1)
    np.testing.assert_allclose(sw.lin, c1.lin, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(sw.pre, c1.pre, rtol=1e-9, atol=1e-15)
    assert sw.seq_overhead == c1.seq_overhead == H


def test_scheduler_charges_h_per_sequence():
    f0, f1 = _pair(seq_overhead=H)
    wl = rl.Workload(trace=[(300, 21, 0.0)])
    out = []
    for f in (f0, f1):
        c = step_costs(M, HW, engine=f, max_tokens=1024, ref_prompts=(300,))
        out.append(rl.simulate_serving(M, HW, workload=wl, requests=None, engine=f, costs=c,
                                       chunk_size=None, max_batched_tokens=1024))
    a, b = out
    assert b.ttft.p50 - a.ttft.p50 == pytest.approx(H, rel=1e-6)  # one prefill chunk
    assert b.tpot.p50 - a.tpot.p50 == pytest.approx(H, rel=1e-6)  # one sequence per step


def test_shipped_profiles_load_seq_overhead():
    for name in ("trtllm", "vllm", "eager"):
        f = serving_factors(name)
        assert f.seq_overhead >= 0.0


def test_prefill_first_runs_prompts_alone_by_hand():
    """vLLM V0 without chunked prefill: two prompts of 64 tokens at t = 0, a 64-token budget
    (one prompt per step), 3 output tokens each. Prefill-first: A's prefill, then B's alone
    (A waits), then two decode steps of both; by hand from the step tables' own prices."""
    from roofline.analysis.scheduler import run_replica

    f = replace(serving_factors("vllm-v0"), seq_overhead=H)
    c = step_costs(M, HW, engine=f, max_tokens=512, ref_prompts=(64,))
    assert c.prefill_first
    arr, isl, osl = np.zeros(2), np.array([64, 64]), np.array([3, 3])
    out = run_replica(arr, isl, osl, c, max_concurrency=8, budget=64, chunked=False)
    p = c.prefill_time(64)  # each prompt alone: its tokens, attention and one sequence's host
    t_b = 2 * p
    # both decode: 64 + 64 tokens in KV, + 2 per step
    end = t_b + c.decode_time(2, 130) + c.decode_time(2, 132)
    np.testing.assert_allclose(out["first"], [p, t_b], rtol=1e-12)
    np.testing.assert_allclose(out["done"], [end, end], rtol=1e-12)
    # the same without the rule: B's prefill joins A's first decode step
    c2 = replace(c, prefill_first=False)
    out2 = run_replica(arr, isl, osl, c2, max_concurrency=8, budget=64, chunked=False)
    mixed = c2.step_time(1, 65, [(64, 0)])
    assert out2["first"][1] == pytest.approx(p + mixed, rel=1e-12)
    assert out2["done"][0] < out["done"][0]  # A no longer waits for B's prefill
    # chunked prefill: the rule does not apply (decodes first), as in vLLM
    out3 = run_replica(arr, isl, osl, c, max_concurrency=8, budget=64, chunked=True)
    out4 = run_replica(arr, isl, osl, c2, max_concurrency=8, budget=64, chunked=True)
    np.testing.assert_allclose(out3["done"], out4["done"], rtol=1e-12)


def test_multi_step_runs_decodes_in_blocks_by_hand():
    """vLLM V0 multi-step (scheduler_steps k = 3), one slot: A (64-token prompt, 5 tokens out)
    then B (64, 2). A's prefill, then its 4 remaining tokens: the run goes on to the end of
    the block they fall in, 6 steps; A's tokens reach the client at that block's end. B is
    admitted only then: its prefill, its 1 remaining token, a block of 3. By hand from the
    tables' own prices; with k = 1 the same requests finish at their own last step."""
    from roofline.analysis.scheduler import run_replica

    f = replace(serving_factors("vllm-v0-multistep"), seq_overhead=H, scheduler_steps=3)
    c = step_costs(M, HW, engine=f, max_tokens=512, ref_prompts=(64,))
    assert c.prefill_first and c.host.scheduler_steps == 3
    arr, isl, osl = np.zeros(2), np.array([64, 64]), np.array([5, 2])
    out = run_replica(arr, isl, osl, c, max_concurrency=1, budget=64, chunked=False)
    p = c.prefill_time(64)

    def steps(n):  # n decode steps of one sequence from 64 tokens in KV (+1 written each)
        return sum(c.decode_time(1, 65 + j) for j in range(n))

    t_a = p + steps(6)
    np.testing.assert_allclose(out["first"], [p, t_a + p], rtol=1e-12)
    np.testing.assert_allclose(out["done"], [t_a, t_a + p + steps(3)], rtol=1e-12)
    one = run_replica(arr, isl, osl, replace(c, host=replace(f, scheduler_steps=1)),
                      max_concurrency=1, budget=64, chunked=False)
    t_a1 = p + steps(4)
    np.testing.assert_allclose(one["done"], [t_a1, t_a1 + p + steps(1)], rtol=1e-12)
