"""Training memory per device (the first pipeline stage, the fullest): weights, gradients and
optimizer states as ZeRO shards them, and activations per Korthikanti et al. 2022 Table 2 (an
MoE layer's MLP block per ``ops.training_formulas.moe_mlp_activation_bytes``)."""

from __future__ import annotations

from typing import Any

from ...ops.training_formulas import (
    layer_activation_terms,
    moe_mlp_activation_bytes,
    op_sac_activation_bytes,
    recomputed_layer_input_bytes,
)
from ...ops.xp import SCALAR
from .context import _Ctx


def _memory(ctx: _Ctx, tp: Any, pp: Any, dp: Any, b: Any, v: Any, rc: Any, zero: Any, sp: Any,
            m: Any, n_lps: Any, p_dev: Any, w_bytes: Any, g_bytes: Any, xp: Any,
            p_exp: Any = 0.0, ep: Any = 1, rc_frac: float = 1.0,
            etp: Any = None) -> dict[str, Any]:
    """Bytes per device of the first stage for the splits ``_evaluate`` prices (same ``xp``):
    ``m`` micro-batches per replica, ``n_lps`` layers per stage, ``p_dev`` parameters on the
    stage, ``w_bytes``/``g_bytes`` its weight and gradient buffers before ZeRO sharding;
    ``p_exp`` of the parameters are routed experts, already split over the ``ep`` ranks, which
    ZeRO shards over the dp/ep ranks holding the same experts (the others over all dp).
    An MoE model's per-layer activations are the average of its dense and MoE layers.
    ``rc_frac``: the share of the layers full recompute re-runs (their inputs kept, 2D per
    token; the others keep every activation, ``options.recompute_fraction``). ``etp``: the
    experts' tensor-parallel size (None: tp), which sets the permuted copies a rank keeps."""
    cfg = ctx.cfg
    s, D = float(ctx.seq_len), float(cfg.d_model)
    ab = ctx.prec.act_bytes
    pp1 = pp == 1
    # Transformer Engine's fp8 recipe: 1-byte GEMM inputs, the other saved tensors 16-bit
    # (ops/training_formulas.layer_activation_terms, counted in true bytes); other widths
    # scale Korthikanti's 2-byte count
    fp8 = ctx.prec.compute == "fp8" and ab < 2.0
    act_scale = 1.0 if fp8 else ab / 2.0
    kw = dict(d_model=D, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
              gated_mlp=cfg.gated_mlp, seq_len=s, tp=tp, sequence_parallel=sp,
              fused_attention=ctx.fused, dropout=ctx.dropout, xp=xp, fp8=fp8)
    # per token and layer, in bytes at 2-byte activations (ops/training_formulas.py)
    per_tok_none, per_tok_sel = layer_activation_terms(d_ff=float(cfg.d_ff), **kw)
    f = ctx.moe_fraction
    if f > 0.0:
        a_none, a_sel = layer_activation_terms(d_ff=0.0, **kw)  # attention and norms only
        moe = moe_mlp_activation_bytes(
            d_model=D, expert_d_ff=float(cfg.moe_d_ff or cfg.d_ff), top_k=cfg.top_k,
            n_shared=cfg.n_shared_experts, n_experts=cfg.n_experts, gated_mlp=cfg.gated_mlp,
            tp=tp, sequence_parallel=sp, xp=xp, fp8=fp8, etp=tp if etp is None else etp)
        per_tok_none = (1 - f) * per_tok_none + f * (a_none + moe)
        per_tok_sel = (1 - f) * per_tok_sel + f * (a_sel + moe)
    skip = f > 0.0 or (xp is SCALAR and rc != 3)  # one configuration, another mode
    per_tok_op = 0.0 if skip else op_sac_activation_bytes(
        d_model=D, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
        d_ff=float(cfg.d_ff), gated_mlp=cfg.gated_mlp, fused_qkv=cfg.fused_qkv, tp=tp,
        sequence_parallel=sp, xp=xp) * (ab / 2.0 / act_scale)  # not re-derived for fp8
    # a fully recomputed layer keeps its input, the residual stream at link_bytes per element,
    # this rank's s/t slice of it under sequence parallelism (ops/training_formulas.
    # recomputed_layer_input_bytes, counted at 2 bytes: rescaled here)
    inp = recomputed_layer_input_bytes(d_model=D, tp=tp, sequence_parallel=sp, xp=xp) \
        * (ctx.prec.link_bytes / 2.0) / act_scale
    per_layer_tok = xp.where(rc == 0, per_tok_none, xp.where(rc == 1, per_tok_sel, xp.where(
        rc == 3, per_tok_op, inp * rc_frac + per_tok_none * (1.0 - rc_frac))))
    tokens_mb = b * s / ctx.cp  # this rank's share of the sequence (context parallelism)
    inflight = xp.where(pp1, 1.0, xp.minimum(m, pp)) * xp.where(
        v > 1, 1 + (pp - 1) / (pp * v), 1.0)
    act = per_layer_tok * act_scale * tokens_mb * n_lps * inflight
    # full (and op-level) recompute: one layer's activations live while it is recomputed
    act = act + xp.where(rc >= 2, per_tok_none * act_scale * tokens_mb * (rc_frac > 0), 0.0)
    act = act + xp.where(pp1, tokens_mb * (cfg.vocab / tp) * 4.0, 0.0)  # fp32 logits (last stage)
    edp = dp / ep
    e_w, e_g = p_exp * ctx.prec.weight_bytes, p_exp * ctx.grad_bytes
    weights = (w_bytes - e_w) / xp.where(zero == 3, dp, 1) + e_w / xp.where(zero == 3, edp, 1)
    grads = (g_bytes - e_g) / xp.where(zero >= 2, dp, 1) + e_g / xp.where(zero >= 2, edp, 1)
    opt = ((p_dev - p_exp) / xp.where(zero >= 1, dp, 1)
           + p_exp / xp.where(zero >= 1, edp, 1)) * ctx.opt_bytes
    total = weights + grads + opt + act + ctx.eff.workspace
    return dict(weights=weights, gradients=grads, opt=opt, activations=act, total=total)
