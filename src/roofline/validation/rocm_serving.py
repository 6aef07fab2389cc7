"""``rl.serve`` with AMD's ROCm vLLM on MI300X (data/validation/rocm_serving.toml): the fit of the
``vllm-rocm`` engine profile's per-layer host cost (data/presets/serving.toml) on AMD's published
latency tables, leaving one container release out at a time, and the OCI rows of a 2024 vLLM
judged with it (docs/validation/vendors.md, "ROCm vLLM").

The ``vllm`` profile's 107 µs per layer per step was fitted on 2023-24 vLLM runs (H200 CI, A100,
OCI's MI300X); AMD's 2025 containers run a Llama 3.1 70B decode step on 8 MI300X in 7.7 ms where
that profile adds 8.6 ms of per-layer cost alone. ``vllm-rocm`` keeps every other ``vllm`` factor
(assumed) and fits ``layer_overhead`` only: the rows are one model at batch 1-4, so a per-step
and a per-layer cost cannot be told apart (the per-layer term carries both). Errors are
ours / published − 1 in end-to-end latency (+: predicted too slow).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache

from .cases import Case, load_cases
from .holdout import FitReport, Refit, golden_bracket, holdout_tables, leave_one_source_out

__all__ = ["cases", "rocm_fit_cases", "rocm_judged_cases", "rocm_ours", "fit_rocm",
           "rocm_holdout", "rocm_fit_table", "rocm_case_table", "rocm_figures", "ENGINE"]

ENGINE = "vllm-rocm"  #: the serving.toml profile this fit sets


@lru_cache(maxsize=1)
def cases() -> tuple[Case, ...]:
    return load_cases("rocm_serving").cases


def rocm_fit_cases() -> tuple[Case, ...]:
    return tuple(c for c in cases() if c.scenario["role"] == "fit")


def rocm_judged_cases() -> tuple[Case, ...]:
    return tuple(c for c in cases() if c.scenario["role"] == "judge")


def rocm_ours(c: Case, layer_overhead: float | None = None, engine: str = ENGINE) -> float:
    """Our end-to-end latency (s) of ``c`` with ``engine``'s profile (``layer_overhead`` in s:
    a trial value in its place; None: the shipped one)."""
    return _ours(c.id, layer_overhead, engine)


@lru_cache(maxsize=2048)
def _ours(cid: str, layer_overhead: float | None, engine: str) -> float:
    from ..scenarios.serving import serve
    from ..scenarios.serving.plan import serving_factors
    from ..specs.dtypes import precision as make_precision

    c = next(x for x in cases() if x.id == cid)
    sc = c.scenario
    f = serving_factors(engine)
    if layer_overhead is not None:
        f = replace(f, name=f"{engine}/fit", layer_overhead=layer_overhead)
    p = make_precision(sc["precision"], activations=sc["activations"], kv=sc["kv"])
    s = serve(sc["model"], sc["hardware"], batch=sc["batch"], prompt_len=sc["prompt"],
              output_len=sc["output"], precision=p, tp=sc["tp"], engine=f)
    if not s.feasible:
        raise AssertionError(f"{cid}: does not fit: {s.reason}")
    return float(s.e2e_latency)


def _log_errors(values: Mapping[str, float] | None, cs: Sequence[Case]) -> list[float]:
    v = None if values is None else values["layer_overhead_us"] * 1e-6
    return [math.log(rocm_ours(c, v) / c.value_si) for c in cs]


def fit_rocm(cs: Sequence[Case] | None = None) -> Refit:
    """``layer_overhead`` (µs, to 0.5 µs) minimising the sum of squared log(ours / published)
    over ``cs``: golden-section search on 0-200 µs, then the best of the 0.5 µs grid around
    it."""
    cs = rocm_fit_cases() if cs is None else cs

    def sse(us: float) -> float:
        return sum(e * e for e in _log_errors({"layer_overhead_us": us}, cs))
    lo, hi = golden_bracket(sse, 0.0, 200.0, 0.25)
    mid = round((lo + hi) / 2 * 2) / 2
    return Refit(values={"layer_overhead_us": min((mid - 0.5, mid, mid + 0.5), key=sse)})


def rocm_holdout() -> FitReport:
    """Shipped value, refit and the fit without each release, with their errors."""
    from ..scenarios.serving.plan import serving_factors

    shipped = {"layer_overhead_us": round(serving_factors(ENGINE).layer_overhead * 1e6, 6)}
    return leave_one_source_out(f"serving {ENGINE}", rocm_fit_cases(), ("layer_overhead_us",),
                                shipped, fit_rocm, _log_errors)


def rocm_fit_table(rep: FitReport | None = None) -> str:
    return holdout_tables(rocm_holdout() if rep is None else rep, lambda _k, v: f"{v:.1f} µs",
                          labels={"layer_overhead_us": f"[engine.{ENGINE}] layer_overhead"})


def rocm_case_table(rep: FitReport | None = None) -> str:
    """Markdown: every row with ours (vllm-rocm shipped, the fit without its release, the vllm
    profile) and the published latency."""
    rep = rocm_holdout() if rep is None else rep
    rows = ["| case | source | role | published | ours (vllm-rocm) | error | held out (fit "
            "without its release) | with the vllm profile |",
            "|---|---|---|---:|---:|---:|---:|---:|"]
    for c in cases():
        mine = rocm_ours(c)
        held = (f"{math.expm1(rep.held_out_errors[c.id]):+.1%}" if c.id in rep.held_out_errors
                else "(judged)")
        gen = rocm_ours(c, engine="vllm") / c.value_si - 1
        rows.append(f"| {c.id} | {c.source} | {c.scenario['role']} | {c.value_si:.3f} s | "
                    f"{mine:.3f} s | {mine / c.value_si - 1:+.1%} | {held} | {gen:+.1%} |")
    return "\n".join(rows)


def rocm_figures(rep: FitReport | None = None) -> dict[str, str]:
    """The figures docs/validation/vendors.md's "ROCm vLLM" reading quotes (inline
    ``<!--v:rocm.KEY-->`` markers): the fit rows' errors with the ``vllm`` profile, shipped and
    held out, the fits without each release, and the judged OCI rows' under both profiles."""
    from .holdout import span_pct

    rep = rocm_holdout() if rep is None else rep
    fit, judged = rocm_fit_cases(), rocm_judged_cases()

    def err(cs: Sequence[Case], engine: str = ENGINE) -> list[float]:
        return [rocm_ours(c, engine=engine) / c.value_si - 1 for c in cs]

    fits = [p.fitted_without.values["layer_overhead_us"] for p in rep.per_source]
    return {"rocm.fit_with_vllm": span_pct(err(fit, "vllm"), signed=False),
            "rocm.fit": span_pct(err(fit)),
            "rocm.held_out": span_pct([math.expm1(rep.held_out_errors[c.id]) for c in fit]),
            "rocm.fits_without": f"{min(fits):.1f}–{max(fits):.1f} µs",
            "rocm.oci": span_pct(err(judged), signed=False),
            "rocm.oci_with_vllm": span_pct(err(judged, "vllm"))}
