"""Which HuggingFace ``model_type`` values ``config.json`` import supports, and checkpoints'
``quantization_config``.

``check_family(cfg)`` returns the config's family or raises: an unknown ``model_type`` is an
``UnknownNameError`` listing the supported ones (never a silent Llama-shaped guess), a known but
unsupported one (encoder-decoders, multimodal wrappers) says so, and a family whose defining
fields are missing (a ``qwen3_moe`` without ``num_experts``) names the field.

``weight_format(cfg)`` reads ``quantization_config`` into a ``WeightFormat`` with the real bytes
per stored weight, scales and zero points counted (docs/import.md, "Quantized checkpoints").
"""

from __future__ import annotations

from typing import Any

from ...errors import SpecError, UnknownNameError, closest
from ..quantization import WeightFormat

__all__ = ["SUPPORTED_MODEL_TYPES", "UNSUPPORTED_MODEL_TYPES", "QUANT_METHODS", "check_family",
           "weight_format"]

#: model_type -> (how it is built, fields it must have beyond the common ones)
SUPPORTED_MODEL_TYPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "gpt2": ("GPT-2 decoder (learned positions, LayerNorm, GELU MLP)", ("n_embd", "n_layer")),
    "bert": ("BERT encoder (post-norm, pooler)", ()),
    "roberta": ("RoBERTa encoder (as BERT)", ()),
    "vit": ("ViT image encoder", ("image_size", "patch_size")),
    "llama": ("Llama decoder (RoPE, RMSNorm, SwiGLU, GQA)", ()),
    "mistral": ("Mistral decoder (Llama + sliding window)", ()),
    "mixtral": ("Mixtral MoE decoder", ("num_local_experts", "num_experts_per_tok")),
    "qwen2": ("Qwen2/Qwen2.5 decoder (QKV bias)", ()),
    "qwen2_moe": ("Qwen2-MoE decoder (routed + shared expert)",
                  ("num_experts|num_local_experts", "num_experts_per_tok",
                   "moe_intermediate_size")),
    "qwen3": ("Qwen3 decoder (head_dim given; per-head q/k RMSNorm not counted)", ()),
    "qwen3_moe": ("Qwen3-MoE decoder",
                  ("num_experts|num_local_experts", "num_experts_per_tok",
                   "moe_intermediate_size")),
    "gemma": ("Gemma decoder (GeGLU, tied, √D embedding scale)", ()),
    "gemma2": ("Gemma 2 decoder (alternating sliding window, sandwich norms, soft-capping)", ()),
    "gemma3": ("Gemma 3, its text model (text_config, as gemma3_text; the SigLIP vision tower "
               "and its image tokens are left out)", ("text_config",)),
    "gemma3_text": ("Gemma 3 decoder (Gemma 2's sandwich norms, GeGLU, tied, √D scale; local "
                    "sliding-window layers per layer_types or every sliding_window_pattern-th "
                    "layer global, 5:1; per-head q/k RMSNorm)", ()),
    "nemotron": ("Nemotron-4 / Minitron decoder (LayerNorm1P, a plain up/down MLP of relu2, RoPE "
                 "on partial_rotary_factor of each head, default 0.5)", ()),
    "phi3": ("Phi-3 decoder (fused QKV and gate/up: the same weights as Llama's)", ()),
    "deepseek_v2": ("DeepSeek-V2 decoder (MLA + MoE)",
                    ("kv_lora_rank", "n_routed_experts", "num_experts_per_tok")),
    "deepseek_v3": ("DeepSeek-V3 decoder (MLA + MoE, noaux_tc router)",
                    ("kv_lora_rank", "n_routed_experts", "num_experts_per_tok")),
    "t5": ("T5 encoder-decoder (RMSNorm, relative position bias, ReLU or gated-GELU MLP)",
           ("d_model", "num_heads", "d_kv", "d_ff", "num_layers")),
    "mt5": ("mT5 encoder-decoder (as T5 v1.1: gated-GELU, untied LM head)",
            ("d_model", "num_heads", "d_kv", "d_ff", "num_layers")),
    "bart": ("BART encoder-decoder (post-norm, learned positions)", ("d_model",)),
    "mbart": ("mBART encoder-decoder (pre-norm, learned positions)", ("d_model",)),
    "whisper": ("Whisper speech encoder-decoder (conv front-end, 30 s window)",
                ("d_model", "num_mel_bins")),
    "llama4": ("Llama 4, its text model (text_config, as llama4_text; the vision encoder is "
               "left out)", ("text_config",)),
    "llama4_text": ("Llama 4 text decoder (MoE every interleave_moe_layer_step layers with one "
                    "shared expert, dense layers of intermediate_size_mlp; chunked attention "
                    "and q/k L2 norms not modelled)",
                    ("num_local_experts", "num_experts_per_tok", "intermediate_size_mlp")),
    "mamba": ("Mamba selective state-space LM (graphs/ssm.py: in_proj, causal conv1d, "
              "x_proj, dt_proj, selective scan, out_proj)",
              ("hidden_size", "num_hidden_layers|n_layer", "vocab_size")),
}
#: known model types that are not supported yet, and why
UNSUPPORTED_MODEL_TYPES: dict[str, str] = {
    "mamba2": "Mamba-2 (state-space duality: multi-head scan, grouped B/C): not modelled yet "
              "(Mamba-1, model_type 'mamba', is)",
}


