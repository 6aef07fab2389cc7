"""Training memory per device (the first pipeline stage, the fullest): weights, gradients and
optimizer states as ZeRO shards them, and activations per Korthikanti et al. 2022 Table 2."""

from __future__ import annotations

from typing import Any

from ...ops.training_formulas import layer_activation_terms
from .context import _Ctx


def _memory(ctx: _Ctx, tp: Any, pp: Any, dp: Any, b: Any, v: Any, rc: Any, zero: Any, sp: Any,
            m: Any, n_lps: Any, p_dev: Any, w_bytes: Any, g_bytes: Any, xp: Any) -> dict[str, Any]:
    """Bytes per device of the first stage for the splits ``_evaluate`` prices (same ``xp``):
    ``m`` micro-batches per replica, ``n_lps`` layers per stage, ``p_dev`` parameters on the
    stage, ``w_bytes``/``g_bytes`` its weight and gradient buffers before ZeRO sharding."""
    cfg = ctx.cfg
    s, D = float(ctx.seq_len), float(cfg.d_model)
    ab = ctx.prec.act_bytes
    pp1 = pp == 1
    act_scale = ab / 2.0  # Korthikanti's table counts 2-byte activations
    # per token and layer, in bytes at 2-byte activations (ops/training_formulas.py)
    per_tok_none, per_tok_sel = layer_activation_terms(
        d_model=D, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
        d_ff=float(cfg.d_ff) * (cfg.top_k if cfg.n_experts else 1), gated_mlp=cfg.gated_mlp,
        seq_len=s, tp=tp, sequence_parallel=sp, fused_attention=ctx.fused, dropout=ctx.dropout,
        xp=xp)
    per_layer_tok = xp.where(rc == 0, per_tok_none, xp.where(rc == 1, per_tok_sel, 2 * D))
    tokens_mb = b * s / ctx.cp  # this rank's share of the sequence (context parallelism)
    inflight = xp.where(pp1, 1.0, xp.minimum(m, pp)) * xp.where(
        v > 1, 1 + (pp - 1) / (pp * v), 1.0)
    act = per_layer_tok * act_scale * tokens_mb * n_lps * inflight
    # full recompute: one layer's activations live while it is recomputed
    act = act + xp.where(rc == 2, per_tok_none * act_scale * tokens_mb, 0.0)
    act = act + xp.where(pp1, tokens_mb * (cfg.vocab / tp) * 4.0, 0.0)  # fp32 logits (last stage)
    weights = w_bytes / xp.where(zero == 3, dp, 1)
    grads = g_bytes / xp.where(zero >= 2, dp, 1)
    opt = p_dev * ctx.opt_bytes / xp.where(zero >= 1, dp, 1)
    total = weights + grads + opt + act + ctx.eff.workspace
    return dict(weights=weights, gradients=grads, opt=opt, activations=act, total=total)
