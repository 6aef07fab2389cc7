"""rl.serve: closed-form generation sums, TP/PP, quantisation, serving scenarios, anchors."""

import json

import numpy as np
import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.scenarios.serving import expected_tokens_per_step, serve_sweep
from roofline.scenarios.serving import plan as sp

M = "llama-3.1-8b"


def test_mlsysim_anchors():
    # seed: Llama-3.1-8B, A100, batch 1 -> 8.999 ms, 111.1 tok/s, AI 0.909 (mlsysim Engine.solve)
    s = rl.serve(M, "A100", batch=1, prompt_len=2048, output_len=256, precision="fp16",
                 preset="mlsysim")
    d = s.decode
    assert d.latency == pytest.approx(8.999e-3, rel=5e-3)
    assert d.throughput == pytest.approx(111.1, rel=5e-3)
    assert d.arithmetic_intensity == pytest.approx(0.909, rel=5e-3)
    # ServingModel golden case (docs/mlsysim-conventions.md §4): H100, S=2048, B=1, fp16
    g = rl.serve(M, "H100", batch=1, prompt_len=2048, output_len=1, precision="fp16",
                 preset="mlsysim")
    assert g.ttft == pytest.approx(70.97e-3, rel=5e-3)
    assert g.tpot == pytest.approx(5.194e-3, rel=5e-3)
    assert g.kv_cache_bytes == pytest.approx(0.2684e9, rel=5e-3)


def test_decode_step_is_affine_in_context():
    plan = sp.device_plan(rl.model(M).config, rl.precision("bf16"), tp=1, pp=1, fuse=True,
                       fused_attention=True)
    g = {S: plan.graph("decode", context=S, batch=4, compressed=False).cost(4)
         for S in (100, 1100, 2100)}
    # attention FLOPs and KV bytes grow linearly with S; every other op is constant
    assert g[2100].flops - g[1100].flops == pytest.approx(g[1100].flops - g[100].flops)
    assert g[2100].kv_bytes_read - g[1100].kv_bytes_read == pytest.approx(
        g[1100].kv_bytes_read - g[100].kv_bytes_read)
    # KV read per step per sample per context token: 2·L·K·H·2 B = 2·32·8·128·2 = 131072
    assert (g[1100].kv_bytes_read - g[100].kv_bytes_read) / 1000 / 4 == pytest.approx(131072)


def test_closed_form_sum_equals_loop_over_steps():
    hw = rl.hardware("H100")
    plan = sp.device_plan(rl.model(M).config, rl.precision("bf16"), tp=1, pp=1, fuse=True,
                       fused_attention=True)
    f = sp.serving_factors("trtllm")
    eff = sp.efficiency(hw, "default", f, "bf16")
    lines = plan.lines(hw, eff, 8)
    loop = sum(lines.step(S)["total"] for S in range(2049, 2304))
    assert lines.total(2049, 2303)["total"] == pytest.approx(loop, rel=1e-12)
    # and each step equals the engine's price of the real graph at that context
    from roofline.engine.core import price

    for S in (2049, 2303):
        c = plan.graph("decode", context=S, batch=8)
        t = price(c.graph, [hw], [eff], np.array([8.0]), keep_ops=True)["op_time"][0, 0]
        assert lines.step(S)["total"] == pytest.approx(float(c.counts @ t), rel=1e-9)


def test_sum_max_affine_matches_brute_force():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 50)), rng.normal(size=(3, 50))
    S = np.arange(3, 41)[:, None]
    brute = np.max(a[:, None, :] + b[:, None, :] * S[None], axis=0).sum(0)
    from roofline.engine.lines import sum_max_int, sum_max_lines

    assert np.allclose(sum_max_int(a, b, 3, 40), brute)
    for k in range(5):
        lines = tuple((float(a[i, k]), float(b[i, k])) for i in range(3))
        assert sum_max_lines(lines, 3, 40) == pytest.approx(brute[k])


def test_long_generation_costs_no_loop():
    import time

    rl.serve(M, "H100", batch=1, prompt_len=1024, output_len=32768)  # warm graph caches
    t = time.perf_counter()
    s = rl.serve(M, "H100", batch=1, prompt_len=1024, output_len=32768)
    assert time.perf_counter() - t < 0.05  # no Python loop over 32k steps
    assert s.e2e_latency == pytest.approx(s.ttft + 32767 * s.tpot)


