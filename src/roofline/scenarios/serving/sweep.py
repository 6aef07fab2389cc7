"""``serve_sweep``: decode-step time and memory fit over hardware × precision × batch × context,
vectorised (one engine call per precision)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _args as A
from ..._text import a_family
from ...analysis.power import power_activity
from ...engine.core import time_model
from ...engine.lines import max_at, op_lines
from ...engine.memory import fits as mem_fits
from ...engine.memory import resident_weights
from ...engine.presets import check_preset
from ...errors import SpecError
from ...graphs.resolve import model as resolve_model
from ...specs.dtypes import PRECISION_ARG, Precision
from ...specs.dtypes import precision as make_precision
from ...specs.resolve import hardware as resolve_hardware
from . import args as R
from . import plan as sp
from .comm import allreduce_times


@A.checked(model=A.anything, hardware=A.anything, batch=R.BATCHES, context=R.CONTEXTS,
           precision=A.seq(PRECISION_ARG, scalar=True, what="dtype names or Precisions"),
           kv_precision=R.OPT_DTYPE, weight_precision=R.OPT_DTYPE,
           group_size=A.optional(A.count()), tp=R.DEGREE, preset=A.text, engine=R.ENGINE,
           kv_window=R.KV_WINDOW, price_per_hour=A.anything, region=A.anything,
           pue=A.anything, client=A.flag)
def serve_sweep(model: Any, hardware: Any, *, batch: Any, context: Any,
                precision: Any = ("bf16",), kv_precision: str | None = None,
                weight_precision: str | None = None, group_size: int | None = None, tp: int = 1,
                preset: str = "default", engine: str = "trtllm",
                kv_window: str = "ring", price_per_hour: float | None = None,
                region: str | None = None, pue: float | None = None,
                client: bool = False) -> dict[str, np.ndarray]:
    """Decode-step time (TPOT at a context), decode throughput and memory fit over a grid
    hardware × precision × batch × context, vectorised (one engine call per precision).

    Returns arrays shaped [hardware, precision, batch, context]: ``tpot`` (s), ``tokens_per_s``
    (= batch / tpot, per deployment), ``fits`` (weights + KV + workspace ≤ capacity) and
    ``kv_cache_bytes`` (per device; sliding-window layers per ``kv_window``, as in ``serve``),
    plus the axes. ``weight_precision`` / ``group_size``: weight-only quantisation applied to
    every precision of the grid, as ``serve`` takes them. Dense models only (MoE graphs are
    built per batch; use ``serve``). A context past the model's: NaN, ``fits`` False.

    Economics per point (``analysis.econ_columns``; ``price_per_hour``, ``region``, ``pue`` as in
    ``serve``): ``utilisation`` (of the binding resource: the larger of MBU = step bytes /
    (device time × bandwidth), as ``serve`` reports it, and MFU = step FLOPs / (TPOT × peak);
    ``power_activity``: the power model's min(1, w_c·MFU + w_m·MBU), analysis/power.py),
    ``usd_per_million_tokens`` (NaN without a price), ``energy_per_token`` (J, facility) and
    ``carbon_per_million_tokens`` (kg, NaN without a region); ``price_per_hour`` and
    ``economics_note`` per hardware say which price and grid were used, or why none.

    ``client=True``: each step as a client sees it — the step's ``batch`` output tokens out
    (ids over the host link, text through the serving stack: engine/client.py,
    ``decode_step_client``) added to ``tpot``; throughput and MFU follow, MBU stays device-side
    (as ``serve(client=True)``).
    """
    from ...analysis.economics import check_economics

    price_per_hour, region, pue = check_economics(price_per_hour, region, pue)
    kv_window = sp.check_kv_window(kv_window)
    m = resolve_model(model)
    cfg = m.config
    if cfg is None or not cfg.generates:
        raise SpecError(f"serve_sweep needs a decoder LLM or an encoder-decoder; {m.name} is "
                        f"{a_family(m.family)} model")
    if cfg.n_experts:
        raise SpecError(f"serve_sweep prices dense models; {m.name} is a mixture of experts "
                        "(its weight traffic depends on the batch): call serve per batch")
    preset = check_preset(preset)
    if preset == "mlsysim":
        raise SpecError("serve_sweep supports preset 'default' or 'bound'")
    hws = [resolve_hardware(h) for h in (hardware if isinstance(hardware, list | tuple)
                                         else [hardware])]
    precs = [precision] if isinstance(precision, str | Precision) else list(precision)
    Bs = np.asarray(batch, dtype=np.float64).ravel()
    Ss = np.asarray(context, dtype=np.float64).ravel()
    if (Bs < 1).any() or (Ss < 1).any():
        raise SpecError("batch and context values must be >= 1")
    factors = sp.NEUTRAL if preset == "bound" else sp.serving_factors(engine)
    out_t = np.full((len(hws), len(precs), len(Bs), len(Ss)), np.nan)
    fits = np.zeros(out_t.shape, dtype=bool)
    kvb = np.zeros(out_t.shape)
    util = np.full(out_t.shape, np.nan)
    act = np.full(out_t.shape, np.nan)  # power activity (analysis/power.py)
    for j, pr in enumerate(precs):
        p = make_precision(pr, kv=kv_precision, weights=weight_precision, group_size=group_size)
        plan = sp.device_plan(cfg, p, tp=tp, pp=1, fuse=factors.fuse, fused_attention=True,
                              weight_format=m.weight_format,
                              kv_per_query_head=factors.kv_per_query_head)
        c1 = plan.graph("decode", context=1)
        c2 = plan.graph("decode", context=2)
        g = sp.concat([c1.graph, c2.graph])  # one time model prices both contexts
        ok_hw = [i for i, h in enumerate(hws) if h.has(p.compute)]
        if not ok_hw:
            continue
        hsel = [hws[i] for i in ok_hw]
        effs = [sp.efficiency(h, preset, factors, p.compute) for h in hsel]
        u = len(c1.graph)
        W = np.where(np.isfinite(c1.window), c1.window, np.inf)
        cnt = c1.counts
        t_dev = np.empty((len(hsel), len(Bs), len(Ss)))
        work = np.empty((2, len(hsel), len(Bs), len(Ss)))  # bytes, flops per device and step
        for i, (h, e) in enumerate(zip(hsel, effs)):
            # the time model's per-op lines in the context S, as serve sums them
            tm = time_model(g, h, e)
            ot = tm.ops(Bs)  # [b, 2u]
            ln = op_lines(tm.select(ot, slice(0, u)), tm.select(ot, slice(u, 2 * u)), tm.gap,
                          tm.sync, tm.has[:u], rows=("time", "bytes", "flops"))
            dep = ln.depends
            S = np.minimum(Ss[:, None], W[dep])  # [s, ud]: windowed ops stop growing at W
            for k, (a, sl) in enumerate((ln.time, ln.bytes, ln.flops)):
                t_in = max_at(a[..., ~dep], sl[..., ~dep], 1.0) @ cnt[~dep]  # [b]
                t_d = max_at(a[:, :, None, dep], sl[:, :, None, dep], S) @ cnt[dep]  # [b, s]
                if k == 0:
                    t_dev[i] = t_in[:, None] + t_d
                else:
                    work[k - 1, i] = t_in[:, None] + t_d
        n_ar = (3 if cfg.arch == "seq2seq" else 2) * plan.cfg.n_layers + 1  # + cross-attention
        comm = np.array([n_ar * allreduce_times(
            Bs * cfg.d_model * p.link_bytes, tp, h, factors) for h in hsel])
        t = t_dev + comm[..., None] + sp.host_step(factors, plan.cfg.n_layers, Bs[:, None])
        if client:
            from ...engine.client import decode_step_client

            t = t + np.array([decode_step_client(Bs, h) for h in hsel])[:, :, None]
        out_t[ok_hw, j] = t
        kv = Bs[:, None] * plan.kv_bytes_per_sequence(Ss, kv_window)[None, :]
        kvb[ok_hw, j] = kv
        ws = np.array([e.workspace for e in effs])[:, None, None]
        cap = np.array([h.memory_capacity_bytes for h in hsel])[:, None, None]
        held = [resident_weights(c1.graph, h) for h in hsel]  # weight streaming: one op's
        w_on = np.array([w for w, _ in held])[:, None, None]
        store_ok = np.array([not why for _, why in held])[:, None, None]
        fits[ok_hw, j] = mem_fits(w_on + kv[None] + ws, cap) & store_ok
        bw = np.array([h.memory_bytes_per_s for h in hsel])[:, None, None]
        peak = np.array([h.peak_flops_per_s.get(p.compute, np.nan) for h in hsel])[:, None, None]
        with np.errstate(divide="ignore", invalid="ignore"):  # as serve: MBU over device time
            mbu, mfu = work[0] / (t_dev * bw), work[1] / (t * peak)
            util[ok_hw, j] = np.fmax(mbu, mfu)
            act[ok_hw, j] = power_activity(mfu, mbu)
    tps = Bs.reshape(1, 1, -1, 1) / _past_context(cfg, Ss, out_t, util, act, fits)
    econ = _economics(hws, tp, tps, act, price_per_hour, region, pue, preset)
    return {"tpot": out_t, "tokens_per_s": tps, "fits": fits,
            "kv_cache_bytes": kvb, "utilisation": util, "power_activity": act, **econ,
            "hardware": np.array([h.name for h in hws]),
            "precision": np.array([str(x) for x in precs]), "batch": Bs, "context": Ss}


def _economics(hws: list[Any], tp: int, tps: np.ndarray, act: np.ndarray,
               price_per_hour: float | None, region: str | None, pue: float | None,
               preset: str) -> dict[str, np.ndarray]:
    """Cost, energy and carbon arrays [hardware, precision, batch, context] of the sweep."""
    from ...analysis.econ_columns import econ_columns

    out = {k: np.full(tps.shape, np.nan) for k in
           ("usd_per_million_tokens", "energy_per_token", "carbon_per_million_tokens")}
    price, notes = np.full(len(hws), np.nan), []
    for i, h in enumerate(hws):
        ec = econ_columns(h, devices=tp, units_per_s=tps[i], utilisation=act[i],
                          price_per_hour=price_per_hour, region=region, pue=pue, preset=preset)
        for k, v in ec.columns().items():
            out[k][i] = v
        price[i] = np.nan if ec.usd_per_device_hour is None else ec.usd_per_device_hour
        notes.append(ec.note())
    return {**out, "price_per_hour": price, "economics_note": np.array(notes)}


def _past_context(cfg: Any, contexts: np.ndarray, *arrays: np.ndarray) -> np.ndarray:
    """A decode step past the model's ``max_position_embeddings`` cannot run (serve's rule):
    NaN in the float ``arrays``, False in the boolean ones, at those contexts (in place);
    returns the first (the TPOT)."""
    if cfg.max_positions:
        over = contexts > cfg.max_positions
        for a in arrays:
            a[..., over] = False if a.dtype == bool else np.nan
    return arrays[0]
