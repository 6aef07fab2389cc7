"""``serve_sweep``: decode-step time and memory fit over hardware × precision × batch × context,
vectorised (one engine call per precision)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import _args as A
from ...engine.core import time_model
from ...engine.lines import max_at, op_lines
from ...engine.memory import fits as mem_fits
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
           kv_window=R.KV_WINDOW)
def serve_sweep(model: Any, hardware: Any, *, batch: Any, context: Any,
                precision: Any = ("bf16",), kv_precision: str | None = None,
                weight_precision: str | None = None, group_size: int | None = None, tp: int = 1,
                preset: str = "default", engine: str = "trtllm",
                kv_window: str = "ring") -> dict[str, np.ndarray]:
    """Decode-step time (TPOT at a context), decode throughput and memory fit over a grid
    hardware × precision × batch × context, vectorised (one engine call per precision).

    Returns arrays shaped [hardware, precision, batch, context]: ``tpot`` (s), ``tokens_per_s``
    (= batch / tpot, per deployment), ``fits`` (weights + KV + workspace ≤ capacity) and
    ``kv_cache_bytes`` (per device; sliding-window layers per ``kv_window``, as in ``serve``),
    plus the axes. ``weight_precision`` / ``group_size``: weight-only quantisation applied to
    every precision of the grid, as ``serve`` takes them. Dense models only (MoE graphs are
    built per batch; use ``serve``).
    """
    kv_window = sp.check_kv_window(kv_window)
    m = resolve_model(model)
    cfg = m.config
    if cfg is None or cfg.arch != "decoder":
        raise SpecError(f"serve_sweep needs a decoder LLM; {m.name} is a {m.family} model")
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
    for j, pr in enumerate(precs):
        p = make_precision(pr, kv=kv_precision, weights=weight_precision, group_size=group_size)
        plan = sp.device_plan(cfg, p, tp=tp, pp=1, fuse=factors.fuse, fused_attention=True,
                              weight_format=m.weight_format)
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
        for i, (h, e) in enumerate(zip(hsel, effs)):
            # the time model's per-op lines in the context S, as serve sums them
            tm = time_model(g, h, e)
            ot = tm.ops(Bs)  # [b, 2u]
            ln = op_lines(tm.select(ot, slice(0, u)), tm.select(ot, slice(u, 2 * u)), tm.gap,
                          tm.sync, tm.has[:u], rows=("time",))
            a, sl = ln.time  # [k, b, u]
            dep = ln.depends
            t_in = max_at(a[..., ~dep], sl[..., ~dep], 1.0) @ cnt[~dep]  # [b]
            S = np.minimum(Ss[:, None], W[dep])  # [s, ud]: windowed ops stop growing at W
            t_d = max_at(a[:, :, None, dep], sl[:, :, None, dep], S) @ cnt[dep]  # [b, s]
            t_dev[i] = t_in[:, None] + t_d
        comm = np.array([(2 * plan.cfg.n_layers + 1) * allreduce_times(
            Bs * cfg.d_model * p.act_bytes, tp, h, factors) for h in hsel])
        t = t_dev + comm[..., None] + factors.step_overhead + \
            factors.layer_overhead * plan.cfg.n_layers
        out_t[ok_hw, j] = t
        kv = Bs[:, None] * plan.kv_bytes_per_sequence(Ss, kv_window)[None, :]
        kvb[ok_hw, j] = kv
        ws = np.array([e.workspace for e in effs])[:, None, None]
        cap = np.array([h.memory_capacity_bytes for h in hsel])[:, None, None]
        fits[ok_hw, j] = mem_fits((c1.graph.weight_footprint_bytes + kv)[None] + ws, cap)
    return {"tpot": out_t, "tokens_per_s": Bs.reshape(1, 1, -1, 1) / out_t, "fits": fits,
            "kv_cache_bytes": kvb, "hardware": np.array([h.name for h in hws]),
            "precision": np.array([str(x) for x in precs]), "batch": Bs, "context": Ss}
