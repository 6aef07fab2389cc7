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
