"""Gemma 3 from config.json (model_type gemma3_text, and gemma3's text_config): the 5:1
local/global window pattern or layer_types, per-head q/k RMSNorm, sandwich norms; parameter
counts against transformers' Gemma3ForCausalLM on the meta device and the published 1B count."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.importers.hf_config import from_hf_config
from roofline.graphs.model import transformer_model

SMALL = {"model_type": "gemma3_text", "hidden_size": 128, "intermediate_size": 256,
         "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 32, "vocab_size": 512, "max_position_embeddings": 256,
         "sliding_window": 16, "sliding_window_pattern": 3}


def _hand_params(D: int, F: int, L: int, N: int, K: int, H: int, V: int) -> int:
    """Tied embedding V·D; per layer q/o D·N·H each, k/v D·K·H each, GeGLU 3·D·F, four
    RMSNorms of D and the q/k norms of H; the final norm D."""
    return V * D + L * (2 * D * N * H + 2 * D * K * H + 3 * D * F + 4 * D + 2 * H) + D


def test_small_config_params_and_pattern_match_transformers() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoConfig.for_model(**{k: v for k, v in SMALL.items()})
    with torch.device("meta"):
        module = transformers.AutoModelForCausalLM.from_config(hf)
    assert type(module).__name__ == "Gemma3ForCausalLM"
    built = transformer_model(from_hf_config(dict(SMALL), name="g3"), key="g3")
    cfg = built.config
    assert built.params == sum(p.numel() for p in module.parameters())
    assert built.params == _hand_params(128, 256, 6, 4, 2, 32, 512)
    # every 3rd layer global: layers 2 and 5 (transformers' own layer_types agree)
    local = [cfg.layer_window(i) is not None for i in range(6)]
    assert local == [t == "sliding_attention" for t in hf.layer_types]
    assert local == [True, True, False, True, True, False]
    assert cfg.layer_window(0) == 16 and cfg.qk_norm and cfg.sandwich_norm
    assert cfg.tied_embeddings and cfg.embed_scale


def test_layer_types_override_the_pattern_and_are_checked() -> None:
    types = ["full_attention"] + ["sliding_attention"] * 5
    cfg = from_hf_config({**SMALL, "layer_types": types}, name="g3")
    assert [cfg.layer_window(i) for i in range(6)] == [None] + [16] * 5
    for bad in (types[:5], types[:5] + ["chunked_attention"], "sliding_attention"):
        with pytest.raises(SpecError, match="layer_types"):
            from_hf_config({**SMALL, "layer_types": bad}, name="g3")
    with pytest.raises(SpecError, match="use_bidirectional_attention"):
        from_hf_config({**SMALL, "use_bidirectional_attention": True}, name="g3")
    # default pattern 6 when the file names none: 5 local to 1 global
    cfg = from_hf_config({k: v for k, v in SMALL.items() if k != "sliding_window_pattern"},
                         name="g3")
    assert [cfg.layer_window(i) is None for i in range(6)] == [False] * 5 + [True]


def test_multimodal_wrapper_reads_its_text_config() -> None:
    text = {k: v for k, v in SMALL.items() if k != "model_type"}
    wrapped = from_hf_config({"model_type": "gemma3", "text_config": text,
                              "vision_config": {"hidden_size": 1152}}, name="g3")
    assert wrapped == from_hf_config(dict(SMALL), name="g3")
    with pytest.raises(SpecError, match="'gemma3' config needs 'text_config'"):
        from_hf_config({"model_type": "gemma3"}, name="g3")


def test_qk_norms_priced_as_norm_ops() -> None:
    g = transformer_model(from_hf_config(dict(SMALL), name="g3"), key="g3").graph(
        precision="bf16", seq_len=10)
    for nm in ("q_norm", "k_norm"):
        i = g.names.index(f"layers.0.attn.{nm}")
        assert g.kinds[i] == "norm" and g.params[i] == 32
    i, j = g.names.index("layers.0.attn.q_norm"), g.names.index("layers.0.attn.k_norm")
    # 10 tokens × heads × 32: the query norm touches twice the key norm's elements (4 vs 2 heads)
    assert g.op_cost(i).flops == pytest.approx(2 * g.op_cost(j).flops)
    assert g.op_cost(i).act_bytes_read >= 10 * 4 * 32 * 2  # reads the [10, 4·32] bf16 queries


def test_bundled_1b_count_and_window_at_long_context() -> None:
    m = rl.model("google/gemma-3-1b-it")
    assert m.key == "gemma-3-1b"
    # Keras-Hub's published count, and the hand count from the config's fields
    assert m.params == m.published["params"].value == 999_885_952
    assert m.params == _hand_params(1152, 6912, 26, 4, 1, 256, 262144)
    cfg = m.config
    assert [i for i in range(26) if cfg.layer_window(i) is None] == [5, 11, 17, 23]
    g = m.graph(precision="bf16", phase="decode", context=8000)
    kv_read = {n: g.op_cost(i).kv_bytes_read for i, n in enumerate(g.names)
               if n.endswith("attn.attention")}
    # a local layer reads K and V of its 512 cached tokens, a global one of all 8000:
    # 1 KV head of 256 values, 2 B each, K and V
    kv = 2 * 1 * 256 * 2
    assert kv_read["layers.0.attn.attention"] == 512 * kv
    assert kv_read["layers.5.attn.attention"] == 8000 * kv
    assert sum(kv_read.values()) == kv * (22 * 512 + 4 * 8000)
    # the KV cache one sequence holds: 22 local layers × 512 tokens + 4 global × 8000
    assert cfg.kv_bytes_per_sequence(8000, 2) == kv * (22 * 512 + 4 * 8000)


def test_bundled_4b_wrapper_fills_transformers_defaults() -> None:
    """google/gemma-3-4b-it's text_config names five fields; the rest are Gemma3TextConfig's
    defaults, so the count equals transformers' Gemma3ForCausalLM built from that text_config."""
    m = rl.model("google/gemma-3-4b-it")
    assert m.key == "gemma-3-4b"
    cfg = m.config
    assert (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.vocab) == (8, 4, 256, 262208)
    assert [i for i in range(34) if cfg.layer_window(i) is None] == [5, 11, 17, 23, 29]
    assert cfg.layer_window(0) == 1024
    assert m.params == _hand_params(2560, 10240, 34, 8, 4, 256, 262208) == 3_880_263_168
    # Keras-Hub's text-only count is 64 embedding rows of 2560 smaller (see the model TOML)
    assert m.params - m.published["params"].value == 64 * 2560
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import tomllib
    from pathlib import Path

    toml = Path(rl.__file__).parent / "data" / "models" / "gemma-3-4b.toml"
    text = tomllib.loads(toml.read_text(encoding="utf-8"))["config"]["text_config"]
    hf = transformers.Gemma3TextConfig(**{k: v for k, v in text.items() if k != "model_type"})
    with torch.device("meta"):
        module = transformers.Gemma3ForCausalLM(hf)
    assert m.params == sum(p.numel() for p in module.parameters())
