"""Transformer zoo: parameter counts against published figures; MLA, MoE, Gemma-2 details."""

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.transformer import from_hf_config

DECODERS = ["llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b",
            "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b", "mistral-7b", "mixtral-8x7b",
            "qwen2.5-0.5b", "qwen2.5-7b", "qwen2.5-72b", "gpt2", "gpt2-xl", "gpt3-175b",
            "gemma-2-9b", "deepseek-v3", "qwen3-8b", "qwen3-30b-a3b", "mistral-7b-v0.3",
            "phi-3-mini"]


@pytest.mark.parametrize("key", DECODERS)
def test_params_match_published(key):
    m = rl.model(key)
    pub = m.published["params"].value
    # published figures are rounded to 3 significant digits (8.03B, 46.7B, 671B ...)
    assert m.params == pytest.approx(pub, rel=0.01), (m.params, pub)


def _active(m):
    g = m.graph(precision="bf16", batch=1)
    cfg = m.config
    experts = sum(p for n, p in zip(g.names, g.params) if ".moe.experts." in n)
    return g.params_total - experts * (1 - cfg.top_k / cfg.n_experts)


def test_moe_active_params():
    # Mixtral: 12.9B active per token (Mistral AI announcement)
    assert _active(rl.model("mixtral-8x7b")) == pytest.approx(12.9e9, rel=0.01)
    # DeepSeek-V3: 37B activated (technical report abstract, rounded)
    assert _active(rl.model("deepseek-v3")) == pytest.approx(37e9, rel=0.02)


def test_gemma2_exact_count_and_details():
    m = rl.model("gemma-2-9b")
    # paper Table 2 total 9,242,164,736 counts a 256,128-row embedding; the config has 256,000:
    # 9,242,164,736 − 128 × 3584 = 9,241,705,984
    assert m.params == 9_242_164_736 - 128 * 3584
    cfg = m.config
    assert cfg.tied_embeddings and cfg.sandwich_norm
    assert cfg.layer_window(0) == 4096 and cfg.layer_window(1) is None
    g = m.graph(precision="bf16", phase="decode", context=8000)
    kv = {n: g.c1[4, i] for i, n in enumerate(g.names) if n.endswith("attn.attention")}
    # local layers read 4096 cached tokens, global layers all 8000
    assert kv["layers.0.attn.attention"] * 8000 == pytest.approx(
        kv["layers.1.attn.attention"] * 4096)


def test_deepseek_mla_kv_cache():
    cfg = rl.model("deepseek-v3").config
    # latent 512 + RoPE key 64 = 576 values per layer per token, 61 layers, 1 B (fp8)
    assert cfg.kv_bytes_per_token(1) == 61 * 576
    g = rl.model("deepseek-v3").graph(precision="fp8", phase="decode", context=1000, batch=1)
    from roofline.graphs.graph import Q

    i = g.names.index("layers.5.attn.attention")
    # absorbed attention reads the 576-wide latent once per cached token
    assert g.c1[Q["kv_bytes_read"], i] == pytest.approx(1000 * 576)


def test_qwen2_has_qkv_bias_and_gpt2_is_fused():
    q = rl.model("qwen2.5-7b").config
    assert q.qkv_bias
    assert rl.model("gpt2").config.fused_qkv


def test_config_errors_name_the_field():
    base = {"model_type": "llama", "hidden_size": 100, "intermediate_size": 256,
            "num_hidden_layers": 2, "num_attention_heads": 3, "vocab_size": 10}
    with pytest.raises(SpecError, match="not divisible"):
        from_hf_config(base)
    with pytest.raises(SpecError, match="num_hidden_layers"):
        from_hf_config({k: v for k, v in base.items() if k != "num_hidden_layers"})
    with pytest.raises(SpecError, match="qk_nope_head_dim"):
        from_hf_config({**base, "num_attention_heads": 4, "kv_lora_rank": 64})