def test_serve_result_fields_and_consistency():
    s = rl.serve(M, "H100", batch=8, prompt_len=2048, output_len=256, precision="bf16",
                 kv_precision="fp8", tp=1)
    assert s.feasible and s.e2e_latency == pytest.approx(s.ttft + 255 * s.tpot)
    assert s.tokens_per_s == pytest.approx(8 * 256 / s.e2e_latency)
    # KV: 8 sequences × 2304 tokens × 2·32·8·128 values × 1 B (fp8) = 1.208 GB
    assert s.kv_cache_bytes == pytest.approx(8 * 2304 * 2 * 32 * 8 * 128)
    assert set(s.memory_breakdown) == {"weights", "kv_cache", "activations", "workspace"}
    assert sum(s.phase_seconds.values()) == pytest.approx(s.e2e_latency, rel=1e-9)
    assert 0 < s.mbu < 1 and 0 < s.mfu < 1
    # the per-op Results are the engine's pricing of the real graphs
    assert s.prefill.ops.to_dicts()[0]["name"] == "embed_tokens"
    f = sp.serving_factors("trtllm")  # TTFT = prefill + request overhead + 32 layers' cost
    assert s.ttft == pytest.approx(s.prefill.latency + f.request_overhead +
                                   f.layer_overhead * 32, rel=1e-6)
    assert any("q_proj" in r["name"] for r in s.decode.ops.to_dicts())
    assert json.dumps(s.to_dict())
    assert "TTFT" in str(s)


def test_max_batch_fits_and_one_more_does_not():
    s = rl.serve("llama-2-7b", "A100", batch=1, prompt_len=2048, output_len=2048,
                 precision="fp16")
    mb = s.max_batch
    assert rl.serve("llama-2-7b", "A100", batch=mb, prompt_len=2048, output_len=2048,
                    precision="fp16").feasible
    big = rl.serve("llama-2-7b", "A100", batch=mb + 8, prompt_len=2048, output_len=2048,
                   precision="fp16")
    assert not big.feasible and "largest batch" in big.reason


def test_quantisation_weights_kv_and_compute_peak():
    hw = rl.hardware("H100")
    bf = rl.serve(M, hw, batch=1, prompt_len=512, output_len=64, precision="bf16")
    w4 = rl.serve(M, hw, batch=1, prompt_len=512, output_len=64, precision="bf16",
                  weight_precision="int4", group_size=128)
    # int4 with one 2-byte scale per 128 weights: 0.5 + 2/128 B per weight
    assert w4.memory_breakdown["weights"] == pytest.approx(
        bf.memory_breakdown["weights"] * (0.5 + 2 / 128) / 2)
    assert w4.decode.t_memory < 0.5 * bf.decode.t_memory  # weight reads dominate decode
    kv8 = rl.serve(M, hw, batch=1, prompt_len=512, output_len=64, kv_precision="fp8")
    assert kv8.kv_cache_bytes == pytest.approx(bf.kv_cache_bytes / 2)
    f8 = rl.serve(M, hw, batch=64, prompt_len=2048, output_len=2, precision="fp8")
    assert f8.prefill.peak_flops_per_s == hw.peak("fp8")
    assert rl.serve(M, "A100", precision="fp8").feasible is False  # A100 has no fp8 peak


def test_tensor_parallel_splits_and_all_reduces():
    one = rl.serve("llama-3.1-70b", "H100", batch=8, prompt_len=1024, output_len=128,
                   precision="fp8", tp=1)
    tp4 = rl.serve("llama-3.1-70b", "H100", batch=8, prompt_len=1024, output_len=128,
                   precision="fp8", tp=4)
    assert tp4.memory_breakdown["weights"] < 0.26 * one.memory_breakdown["weights"]
    assert tp4.memory_breakdown["kv_cache"] == pytest.approx(one.memory_breakdown["kv_cache"] / 4)
    assert tp4.phase_seconds["tp_comm"] > 0 and tp4.tpot < one.tpot
    assert tp4.devices == 4
    # one all-reduce of a decode step: B·D·2 B = 8·8192·2 = 131072 B over 4 ranks, one-shot,
    # α(4) = 3.7 + 0.37·2 = 4.44 µs, 450 GB/s × 0.75: 4.44e-6 + 3·131072/337.5e9 = 5.61 µs
    from roofline.scenarios.serving import allreduce_time

    assert allreduce_time(131072, 4, rl.hardware("H100"), sp.serving_factors("trtllm")) == \
        pytest.approx(4.44e-6 + 3 * 131072 / 337.5e9)


