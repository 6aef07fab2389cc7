"""Decode attention that reads each KV head once per query head (``kv_per_query_head``):
TensorRT-LLM's masked-MHA kernel before XQA (v0.5 / v0.6.1, engine "trtllm-legacy"; sources
trt_mmha and trt_xqa in data/presets/serving.toml). Hand calculations of the extra KV bytes."""

from dataclasses import replace

import numpy as np
import pytest

import roofline as rl
from roofline.graphs.graph import Q
from roofline.scenarios.serving import plan as sp

P8 = rl.precision("fp8", activations="fp16", kv="fp8")


def _plan(model, tp, on):
    return sp.device_plan(rl.model(model).config, P8, tp=tp, pp=1, fuse=True,
                          fused_attention=True, kv_per_query_head=on)


def test_decode_graph_reads_the_kv_head_once_per_query_head_by_hand():
    # Llama-2-70B: 64 query heads, 8 KV heads, head 128, 80 layers; at tp 4 each device holds
    # 16 query and 2 KV heads: a group of 8 query heads per KV head
    on, off = _plan("llama-2-70b", 4, True), _plan("llama-2-70b", 4, False)
    assert (on.cfg.n_heads, on.cfg.n_kv_heads) == (16, 2)
    a = on.graph("decode", context=1024, batch=8, compressed=False)
    b = off.graph("decode", context=1024, batch=8, compressed=False)
    # KV read per sequence per step at context 1024, fp8 cache (1 B): once per KV head it is
    # 1024 tokens x 80 layers x 2 heads x (128 + 128) x 1 B = 41.9 MB; per query head, 8 times
    once = 1024 * 80 * 2 * 256 * 1
    assert b.cost(1).kv_bytes_read == pytest.approx(once, rel=1e-12)
    assert a.cost(1).kv_bytes_read == pytest.approx(8 * once, rel=1e-12)
    # nothing else moves: FLOPs, weights, activations, the new tokens' KV writes
    r = Q["kv_bytes_read"]
    rest = [i for i in range(a.c0.shape[0]) if i != r]
    assert np.array_equal(a.c0[rest], b.c0[rest]) and np.array_equal(a.c1[rest], b.c1[rest])
    # only the attention ops change
    changed = {a.kinds[i] for i in range(len(a)) if a.c1[r, i] != b.c1[r, i]}
    assert changed == {"attention"}


def test_prefill_and_multi_head_models_are_unchanged():
    on, off = _plan("llama-2-70b", 4, True), _plan("llama-2-70b", 4, False)
    a = on.graph("prefill", seq_len=512, compressed=False)
    b = off.graph("prefill", seq_len=512, compressed=False)
    assert np.array_equal(a.c1, b.c1)  # the context phase runs a fused MHA over the prompt
    # Llama-2-7B has 32 KV heads for 32 query heads: a group of one, nothing to repeat
    m_on, m_off = _plan("llama-2-7b", 1, True), _plan("llama-2-7b", 1, False)
    g1 = m_on.graph("decode", context=2048, compressed=False)
    g2 = m_off.graph("decode", context=2048, compressed=False)
    assert np.array_equal(g1.c0, g2.c0) and np.array_equal(g1.c1, g2.c1)


def test_serve_prices_the_extra_bytes_for_the_legacy_engine_only():
    legacy = sp.serving_factors("trtllm-legacy")
    assert legacy.kv_per_query_head
    assert not any(sp.serving_factors(e).kv_per_query_head
                   for e in ("trtllm", "vllm", "vllm-v1", "eager"))
    kw = dict(batch=8, prompt_len=1023, output_len=2, precision=P8, tp=4)
    s = rl.serve("llama-2-70b", "H100", engine=legacy, **kw)
    t = rl.serve("llama-2-70b", "H100", engine=replace(legacy, kv_per_query_head=False), **kw)
    # the step at context 1024 moves 7 more reads of the 8 sequences' KV cache (335.5 MB each)
    kv = 8 * 1024 * 80 * 2 * 256 * 1
    assert s.decode.bytes - t.decode.bytes == pytest.approx(7 * kv, rel=1e-9)
    assert s.decode.flops == pytest.approx(t.decode.flops, rel=1e-12)
    assert s.tpot > t.tpot
    assert s.kv_cache_bytes == t.kv_cache_bytes  # the cache itself is stored once per KV head


def test_trtllm_v08_is_legacy_with_xqa_decode():
    """TensorRT-LLM v0.8 (engine "trtllm-v08", source trt_xqa): the legacy runtime and its fitted
    terms with XQA decode attention, which reads a KV head once for its group; nothing else."""
    old, new = sp.serving_factors("trtllm-legacy"), sp.serving_factors("trtllm-v08")
    assert old.kv_per_query_head and not new.kv_per_query_head
    assert replace(new, name=old.name, kv_per_query_head=True, provenance=None) == \
        replace(old, provenance=None)
    kw = dict(batch=8, prompt_len=1023, output_len=2, precision=P8, tp=4)
    s = rl.serve("llama-2-70b", "H100", engine="trtllm-legacy", **kw)
    t = rl.serve("llama-2-70b", "H100", engine="trtllm-v08", **kw)
    # the step at context 1024 reads the 8 sequences' fp8 KV cache 7 times fewer: per sequence
    # 1024 tokens x 80 layers x 2 KV heads (of 8, tp 4) x (128 + 128) x 1 B = 41.9 MB
    kv = 8 * 1024 * 80 * 2 * 256 * 1
    assert s.decode.bytes - t.decode.bytes == pytest.approx(7 * kv, rel=1e-9)
    assert s.ttft == pytest.approx(t.ttft, rel=1e-12)  # prefill unchanged
    assert s.tpot > t.tpot


def test_vllm_legacy_is_vllm_with_paged_attention_decode():
    """vLLM before its FlashAttention decode path (engine "vllm-legacy", source vllm_pa):
    PagedAttention's grid is (query heads, sequences), so it is the vllm profile with each KV
    head read once per query head, and nothing else changed."""
    old, new = sp.serving_factors("vllm-legacy"), sp.serving_factors("vllm")
    assert old.kv_per_query_head and not new.kv_per_query_head
    assert replace(old, name=new.name, kv_per_query_head=False, provenance=None) == \
        replace(new, provenance=None)
    p16 = rl.precision("fp16")
    kw = dict(batch=64, prompt_len=1023, output_len=2, precision=p16, tp=4)
    s = rl.serve("llama-2-70b", "A100", engine="vllm-legacy", **kw)
    t = rl.serve("llama-2-70b", "A100", engine="vllm", **kw)
    # the step at context 1024 reads the 64 sequences' fp16 KV cache 7 more times: per
    # sequence 1024 tokens x 80 layers x 2 KV heads (of 8, tp 4) x (128 + 128) x 2 B = 83.9 MB
    kv = 64 * 1024 * 80 * 2 * 256 * 2
    assert s.decode.bytes - t.decode.bytes == pytest.approx(7 * kv, rel=1e-9)
    assert s.ttft == pytest.approx(t.ttft, rel=1e-12)  # prefill unchanged
    assert s.tpot > t.tpot
