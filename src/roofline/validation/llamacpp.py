"""The llama.cpp / Ollama engine profile (data/presets/serving.toml [engine.llamacpp]) against
published batch-1 decode rates (data/validation/llamacpp.toml): the fit of its two factors, the
in-sample and leave-one-source-out errors, and the tables of docs/validation/llamacpp.md.

The prediction is ``rl.serve(model, hardware, batch=1, prompt_len=1, output_len=n,
precision=<GGUF type>, engine="llamacpp")``'s decode rate, 1 / TPOT. The two fitted factors:
``memory_max`` (the fraction of the memory bandwidth ggml's matrix-vector kernels stream weights
at) and ``layer_overhead`` (host and launch time per layer per token, additive in the TPOT).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from .cases import Case, load_cases
from .holdout import FitReport, Refit, holdout_tables, leave_one_source_out

__all__ = ["cases", "fitted_cases", "fit_llamacpp", "llamacpp_holdout", "case_table",
           "holdout_table", "MEMORY_GRID", "OVERHEAD_GRID_US"]

MEMORY_GRID = tuple(round(0.40 + 0.025 * i, 3) for i in range(23))  # 0.40 … 0.95
OVERHEAD_GRID_US = tuple(float(x) for x in range(0, 301, 5))  # 0 … 300 µs per layer


@lru_cache(maxsize=1)
def cases() -> tuple[Case, ...]:
    return load_cases("llamacpp").cases


def fitted_cases() -> tuple[Case, ...]:
    """The cases the fit uses (known outliers apart)."""
    return tuple(c for c in cases() if not c.known_outlier)


def _factors(memory_max: float | None, layer_overhead: float) -> Any:
    from ..scenarios.serving.plan import serving_factors

    base = serving_factors("llamacpp")
    patch = base.patch
    if memory_max is not None and patch is not None:
        groups = tuple((g, (("max", memory_max),) if g == "memory" else fv)
                       for g, fv in patch.groups)
        patch = replace(patch, groups=groups)
    return replace(base, patch=patch, layer_overhead=layer_overhead)


def _tpot(c: Case, factors: Any) -> float:
    from ..scenarios.serving import serve

    sc = c.scenario
    return serve(sc["model"], sc["hardware"], batch=1, prompt_len=1, output_len=sc["output"],
                 precision=sc["precision"], engine=factors).tpot


@lru_cache(maxsize=4096)
def _base_tpot(cid: str, memory_max: float | None) -> tuple[float, int]:
    """TPOT without the per-layer term and the layer count (the term is additive)."""
    from ..graphs.resolve import model as resolve_model

    c = next(x for x in cases() if x.id == cid)
    layers = resolve_model(c.scenario["model"]).config.n_layers
    return _tpot(c, _factors(memory_max, 0.0)), layers


def predict(c: Case, values: Mapping[str, float] | None = None) -> float:
    """Our decode tokens/s for ``c`` (the shipped profile, or ``values``)."""
    from ..scenarios.serving.plan import serving_factors

    if values is None:
        return 1.0 / _tpot(c, serving_factors("llamacpp"))
    t0, layers = _base_tpot(c.id, values["memory_max"])
    return 1.0 / (t0 + layers * values["layer_overhead"])


def _log_errors(values: Mapping[str, float] | None, cs: Sequence[Case]) -> list[float]:
    return [math.log(predict(c, values) / c.value_si) for c in cs]


def fit_llamacpp(cs: Sequence[Case] | None = None) -> Refit:
    """Grid search of (memory_max, layer_overhead) minimising the RMS of log(ours/measured)."""
    cs = fitted_cases() if cs is None else cs
    best: tuple[float, float, float] | None = None
    for mm in MEMORY_GRID:
        base = [(_base_tpot(c.id, mm), c.value_si) for c in cs]
        for lo_us in OVERHEAD_GRID_US:
            lo = lo_us * 1e-6
            sse = sum(math.log(1.0 / (t0 + n * lo) / v) ** 2 for (t0, n), v in base)
            if best is None or sse < best[0]:
                best = (sse, mm, lo)
    assert best is not None
    return Refit(values={"memory_max": best[1], "layer_overhead": best[2]})


def _shipped() -> dict[str, float]:
    from ..scenarios.serving.plan import serving_factors

    f = serving_factors("llamacpp")
    mem = dict(dict(f.patch.groups)["memory"]) if f.patch is not None else {}
    return {"memory_max": float(mem["max"]), "layer_overhead": f.layer_overhead}


def llamacpp_holdout() -> FitReport:
    return leave_one_source_out("llamacpp", fitted_cases(), ("memory_max", "layer_overhead"),
                                _shipped(), fit_llamacpp, _log_errors)


def holdout_table(rep: FitReport | None = None) -> str:
    rep = llamacpp_holdout() if rep is None else rep

    def fmt(k: str, v: float) -> str:
        return f"{v * 1e6:.0f} µs" if k == "layer_overhead" else f"{v:.3f}"
    return holdout_tables(rep, fmt)


def case_table(rep: FitReport | None = None) -> str:
    """Every case: published, ours (shipped profile), error, the held-out error."""
    rep = llamacpp_holdout() if rep is None else rep
    lines = ["| case | precision | published [tok/s] | ours [tok/s] | error | held out | "
             "source |", "|---|---|---:|---:|---:|---:|---|"]
    for c in cases():
        ours = predict(c)
        held = rep.held_out_errors.get(c.id)
        h = "outlier" if held is None else f"{math.expm1(held):+.1%}"
        lines.append(f"| {c.id} | {c.scenario['precision']} | {c.value_si:,.2f} | {ours:,.2f} "
                     f"| {ours / c.value_si - 1:+.1%} | {h} | {c.source} |")
    return "\n".join(lines)
