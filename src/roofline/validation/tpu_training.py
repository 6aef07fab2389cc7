"""``rl.train`` on Google TPUs against published MaxText runs (data/validation/tpu_training.toml):
the fit of the training matmul fraction of the ``[tpu-trillium]`` table of
data/presets/training.toml on the v6e runs, with its leave-one-source-out errors, and the other
TPU runs judged with the ``[tpu]`` kind's factors (docs/validation/vendors.md, "TPU training").

Each run is pure FSDP over its chips (MaxText ``ici_fsdp_parallelism = -1``: tp = pp = 1,
dp = chips, ZeRO-3). MaxText's remat policies keep some matmul outputs (on device or offloaded
to host memory) and recompute the rest of a layer; rl.train knows no recompute, selective or
full. A run is priced between the two it does know:
``t = t(none) + r · (t(full) − t(none))``, with ``r`` the recomputed share of a layer's forward
FLOPs (``recompute_share``, from the zoo model's shapes and the tensors the policy keeps, as the
source's workload definition lists them): recomputation costs in proportion to the FLOPs it
repeats. Errors are ours / published − 1 in tokens per second per chip (+: predicted too fast).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from .cases import Case, load_cases
from .holdout import FitReport, Refit, golden_bracket, holdout_tables, leave_one_source_out

__all__ = ["cases", "tpu_fit_cases", "tpu_judged_cases", "recompute_share", "layer_flops",
           "tpu_ours", "fits_memory", "fit_tpu", "tpu_holdout", "tpu_fit_table",
           "tpu_case_table", "MATMULS", "ASSUMED", "TABLE"]

#: the layer matmuls of a decoder by their MaxText names (``context``: the attention core)
MATMULS = ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwi", "mlpwo", "context")
#: the TPU training matmul fraction before this fit (assumed: the GPU value, not fitted)
ASSUMED = 0.80
#: the training.toml table the fit sets (its ``devices``: the parts whose runs it is fitted on)
TABLE = "tpu-trillium"


@lru_cache(maxsize=1)
def cases() -> tuple[Case, ...]:
    return load_cases("tpu_training").cases


def _device(c: Case) -> str:
    from ..specs.resolve import cluster as resolve_cluster

    return resolve_cluster(c.scenario["cluster"], 1).device.key


def _table_devices() -> tuple[str, ...]:
    from ..scenarios.training.factors import _factor_tables

    return _factor_tables()[TABLE].devices


def tpu_fit_cases() -> tuple[Case, ...]:
    """The runs on the parts of ``TABLE`` (the fit's cases)."""
    return tuple(c for c in cases() if _device(c) in _table_devices())


def tpu_judged_cases() -> tuple[Case, ...]:
    """The other TPU runs: priced with their kind's table, never fitted on."""
    return tuple(c for c in cases() if _device(c) not in _table_devices())


def _saved(c: Case) -> tuple[str, ...]:
    names = tuple(s.strip() for s in c.scenario["saved"].split(",") if s.strip())
    bad = [n for n in names if n not in MATMULS]
    if bad:
        raise ValueError(f"{c.id}: saved names {bad} are not layer matmuls; allowed: "
                         f"{', '.join(MATMULS)}")
    return names


def layer_flops(model: str, seq_len: int) -> dict[str, float]:
    """Forward FLOPs per token of one decoder layer's matmuls (causal attention core: each
    query sees seq_len / 2 keys on average, QKᵀ and PV)."""
    from ..graphs.model import model as load_model

    cfg = load_model(model).config
    q = cfg.n_heads * cfg.head_dim
    kv = cfg.n_kv_heads * cfg.head_dim
    d, ff = cfg.d_model, cfg.d_ff
    return {"query_proj": 2.0 * d * q, "key_proj": 2.0 * d * kv, "value_proj": 2.0 * d * kv,
            "out_proj": 2.0 * q * d, "mlpwi": 2.0 * d * ff * (2 if cfg.gated_mlp else 1),
            "mlpwo": 2.0 * ff * d, "context": 2.0 * 2.0 * (seq_len / 2) * q}


def recompute_share(model: str, seq_len: int, saved: Sequence[str]) -> float:
    """The share of a layer's forward matmul FLOPs a remat policy keeping ``saved`` repeats."""
    f = layer_flops(model, seq_len)
    return sum(v for k, v in f.items() if k not in saved) / sum(f.values())


def _run(c: Case, recompute: str, gemm_max: float | None) -> Any:
    from ..scenarios.training import train
    from ..scenarios.training.factors import _OVERRIDE, training_factors
    from ..specs.resolve import cluster as resolve_cluster

    sc = c.scenario
    cl = resolve_cluster(sc["cluster"], 1)
    kw = dict(nodes=sc["chips"] // cl.devices_per_node, global_batch=sc["global_batch"],
              seq_len=sc["seq_len"], micro_batch=sc["micro_batch"], tp=1, pp=1,
              dp=sc["chips"], zero=3, recompute=recompute, precision="bf16")
    if gemm_max is None:
        return train(sc["model"], sc["cluster"], **kw)
    if cl.device.key not in _table_devices():
        raise ValueError(f"{c.id}: {cl.device.key} is not a part of [{TABLE}]")
    base = training_factors("tpu", cl.device.key)
    _OVERRIDE[TABLE] = replace(base, gemm=replace(base.gemm, max=gemm_max))
    try:
        return train(sc["model"], sc["cluster"], **kw)
    finally:
        _OVERRIDE.pop(TABLE, None)


def tpu_ours(c: Case, gemm_max: float | None = None) -> float:
    """Our tokens / s / chip for ``c`` (``gemm_max``: the [tpu] training fraction to price it
    with; None: the shipped one)."""
    return _ours(c.id, gemm_max)


@lru_cache(maxsize=4096)
def _ours(cid: str, gemm_max: float | None) -> float:
    c = next(x for x in cases() if x.id == cid)
    sc = c.scenario
    r = recompute_share(sc["model"], sc["seq_len"], _saved(c))
    t0 = _run(c, "none", gemm_max).step_time
    t1 = _run(c, "full", gemm_max).step_time
    t = t0 + r * (t1 - t0)
    return sc["global_batch"] * sc["seq_len"] / t / sc["chips"]


def fits_memory(c: Case) -> bool:
    """Whether our memory model fits the run with full recompute (MaxText offloads activations
    to host memory, which rl.train does not model)."""
    return bool(_run(c, "full", None).feasible)


def _log_errors(values: Mapping[str, float] | None, cs: Sequence[Case]) -> list[float]:
    v = None if values is None else round(values["gemm_max"], 4)
    return [math.log(tpu_ours(c, v) / c.value_si) for c in cs]


def fit_tpu(cs: Sequence[Case] | None = None) -> Refit:
    """The ``TABLE`` training fraction minimising the sum of squared log(ours / published) over
    ``cs``: golden-section search on 0.30-1.00, then the best of the 0.005 grid around it."""
    cs = tpu_fit_cases() if cs is None else cs

    def sse(v: float) -> float:
        return sum(e * e for e in _log_errors({"gemm_max": v}, cs))
    lo, hi = golden_bracket(sse, 0.30, 1.00, 0.004)
    mid = round(round((lo + hi) / 2 / 0.005) * 0.005, 3)
    grid = [round(mid + 0.005 * i, 3) for i in (-2, -1, 0, 1, 2)]
    return Refit(values={"gemm_max": min(grid, key=sse)})


def tpu_holdout() -> FitReport:
    """Shipped value, refit and the fit without each source, with their errors."""
    from ..scenarios.training.factors import training_factors

    shipped = {"gemm_max": training_factors("tpu", _table_devices()[0]).gemm.max}
    return leave_one_source_out(f"training {TABLE}", tpu_fit_cases(), ("gemm_max",), shipped,
                                fit_tpu, _log_errors)


def tpu_fit_table(rep: FitReport | None = None) -> str:
    return holdout_tables(tpu_holdout() if rep is None else rep, lambda _k, v: f"{v:.3f}",
                          labels={"gemm_max": f"[{TABLE}.efficiency.gemm] max"})


def tpu_case_table(rep: FitReport | None = None) -> str:
    """Markdown: every run with its recomputed share, our number (shipped fraction, the fit
    without its source, the assumed 0.80) and the published one; the runs on other parts are
    judged with their kind's table."""
    from ..scenarios.training.factors import factor_table_for

    rep = tpu_holdout() if rep is None else rep
    rows = ["| case | source | table | chips | recomputed share | published tok/s/chip | ours | "
            "error | held out (fit without its source) | with the assumed 0.80 | "
            "fits our memory |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in cases():
        sc = c.scenario
        r = recompute_share(sc["model"], sc["seq_len"], _saved(c))
        mine = tpu_ours(c)
        fitted = c.id in rep.held_out_errors
        held = f"{math.expm1(rep.held_out_errors[c.id]):+.1%}" if fitted else "(judged)"
        before = f"{tpu_ours(c, ASSUMED) / c.value_si - 1:+.1%}" if fitted else "(same)"
        fits = "yes" if fits_memory(c) else "no (host offload)"
        rows.append(f"| {c.id} | {c.source} | {factor_table_for('tpu', _device(c))} | "
                    f"{sc['chips']} | {r:.3f} | {c.value_si:,.0f} | {mine:,.0f} | "
                    f"{mine / c.value_si - 1:+.1%} | {held} | {before} | {fits} |")
    return "\n".join(rows)
