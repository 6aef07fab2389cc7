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
Under MoE parallel folding (``etp``, Megatron-Core's expert tensor-parallel size, not tp) the
routed experts are split etp ways instead: tp then need not divide their width, etp must
(``etp_problem``); the shared experts stay split by tp.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import SpecError
from .transformer import TransformerConfig

__all__ = ["shard_config", "tp_problem", "allowed_tp", "etp_problem", "expert_width"]


def _pos_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise SpecError(f"{name} must be a positive integer, got {v!r}")
    return v


def allowed_tp(cfg: TransformerConfig, etp: int | None = None) -> list[int]:
    """The tensor-parallel degrees ``shard_config`` accepts for ``cfg`` (with ``etp``)."""
    return [t for t in range(1, cfg.n_heads + 1) if tp_problem(cfg, t, etp) is None]


def expert_width(cfg: TransformerConfig) -> tuple[str, int]:
    """The routed experts' width and the config field it comes from (0 for a dense model)."""
    if not cfg.n_experts:
        return "moe_intermediate_size", 0
    if cfg.moe_d_ff:
        return "moe_intermediate_size", cfg.moe_d_ff
    return "intermediate_size", cfg.d_ff


def tp_problem(cfg: TransformerConfig, tp: int, etp: int | None = None) -> str | None:
    """Why ``tp`` cannot split ``cfg`` (None: it can). With ``etp`` (not None, not tp; an MoE
    model) the routed experts are split etp ways (``etp_problem``): tp need not divide their
    width, unless the same field is also a width tp splits (the dense layers' MLP, the shared
    experts', which are n_shared × moe_intermediate_size, or d_ff when it is the experts')."""
    N, K = cfg.n_heads, cfg.n_kv_heads
    if N % tp:
        return f"tp={tp} must divide num_attention_heads={N} of {cfg.name}"
    if not cfg.mla and K % tp and tp % K:
        return (f"tp={tp} and num_key_value_heads={K} of {cfg.name}: tp must divide K (split KV "
                "heads) or be a multiple of it (replicate them)")
    routed = expert_width(cfg)[0] if cfg.n_experts and etp not in (None, tp) else None
    for nm, width in (("intermediate_size", cfg.d_ff), ("moe_intermediate_size", cfg.moe_d_ff)):
        if nm == routed and not _tp_splits_too(cfg, nm):
            continue  # etp's to divide
        if width and width % tp:
            return f"tp={tp} must divide {nm}={width} of {cfg.name}"
    return None


def _tp_splits_too(cfg: TransformerConfig, field: str) -> bool:
    """Whether tp splits a width read from ``field``, the routed experts' (folded) field."""
    if cfg.n_shared_experts:
        return True  # the shared experts: n_shared × the routed width, split by tp
    # moe_intermediate_size is the routed experts' only; d_ff (moe_d_ff unset) also the
    # dense layers' MLP, if the model has any
    return field == "intermediate_size" and any(
        not cfg.layer_is_moe(i) for i in range(cfg.n_layers))


def etp_problem(cfg: TransformerConfig, etp: int, fits: Any = None) -> str | None:
    """Why ``etp`` (the expert tensor-parallel size) cannot split ``cfg``'s routed experts
    (None: it can), with the sizes that can (those ``fits(e)`` also accepts, if given)."""
    nm, width = expert_width(cfg)
    if not width or width % etp == 0:
        return None
    ok = ", ".join(str(e) for e in range(1, width + 1)
                   if width % e == 0 and (fits is None or fits(e))) or "none"
    return (f"etp={etp} must divide the expert width {width} ({nm}) of {cfg.name} (each routed "
            f"expert is split etp ways); allowed etp: {ok}")


def shard_config(cfg: TransformerConfig, tp: int = 1, pp: int = 1,
                 ep: int = 1, etp: int | None = None) -> TransformerConfig:
    """The per-device ``TransformerConfig`` of a (tp, pp, ep) split (``cfg`` itself when nothing
    is split). Raises a SpecError naming the degree and the dimension it does not divide, with
    the allowed degrees. ``etp`` (MoE parallel folding; None: tp; a dense model has no experts
    for it to split): the routed experts' split, checked here (``etp_problem``); the config's
    routed width stays tp's share (floored where tp does not divide it: only the routed-expert
    ops read it then, and the training graph rebuilds those at F_e/etp, graphs/training.py
    ``_fold_experts``)."""
    tp, pp, ep = _pos_int("tp", tp), _pos_int("pp", pp), _pos_int("ep", ep)
    if cfg.n_experts and cfg.n_experts % ep:
        raise SpecError(f"ep={ep} must divide the {cfg.n_experts} experts of {cfg.name}")
    if not cfg.n_experts and ep != 1:
        raise SpecError(f"ep={ep}: {cfg.name} has no experts (dense model); use ep=1")
    if etp not in (None, tp) and (why := etp_problem(cfg, _pos_int("etp", etp))) is not None:
        raise SpecError(why)  # (at etp = tp the tp rule below names tp)
    if tp == 1 and pp == 1:
        return cfg
    why = tp_problem(cfg, tp, etp)
    if why is not None:
        ok = ", ".join(str(t) for t in allowed_tp(cfg, etp))
        raise SpecError(f"{why}; allowed tp: {ok}")
    if pp > cfg.n_layers:
        raise SpecError(f"pp={pp} exceeds the {cfg.n_layers} layers of {cfg.name}")
    K = cfg.n_kv_heads
    k_loc = max(K // tp, 1) if cfg.mla or K % tp == 0 else 1  # else: replicated on tp/K devices
    layers = -(-cfg.n_layers // pp)
    return replace(cfg, n_heads=cfg.n_heads // tp, n_kv_heads=k_loc, d_ff=cfg.d_ff // tp,
                   moe_d_ff=cfg.moe_d_ff // tp, vocab=-(-cfg.vocab // tp), n_layers=layers,
                   encoder_layers=-(-cfg.encoder_layers // pp),
                   first_dense_layers=min(cfg.first_dense_layers, layers))
