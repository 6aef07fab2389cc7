"""Training memory per device (the first pipeline stage, the fullest): weights, gradients and
optimizer states as ZeRO shards them, and activations per Korthikanti et al. 2022 Table 2."""

from __future__ import annotations

from typing import Any

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
    cfg_h = cfg.n_heads
    sp = (tp > 1) & xp.asarray(sp, dtype=bool)
    act_scale = ab / 2.0  # Korthikanti's table counts 2-byte activations
    H, K = float(cfg.head_dim), float(cfg.n_kv_heads)
    F = float(cfg.d_ff) * (cfg.top_k if cfg.n_experts else 1)
    mask = 1.0 if ctx.dropout else 0.0
    # per token, in bytes at 2-byte activations (Korthikanti Table 2 generalised to GQA/gated MLP)
    repl = 4 * D + 2 * D + 2 * D + 2 * mask * D  # two norm inputs, QKV and MLP inputs, masks
    # Q, K and V kept for the attention backward, its output (the o_proj input), MLP inputs of
    # the activation and of the down projection (gated: gate and up outputs and their product)
    shard = 2 * D + 4 * K * H + 2 * D + (6 * F if cfg.gated_mlp else 4 * F)
    # unfused attention keeps the softmax output (and, with dropout, its mask and output)
    scores = 0.0 if ctx.fused else (2 + 3 * mask) * cfg_h * s
    per_tok_none = xp.where(sp, (repl + shard) / tp, repl + shard / tp) + scores / tp
    per_tok_sel = xp.where(sp, (repl + shard) / tp, repl + shard / tp)
    per_layer_tok = xp.where(rc == 0, per_tok_none, xp.where(rc == 1, per_tok_sel, 2 * D))
    tokens_mb = b * s
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
