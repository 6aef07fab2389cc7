"""``best_parallelism``: every valid split of a model on a cluster, priced at once, ranked."""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from ... import _args as A
from ...engine.attention import ATTENTION_KERNELS
from ...engine.memory import fits as mem_fits
from ...engine.table import Table
from ...errors import SpecError
from ...graphs.shard import etp_problem, tp_problem
from ...graphs.training import GROUPS
from ...ops.training_formulas import MOE_DISPATCHERS, MOE_ROUTINGS
from ...specs.dtypes import Precision
from ...units import FRACTION
from .context import (
    ELEMENTWISE,
    OPTIMIZER_DTYPES,
    _context,
    _graph,
    _group_times,
    model_flops_per_sample,
)
from .folding import folding_eps
from .step import (
    COMMON_ARGS,
    OPT_DEGREE,
    RECOMPUTE,
    RECOMPUTE_ARG,
    SEARCHED_RECOMPUTE,
    ZERO,
    _check_int,
    _evaluate,
    check_selective_op,
)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _expert_splits(cfg: Any, t: int, d: int, etps: list[int] | None) -> list[tuple[int, int]]:
    """The (ep, etp) of the expert layers over the t·d ranks of a stage: etp = t and ep
    dividing d (``etps`` None, Megatron-Core's default), or each etp of ``etps`` with every ep
    that the folding rules allow (folding.check_folding: etp·ep divides t·d; ep the experts)."""
    if not cfg.n_experts:
        return [(1, t)]
    out = []
    for et in ([t] if etps is None else etps):
        out += [(e, et) for e in folding_eps(cfg.n_experts, t * d, et)]
    return out


