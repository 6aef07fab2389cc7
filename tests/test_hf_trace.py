"""HuggingFace transformers modules traced on the meta device (``from_config``: no weights
downloaded, small configs built here) against the graphs built from the same config.json
fields: FLOPs and parameters within 1 %."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import roofline as rl  # noqa: E402
from roofline.graphs.importers.hf_config import from_hf_config  # noqa: E402
from roofline.graphs.model import transformer_model  # noqa: E402

T = 32  # tokens traced
SMALL = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
             max_position_embeddings=256, pad_token_id=0, bos_token_id=0, eos_token_id=0)


def _pair(config, auto, inputs, **graph_kw):  # type: ignore[no-untyped-def]
    with torch.device("meta"):
        module = auto.from_config(config) if hasattr(auto, "from_config") else auto(config)
    traced = rl.model(module.eval(), example_inputs=inputs, **graph_kw)
    d = config.to_dict()
    built = transformer_model(from_hf_config(d, name="cfg"), key="cfg")
    return traced, built


def _close(traced, built, seq: int | None, fused: bool = True) -> None:  # type: ignore[no-untyped-def]
    kw = {"seq_len": seq} if seq else {}
    for b in (1, 4):
        ft = traced.graph(precision="bf16", **kw).cost(b).flops
        fb = built.graph(precision="bf16", fused_attention=fused, **kw).cost(b).flops
        assert ft == pytest.approx(fb, rel=0.01), (b, ft, fb)
    assert traced.params == pytest.approx(built.params, rel=0.01)


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2"])
def test_decoder_families(family: str) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    extra = {"head_dim": 32} if family in ("qwen3", "gemma2") else {}
    # HF runs Gemma 2's attention eagerly (QKᵀ, softmax, ·V over the whole T×T matrix): the
    # graph's unfused attention prices the same
    fused = family != "gemma2"
    cfg = AutoConfig.for_model(family, **SMALL, **extra)
    ids = torch.zeros(1, T, dtype=torch.long)
    traced, built = _pair(cfg, AutoModelForCausalLM, (ids,), seq_dim=1)
    assert traced.unsupported_ops == ()
    _close(traced, built, T, fused)


def test_gpt2() -> None:
    from transformers import AutoModelForCausalLM, GPT2Config

    cfg = GPT2Config(n_embd=128, n_layer=2, n_head=4, vocab_size=512, n_positions=256)
    traced, built = _pair(cfg, AutoModelForCausalLM, (torch.zeros(1, T, dtype=torch.long),),
                          seq_dim=1)
    _close(traced, built, T)


def test_bert_and_vit() -> None:
    from transformers import AutoModel, BertConfig, ViTConfig, ViTForImageClassification

    cfg = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=256, vocab_size=512, max_position_embeddings=256)
    traced, built = _pair(cfg, AutoModel, (torch.zeros(1, T, dtype=torch.long),), seq_dim=1)
    _close(traced, built, T)
    vcfg = ViTConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=256, image_size=64, patch_size=16, num_labels=10)
    traced, built = _pair(vcfg, ViTForImageClassification, (torch.zeros(1, 3, 64, 64),))
    _close(traced, built, None)


#: small MoE configs (4 experts, top-2); DeepSeek-V3 with MLA and one dense first layer
MOE = {
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                      shared_expert_intermediate_size=128),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                      head_dim=32),
    "deepseek_v3": dict(num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2,
                        moe_intermediate_size=64, kv_lora_rank=32, q_lora_rank=64,
                        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                        n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1),
}


@pytest.mark.parametrize("family", list(MOE))
def test_moe_families(family: str) -> None:
    """transformers 5 runs the experts as aten._grouped_mm (rows sorted by expert): priced as
    2·(T·k)·K·N FLOPs with every expert's weight read once; the routing sort/histc are tiny.
    The config-built graph counts the experts T·k rows touch (all 4 at 32 tokens)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(family, **{**SMALL, **MOE[family]})
    with torch.device("meta"):  # grouped_mm's meta kernel takes bf16 operands only
        module = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    traced = rl.model(module.eval(), example_inputs=(torch.zeros(1, T, dtype=torch.long),),
                      seq_dim=1)
    built = transformer_model(from_hf_config(cfg.to_dict(), name="cfg"), key="cfg")
    assert traced.unsupported_ops == ()
    assert traced.params == pytest.approx(built.params, rel=0.01)
    for b in (1, 4):
        ft = traced.graph(precision="bf16", seq_len=T, batch=b).cost(b).flops
        fb = built.graph(precision="bf16", seq_len=T, batch=b).cost(b).flops
        if family == "deepseek_v3":
            # HF runs MLA's attention eagerly over the whole T×T matrix (2 layers, 4 heads,
            # q/k dim 24, v dim 16); the graph counts the causal T(T+1)/2 pairs:
            # 2 · 2 · 4 · (32·32 − 32·33/2) · (24 + 16) = 317,440 per sample
            ft -= b * 2 * 2 * 4 * (T * T - T * (T + 1) // 2) * (24 + 16)
        assert ft == pytest.approx(fb, rel=0.01), (b, ft, fb)


def test_encoder_decoders() -> None:
    """T5, BART and Whisper modules (encoder 24 tokens / 48 mel frames, decoder 8 tokens)
    against the seq2seq graphs of the same config (source_len 24): parameters equal, FLOPs
    within 1 %."""
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        T5Config,
        T5ForConditionalGeneration,
        WhisperConfig,
        WhisperForConditionalGeneration,
    )

    from roofline.graphs.knobs import resize

    stack = dict(encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                 d_model=64, vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=1,
                 decoder_start_token_id=1)
    Ts, Td = 24, 8
    cases = [
        (T5ForConditionalGeneration, T5Config(
            d_model=64, d_kv=16, num_heads=4, d_ff=128, num_layers=2, vocab_size=128,
            n_positions=Ts, relative_attention_num_buckets=8),
         torch.zeros(1, Ts, dtype=torch.long)),
        (BartForConditionalGeneration, BartConfig(**stack, max_position_embeddings=64),
         torch.zeros(1, Ts, dtype=torch.long)),
        (WhisperForConditionalGeneration, WhisperConfig(
            **stack, num_mel_bins=16, max_source_positions=Ts, max_target_positions=32,
            suppress_tokens=[], begin_suppress_tokens=[]), torch.zeros(1, 16, 2 * Ts)),
    ]
    for cls, config, x in cases:
        with torch.device("meta"):
            module = cls(config).eval()
        traced = rl.model(module, example_inputs=(x,),
                          example_kwargs={"decoder_input_ids": torch.zeros(1, Td,
                                                                           dtype=torch.long)})
        built = resize(transformer_model(from_hf_config(config.to_dict(), name="cfg"),
                                         key="cfg"), source_len=Ts)
        assert traced.unsupported_ops == ()
        assert traced.module_params == built.params, cls.__name__
        for b in (1, 4):
            ft = traced.graph(precision="bf16", batch=b).cost(b).flops
            fb = built.graph(precision="bf16", seq_len=Td).cost(b).flops
            assert ft == pytest.approx(fb, rel=0.01), (cls.__name__, b, ft, fb)


