"""HF config.json: model_type checked against the supported families, quantization_config
honoured with the real bytes per weight, hub ids resolved offline (docs/import.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import roofline as rl
from roofline.errors import SpecError, UnknownNameError
from roofline.graphs.importers.hf_config import from_hf_config
from roofline.graphs.importers.hf_families import (
    SUPPORTED_MODEL_TYPES,
    check_family,
    weight_format,
)

LLAMA = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 512,
         "vocab_size": 1000}


def _write(tmp: Path, cfg: dict, name: str = "m") -> Path:
    d = tmp / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_unknown_family_lists_the_supported_ones() -> None:
    with pytest.raises(UnknownNameError) as e:
        from_hf_config({**LLAMA, "model_type": "falcon_mamba_x"}, name="x")
    for mt in ("llama", "qwen3_moe", "deepseek_v3"):
        assert mt in str(e.value)
    with pytest.raises(SpecError, match="Mamba-2.*supported families"):
        from_hf_config({"model_type": "mamba2", "d_model": 512}, name="mamba2-130m")
    # T5 is supported now (tests/test_seq2seq.py); a T5 config without its heads names them
    with pytest.raises(SpecError, match="'t5' config needs 'num_heads'"):
        from_hf_config({"model_type": "t5", "d_model": 512}, name="t5-small")
    with pytest.raises(SpecError, match="no 'model_type'"):
        from_hf_config({k: v for k, v in LLAMA.items() if k != "model_type"}, name="x")


def test_family_fields_are_required() -> None:
    # a qwen3_moe config with only dense fields is refused, naming the field
    with pytest.raises(SpecError, match="'qwen3_moe' config needs 'num_experts'"):
        from_hf_config({**LLAMA, "model_type": "qwen3_moe"}, name="q")
    assert check_family({**LLAMA, "model_type": "Qwen3"}, "q") == "qwen3"
    assert {"llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "phi3", "gemma2", "gpt2",
            "bert", "vit", "deepseek_v3"} <= set(SUPPORTED_MODEL_TYPES)


def test_qwen2_moe_shared_expert() -> None:
    cfg = from_hf_config({**LLAMA, "model_type": "qwen2_moe", "num_experts": 8,
                          "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                          "shared_expert_intermediate_size": 256}, name="q")
    assert cfg.n_experts == 8 and cfg.n_shared_experts == 4  # 256 / 64


def test_fp8_block_quantization_deepseek_v3() -> None:
    """The zoo's DeepSeek-V3 carries its config's fp8 quantization_config: 1 B per weight
    + one fp32 scale per 128×128 block on every linear except the head and the router."""
    m = rl.model("deepseek-v3")
    g = m.graph(precision="bf16", batch=1)
    wf = m.weight_format
    assert wf.bytes_per_weight == 1 + 4 / (128 * 128)
    q = g.meta["quantized_params"]
    P = g.params_total
    # embedding (129,280 × 7,168) and the LM head stay bf16, with norms and routers
    assert P - q > 2 * 129_280 * 7_168
    assert g.weight_footprint_bytes == pytest.approx(q * (1 + 4 / 16384) + (P - q) * 2)
    assert 670e9 < g.weight_footprint_bytes < 676e9  # not the 1,342 GB of bf16
    # the precision's own weights win: weight_precision="int4" ignores the checkpoint format
    g4 = m.graph(precision=rl.precision("bf16", weights="int4"), batch=1)
    assert g4.weight_footprint_bytes == pytest.approx(P * 0.5)


@pytest.mark.parametrize("qc,bpw", [
    # AWQ 4-bit, group 128, zero points: 0.5 + 2/128 (fp16 scale) + 0.5/128 (packed zero)
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
     0.5 + 2 / 128 + 0.5 / 128),
    ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": False}, 0.5 + 2 / 64),
    # GPTQ 4-bit group 128 (qzeros are stored even when symmetric)
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True},
     0.5 + 2 / 128 + 0.5 / 128),
    # bitsandbytes nf4: 0.5 + an fp32 absmax per 64; double quant: 8-bit absmax + fp32 / 256
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
     0.5 + 4 / 64),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
      "bnb_4bit_use_double_quant": True}, 0.5 + 1 / 64 + 4 / (64 * 256)),
])
def test_quantized_bytes_per_weight(tmp_path: Path, qc: dict, bpw: float) -> None:
    assert weight_format({**LLAMA, "quantization_config": qc}, "m").bytes_per_weight == bpw
    m = rl.model(_write(tmp_path, {**LLAMA, "quantization_config": qc}))
    g = m.graph(precision="fp16")
    # linears: 2 layers × (q 256·256 + k, v 256·128 + o 256·256 + 3 MLP 256·512) = 1,179,648
    lin = 2 * (256 * 256 + 2 * 256 * 128 + 256 * 256 + 3 * 256 * 512)
    assert g.meta["quantized_params"] == lin
    other = g.params_total - lin  # embedding, LM head, norms at fp16
    assert g.weight_footprint_bytes == pytest.approx(lin * bpw + other * 2)
    r = rl.solve(m, "H100", batch=1, precision="fp16", phase="decode", context=128)
    assert r.memory_breakdown["weights"] == pytest.approx(lin * bpw + other * 2)


def test_bad_quantization_config() -> None:
    with pytest.raises(SpecError, match="quant_method 'hqq' is not supported"):
        weight_format({**LLAMA, "quantization_config": {"quant_method": "hqq"}}, "m")
    with pytest.raises(SpecError, match="group_size"):
        weight_format({**LLAMA, "quantization_config": {"quant_method": "awq", "bits": 4,
                                                         "group_size": 0}}, "m")
    with pytest.raises(SpecError, match="weight_block_size"):
        weight_format({**LLAMA, "quantization_config": {"quant_method": "fp8",
                                                         "weight_block_size": [128]}}, "m")


@pytest.mark.parametrize("hub_id,key", [
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"), ("google/gemma-2-9b-it", "gemma-2-9b"),
    ("deepseek-ai/DeepSeek-R1", "deepseek-v3"), ("mistralai/Mistral-7B-v0.3", "mistral-7b-v0.3"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3"), ("Qwen/Qwen3-8B", "qwen3-8b")])
def test_hub_ids_resolve_offline(hub_id: str, key: str) -> None:
    assert rl.model(hub_id).key == key


def test_mistral_v03_differs_from_v01() -> None:
    """v0.3: 32,768-token vocabulary and no sliding window, unlike v0.1."""
    v1, v3 = rl.model("mistral-7b").config, rl.model("mistral-7b-v0.3").config
    assert (v1.vocab, v3.vocab) == (32000, 32768)
    assert v1.sliding_window == 4096 and v3.sliding_window is None
    # 768 more vocabulary rows in the embedding and the untied head: 2 × 768 × 4096
    assert rl.model("mistral-7b-v0.3").params - rl.model("mistral-7b").params == 2 * 768 * 4096


def test_serve_prices_the_checkpoint_format_too(tmp_path: Path) -> None:
    """rl.serve and rl.solve store the same weights for a quantized checkpoint."""
    qc = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    m = rl.model(_write(tmp_path, {**LLAMA, "quantization_config": qc}))
    s = rl.solve(m, "H100", batch=1, precision="fp16", phase="decode", context=64)
    r = rl.serve(m, "H100", batch=1, prompt_len=32, output_len=8, precision="fp16")
    assert r.memory_breakdown["weights"] == pytest.approx(s.memory_breakdown["weights"])
    plain = rl.serve(rl.model(_write(tmp_path, LLAMA, "plain")), "H100", batch=1,
                     prompt_len=32, output_len=8, precision="fp16")
    lin = 2 * (256 * 256 + 2 * 256 * 128 + 256 * 256 + 3 * 256 * 512)  # the quantized linears
    P = plain.memory_breakdown["weights"] / 2  # fp16: 2 B per parameter
    assert r.memory_breakdown["weights"] == pytest.approx(
        lin * (0.5 + 2 / 128 + 0.5 / 128) + (P - lin) * 2)


@pytest.mark.parametrize("cfg, field", [
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 0,
      "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100},
     "num_attention_heads=0"),
    ({"model_type": "gpt2", "n_embd": 64, "n_head": 0, "n_layer": 2, "vocab_size": 100},
     "n_head=0"),
    ({"model_type": "bert", "hidden_size": 64, "num_attention_heads": 0,
      "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100},
     "num_attention_heads=0"),
    ({"model_type": "whisper", "d_model": 64, "num_mel_bins": 80,
      "encoder_attention_heads": 0}, "encoder_attention_heads=0"),
    ({"model_type": "t5", "d_model": 64, "num_heads": 0, "d_kv": 16, "d_ff": 128,
      "num_layers": 2}, "'num_heads'"),
])
def test_zero_heads_name_the_field_and_the_range(cfg: dict, field: str) -> None:
    with pytest.raises(SpecError, match=field) as e:
        from_hf_config(cfg, name="x")
    assert "[1, " in str(e.value) or "it is 0" in str(e.value)