def _splits(cfg: Any, devices: int, tps: list[int], global_batch: int,
            micro_batches: tuple[int, ...], interleaves: tuple[int, ...],
            recomputes: tuple[str, ...], zeros: tuple[int, ...],
            ep_overlap: bool, pp_flushes: int = 1,
            pp_overlap: bool | None = None,
            etps: dict[int, list[int]] | None = None, flex: bool = False) -> dict[str, list[Any]]:
    """Every valid (tp, pp, dp, ep, b, v, recompute, ZeRO, etp) split, column by column
    (``etps``: the expert tensor-parallel sizes each tp may pair with, ``_expert_splits``;
    None: etp = tp; with
    ``ep_overlap`` only those the combined-1F1B rules allow: ep > 1, no full recompute,
    interleaving when pp > 1; with ``pp_flushes`` k only those whose micro-batches per replica
    split into k equal schedules, as ``train`` requires; with ``pp_overlap=True`` only the
    interleaved ones, pp > 1 and v >= 2, as ``train`` requires; with ``flex`` (the flex
    dispatcher asked for) only those with etp·ep > 1, ``options.check_flex_group``)."""
    out: list[tuple[int, ...]] = []
    add = out.append
    rcs = [RECOMPUTE.index(rc) for rc in recomputes if not (ep_overlap and rc == "full")]
    for t in tps:
        for p in _divisors(cfg.n_layers):
            if devices % (t * p):
                continue
            d = devices // (t * p)
            eps = _expert_splits(cfg, t, d, None if etps is None else etps[t])
            zs = [z for z in zeros if not (d == 1 and z > 0)]
            for b in micro_batches:
                if global_batch % (d * b):
                    continue
                mcount = global_batch // (d * b)
                if mcount % pp_flushes:
                    continue
                mcount //= pp_flushes  # micro-batches of one pipeline schedule
                vs = [1] if p == 1 else [v for v in interleaves if (cfg.n_layers // p) % v == 0
                                         and (v == 1 or mcount % p == 0)]
                for e, et in eps:
                    if (ep_overlap and e < 2) or (flex and et * e == 1):
                        continue
                    for v in vs:
                        if (ep_overlap and p > 1 and v < 2) or (pp_overlap and (p == 1 or v < 2)):
                            continue
                        for rc in rcs:
                            for z in zs:
                                add((t, p, d, e, b, v, rc, z, et))
    cols = list(zip(*out)) if out else [()] * 9
    return {k: list(c) for k, c in zip(("tp", "pp", "dp", "ep", "b", "v", "rc", "zero", "etp"),
                                        cols)}


def _per_rank(ctx: Any, rows: dict[str, list[Any]], arr: dict[str, Any]) -> tuple[Any, ...]:
    """Per split: the group times of one micro-batch [n, G] and the per-rank parameters of a
    layer, the embedding, the head and a layer's routed experts, one graph per (tp, ep, etp, b)."""
    n = len(arr["tp"])
    gt = np.empty((n, len(GROUPS)))
    lp, emb, head, lpe = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    # Python ints (numpy scalars are slow)
    for t, e, et in sorted(set(zip(rows["tp"], rows["ep"], rows["etp"]))):
        sel = (arr["tp"] == t) & (arr["ep"] == e) & (arr["etp"] == et)
        bs = sorted({int(x) for x in arr["b"][sel].tolist()})
        times = _group_times(ctx, t, e, bs, True, et)
        for b in bs:
            s2 = sel & (arr["b"] == b)
            gt[s2] = times[b]
            tg = _graph(ctx, t, e, b, True, et)
            lp[s2], emb[s2], head[s2] = tg.layer_params, tg.embed_params, tg.head_params
            lpe[s2] = tg.layer_expert_params
    return gt, lp, emb, head, lpe


def _etp_pairs(cfg: Any, tps: list[int], etps: tuple[int, ...] | None) -> dict[int, list[int]]:
    """Each tp that can split ``cfg`` with the etps of ``etps`` it can pair with
    (``graphs.shard.tp_problem``; None: etp = tp, the tp rule alone). Every etp of ``etps``
    must split the experts (``etp_problem``): one that cannot is a SpecError."""
    if etps is None:
        return {t: [t] for t in tps if tp_problem(cfg, t) is None}
    if not cfg.n_experts:
        raise SpecError(f"etps={list(etps)} (expert tensor parallelism) applies to mixture-of-"
                        f"experts models; {cfg.name} has no experts (leave etps unset)")
    ok = list(dict.fromkeys(etps))
    bad = [why for e in ok if (why := etp_problem(cfg, e)) is not None]
    if bad:  # each size must split the experts: one that cannot is refused, not dropped
        raise SpecError(f"etps={list(etps)}: {bad[0]}")
    return {t: [e for e in ok if tp_problem(cfg, t, e) is None] for t in tps}


def _no_split(cfg: Any, devices: int, global_batch: int, micro_batches: tuple[int, ...],
              pp_flushes: int, etps: tuple[int, ...] | None, max_tp: int) -> NoReturn:
    """best_parallelism found no split: a SpecError. With ``etps`` none of which can split the
    experts over ``devices`` with any tp up to ``max_tp`` (each etp·ep divides a stage's tp·dp
    ranks, ``folding.check_folding``, and tp and etp split the model, ``tp_problem``), it names
    them, the rule and the sizes that can; otherwise the batch, the micro-batches, the flushes
    (and the etps) given."""
    more = f" and pp_flushes={pp_flushes}" if pp_flushes > 1 else ""
    tps = [t for t in _divisors(devices) if t <= max_tp]
    ok = [e for e in _divisors(devices) if etp_problem(cfg, e) is None
          and any(tp_problem(cfg, t, e) is None and _expert_splits(cfg, t, devices // t, [e])
                  for t in tps)] if etps is not None else []
    if etps is None or set(etps) & set(ok):
        more += f" and etps={list(etps)}" if etps is not None else ""
        raise SpecError(f"no valid split of {cfg.name} on {devices} devices with global_batch="
                        f"{global_batch} and micro-batches {micro_batches}{more}")
    raise SpecError(f"etps={list(etps)}: no split of {cfg.name} on {devices} devices with tp up "
                    f"to max_tp={max_tp} pairs with them: each etp·ep must divide a stage's "
                    f"tp·dp ranks (Megatron-Core's expert groups) and etp split the experts; "
                    f"allowed etps here: {ok}")


@A.checked(**COMMON_ARGS,
           micro_batches=A.seq(A.count(), what="micro-batch sizes such as (1, 2, 4)"),
           interleaves=A.seq(A.count(1, 1024), what="interleave factors such as (1, 2)"),
           recomputes=A.seq(RECOMPUTE_ARG, what=f"recompute modes ({', '.join(RECOMPUTE)})"),
           zeros=A.seq(ZERO, what="ZeRO stages (0, 1, 2, 3)"), max_tp=OPT_DEGREE,
           top=A.optional(A.count(1, 10**9)), include_infeasible=A.flag,
           price_per_hour=A.anything, region=A.anything, pue=A.anything,
           attention_kernel=A.choice(*ATTENTION_KERNELS), moe_routing=A.choice(*MOE_ROUTINGS),
           ep_overlap=A.flag, elementwise=A.choice(*ELEMENTWISE),
           optimizer_dtype=A.choice(*OPTIMIZER_DTYPES), pp_flushes=A.count(1, 10**6),
           pp_overlap=A.optional(A.flag), moe_dispatcher=A.optional(A.choice(*MOE_DISPATCHERS)),
           etps=A.optional(A.seq(A.count(1, A.MAX_DEVICES),
                                 what="expert tensor-parallel sizes such as (1, 2)")))
def best_parallelism(model: Any, cluster: Any, *, global_batch: int, seq_len: int,
                     precision: str | Precision = "bf16", nodes: int | None = None,
                     micro_batches: tuple[int, ...] = (1, 2, 4, 8),
                     interleaves: tuple[int, ...] = (1, 2, 3, 4, 6, 8),
                     recomputes: tuple[str, ...] = SEARCHED_RECOMPUTE,
                     zeros: tuple[int, ...] = (0, 1, 2, 3),
                     max_tp: int | None = None, fused_attention: bool = True,
                     dropout: bool = False, dp_overlap: bool = True, preset: str = "default",
                     top: int | None = 20, include_infeasible: bool = False,
                     price_per_hour: float | None = None, region: str | None = None,
                     pue: float | None = None, attention_kernel: str = "auto",
                     moe_routing: str = "random", ep_overlap: bool = False,
                     elementwise: str = "fused", optimizer_dtype: str = "fp32",
                     pp_flushes: int = 1, pp_overlap: bool | None = None,
                     etps: tuple[int, ...] | None = None,
                     moe_dispatcher: str | None = None) -> Table:
    """Every valid (tp, pp, dp, ep, micro-batch, interleave, recompute, ZeRO) split of ``model``
    on ``cluster``, priced at once; those that do not fit dropped; ranked by step time.

    ``tp`` ranges over divisors of the device count that divide the heads (and the KV heads or
    vice versa) up to ``max_tp`` (default: the scale-up domain); ``pp`` over divisors of the
    layers; ``ep`` over divisors of the experts (MoE only). Returns a ``Table`` (best first).

    Each row also has ``usd_per_million_tokens``, ``energy_per_token`` (J, facility: devices at
    the row's MFU + node overhead, × PUE) and ``carbon_per_million_tokens``, as
    ``rl.train``'s ``economics`` (``price_per_hour``, ``region``, ``pue`` as there; NaN without a
    price or a region, the table's ``notes`` say why). ``attention_kernel``, ``moe_routing``,
    ``moe_dispatcher``, ``elementwise``, ``optimizer_dtype``, ``pp_flushes``, ``ep_overlap``,
    ``pp_overlap`` as ``rl.train``'s, on the splits it allows (``ep_overlap``: ep > 1, no full
    recompute, interleaving when pp > 1; ``pp_flushes``: micro-batches that divide into that
    many schedules; "flex": etp·ep > 1; ``pp_overlap=True``: the interleaved splits; None: on
    where interleaved); the ``pp_overlap`` column says which.

    ``etps`` (MoE): the expert tensor-parallel sizes searched (MoE parallel folding, as
    ``rl.train``'s ``etp``): each split pairs its tp with every etp of ``etps`` and every ep the
    folding rules allow (etp·ep divides the tp·dp ranks of a stage, ep the experts; folding.py;
    an etp not dividing the expert width a SpecError), so ``etps=(1,)`` fixes etp = 1 and
    ``etps=(1, 2, 4, 8)`` searches it. None: etp = tp (Megatron-Core's), ep dividing dp.
    """
    from ...analysis.economics import check_economics

    price_per_hour, region, pue = check_economics(price_per_hour, region, pue)
    if attention_kernel == "unfused":
        fused_attention = False
    ctx = _context(model, cluster, nodes, precision, seq_len, fused_attention, dropout, preset,
                   None, 1, attention_kernel, moe_routing, elementwise, optimizer_dtype, "all",
                   moe_dispatcher)
    global_batch = _check_int("global_batch", global_batch)
    cfg, devices = ctx.cfg, ctx.cl.devices
    check_selective_op(ctx, tuple(recomputes))
    if ep_overlap and not cfg.n_experts:
        raise SpecError(f"ep_overlap=True overlaps expert-parallel exchanges; {cfg.name} has no "
                        "experts")
    max_tp = max_tp or ctx.cl.domain
    pairs = _etp_pairs(cfg, [t for t in _divisors(devices) if t <= max_tp], etps)
    tps = [t for t in _divisors(devices) if t <= max_tp and pairs.get(t)]
    rows = _splits(cfg, devices, tps, global_batch, micro_batches, interleaves, recomputes,
                   zeros, ep_overlap, pp_flushes, pp_overlap, None if etps is None else pairs,
                   moe_dispatcher == "flex")
    if not rows["tp"]:
        _no_split(cfg, devices, global_batch, micro_batches, pp_flushes, etps, max_tp)
    arr = {k: np.asarray(v, dtype=np.float64) for k, v in rows.items()}
    n = len(arr["tp"])
    gt, lp, emb, head, lpe = _per_rank(ctx, rows, arr)
    r = _evaluate(ctx, global_batch, arr["tp"], arr["pp"], arr["dp"], arr["ep"], arr["b"],
                  arr["v"], arr["rc"], arr["zero"], gt, lp, emb, head, dp_overlap, lp_exp=lpe,
                  ep_overlap=ep_overlap, pp_flushes=pp_flushes,
                  pp_overlap=False if pp_overlap is False else None,
                  etp=None if etps is None else arr["etp"])
    cap = ctx.cl.device.memory_capacity_bytes
    fits = mem_fits(r["total"], cap)
    if "weight_store" in r:  # weight streaming: the training state must fit the store too
        store = ctx.cl.device.weight_store
        assert store is not None  # a weight_store row exists only for a part with a store
        fits = fits & mem_fits(r["weight_store"], store.capacity_bytes)
    mf = np.array([model_flops_per_sample(ctx.m, seq_len, micro_batch=int(b),
                                          precision=ctx.prec)[0] for b in arr["b"]]) \
        if cfg.n_experts else model_flops_per_sample(ctx.m, seq_len, precision=ctx.prec)[0]
    mfu = mf * global_batch / (r["step"] * devices * ctx.peak)
    # fastest first; among equally fast splits, the one needing less memory
    order = np.lexsort((r["total"], np.where(fits, r["step"], np.inf) if not include_infeasible
                        else r["step"]))
    if not include_infeasible:
        order = order[fits[order]]
    if top is not None:
        order = order[:top]
    cols = {
        "tp": arr["tp"][order].astype(int), "pp": arr["pp"][order].astype(int),
        "dp": arr["dp"][order].astype(int), "ep": arr["ep"][order].astype(int),
        "etp": arr["etp"][order].astype(int),
        "micro_batch": arr["b"][order].astype(int), "interleave": arr["v"][order].astype(int),
        "recompute": [RECOMPUTE[int(x)] for x in arr["rc"][order].tolist()],
        "zero": arr["zero"][order].astype(int),
        "step_time": r["step"][order], "mfu": mfu[order],
        "tokens_per_s": global_batch * seq_len / r["step"][order],
        "memory": r["total"][order], "bubble": r["bubble"][order],
        "comm": (r["tp_comm"] + r["dp_comm"] + r["pp_comm"] + r["ep_comm"])[order],
        "fits": fits[order],
        # the sends priced behind compute (rl.train's pp_overlap resolved: pp_exposed's rule)
        "pp_overlap": (arr["pp"][order] > 1) & (arr["v"][order] > 1) & (pp_overlap is not False),
    }
    from ...analysis.econ_columns import ECON_COLUMN_UNITS, econ_columns
    from ...analysis.power import power_activity

    act = cols["mfu"] if ctx.preset == "mlsysim" else power_activity(cols["mfu"])
    ec = econ_columns(ctx.cl.device, devices=devices, units_per_s=cols["tokens_per_s"],
                      utilisation=act, other_power_w=ctx.cl.nodes * ctx.cl.node_overhead_w,
                      price_per_hour=price_per_hour, region=region, pue=pue, preset=ctx.preset)
    cols.update(ec.columns())
    return Table(cols, units={"step_time": "s", "memory": "B", "bubble": "s", "comm": "s",
                              "tokens_per_s": "tokens/s", "mfu": FRACTION, **ECON_COLUMN_UNITS},
                 notes=(ec.note(),),
                 show=("tp", "pp", "dp", "ep", *(("etp",) if etps is not None else ()),
                       "micro_batch", "recompute", "zero", "step_time",
                       "mfu", "memory", "fits", "interleave", "tokens_per_s", "bubble", "comm"),
                 title=f"{cfg.name} on {ctx.cl.name} × {ctx.cl.nodes} nodes ({devices} devices), "
                       f"global batch {global_batch} × {seq_len}: {int(fits.sum())} of {n} splits "
                       f"fit")
