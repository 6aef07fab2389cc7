"""``train``: one optimizer step priced for a (tp, pp, dp, ep) split — the vectorised step model
(also evaluated by ``best_parallelism`` over many splits at once) and the checks of a split."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _args as A
from ..._call import records_call
from ..._econ_args import with_economics
from ...analysis.power import device_power_w, power_activity
from ...engine.attention import ATTENTION_KERNELS
from ...engine.memory import (
    STREAMED_OPTIMIZER_NOTE,
    fit_reason,
    fits,
    store_reason,
    streamed_training,
    streams_weights,
)
from ...engine.tiles import smooth_fill
from ...errors import SpecError
from ...graphs.model import Model
from ...graphs.resolve import model as resolve_model
from ...graphs.training import GROUPS, LORA_TARGETS
from ...ops import collectives as coll
from ...ops import cost
from ...ops.training_formulas import MOE_DISPATCHERS, MOE_ROUTINGS, OPTIMIZERS
from ...ops.xp import SCALAR
from ...specs.dtypes import PRECISION_ARG, Precision
from .context import (
    ELEMENTWISE,
    OPTIMIZER_DTYPES,
    _context,
    _Ctx,
    _graph,
    _group_times,
    flops_terms,
)
from .folding import check_folding, ep_exposed, fold_terms
from .memory import _memory
from .optimizer import optimizer_model, optimizer_time
from .options import (
    CONV_LAYOUTS,
    check_ep_overlap,
    check_flex_group,
    check_graph_only_options,
    check_model_options,
    check_selective_op,
    pp_overlap_of,
    recompute_fraction,
)
from .result import TrainingResult
from .stages import (
    STAGES_ARG,
    StageLayout,
    megatron_layout,
    pipeline_stages,
    pp_exposed,
)

RECOMPUTE = ("none", "selective", "full", "selective_op")
#: the recompute modes ``best_parallelism`` searches by default (Megatron-LM's); "selective_op"
#: (torchtitan's op-level policy) is priced when asked for
SEARCHED_RECOMPUTE = RECOMPUTE[:3]
_GI = {g: i for i, g in enumerate(GROUPS)}
#: the optimizer step per local parameter: mixed-precision AdamW with gradient clipping and
#: weight decay (ops/training_formulas.py): 34 bytes, 16 FLOPs; priced as an op of the time
#: model (optimizer.py)
_ADAMW = cost("optimizer_step", params=1, optimizer="adamw")
ADAM_BYTES_PER_PARAM = _ADAMW.bytes
ADAM_FLOPS_PER_PARAM = _ADAMW.flops
#: the optimizers decoder training is modelled with (mixed precision, fp32 master weights)
DECODER_OPTIMIZERS = ("adam", "adamw")
#: gradient bucket for DP overlap, bytes (Megatron's default 40 M parameters in fp32)
DP_BUCKET_BYTES = 40e6 * 4


def _check_moe_sp(ctx: _Ctx, tp: int, sequence_parallel: bool) -> None:
    """MoELayer.forward (NVIDIA/Megatron-LM d98e8a64) raises in training when the attention's
    tensor-parallel group is > 1 and sequence parallelism is off."""
    if ctx.cfg.n_experts and tp > 1 and not sequence_parallel:
        raise SpecError(f"tp={tp} with sequence_parallel=False: {ctx.cfg.name} is a mixture of "
                        "experts, and Megatron-Core refuses to train an MoE layer with tensor "
                        "parallelism but no sequence parallelism; allowed: "
                        "sequence_parallel=True (the default; CLI: drop --no-sp) or tp=1")


def _evaluate(ctx: _Ctx, global_batch: int, tp: Any, pp: Any, dp: Any, ep: Any, b: Any, v: Any,
              rc: Any, zero: Any, gt: Any, lp: Any, emb_p: Any, head_p: Any,
              dp_overlap: bool, sp: Any = True, xp: Any = np,
              layout: StageLayout | None = None,
              trainable: tuple[Any, Any, Any] | None = None,
              optimizer: str = "adam", lp_exp: Any = 0.0,
              ep_overlap: bool = False, cp_overlap: bool = True,
              pp_flushes: int = 1, rc_frac: float = 1.0, pp_overlap: Any = None,
              etp: Any = None) -> dict[str, Any]:
    """Price many configurations at once. ``gt`` is [n, G] group times per micro-batch;
    ``lp``, ``emb_p``, ``head_p`` the per-rank parameters of a layer, the embedding, the head;
    ``optimizer`` one of ``DECODER_OPTIMIZERS`` (mixed precision).
    With ``xp=SCALAR`` every argument is a Python number (``gt`` a [G] sequence): the same
    formulas price one configuration without numpy's per-call overhead. ``layout``: unequal
    pipeline stages (training/stages.py; None: L/pp layers on every stage). ``trainable``: the
    trainable parameters of a layer, the embedding, the head where they are fewer than all of
    them (LoRA; None: every parameter is trained). ``lp_exp``: the routed-expert parameters
    of a layer on this rank (in ``lp``; held by E/ep experts, replicated over dp/ep ranks).
    ``ep_overlap``: Megatron-Core's combined 1F1B all-to-all overlap (``folding.ep_exposed``);
    ``etp``: ``folding.fold_terms``. ``cp_overlap``: the K/V exchange behind the attention
    core (ring attention) or exposed (an all-gather in front of it). ``pp_flushes``: pipeline
    schedules per step, each of m / pp_flushes micro-batches. ``rc_frac``: full recompute's
    share of the layers (options.py); ``pp_overlap``: sends behind compute (``pp_exposed``)."""
    cfg, links, cp = ctx.cfg, ctx.links, ctx.cp
    s = float(ctx.seq_len) / cp  # tokens on this rank
    D, L = float(cfg.d_model), float(cfg.n_layers)
    lb = ctx.prec.link_bytes  # an activation on a link: 16-bit under fp8 (Precision)
    # a tensor-parallel all-reduce, or with sequence parallelism its reduce-scatter of a matmul's
    # 16-bit output and the all-gather of the next GEMM's input, which Transformer Engine casts
    # to fp8 before gathering it (v1.8 3ec998e9, pytorch/module/layernorm_linear.py and
    # linear.py forward, base.py grad_output_preprocess backward): one all-reduce at the mean
    # of the two widths
    ab_tp = 0.5 * (ctx.prec.act_bytes + lb) if sp else lb
    wb = ctx.prec.weight_bytes
    if xp is SCALAR:  # the group's time by name, as Python floats (a C lookup, no frame)
        gtl = gt.tolist() if isinstance(gt, np.ndarray) else [float(x) for x in gt]
        f = dict(zip(GROUPS, gtl)).__getitem__
    else:
        f = lambda g: gt[:, _GI[g]]  # noqa: E731
    t_op = f("layer_fwd_op")  # the ops op-level selective checkpointing re-runs
    t_lf = f("layer_fwd") + f("layer_fwd_core") + t_op
    t_core = f("layer_fwd_core")
    t_lb = f("layer_bwd") + f("layer_bwd_dw") + f("layer_bwd_dw_col")
    t_dwc = f("layer_bwd_dw_col")
    t_hf, t_hb, t_ef, t_eb = f("head_fwd"), f("head_bwd"), f("embed_fwd"), f("embed_bwd")
    if layout is None:
        n_first = n_last = n_mid = act_layers = L / pp
    else:
        n_first, n_last, n_mid, act_layers = (layout.first, layout.last, layout.middle,
                                              layout.act_layers)
    one = xp.ones_like(tp, dtype=float)

    # -- tensor parallelism
    t_pair, etp_, ep_w, t_xp = fold_terms(ctx, b * s * D * ab_tp, tp, one, ep, etp, xp,
                                          b * s * D)  # folding.py
    # a fully recomputed forward repeats its collectives; op-level checkpointing saves the
    # reduce-scatter outputs and re-gathers the sequence-parallel inputs (half of them)
    tp_f = t_pair * (1 + (rc == 2) * rc_frac + 0.5 * (rc == 3))
    tp_b = xp.maximum(t_pair - t_xp - t_dwc, 0.0) + t_xp  # t_xp exposed: folding.expert_pair
    t_rc = xp.where(rc == 1, t_core, xp.where(rc == 2, t_lf * rc_frac,
                                              xp.where(rc == 3, t_op, 0.0)))
    m = global_batch / (dp * b)
    m_sched = m / pp_flushes  # micro-batches of one pipeline schedule
    # -- expert parallelism (the MoE layers' dispatch and combine)
    ep_l = ep_exposed(ctx, b * s / tp * D * lb, etp_, ep, rc, t_lf + t_lb + t_rc, m_sched, pp,
                      ep_overlap, xp, rc_frac) if cfg.n_experts else xp.zeros_like(one)
    cp_l = _cp_exposed(ctx, b, tp, t_core, cp_overlap, xp) if cp > 1 else xp.zeros_like(one)
    # -- one micro-batch through the slowest stage: the first (with the embedding), the last
    # (LM head and loss) or the fullest middle one; with pp = 1 the one stage runs all of it
    pp1 = pp == 1
    t_layer = t_lf + t_lb + t_rc + tp_f + tp_b + ep_l + cp_l
    t_first = n_first * t_layer + t_ef + t_eb
    t_last = n_last * t_layer + t_hf + t_hb
    last_slowest = t_last >= t_first
    mid_slowest = n_mid * t_layer > xp.maximum(t_first, t_last)
    n_lps = xp.where(pp1, L, xp.where(mid_slowest, n_mid, xp.where(last_slowest, n_last,
                                                                   n_first)))
    ext_f = xp.where(pp1, t_hf + t_ef, xp.where(mid_slowest, 0.0,
                                                xp.where(last_slowest, t_hf, t_ef)))
    ext_b = xp.where(pp1, t_hb + t_eb, xp.where(mid_slowest, 0.0,
                                                xp.where(last_slowest, t_hb, t_eb)))
    cross = tp * cp * pp * dp > links.domain
    t_p2p = coll.group_send_recv(b * s * D * lb / tp, cross, links, xp)
    pp_mb = xp.where(pp1, 0.0, 2 * v * t_p2p)
    f_mb, b_mb, rc_mb = n_lps * t_lf + ext_f, n_lps * t_lb + ext_b, n_lps * t_rc
    pp_ex = pp_exposed(pp_mb, t_p2p, f_mb, b_mb + rc_mb, v, pp_overlap, xp)
    tp_mb, ep_mb, cp_mb = n_lps * (tp_f + tp_b), n_lps * ep_l, n_lps * cp_l
    t_mb = f_mb + b_mb + rc_mb + tp_mb + ep_mb + cp_mb + pp_ex
    # each schedule fills and drains the pipeline, its sends blocking there (pp_exposed)
    bubble = pp_flushes * (pp - 1) / v * (t_mb + pp_mb - pp_ex)

    # -- parameters on the fullest stage (all of them; those trained)
    stage_params = _stage_params(ctx, pp1, n_first, n_last, n_mid, xp)
    p_dev = stage_params(lp, emb_p, head_p)
    p_train = p_dev if trainable is None else stage_params(*trainable)
    p_exp = stage_params(lp_exp, 0.0, 0.0) if cfg.n_experts else 0.0 * p_dev
    # -- data parallelism (+ ZeRO) over the dp·cp ranks holding the same weights
    dpc = dp * cp
    g_bytes, w_bytes = p_train * ctx.grad_bytes, p_dev * ctx.prec.weight_bytes
    dp_exp = _dp_exposed(ctx, tp, dpc, zero, m, p_train, w_bytes, g_bytes, trainable is None,
                         f_mb, b_mb, rc_mb, n_lps, dp_overlap, xp, p_exp, ep_w)
    # -- optimizer over the local shard
    edp = dpc / ep_w  # the ranks holding the same experts (expert-data-parallel)
    p_opt = (p_train - p_exp) / xp.where(zero >= 1, dpc, 1) + p_exp / xp.where(zero >= 1, edp, 1)
    t_opt = optimizer_time(optimizer_model(ctx.key, optimizer, ctx.prec, ctx.cl.device,
                                           ctx.eff, **_optimizer_kw(ctx)), params=p_opt, xp=xp)
    mem = _memory(ctx, tp, pp, dpc, b, v, rc, zero, sp, m_sched, xp.where(pp1, L, act_layers),
                  p_train, w_bytes, g_bytes, xp, p_exp, ep_w, rc_frac, etp_)
    if streams_weights(ctx.cl.device):
        # weight streaming: weights, gradients and optimizer states live in the weight store;
        # the chip holds the largest layer's (a block, the embedding, the head) weights and
        # gradient; the update runs in the store (STREAMED_OPTIMIZER_NOTE)
        big = xp.maximum(xp.maximum(lp, emb_p), head_p)
        mem = streamed_training(mem, big * wb, big * ctx.grad_bytes, xp)
        t_opt = 0.0 * t_opt
    step = m * t_mb + bubble + dp_exp + t_opt
    return dict(step=step, t_mb=t_mb, m=m, bubble=bubble, forward=m * f_mb, backward=m * b_mb,
                recompute=m * rc_mb, tp_comm=m * tp_mb, ep_comm=m * ep_mb, pp_comm=m * pp_ex,
                cp_comm=m * cp_mb,
                dp_comm=dp_exp, optimizer=t_opt, p_dev=p_dev, **mem)


def _optimizer_kw(ctx: _Ctx) -> dict[str, Any]:
    """The optimizer step's byte widths: none for fp32 states (the formula's defaults); bf16
    states: bf16 gradients and m, v, and a bf16 master for weights narrower than bf16."""
    if ctx.optimizer_dtype == "fp32":
        return {}
    wb = ctx.prec.weight_bytes
    return dict(grad_bytes=2.0, state_bytes=2.0, master_weights=wb < 2, master_bytes=2.0,
                weight_bytes=wb)


def _dp_exposed(ctx: _Ctx, tp: Any, dpc: Any, zero: Any, m: Any, p_train: Any, w_bytes: Any,
                g_bytes: Any, all_trained: bool, f_mb: Any, b_mb: Any, rc_mb: Any, n_lps: Any,
                dp_overlap: bool, xp: Any, p_exp: Any = 0.0, ep: Any = 1) -> Any:
    """Exposed seconds per step of the data-parallel reduction over the ``dpc`` ranks holding
    the same weights: ZeRO 0 all-reduce, 1/2 reduce-scatter + all-gather of the updated
    parameters, 3 FSDP's per-micro-batch gathers; bucketed and overlapped with the backward
    when ``dp_overlap`` (what does not fit under it, and at least the last bucket, stays).
    The ``p_exp`` routed-expert parameters among them are reduced and gathered over the
    dpc/ep ranks holding the same experts (stride tp·ep; Megatron-Core's expert-data-parallel
    group), the others over all dpc ranks; under MoE parallel folding ``ep`` is ep·etp/tp
    (edp = tp·dpc / (etp·ep) ranks spaced etp·ep apart: folding.py)."""
    wb = ctx.prec.weight_bytes
    L, edp = ctx.links, dpc / ep
    e_g, e_w = p_exp * ctx.grad_bytes, p_exp * wb  # the expert part of g_bytes, w_bytes
    ar = coll.group_all_reduce(g_bytes - e_g, dpc, tp, L, xp)
    rs = coll.group_reduce_scatter(g_bytes - e_g, dpc, tp, L, xp)  # half a ring all-reduce
    ag = coll.group_all_gather(w_bytes - e_w, dpc, tp, L, xp)
    if xp is not SCALAR or p_exp:  # one dense configuration: the expert terms are 0 (x + 0 = x)
        ar = ar + coll.group_all_reduce(e_g, edp, tp * ep, L, xp)
        rs = rs + coll.group_reduce_scatter(e_g, edp, tp * ep, L, xp)
        ag = ag + coll.group_all_gather(e_w, edp, tp * ep, L, xp)
    # ZeRO 1/2 all-gather the updated (trained) parameters once per step
    ag_upd = ag if all_trained else coll.group_all_gather(p_train * wb, dpc, tp, L, xp)
    # ZeRO-3 reduce-scatters every micro-batch's gradients (below) instead of once per step
    t_dp = xp.where(zero == 0, ar, xp.where(zero == 3, ag_upd, rs + ag_upd))
    if dp_overlap:
        window = b_mb + rc_mb + xp.where(zero >= 1, f_mb, 0.0)
        last_bucket = t_dp * xp.minimum(1.0, DP_BUCKET_BYTES / xp.maximum(g_bytes, 1.0))
        dp_exp = xp.where(dpc > 1, xp.maximum(t_dp - window, last_bucket), 0.0)
    else:
        dp_exp = xp.where(dpc > 1, t_dp, 0.0)
    # ZeRO-3 as FSDP runs it, per layer and micro-batch: the next layer's parameters are
    # gathered while this one computes (in the forward, and again, resharded, in the backward)
    # and its gradients reduce-scattered behind the previous layer's backward; the first gather
    # and the last reduce-scatter have nothing to hide behind (_fsdp_exposed)
    z3 = xp.where(zero == 3, _fsdp_exposed(ag, rs, f_mb, b_mb + rc_mb, n_lps, xp)
                  if dp_overlap else 2 * ag + rs, 0.0)
    dp_exp = dp_exp + xp.where(dpc > 1, m * z3, 0.0)
    return dp_exp


def _cp_exposed(ctx: _Ctx, b: Any, tp: Any, t_core: Any, overlap: bool, xp: Any) -> Any:
    """Exposed context-parallel K/V exchange per layer and micro-batch: each layer gathers the
    whole sequence's K and V from the cp group (ring attention's cp − 1 passes move the same
    bytes) behind its attention core; the backward gathers them again and reduce-scatters dK,
    dV behind its 2.5× longer core. Without ``overlap`` (Llama 3's all-gather CP,
    arXiv:2407.21783 §3.3.2: "the all-gather communication latency is exposed in the critical
    path") the forward gather and the backward reduce-scatter of dK, dV wait in front of the
    attention (the gathered K, V kept for the backward: the least traffic that reading
    allows)."""
    cfg = ctx.cfg
    kv = b * float(ctx.seq_len) * 2 * xp.maximum(cfg.n_kv_heads / tp, 1.0) * cfg.head_dim \
        * ctx.prec.link_bytes
    t_kv = coll.group_all_gather(kv, ctx.cp, tp, ctx.links, xp)
    if not overlap:
        return 2 * t_kv
    return xp.maximum(t_kv - t_core, 0.0) + xp.maximum(2 * t_kv - 2.5 * t_core, 0.0)


def _fsdp_exposed(ag: Any, rs: Any, t_f: Any, t_b: Any, n: Any, xp: Any) -> Any:
    """Exposed ZeRO-3 time of one micro-batch through n layers (FSDP's prefetching):
    ag/n + rs/n (the first gather, the last reduce-scatter) + n · (max(0, ag/n − t_f/n) +
    max(0, (ag + rs)/n − t_b/n)), with ``ag`` one all-gather of the stage's parameters, ``rs``
    one reduce-scatter of its gradients, ``t_f``/``t_b`` its forward / backward compute."""
    nl = xp.maximum(n, 1.0)
    ag_l, rs_l = ag / nl, rs / nl
    return ag_l + rs_l + nl * (xp.maximum(ag_l - t_f / nl, 0.0)
                               + xp.maximum(ag_l + rs_l - t_b / nl, 0.0))


def _stage_params(ctx: _Ctx, pp1: Any, n_first: Any, n_last: Any, n_mid: Any, xp: Any) -> Any:
    """The parameters on the fullest stage, for per-rank (layer, embedding, head) counts: all
    of them with pp = 1; else the first stage (its layers + the embedding), the last (its
    layers + the head, and the embedding again when tied) or the fullest middle one."""
    L = float(ctx.cfg.n_layers)
    tied = ctx.cfg.tied_embeddings

    def params(lp: Any, emb_p: Any, head_p: Any) -> Any:
        return xp.where(pp1, L * lp + emb_p + head_p, xp.maximum(xp.maximum(
            n_first * lp + emb_p, n_last * lp + head_p + (emb_p if tied else 0.0)),
            n_mid * lp))
    return params


def _trainable_params(ctx: _Ctx, b: int) -> float:
    """Parameters the step trains, model-wide (the unsharded graph's counts × layers: tp 1 and
    ep 1, every expert counted)."""
    g = _graph(ctx, 1, 1, b, False)
    if g.layer_trainable is None:
        return float(ctx.cfg.n_layers * g.layer_params + g.embed_params + g.head_params)
    # the three trainable counts are set together (graphs/training.py)
    assert g.embed_trainable is not None and g.head_trainable is not None
    return float(ctx.cfg.n_layers * g.layer_trainable + g.embed_trainable + g.head_trainable)


def _check_int(name: str, v: Any, lo: int = 1) -> int:
    return A.check_count(name, v, lo)


#: argument rules shared by train and best_parallelism (see roofline._args)
DEGREE = A.count(1, A.MAX_DEVICES)
OPT_DEGREE = A.optional(DEGREE)
ZERO = A.choice(0, 1, 2, 3)
RECOMPUTE_ARG = A.choice(*RECOMPUTE)
COMMON_ARGS = dict(model=A.anything, cluster=A.anything, global_batch=A.count(),
                   seq_len=A.count(1, A.MAX_TOKENS), precision=PRECISION_ARG,
                   nodes=OPT_DEGREE, fused_attention=A.flag, dropout=A.flag, dp_overlap=A.flag,
                   preset=A.text)


def _degrees(ctx: _Ctx, tp: Any, pp: Any, dp: Any, ep: Any, interleave: Any,
             pp_stages: Any, *layout: Any) -> tuple[int, int, int, int, int, Any, bool]:
    """(tp, pp, dp, ep, interleave) as positive integers (train's argument rules have checked
    the ones given); pp from ``pp_stages`` when only the stages are given; dp defaulting to
    devices / (tp·pp·cp), ≥ 1 when it divides; then (pp_stages, chunked) and interleave as
    Megatron-Core's ``layout`` arguments set them (stages.megatron_layout)."""
    if pp_stages is not None and pp == 1:
        pp = _check_int("pp", len(pp_stages))
    if dp is None:
        if ctx.cl.devices % (tp * pp * ctx.cp):
            raise SpecError(f"tp·pp·cp = {tp * pp * ctx.cp} must divide the cluster's "
                            f"{ctx.cl.devices} devices")
        dp = ctx.cl.devices // (tp * pp * ctx.cp)
    stages, interleave, chunked = megatron_layout(ctx.cfg.n_layers, pp, interleave, pp_stages,
                                                  *layout)
    return tp, pp, dp, ep, interleave, stages, chunked


def _validate(ctx: _Ctx, global_batch: int, micro_batch: int, tp: int, pp: int, dp: int, ep: int,
              interleave: int, recompute: str, zero: int, pp_flushes: int = 1,
              etp: int | None = None, ep_overlap: bool = False,
              cp_overlap: bool = True, moe_dispatcher: str | None = None) -> None:
    """The split's consistency (SpecError on the first problem): devices, cp (and
    ``cp_overlap``), interleave, the expert groups (folding.check_folding) and the flex
    dispatcher's (``options.check_flex_group``), batches, recompute, zero, ``ep_overlap``'s
    rules."""
    devices, cp = ctx.cl.devices, ctx.cp
    if not cp_overlap and cp == 1:
        raise SpecError("cp_overlap=False exposes the context-parallel K/V exchange; it needs "
                        f"context parallelism (cp > 1), got cp={cp}")
    if tp * cp * pp * dp != devices:
        what = "tp·cp·pp·dp" if cp > 1 else "tp·pp·dp"
        vals = f"{tp}·{cp}·{pp}·{dp}" if cp > 1 else f"{tp}·{pp}·{dp}"
        raise SpecError(f"{what} = {vals} = {tp * cp * pp * dp} must equal the cluster's "
                        f"{devices} devices ({ctx.cl.nodes} nodes × {ctx.cl.devices_per_node})")
    if cp > 1 and ctx.seq_len % (2 * cp):
        raise SpecError(f"cp={cp}: seq_len={ctx.seq_len} must be a multiple of 2·cp = {2 * cp} "
                        "(each rank holds 2 of 2·cp sequence chunks)")
    if interleave > 1 and pp == 1:
        raise SpecError("interleave > 1 needs pipeline parallelism (pp > 1)")
    check_folding(ctx, tp, dp, ep, tp if etp is None else etp)  # etp·ep | tp·cp·dp
    check_flex_group(moe_dispatcher, tp, ep, etp)
    if global_batch % (dp * micro_batch):
        raise SpecError(f"global_batch={global_batch} must be divisible by dp·micro_batch = "
                        f"{dp}·{micro_batch} = {dp * micro_batch}")
    m = global_batch // (dp * micro_batch)
    if m % pp_flushes:
        raise SpecError(f"pp_flushes={pp_flushes} must divide the {m} micro-batches per replica "
                        "(each pipeline schedule runs the same number)")
    m //= pp_flushes
    if interleave > 1 and m % pp:
        raise SpecError(f"the interleaved schedule needs the {m} micro-batches per schedule to "
                        f"be a multiple of pp={pp}")
    if recompute not in RECOMPUTE:
        raise SpecError(f"recompute={recompute!r}; allowed: {', '.join(RECOMPUTE)}")
    if zero not in (0, 1, 2, 3):
        raise SpecError(f"zero={zero!r}; allowed: 0, 1, 2, 3")
    check_selective_op(ctx, (recompute,))
    if ep_overlap:
        check_ep_overlap(ctx, ep, pp, interleave, recompute)


@records_call("train")
@with_economics
@A.checked(**{**COMMON_ARGS, "seq_len": A.optional(A.count(1, A.MAX_TOKENS))},
           micro_batch=A.count(), tp=DEGREE, pp=DEGREE, dp=OPT_DEGREE,
           ep=DEGREE, etp=OPT_DEGREE, interleave=A.count(1, 1024),
           recompute=A.optional(RECOMPUTE_ARG), zero=A.optional(ZERO),
           sequence_parallel=A.flag, optimizer=A.choice(*OPTIMIZERS),
           pp_stages=STAGES_ARG, lora_rank=A.optional(A.count(1, 65536)), cp=DEGREE,
           attention_kernel=A.choice(*ATTENTION_KERNELS), moe_routing=A.choice(*MOE_ROUTINGS),
           moe_dispatcher=A.optional(A.choice(*MOE_DISPATCHERS)),
           ep_overlap=A.flag, cp_overlap=A.flag, elementwise=A.choice(*ELEMENTWISE),
           optimizer_dtype=A.choice(*OPTIMIZER_DTYPES), pp_flushes=A.count(1, 10**6),
           data_loader=A.anything, lora_targets=A.choice(*LORA_TARGETS),
           recompute_layers=A.optional(A.count(0, 10**6)), pp_overlap=A.optional(A.flag),
           conv_layout=A.optional(A.choice(*CONV_LAYOUTS)), pp_account_embedding=A.flag,
           pp_account_loss=A.flag, pp_layout=A.optional(A.text))
def train(model: Any, cluster: Any, *, global_batch: int, seq_len: int | None = None,
          micro_batch: int = 1, tp: int = 1, pp: int = 1, dp: int | None = None, ep: int = 1,
          etp: int | None = None, interleave: int = 1, recompute: str | None = None,
          zero: int | None = None, precision: str | Precision = "bf16", nodes: int | None = None,
          sequence_parallel: bool = True, fused_attention: bool = True, dropout: bool = False,
          dp_overlap: bool = True, preset: str = "default", optimizer: str = "adam",
          pp_stages: Any = None, lora_rank: int | None = None, cp: int = 1,
          attention_kernel: str = "auto", moe_routing: str = "random", ep_overlap: bool = False,
          cp_overlap: bool = True, elementwise: str = "fused", optimizer_dtype: str = "fp32",
          pp_flushes: int = 1, data_loader: Any = None, lora_targets: str = "all",
          recompute_layers: int | None = None, pp_overlap: bool | None = None,
          conv_layout: str | None = None, pp_account_embedding: bool = False,
          pp_account_loss: bool = False, pp_layout: str | None = None,
          moe_dispatcher: str | None = None) -> TrainingResult:
    """Price one optimizer step of ``model`` trained on ``cluster`` with a (tp, pp, dp, ep) split.

    Models that are not decoder LMs (CNNs, ViT, BERT, imported modules) are trained data
    parallel by the generic model (training/generic.py): ``seq_len`` only for sequence models,
    ``optimizer`` "sgd" | "momentum" | "adam" | "adamw" (``ops.training_formulas.OPTIMIZERS``;
    decoders: "adam" | "adamw"), ``zero`` 0-3 (default 0) and ``recompute`` "none" (default)
    or "full" (√n-segment checkpointing); tp, pp, ep and interleave do not apply (a value
    other than 1 is refused). ``data_loader``: (loader, workers per device), the host input
    pipeline's ceiling (None: off); ``conv_layout`` (generic.py; None: "nhwc"). Decoders: neither.

    ``dp`` defaults to devices / (tp·pp). ``etp`` (MoE): MoE parallel folding (folding.py), the
    experts split etp ways (None: tp). ``pp`` need not divide the layers: the stages are as even
    as possible, the lighter at the ends (training/stages.py), or ``pp_stages`` gives each
    stage's layers (``pp`` defaults to its length), or Megatron-Core's ``pp_account_embedding``,
    ``pp_account_loss``, ``pp_layout`` do (stages.megatron_layout); the slowest stage paces.
    ``lora_rank`` r: LoRA — an adapter A·B of rank r on every linear of the blocks (on the fused
    q / k / v projection only: ``lora_targets="qkv"``), every other weight frozen (no dW GEMMs,
    dX kept; gradients, optimizer state, dp reduction for the adapters; graphs/training.py).
    ``cp``: context parallelism (Megatron-LM's, ring attention's): each of the cp ranks of a
    group holds seq_len/cp tokens of every sequence, gathers the whole sequence's K and V per
    layer behind its attention (exposed where the exchange is longer) and reduces gradients with
    the dp ranks; devices = tp·cp·pp·dp, dp defaults to devices / (tp·cp·pp).
    ``interleave`` is v, model chunks per device (interleaved 1F1B). ``recompute``: "none" |
    "selective" | "full" (decoder default "selective": Megatron's, the attention core re-run) |
    "selective_op" (torchtitan's op-level policy: matmul and attention outputs saved except
    every second matmul of a block; those and the norms, activations and other cheap ops re-run
    in the backward; ``graphs.training.op_recomputed``). ``recompute_layers`` k: "full" for k
    layers per stage only (Megatron's block method; options.py). ``zero``: 0–3 (decoders 1).
    ``fused_attention``: FlashAttention-style kernels (False: the unfused QKᵀ/softmax/·V path of
    2021–22 Megatron). ``dropout``: count dropout masks in activation memory. ``dp_overlap``:
    overlap the gradient reduction with backward. A split that does not fit in memory is a
    result with ``feasible=False`` and the reason; an inconsistent split is a SpecError.
    ``attention_kernel``: the fused-attention kernel ("auto": FA3 on Hopper, cuDNN on Blackwell,
    the matmul model elsewhere, in fp8 its forward at the 16-bit rate; "fa2", "fa3", "cudnn",
    "gemm"; "unfused" = ``fused_attention=False``; engine/attention.py): forward and
    backward each at the kernel's measured rate. ``moe_routing`` (MoE models): how the router
    spreads a token's k experts, which sets how many expert-parallel ranks each token is
    dispatched to (once per rank): "random" (uniform, balanced in expectation) or "contiguous"
    (NeMo AutoModel's FakeBalancedGate: k consecutive experts; training_formulas
    .moe_dispatch_ranks). ``moe_dispatcher``: "flex" (DeepEP; None) | "alltoall" (folding.py).
    ``ep_overlap`` (MoE, ep > 1): Megatron-Core's combined 1F1B, each micro-batch's dispatch and
    combine behind the adjacent micro-batch's compute (``folding.ep_exposed``); refused with full
    recompute and, when pp > 1, without interleaving (the schedule's rules). Default: exposed.
    ``cp_overlap`` (cp > 1): the K/V exchange runs behind the attention core, as ring attention
    overlaps it (default); False: an all-gather in front of it, exposed, as Llama 3's
    all-gather context parallelism runs it (arXiv:2407.21783 §3.3.2). ``elementwise``: "fused"
    (one kernel per norm, RoPE, activation, loss) or "eager" (PyTorch eager's op chains, fp32
    upcasts, as torchtitan writes them: data/presets/eager.toml). ``optimizer_dtype``: "fp32"
    or "bf16" gradients and Adam states (context.optimizer_state_bytes_per_param).
    ``pp_flushes``: pipeline schedules per step (1: all micro-batches in one, Megatron's; the
    accumulation steps of a stack that runs one schedule each, as NeMo AutoModel's benchmark
    loop): each fills and drains the pipeline (the bubble paid pp_flushes times).
    ``pp_overlap``: Megatron's overlap_p2p_comm (stages.pp_exposed; None: on if interleaved).
    Economics: ``price_per_hour`` (USD/device-hour), ``region``, ``pue``: cost/energy/carbon."""
    if attention_kernel == "unfused":
        fused_attention = False
    m = model if isinstance(model, Model) else resolve_model(model)
    check_model_options(m, lora_rank, lora_targets, ep_overlap, moe_routing, etp, moe_dispatcher)
    if m.config is None or m.config.arch != "decoder":
        from .generic import decoder_options, train_graph

        odt = None if optimizer_dtype == "fp32" else optimizer_dtype  # refused unless default
        return train_graph(m, cluster, global_batch=global_batch, micro_batch=micro_batch,
                           seq_len=seq_len, dp=dp, precision=precision, nodes=nodes, tp=tp,
                           optimizer=optimizer, dp_overlap=dp_overlap, preset=preset, pp=pp,
                           ep=ep, interleave=interleave, recompute=recompute, zero=zero,
                           optimizer_dtype=odt, pp_flushes=pp_flushes, data_loader=data_loader,
                           conv_layout=conv_layout,
                           decoder_only=decoder_options(
                               cp, pp_stages, attention_kernel, fused_attention, dropout,
                               elementwise, recompute_layers, pp_overlap, pp_account_embedding,
                               pp_account_loss, pp_layout))
    check_graph_only_options(m, data_loader, conv_layout)
    recompute = "selective" if recompute is None else recompute  # decoder defaults
    zero = 1 if zero is None else zero
    if seq_len is None:
        raise SpecError(f"training {m.name} (a decoder LM) needs seq_len=")
    if optimizer not in DECODER_OPTIMIZERS:
        raise SpecError(f"optimizer={optimizer!r}: decoder training is modelled with "
                        "mixed-precision Adam(W) only; allowed: adam, adamw")
    # the degrees, batches and zero are ints in range: A.checked above converted and checked them
    ctx = _context(model, cluster, nodes, precision, seq_len, fused_attention, dropout, preset,
                   lora_rank, cp, attention_kernel, moe_routing, elementwise, optimizer_dtype,
                   lora_targets, moe_dispatcher)
    tp, pp, dp, ep, interleave, pp_stages, chunked = _degrees(
        ctx, tp, pp, dp, ep, interleave, pp_stages, pp_account_embedding, pp_account_loss,
        pp_layout)
    _check_moe_sp(ctx, tp, sequence_parallel)
    _validate(ctx, global_batch, micro_batch, tp, pp, dp, ep, interleave, recompute, zero,
              pp_flushes, etp, ep_overlap, cp_overlap, moe_dispatcher)
    stages = pipeline_stages(ctx.cfg.n_layers, pp, pp_stages, interleave, chunked=chunked)
    rc_frac = recompute_fraction(recompute, recompute_layers, stages, interleave)
    layout = None if len(set(stages)) == 1 else StageLayout.of(
        stages, global_batch // (dp * micro_batch))
    sp = bool(sequence_parallel) and tp > 1
    tg = _graph(ctx, tp, ep, micro_batch, sp, etp)  # raises on heads/width not divisible
    gt = _group_times(ctx, tp, ep, [micro_batch], sp, etp)[micro_batch]
    rc, overlap = RECOMPUTE.index(recompute), pp_overlap_of(pp_overlap, interleave, pp)
    trainable = None if lora_rank is None else (tg.layer_trainable, tg.embed_trainable,
                                                 tg.head_trainable)
    r = _evaluate(ctx, global_batch, tp, pp, dp, ep, micro_batch, interleave, rc, zero, gt,
                  tg.layer_params, tg.embed_params, tg.head_params, dp_overlap, sp, SCALAR,
                  layout, trainable, optimizer, tg.layer_expert_params, ep_overlap, cp_overlap,
                  pp_flushes, rc_frac, overlap, etp)
    return _result(ctx, r, global_batch, micro_batch, tp, pp, dp, ep, interleave, recompute,
                   zero, sp, stages, optimizer, rc_frac, overlap, etp)


def _result(ctx: _Ctx, r: dict[str, float], global_batch: int, micro_batch: int,
            tp: int, pp: int, dp: int, ep: int, interleave: int, recompute: str,
            zero: int, sp: bool = True, stages: tuple[int, ...] = (),
            optimizer: str = "adam", rc_frac: float = 1.0,
            pp_overlap: bool = False, etp: int | None = None) -> TrainingResult:
    step = float(r["step"])
    mf, sel, full, op_rc = flops_terms(ctx.m, ctx.seq_len, micro_batch=micro_batch,
                                       precision=ctx.prec, lora_rank=ctx.lora_rank,
                                       lora_targets=ctx.lora_targets)
    extra = {"none": 0.0, "selective": sel, "full": full * rc_frac, "selective_op": op_rc}[
        recompute]
    model_flops = mf * global_batch
    hw_flops = (mf + extra) * global_batch
    devices = ctx.cl.devices
    cap = ctx.cl.device.memory_capacity_bytes
    mem = {"weights": float(r["weights"]), "gradients": float(r["gradients"]),
           "optimizer": float(r["opt"]), "activations": float(r["activations"]),
           "workspace": float(ctx.eff.workspace), "total": float(r["total"])}
    feasible = bool(fits(mem["total"], cap))
    reason = "" if feasible else fit_reason(mem["total"], cap, ctx.cl.device.name, {
        k: mem[k] for k in ("weights", "gradients", "optimizer", "activations")})
    warnings: tuple[str, ...] = ()
    if "weight_store" in r:  # weight streaming: the training state must fit the store
        mem["weight_store"] = float(r["weight_store"])
        why = store_reason(mem["weight_store"], ctx.cl.device)
        if feasible and why:
            feasible, reason = False, why
        store = ctx.cl.device.weight_store
        assert store is not None  # a weight_store row exists only for a part with a store
        warnings = (STREAMED_OPTIMIZER_NOTE.format(store=store.name),)
    bd = {k: float(r[k]) for k in ("forward", "backward", "recompute", "optimizer", "tp_comm",
                                      "dp_comm", "pp_comm", "ep_comm", "cp_comm", "bubble")}
    hw = ctx.cl.device
    mfu = model_flops / (step * devices * ctx.peak)
    other = ctx.cl.nodes * ctx.cl.node_overhead_w
    power = devices * (device_power_w(hw, mfu, "mlsysim") if ctx.preset == "mlsysim" else
                       device_power_w(hw, power_activity(mfu))) + other
    return TrainingResult(
        model=ctx.m.name, cluster=ctx.cl.name, device=hw.name, devices=devices,
        precision=ctx.prec.label, preset=ctx.preset, global_batch=global_batch,
        seq_len=ctx.seq_len, micro_batch=micro_batch, microbatches=int(round(float(r["m"]))),
        tp=tp, pp=pp, dp=dp, ep=ep, etp=tp if etp is None else etp, interleave=interleave,
        recompute=recompute, zero=zero,
        sequence_parallel=sp and tp > 1, pp_stages=tuple(stages), lora_rank=ctx.lora_rank,
        cp=ctx.cp, lora_targets=ctx.lora_targets, pp_overlap=pp_overlap,
        trainable_params=_trainable_params(ctx, micro_batch), step_time=step,
        tokens_per_s=global_batch * ctx.seq_len / step,
        mfu=model_flops / (step * devices * ctx.peak), hfu=hw_flops / (step * devices * ctx.peak),
        model_flops_per_step=model_flops, hardware_flops_per_step=hw_flops, breakdown=bd,
        memory_per_device=mem, memory_capacity=cap, feasible=feasible, reason=reason,
        power_w=power, other_power_w=other, _hw=hw, optimizer=optimizer, warnings=warnings,
        t_fill=smooth_fill(ctx.eff))
