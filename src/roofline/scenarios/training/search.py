"""``best_parallelism``: every valid split of a model on a cluster, priced at once, ranked."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _args as A
from ...engine.attention import ATTENTION_KERNELS
from ...engine.memory import fits as mem_fits
from ...engine.table import Table
from ...errors import SpecError
from ...graphs.shard import tp_problem
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


def _splits(cfg: Any, devices: int, tps: list[int], global_batch: int,
            micro_batches: tuple[int, ...], interleaves: tuple[int, ...],
            recomputes: tuple[str, ...], zeros: tuple[int, ...],
            ep_overlap: bool, pp_flushes: int = 1,
            pp_overlap: bool | None = None, flex: bool = False) -> dict[str, list[Any]]:
    """Every valid (tp, pp, dp, ep, b, v, recompute, ZeRO) split, column by column (with
    ``ep_overlap`` only those the combined-1F1B rules allow: ep > 1, no full recompute,
    interleaving when pp > 1; with ``pp_flushes`` k only those whose micro-batches per replica
    split into k equal schedules, as ``train`` requires; with ``pp_overlap=True`` only the
    interleaved ones, pp > 1 and v >= 2, as ``train`` requires; with ``flex`` (the flex
    dispatcher asked for) only those with tp·ep > 1, ``options.check_flex_group``)."""
    out: list[tuple[int, ...]] = []
    add = out.append
    rcs = [RECOMPUTE.index(rc) for rc in recomputes if not (ep_overlap and rc == "full")]
    for t in tps:
        for p in _divisors(cfg.n_layers):
            if devices % (t * p):
                continue
            d = devices // (t * p)
            eps = [e for e in _divisors(d) if cfg.n_experts % e == 0] if cfg.n_experts else [1]
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
                for e in eps:
                    if (ep_overlap and e < 2) or (flex and t * e == 1):
                        continue
                    for v in vs:
                        if (ep_overlap and p > 1 and v < 2) or (pp_overlap and (p == 1 or v < 2)):
                            continue
                        for rc in rcs:
                            for z in zs:
                                add((t, p, d, e, b, v, rc, z))
    cols = list(zip(*out)) if out else [()] * 8
    return {k: list(c) for k, c in zip(("tp", "pp", "dp", "ep", "b", "v", "rc", "zero"), cols)}


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
           pp_overlap=A.optional(A.flag), moe_dispatcher=A.optional(A.choice(*MOE_DISPATCHERS)))
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
                     elementwise: str = "fused", optimizer_dtype: str = "fp32", pp_flushes: int = 1,
                     pp_overlap: bool | None = None, moe_dispatcher: str | None = None) -> Table:
    """Every valid (tp, pp, dp, ep, micro-batch, interleave, recompute, ZeRO) split of ``model``
    on ``cluster``, priced at once; those that do not fit dropped; ranked by step time.

    ``tp`` ranges over divisors of the device count that divide the heads (and the KV heads or
    vice versa) up to ``max_tp`` (default: the scale-up domain); ``pp`` over divisors of the
    layers; ``ep`` over divisors of the experts (MoE only). Returns a ``Table`` (best first).

    Each row also has ``usd_per_million_tokens``, ``energy_per_token`` (J, facility: devices at
    the row's MFU + node overhead, × PUE) and ``carbon_per_million_tokens``, as
    ``rl.train``'s ``economics`` (``price_per_hour``, ``region``, ``pue`` as there; NaN without a
    price or a region, the table's ``notes`` say why). ``attention_kernel``, ``moe_routing``,
    ``moe_dispatcher``, ``elementwise``, ``optimizer_dtype``, ``pp_flushes``, ``ep_overlap`` as
    ``rl.train``'s (with ``ep_overlap`` only the splits its rules allow: ep > 1, no full
    recompute, interleaving when pp > 1; with ``pp_flushes`` only the splits whose micro-batches
    divide into that many schedules; with ``moe_dispatcher="flex"`` only tp·ep > 1).
    ``pp_overlap`` as ``rl.train``'s (None: on where interleaved; False: every split's sends
    blocking; True: only the interleaved splits); the ``pp_overlap`` column says which.
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
    tps = [t for t in _divisors(devices) if t <= max_tp and tp_problem(cfg, t) is None]
    rows = _splits(cfg, devices, tps, global_batch, micro_batches, interleaves, recomputes,
                   zeros, ep_overlap, pp_flushes, pp_overlap, moe_dispatcher == "flex")
    if not rows["tp"]:
        flushes = f" and pp_flushes={pp_flushes}" if pp_flushes > 1 else ""
        raise SpecError(f"no valid split of {cfg.name} on {devices} devices with global_batch="
                        f"{global_batch} and micro-batches {micro_batches}{flushes}")
    arr = {k: np.asarray(v, dtype=np.float64) for k, v in rows.items()}
    n = len(arr["tp"])
    gt = np.empty((n, len(GROUPS)))
    lp, emb, head, lpe = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    keys = sorted(set(zip(rows["tp"], rows["ep"])))  # Python ints (numpy scalars are slow)
    for t, e in keys:
        sel = (arr["tp"] == t) & (arr["ep"] == e)
        bs = sorted({int(x) for x in arr["b"][sel].tolist()})
        times = _group_times(ctx, t, e, bs)
        for b in bs:
            s2 = sel & (arr["b"] == b)
            gt[s2] = times[b]
            tg = _graph(ctx, t, e, b)
            lp[s2], emb[s2], head[s2] = tg.layer_params, tg.embed_params, tg.head_params
            lpe[s2] = tg.layer_expert_params
    r = _evaluate(ctx, global_batch, arr["tp"], arr["pp"], arr["dp"], arr["ep"], arr["b"],
                  arr["v"], arr["rc"], arr["zero"], gt, lp, emb, head, dp_overlap, lp_exp=lpe,
                  ep_overlap=ep_overlap, pp_flushes=pp_flushes,
                  pp_overlap=False if pp_overlap is False else None)
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
                 show=("tp", "pp", "dp", "ep", "micro_batch", "recompute", "zero", "step_time",
                       "mfu", "memory", "fits", "interleave", "tokens_per_s", "bubble", "comm"),
                 title=f"{cfg.name} on {ctx.cl.name} × {ctx.cl.nodes} nodes ({devices} devices), "
                       f"global batch {global_batch} × {seq_len}: {int(fits.sum())} of {n} splits "
                       f"fit")
