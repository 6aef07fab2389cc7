"""``shard_config``: the per-device transformer of a tensor × pipeline × expert parallel split —
one function for serving and training.

Megatron-style tensor parallelism (Shoeybi et al. 2019, §3) splits query heads N/tp, KV heads
K/tp, the MLP width F/tp and the expert MLP width F_e/tp (Megatron-Core's expert tensor
parallelism defaults to the tensor-parallel size), and the vocabulary (LM head, embedding)
⌈V/tp⌉. When tp > K each KV head is replicated on tp/K devices, as vLLM and TensorRT-LLM do:
every device keeps one KV head, so its KV cache is 1·H per layer and token, not K·H/tp. MLA's
latent is replicated on every TP rank. Pipeline parallelism puts ⌈L/pp⌉ layers on each device
(the stage described is one that also holds the embedding and LM head, the heaviest); expert
parallelism ``ep`` must divide the experts (the per-rank expert count is the graph builder's).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import SpecError
from .transformer import TransformerConfig

__all__ = ["shard_config", "tp_problem", "allowed_tp"]


def _pos_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise SpecError(f"{name} must be a positive integer, got {v!r}")
    return v


def allowed_tp(cfg: TransformerConfig) -> list[int]:
    """The tensor-parallel degrees ``shard_config`` accepts for ``cfg``."""
    return [t for t in range(1, cfg.n_heads + 1) if tp_problem(cfg, t) is None]


def tp_problem(cfg: TransformerConfig, tp: int) -> str | None:
    """Why ``tp`` cannot split ``cfg`` (None: it can)."""
    N, K = cfg.n_heads, cfg.n_kv_heads
    if N % tp:
        return f"tp={tp} must divide num_attention_heads={N} of {cfg.name}"
    if not cfg.mla and K % tp and tp % K:
        return (f"tp={tp} and num_key_value_heads={K} of {cfg.name}: tp must divide K (split KV "
                "heads) or be a multiple of it (replicate them)")
    for nm, width in (("intermediate_size", cfg.d_ff), ("moe_intermediate_size", cfg.moe_d_ff)):
        if width and width % tp:
            return f"tp={tp} must divide {nm}={width} of {cfg.name}"
    return None


def shard_config(cfg: TransformerConfig, tp: int = 1, pp: int = 1,
                 ep: int = 1) -> TransformerConfig:
    """The per-device ``TransformerConfig`` of a (tp, pp, ep) split (``cfg`` itself when nothing
    is split). Raises a SpecError naming the degree and the dimension it does not divide, with
    the allowed tensor-parallel degrees."""
    tp, pp, ep = _pos_int("tp", tp), _pos_int("pp", pp), _pos_int("ep", ep)
    if cfg.n_experts and cfg.n_experts % ep:
        raise SpecError(f"ep={ep} must divide the {cfg.n_experts} experts of {cfg.name}")
    if not cfg.n_experts and ep != 1:
        raise SpecError(f"ep={ep}: {cfg.name} has no experts (dense model); use ep=1")
    if tp == 1 and pp == 1:
        return cfg
    why = tp_problem(cfg, tp)
    if why is not None:
        raise SpecError(f"{why}; allowed tp: {', '.join(str(t) for t in allowed_tp(cfg))}")
    if pp > cfg.n_layers:
        raise SpecError(f"pp={pp} exceeds the {cfg.n_layers} layers of {cfg.name}")
    K = cfg.n_kv_heads
    k_loc = max(K // tp, 1) if cfg.mla or K % tp == 0 else 1  # else: replicated on tp/K devices
    layers = -(-cfg.n_layers // pp)
    return replace(cfg, n_heads=cfg.n_heads // tp, n_kv_heads=k_loc, d_ff=cfg.d_ff // tp,
                   moe_d_ff=cfg.moe_d_ff // tp, vocab=-(-cfg.vocab // tp), n_layers=layers,
                   encoder_layers=-(-cfg.encoder_layers // pp),
                   first_dense_layers=min(cfg.first_dense_layers, layers))