@pytest.mark.parametrize("family", ["llama", "gemma2", "deepseek_v3"])
def test_repeated_layers_traced_once_equal_every_layer_traced(family: str) -> None:
    """Identical layers replayed from the first (trace_repeats=True, the default) give the
    same ops, names and costs as tracing every layer; Gemma 2's alternating sliding-window
    layers and DeepSeek-V3's dense first layer have their own signatures."""
    from transformers import AutoConfig, AutoModelForCausalLM

    extra = {"gemma2": {"head_dim": 32}, "deepseek_v3": MOE["deepseek_v3"]}.get(family, {})
    cfg = AutoConfig.for_model(family, **{**SMALL, "num_hidden_layers": 4, **extra})
    with torch.device("meta"):
        module = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    ids = (torch.zeros(1, T, dtype=torch.long),)
    once = rl.model(module, example_inputs=ids, seq_dim=1)
    every = rl.model(module, example_inputs=ids, seq_dim=1, trace_repeats=False)
    assert any("repeated layers traced once" in n for n in once.notes)
    assert not any("repeated layers" in n for n in every.notes)
    for b in (1, 3):
        g1 = once.graph(precision="bf16", seq_len=T, batch=b)
        g2 = every.graph(precision="bf16", seq_len=T, batch=b)
        assert g1.names == g2.names and g1.kinds == g2.kinds
        assert (g1.quantities(b) == g2.quantities(b)).all()
    assert once.params == every.params


def test_gemma3_local_and_global_layers() -> None:
    """Gemma 3 (layer 0 local with a 16-token window, layer 1 global; q/k norms, four norms a
    layer). transformers calls SDPA causal on the global layer but with an explicit mask on the
    local one, which traces as the whole T×T matrix of 1,024 pairs; the graph's windowed
    attention counts at most T·window = 32·16 = 512 pairs (ops/formulas.py): the trace's
    excess on layer 0 is 2 (QKᵀ and ·V) · 2 · 4 heads · (1024 − 512) · 32 = 262,144 FLOPs per
    sample."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("gemma3_text", **SMALL, head_dim=32, sliding_window=16,
                               sliding_window_pattern=2)
    ids = torch.zeros(1, T, dtype=torch.long)
    traced, built = _pair(cfg, AutoModelForCausalLM, (ids,), seq_dim=1)
    assert traced.unsupported_ops == ()
    assert built.config.layer_window(0) == 16 and built.config.layer_window(1) is None
    assert traced.params == built.params
    for b in (1, 4):
        ft = traced.graph(precision="bf16", seq_len=T).cost(b).flops - b * 262_144
        fb = built.graph(precision="bf16", seq_len=T).cost(b).flops
        assert ft == pytest.approx(fb, rel=0.01), (b, ft, fb)