def test_tp_beyond_kv_heads_replicates_them():
    cfg = rl.model(M).config  # 32 heads, 8 KV heads
    c16 = sp.shard_config(cfg, tp=16)
    assert (c16.n_heads, c16.n_kv_heads) == (2, 1)  # each KV head on 16/8 = 2 devices
    s = rl.serve(M, "H100", batch=1, prompt_len=128, output_len=8, tp=16)
    assert any("replicated" in n for n in s.notes)
    with pytest.raises(SpecError, match="tp=3 must divide num_attention_heads=32"):
        sp.shard_config(cfg, tp=3)
    from dataclasses import replace

    odd = replace(cfg, n_heads=48, n_kv_heads=6)  # tp=4 divides 48 heads but not 6 KV heads
    with pytest.raises(SpecError, match="tp must divide K"):
        sp.shard_config(odd, tp=4)
    with pytest.raises(SpecError):
        sp.shard_config(cfg, tp=12)


def test_pipeline_parallel_halves_weights_per_device():
    a = rl.serve(M, "H100", batch=8, prompt_len=512, output_len=64)
    b = rl.serve(M, "H100", batch=8, prompt_len=512, output_len=64, pp=2)
    assert b.memory_breakdown["weights"] < 0.6 * a.memory_breakdown["weights"]
    assert b.phase_seconds["pp_comm"] > 0 and b.devices == 2


def test_speculative_decoding():
    assert expected_tokens_per_step(0.0, 4) == 1.0
    # α = 0.5, k = 2: (1 − 0.5³)/(1 − 0.5) = 0.875/0.5 = 1.75
    assert expected_tokens_per_step(0.5, 2) == pytest.approx(1.75)
    base = rl.serve("llama-3.1-70b", "H100", batch=1, prompt_len=512, output_len=256,
                    precision="fp8", tp=4)
    spec = rl.serve("llama-3.1-70b", "H100", batch=1, prompt_len=512, output_len=256,
                    precision="fp8", tp=4, draft="llama-3.2-1b", draft_len=4, acceptance=0.8)
    assert spec.tpot < base.tpot and "speculative" in spec.notes[0]
    bad = rl.serve("llama-3.1-70b", "H100", batch=1, prompt_len=512, output_len=256,
                   precision="fp8", tp=4, draft="llama-3.2-1b", acceptance=0.0)
    assert bad.tpot > base.tpot  # nothing accepted: pure extra work


def test_prefix_caching_and_chunked_prefill():
    full = rl.serve(M, "H100", batch=4, prompt_len=4096, output_len=16)
    cached = rl.serve(M, "H100", batch=4, prompt_len=4096, output_len=16, prefix_cached=3072)
    assert cached.ttft < 0.4 * full.ttft
    ch = rl.serve(M, "H100", batch=4, prompt_len=4096, output_len=16, chunk_size=512)
    # chunks recompute nothing but re-read weights 8 times: slightly slower, same order
    assert full.ttft < ch.ttft < 1.3 * full.ttft
    ch2 = rl.serve(M, "H100", batch=4, prompt_len=4096, output_len=16, chunk_size=1000)
    assert ch2.ttft == pytest.approx(ch.ttft, rel=0.1)


def test_disaggregated_prefill_decode():
    s = rl.serve(M, "H100", batch=4, prompt_len=2048, output_len=64, decode_hardware="H200",
                 kv_link_bytes_per_s=50e9)
    co = rl.serve(M, "H100", batch=4, prompt_len=2048, output_len=64)
    # KV of 4 × 2048 tokens × 131072 B over 50 GB/s = 21.47 ms
    assert s.phase_seconds["kv_transfer"] == pytest.approx(4 * 2048 * 131072 / 50e9)
    assert s.tpot < co.tpot  # H200 has more bandwidth


def test_moe_reads_expected_distinct_experts():
    from roofline.graphs.transformer import _expected_experts

    # E=8, k=2: one token touches 2 experts; many tokens touch all 8
    assert _expected_experts(8, 2, 1) == pytest.approx(2.0)
    assert _expected_experts(8, 2, 64) == pytest.approx(8.0, rel=1e-6)
    a = rl.serve("mixtral-8x7b", "H100", batch=1, prompt_len=256, output_len=32, precision="fp8",
                 tp=2)
    b = rl.serve("mixtral-8x7b", "H100", batch=32, prompt_len=256, output_len=32,
                 precision="fp8", tp=2)
    assert b.tpot > 1.5 * a.tpot  # batch 32 reads all 8 experts, batch 1 only ~2


