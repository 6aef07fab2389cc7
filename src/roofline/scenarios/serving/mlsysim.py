"""``serve(preset="mlsysim")``: mlsysim 0.1.1's ServingModel conventions
(docs/mlsysim-conventions.md §4)."""

from __future__ import annotations

import math
from typing import Any

from ...graphs.model import Model
from ...specs.dtypes import DTYPE_BYTES, Precision
from ...specs.hardware import Hardware
from .result import ServeResult


def _serve_mlsysim(m: Model, hw: Hardware, base: dict[str, Any], B: int, P: int, n: int,
                   p: Precision) -> ServeResult:
    """mlsysim 0.1.1 ServingModel.solve (docs/mlsysim-conventions.md §4), seq_len = prompt_len."""
    from ...engine.mlsysim import conventions, mlsysim_device, mlsysim_model
    from ...engine.solve import solve

    cfg = m.config
    assert cfg is not None
    c = conventions()
    dev = mlsysim_device(hw)
    agg = mlsysim_model(m)
    peak = dev.peak(p.compute, hw)
    if math.isnan(peak):
        peak = hw.peak(p.compute)
    bpp = DTYPE_BYTES[p.weights]
    L, N = cfg.n_layers, cfg.n_heads
    hd = cfg.d_model // N
    S = P
    pre_flops = 2 * agg.params * S * B + 4 * L * N * hd * S * S * B
    ttft = pre_flops / (peak * c["efficiency"]) + dev.dispatch_tax
    kv = 2 * L * cfg.n_kv_heads * hd * S * B * bpp
    W = agg.params * bpp
    itl = (W + kv) / dev.bandwidth + L * c["layer_tax"]
    e2e = ttft + (n - 1) * itl
    cap = hw.memory_capacity_bytes
    feasible = W + kv <= cap
    tps = B * n / e2e
    dec = solve(m, hw, batch=B, precision=p, preset="mlsysim", phase="decode")
    return ServeResult(
        **base, ttft=ttft, tpot=itl, e2e_latency=e2e, tokens_per_s=tps,
        tokens_per_s_per_device=tps, steady_tpot=itl, steady_tokens_per_s=B / itl,
        mbu=(W + kv) / (itl * dev.bandwidth), mfu=(pre_flops + (n - 1) * 2 * agg.params * B) /
        (e2e * peak), kv_cache_bytes=kv, memory_breakdown={"weights": W, "kv_cache": kv},
        memory_capacity=cap, max_batch=int((cap - W) // (kv / B)) if kv else 0,
        feasible=feasible, reason="" if feasible else "weights + KV exceed capacity",
        phase_seconds={"compute (TTFT)": ttft, "memory (ITL)": (n - 1) * itl},
        notes=(("mlsysim ServingModel conventions: TTFT compute-only with non-causal S² "
               "attention, ITL memory-only with the whole KV cache read each step"),),
        _prefill=None, _decode=dec)
