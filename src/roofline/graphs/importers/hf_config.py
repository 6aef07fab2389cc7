"""HuggingFace ``config.json`` -> ``TransformerConfig`` (plain JSON; no transformers import).

``from_hf_config`` normalises the field names of the families we know (GPT-2, BERT/RoBERTa, ViT,
and the Llama family: llama, mistral, mixtral, qwen2, gemma, gemma2, deepseek_v2/v3); ``hf_model``
reads a ``config.json`` file into a ``Model``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..._data import read_text
from ...errors import SpecError
from ..model import Model, transformer_model
from ..transformer import TransformerConfig

__all__ = ["from_hf_config", "hf_model"]

_ACT = {"gelu": "gelu_erf", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
        "gelu_fast": "gelu_tanh", "gelu_tanh": "gelu_tanh", "relu": "relu", "silu": "silu",
        "swish": "silu", "quick_gelu": "quick_gelu", "tanh": "tanh"}


def _req(cfg: dict[str, Any], *names: str, where: str) -> Any:
    for n in names:
        if n in cfg and cfg[n] is not None:
            return cfg[n]
    raise SpecError(f"{where}: config is missing required field {names[0]!r}"
                    + (f" (or {', '.join(repr(n) for n in names[1:])})" if len(names) > 1 else ""))


def from_hf_config(cfg: dict[str, Any], name: str = "model") -> TransformerConfig:
    """Normalise a HuggingFace ``config.json`` dict (read as plain JSON; no transformers import)."""
    if not isinstance(cfg, dict):
        raise SpecError(f"{name}: a config must be a JSON object")
    mt = str(cfg.get("model_type", "")).lower()
    w = name
    if mt in ("gpt2",) or "n_embd" in cfg:
        D = int(_req(cfg, "n_embd", "hidden_size", where=w))
        N = int(_req(cfg, "n_head", "num_attention_heads", where=w))
        return TransformerConfig(
            name=name, arch="decoder", d_model=D, n_layers=int(_req(cfg, "n_layer", where=w)),
            n_heads=N, n_kv_heads=N, head_dim=D // N, d_ff=int(cfg.get("n_inner") or 4 * D),
            vocab=int(_req(cfg, "vocab_size", where=w)),
            max_positions=int(cfg.get("n_positions", cfg.get("n_ctx", 1024))), norm="layernorm",
            gated_mlp=False, act=_ACT.get(cfg.get("activation_function", "gelu_new"), "gelu_tanh"),
            qkv_bias=True, o_bias=True, mlp_bias=True, fused_qkv=True, positions="learned",
            tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        )
    D = int(_req(cfg, "hidden_size", where=w))
    N = int(_req(cfg, "num_attention_heads", where=w))
    L = int(_req(cfg, "num_hidden_layers", where=w))
    F = int(_req(cfg, "intermediate_size", where=w))
    if mt == "bert" or mt == "roberta":
        return TransformerConfig(
            name=name, arch="encoder", d_model=D, n_layers=L, n_heads=N, n_kv_heads=N,
            head_dim=D // N, d_ff=F, vocab=int(_req(cfg, "vocab_size", where=w)),
            max_positions=int(cfg.get("max_position_embeddings", 512)), norm="layernorm",
            gated_mlp=False, act=_ACT.get(cfg.get("hidden_act", "gelu"), "gelu_erf"),
            qkv_bias=True, o_bias=True, mlp_bias=True, positions="learned", post_norm=True,
            type_vocab=int(cfg.get("type_vocab_size", 2)), pooler=True, tied_embeddings=True,
        )
    if mt == "vit":
        return TransformerConfig(
            name=name, arch="vision", d_model=D, n_layers=L, n_heads=N, n_kv_heads=N,
            head_dim=D // N, d_ff=F, vocab=0, max_positions=0, norm="layernorm", gated_mlp=False,
            act=_ACT.get(cfg.get("hidden_act", "gelu"), "gelu_erf"), qkv_bias=bool(
                cfg.get("qkv_bias", True)), o_bias=True, mlp_bias=True, positions="learned",
            image_size=int(_req(cfg, "image_size", where=w)),
            patch_size=int(_req(cfg, "patch_size", where=w)),
            channels=int(cfg.get("num_channels", 3)), classes=int(cfg.get("num_labels", 1000)),
        )
    # Llama-family decoders: llama, mistral, mixtral, qwen2, gemma, gemma2, deepseek_v2/v3, ...
    K = int(cfg.get("num_key_value_heads") or N)
    H = int(cfg.get("head_dim") or D // N)
    if not cfg.get("head_dim") and D % N:
        raise SpecError(f"{name}: hidden_size={D} is not divisible by num_attention_heads={N} "
                        "and no head_dim is given")
    gemma = mt.startswith("gemma")
    # Gemma's config names the activation hidden_activation (hidden_act is a legacy field)
    act_name = ((cfg.get("hidden_activation") if gemma else None) or cfg.get("hidden_act")
                or cfg.get("hidden_activation") or "silu")
    E = int(cfg.get("num_local_experts") or cfg.get("num_experts")
            or cfg.get("n_routed_experts") or 0)
    sw = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    mla = bool(cfg.get("kv_lora_rank"))
    if mla:
        for f in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            _req(cfg, f, where=w)
    # Gemma/Gemma 2 tie the LM head to the embedding unless the file says otherwise
    # (GemmaConfig/Gemma2Config default tie_word_embeddings=True); others default to untied.
    tied = bool(cfg.get("tie_word_embeddings", gemma))
    return TransformerConfig(
        name=name, arch="decoder", d_model=D, n_layers=L, n_heads=N, n_kv_heads=K, head_dim=H,
        d_ff=F, vocab=int(_req(cfg, "vocab_size", where=w)),
        max_positions=int(cfg.get("max_position_embeddings", 4096)), norm="rmsnorm",
        gated_mlp=True, act=_ACT.get(act_name, "silu"),
        qkv_bias=bool(cfg.get("attention_bias", mt.startswith("qwen2"))),
        o_bias=False, mlp_bias=bool(cfg.get("mlp_bias", False)), positions="rope",
        tied_embeddings=tied,
        n_experts=E, top_k=int(cfg.get("num_experts_per_tok") or 0) if E else 0,
        sliding_window=int(sw) if sw else None, embed_scale=gemma,
        window_every=2 if mt == "gemma2" else 1, sandwich_norm=mt == "gemma2",
        final_logit_softcap=bool(cfg.get("final_logit_softcapping")),
        moe_d_ff=int(cfg.get("moe_intermediate_size") or 0) if E else 0,
        n_shared_experts=int(cfg.get("n_shared_experts") or 0) if E else 0,
        first_dense_layers=int(cfg.get("first_k_dense_replace") or 0) if E else 0,
        router_bias=E > 0 and cfg.get("topk_method") == "noaux_tc",
        q_lora_rank=int(cfg.get("q_lora_rank") or 0) if mla else 0,
        kv_lora_rank=int(cfg.get("kv_lora_rank") or 0),
        qk_nope_head_dim=int(cfg.get("qk_nope_head_dim") or 0) if mla else 0,
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0) if mla else 0,
        v_head_dim=int(cfg.get("v_head_dim") or 0) if mla else 0,
    )


def hf_model(path: Path) -> Model:
    """A Model from a HuggingFace ``config.json`` file (named after its folder)."""
    import json

    text = read_text(path, "model config")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(f"model config {str(path)!r} is not valid JSON: {e.msg} (line "
                        f"{e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise SpecError(f"model config {str(path)!r} nests too deeply to be a config.json"
                        ) from None
    name = path.parent.name if path.name == "config.json" else path.stem
    return transformer_model(from_hf_config(cfg, name=name), key=name, name=name,
                             source=str(path))