def test_capacity_meets_slos():
    c = rl.serving_capacity(M, "H100", prompt_len=1024, output_len=256, ttft_slo=0.5,
                            tpot_slo=0.05)
    assert c.rate_per_s > 1 and c.ttft <= 0.5 and c.tpot <= 0.05
    assert c.limited_by in ("ttft", "tpot", "memory")
    tight = rl.serving_capacity(M, "H100", prompt_len=1024, output_len=256, ttft_slo=0.5,
                                tpot_slo=0.02)
    assert tight.rate_per_s < c.rate_per_s
    assert "M/D/1" in c.queue_model


def test_sweep_matches_serve_decode_steps():
    out = serve_sweep(M, ["H100", "A100"], batch=[1, 8, 64], context=[512, 4096],
                      precision=["bf16", "fp8"])
    assert out["tpot"].shape == (2, 2, 3, 2)
    assert np.isnan(out["tpot"][1, 1]).all()  # A100 has no fp8
    s = rl.serve(M, "H100", batch=8, prompt_len=4095, output_len=2)  # one step at S=4096
    assert out["tpot"][0, 0, 1, 1] == pytest.approx(s.tpot, rel=1e-9)


def test_bad_input():
    with pytest.raises(SpecError, match="prompt_len"):
        rl.serve(M, "H100", prompt_len=0)
    r = rl.serve("llama-2-7b", "H100", prompt_len=4000, output_len=200)
    assert not r.feasible and "max_position_embeddings=4096" in r.reason
    huge = rl.serve("llama-3.1-405b", "L4", batch=1, prompt_len=128, output_len=8)
    assert not huge.feasible and huge.max_batch == 0
    with pytest.raises(SpecError, match="decoder"):
        rl.serve("resnet50", "H100")
    with pytest.raises(KeyError, match="engine"):
        rl.serve(M, "H100", engine="tgi")


def test_solve_decode_step_still_works():
    r = rl.solve(rl.model(M), "A100", phase="decode", batch=1, context=1024)
    assert r.phase == "decode" and r.context == 1024 and r.latency > 0


def test_pipeline_stages_keep_kv_for_every_sequence():
    # pp=2 halves the layers per device, not the sequences: each micro-batch passes through
    # both stages, and each stage keeps its layers' KV for all of them. Llama-3.1-8B bf16:
    # 8 KV heads x 128 x 2 (K, V) x 2 B = 4096 B per layer per token; 16 layers per stage;
    # 8 sequences x (512 + 64) tokens x 16 x 4096 B = 301,989,888 B per device
    b = rl.serve(M, "H100", batch=8, prompt_len=512, output_len=64, pp=2)
    assert b.memory_breakdown["kv_cache"] == 8 * 576 * 16 * 4096
    a = rl.serve(M, "H100", batch=8, prompt_len=512, output_len=64)
    assert b.memory_breakdown["kv_cache"] == pytest.approx(a.memory_breakdown["kv_cache"] / 2)


@pytest.mark.parametrize("w,g", [("int8", None), ("int4", None), ("int4", 128)])
def test_sweep_takes_weight_only_quantisation_as_serve_does(w, g):
    out = serve_sweep("llama-3.1-70b", "H100", batch=[1, 8], context=[1024], tp=2,
                      precision="bf16", kv_precision="fp8", weight_precision=w, group_size=g)
    s = rl.serve("llama-3.1-70b", "H100", batch=8, prompt_len=1023, output_len=2, tp=2,
                 kv_precision="fp8", weight_precision=w, group_size=g)
    assert out["tpot"][0, 0, 1, 0] == pytest.approx(s.tpot, rel=1e-9)
    # int8 halves and int4 quarters the bf16 weight bytes a memory-bound step reads
    full = serve_sweep("llama-3.1-70b", "H100", batch=[1], context=[1024], tp=2,
                       kv_precision="fp8")["tpot"][0, 0, 0, 0]
    assert out["tpot"][0, 0, 0, 0] < (0.75 if w == "int8" else 0.5) * full