def check_family(cfg: dict[str, Any], name: str) -> str:
    """The config's ``model_type`` (lower case) after the checks in the module docstring."""
    raw = cfg.get("model_type")
    if raw is None:
        if "n_embd" in cfg:
            return "gpt2"  # GPT-2-style field names without a model_type (hand-written configs)
        raise SpecError(f"{name}: config.json has no 'model_type'; add one of the supported "
                        f"families: {', '.join(sorted(SUPPORTED_MODEL_TYPES))}")
    if not isinstance(raw, str):
        raise SpecError(f"{name}: model_type must be a string, got {raw!r}")
    mt = raw.lower()
    if mt in UNSUPPORTED_MODEL_TYPES:
        raise SpecError(f"{name}: model_type {raw!r} is {UNSUPPORTED_MODEL_TYPES[mt]}; supported "
                        f"families: {', '.join(sorted(SUPPORTED_MODEL_TYPES))}")
    if mt not in SUPPORTED_MODEL_TYPES:  # the whole (short) list: it is the documentation
        hint = closest(raw, SUPPORTED_MODEL_TYPES)
        raise UnknownNameError(f"{name}: model_type {raw!r} is not a supported family.{hint} "
                               f"Supported: {', '.join(sorted(SUPPORTED_MODEL_TYPES))} "
                               "(docs/import.md, 'HuggingFace config.json')")
    for f in SUPPORTED_MODEL_TYPES[mt][1]:
        # "a|b": either name (transformers 5 writes Qwen-MoE's num_experts as
        # num_local_experts)
        f = next((n for n in f.split("|") if cfg.get(n) is not None), f.split("|")[0])
        v = cfg.get(f)
        # missing; or, for an MoE family, no experts; or no heads (ranges are checked where
        # the fields are read)
        if v is None or v == "" or (v == 0 and ("expert" in f or "heads" in f)):
            raise SpecError(f"{name}: a {mt!r} config needs {f!r} "
                            f"({SUPPORTED_MODEL_TYPES[mt][0]}); it is "
                            + ("0" if v == 0 else "missing"))
    return mt


#: quant_method values read from quantization_config
QUANT_METHODS = ("fp8", "awq", "gptq", "bitsandbytes")


def _pos_int(qc: dict[str, Any], key: str, default: int, name: str) -> int:
    v = qc.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or (v < 1 and v != -1):
        raise SpecError(f"{name}: quantization_config.{key} must be a positive integer (or -1 "
                        f"for one group per row), got {v!r}")
    return v


def weight_format(cfg: dict[str, Any], name: str) -> WeightFormat | None:
    """The stored weight format of the checkpoint (None: unquantized)."""
    qc = cfg.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise SpecError(f"{name}: quantization_config must be an object, got {qc!r}")
    method = str(qc.get("quant_method", "")).lower()
    # a typical d_in
    tc = cfg.get("text_config")
    text = tc if isinstance(tc, dict) else {}
    row = int(cfg.get("hidden_size") or cfg.get("n_embd") or cfg.get("d_model")
              or text.get("hidden_size") or 4096)
    if method == "fp8":
        block = qc.get("weight_block_size")
        if block:
            if not (isinstance(block, list) and len(block) == 2 and all(
                    isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
                raise SpecError(f"{name}: quantization_config.weight_block_size must be two "
                                f"positive integers, got {block!r}")
            g = block[0] * block[1]
            return WeightFormat(method="fp8", bits=8, group_size=g, bytes_per_weight=1 + 4 / g,
                                derivation=f"1 B e4m3 + one fp32 scale per {block[0]}×{block[1]} "
                                f"block: 1 + 4/{g}")
        return WeightFormat(method="fp8", bits=8, group_size=row, bytes_per_weight=1 + 4 / row,
                            derivation=f"1 B + one fp32 scale per output row of ~{row}")
    if method in ("awq", "gptq"):
        bits = _pos_int(qc, "bits" if "bits" in qc else "w_bit", 4, name)
        key = "group_size" if "group_size" in qc else "q_group_size"
        g = _pos_int(qc, key, 128, name)
        g = row if g == -1 else g
        zeros = method == "gptq" or bool(qc.get("zero_point", True))
        bpw = bits / 8 + 2 / g + (bits / 8 / g if zeros else 0.0)
        return WeightFormat(method=method, bits=bits, group_size=g, bytes_per_weight=bpw,
                            derivation=f"{bits}/8 B + an fp16 scale per {g} weights"
                            + (f" + a packed {bits}-bit zero point per {g}" if zeros else "")
                            + (" (GPTQ's g_idx, 4 B per input row, not counted)"
                               if method == "gptq" else ""))
    if method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            kind = str(qc.get("bnb_4bit_quant_type", "fp4"))
            if qc.get("bnb_4bit_use_double_quant"):
                bpw = 0.5 + 1 / 64 + 4 / (64 * 256)
                how = "0.5 B + an 8-bit absmax per 64-weight block + an fp32 per 256 blocks"
            else:
                bpw = 0.5 + 4 / 64
                how = "0.5 B + an fp32 absmax per 64-weight block"
            return WeightFormat(method="bitsandbytes", bits=4, group_size=64,
                                bytes_per_weight=bpw, derivation=f"{kind}: {how} (QLoRA §2-3)")
        if qc.get("load_in_8bit"):
            return WeightFormat(method="bitsandbytes", bits=8, group_size=row,
                                bytes_per_weight=1 + 4 / row,
                                derivation=f"int8 + an fp32 absmax per output row of ~{row} "
                                "(LLM.int8)")
        raise SpecError(f"{name}: a bitsandbytes quantization_config needs load_in_4bit or "
                        "load_in_8bit")
    raise SpecError(f"{name}: quantization_config.quant_method {qc.get('quant_method')!r} is "
                    f"not supported; supported: {', '.join(QUANT_METHODS)}")
