"""``rl.train`` against published training runs on parts that are not NVIDIA's
(data/validation/vendor_training.toml): AMD MI325X runs of AMD's Primus / Megatron-LM stack.
Nothing is fitted on them: each run is priced with the default preset's factors as shipped (on
CDNA 3, ``[gpu-cdna3]`` of data/presets/training.toml: a training matmul fraction derived from
the CDNA 3 kernel fraction, never fitted on a training run), by the same code as the H100 runs
(``training_runs.predict_run``: a knob a row does not give is searched). Errors are ours /
published − 1 in tokens/s/GPU (+: predicted too fast). docs/validation/training-runs.md,
"Other vendors".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from .cases import Case, load_cases
from .holdout import FitReport, Refit, golden_bracket, holdout_tables, leave_one_source_out

__all__ = ["vendor_training_cases", "vendor_rows", "vendor_table", "vendor_summary", "vendor_ours",
           "fit_cdna3", "cdna3_holdout", "cdna3_fit_table", "vendor_figures", "TABLE"]

#: the training.toml table a CDNA 3 run is priced with, and the one the fit moves
TABLE = "gpu-cdna3"


@lru_cache(maxsize=1)
def vendor_training_cases() -> tuple[Case, ...]:
    """The published runs (load_cases refuses a case without a source or its table and row)."""
    return load_cases("vendor_training").cases


def vendor_rows() -> list[dict[str, Any]]:
    """Each case with our tokens/s/GPU, the published one, the error and the searched knobs."""
    from .training_runs import predict_run

    out = []
    for c in vendor_training_cases():
        r, searched = predict_run(c)
        ours = r.tokens_per_s / r.devices
        out.append({"id": c.id, "source": c.source, "ours": ours, "published": c.value_si,
                    "error": ours / c.value_si - 1.0, "searched": searched, "result": r,
                    "device": r.device if hasattr(r, "device") else "",
                    "recompute_layers": c.scenario.get("recompute_layers")})
    return out


def vendor_summary(rs: list[dict[str, Any]]) -> dict[str, float]:
    """Median and largest |error| and the geometric-mean ratio ours / published (the H100
    runs' ``training_runs.summary``; no run here is a known outlier)."""
    from .training_runs import summary

    return summary([{**x, "outlier": False} for x in rs])


def vendor_table(rs: list[dict[str, Any]] | None = None) -> str:
    """The generated table of docs/validation/training-runs.md, "Other vendors"."""
    rs = vendor_rows() if rs is None else rs
    lines = ["| case | precision | split t·p·d | knobs | published | ours | error | source |",
             "|---|---|---|---|---:|---:|---:|---|"]
    for x in rs:
        r = x["result"]
        rc = r.recompute if x.get("recompute_layers") is None else \
            f"{r.recompute} {x['recompute_layers']} of {max(r.pp_stages)} layers"
        knobs = f"b={r.micro_batch}, {rc}, ZeRO {r.zero}"
        if x["searched"]:
            knobs += " (" + ", ".join(sorted(x["searched"])) + " searched)"
        mark = "" if r.feasible else " (over the zoo part's memory)"
        lines.append(f"| {x['id']}{mark} | {r.precision} | {r.tp}·{r.pp}·{r.dp} | {knobs} "
                     f"| {x['published']:,.0f} tok/s/GPU | {x['ours']:,.0f} tok/s/GPU "
                     f"| {x['error']:+.1%} | {x['source']} |")
    s = vendor_summary(rs)
    lines += ["", f"**{s['n']} runs: median |error| {s['median_abs_error']:.1%}, largest "
                  f"{s['max_abs_error']:.1%}, geometric-mean ratio ours/published "
                  f"{s['geomean_ratio']:.3f}** (nothing fitted on them)."]
    return "\n".join(lines)


# -- a CDNA 3 training matmul fraction fitted on these runs (judged, not shipped) ------------

@lru_cache(maxsize=32)
def _knobs(cid: str) -> dict[str, Any]:
    """The train() arguments of case ``cid``, its searched knobs fixed where the shipped factors
    put them (a fit then moves only the matmul fraction)."""
    from .training_runs import _FIXED, predict_run

    c = next(x for x in vendor_training_cases() if x.id == cid)
    r, _ = predict_run(c)
    sc = dict(c.scenario)
    kw = dict(nodes=sc["gpus"] // 8, global_batch=sc["global_batch"], seq_len=sc["seq_len"],
              micro_batch=r.micro_batch, tp=r.tp, pp=r.pp, dp=r.dp, interleave=r.interleave,
              recompute=r.recompute, precision=sc["precision"])
    kw.update({k: sc[k] for k in _FIXED if k in sc})
    return {"model": sc["model"], "cluster": sc["cluster"], **kw}


@lru_cache(maxsize=512)
def _ours(cid: str, gemm_max: float | None) -> float:
    from dataclasses import replace

    from ..scenarios.training import train
    from ..scenarios.training.factors import _OVERRIDE, training_factors

    kw = dict(_knobs(cid))
    model, cl = kw.pop("model"), kw.pop("cluster")
    if gemm_max is None:
        r = train(model, cl, **kw)
    else:
        base = training_factors("gpu", "mi300x")
        _OVERRIDE[TABLE] = replace(base, gemm=replace(base.gemm, max=gemm_max))
        try:
            r = train(model, cl, **kw)
        finally:
            _OVERRIDE.pop(TABLE, None)
    return r.tokens_per_s / r.devices


def vendor_ours(c: Case, gemm_max: float | None = None) -> float:
    """Our tokens/s/GPU for ``c`` at its fixed knobs (``gemm_max``: the ``TABLE`` training
    matmul fraction to price it with; None: the shipped one)."""
    return _ours(c.id, gemm_max)


def _log_errors(values: Mapping[str, float] | None, cs: Sequence[Case]) -> list[float]:
    v = None if values is None else values["gemm_max"]
    return [math.log(_ours(c.id, v) / c.value_si) for c in cs]


def fit_cdna3(cs: Sequence[Case] | None = None) -> Refit:
    """The ``TABLE`` training fraction (at the MI300X's clock; the MI325X runs at its clock
    ratio, Efficiency.clock) minimising the sum of squared log(ours / published) over ``cs``:
    golden-section search on 0.30 up to the largest fraction no part's clock ratio lifts above
    the peak (``_cap``), then the best of the 0.005 grid around it."""
    cs = vendor_training_cases() if cs is None else cs

    def sse(v: float) -> float:
        return sum(e * e for e in _log_errors({"gemm_max": v}, cs))
    lo, hi = golden_bracket(sse, 0.30, _cap(), 0.004)
    mid = round(round((lo + hi) / 2 / 0.005) * 0.005, 3)
    grid = [round(mid + 0.005 * i, 3) for i in (-2, -1, 0, 1, 2)]
    return Refit(values={"gemm_max": min(grid, key=sse)})


def _cap() -> float:
    """The largest training fraction that no CDNA 3 part's clock ratio prices above its peak:
    1 / the largest ratio (max x ratio <= 1, as Efficiency refuses otherwise)."""
    from ..engine.presets import efficiency_for
    from ..specs.hardware import hardware

    rs = [r for p in ("mi300x", "mi325x") for _, r in efficiency_for(hardware(p), "default").clock]
    return min(1.0, 1.0 / max(rs, default=1.0))


def cdna3_holdout() -> FitReport:
    """The shipped (derived) fraction, the refit on every run and the fit without each source,
    with their errors."""
    from ..scenarios.training.factors import training_factors

    shipped = {"gemm_max": training_factors("gpu", "mi300x").gemm.max}
    return leave_one_source_out(f"training {TABLE}", vendor_training_cases(), ("gemm_max",),
                                shipped, fit_cdna3, _log_errors)


def cdna3_fit_table(rep: FitReport | None = None) -> str:
    return holdout_tables(cdna3_holdout() if rep is None else rep, lambda _k, v: f"{v:.3f}",
                          labels={"gemm_max": f"[{TABLE}.efficiency.gemm] max"})


def _whatif_none() -> tuple[float, bool]:
    """(error, feasible) of the 64-GPU 70B BF16 row priced without recompute (shipped factors)."""
    from dataclasses import replace

    from .training_runs import predict_run

    c = next(x for x in vendor_training_cases() if x.id == "MI325X Llama 3.1 70B BF16, 64 GPUs")
    sc = {k: v for k, v in c.scenario.items() if k != "recompute_layers"} | {"recompute": "none"}
    r, _ = predict_run(replace(c, scenario=sc))
    return r.tokens_per_s / r.devices / c.value_si - 1.0, r.feasible


def _whatif_all_layers(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as priced before session 27: each row with ``recompute_layers`` at every layer
    of its stage (plain "full", the MI300X recipes' 80 of 80) instead of the MI325X recipes'."""
    from dataclasses import replace

    from .training_runs import predict_run

    out = []
    for c, x in zip(vendor_training_cases(), rs, strict=True):
        if "recompute_layers" not in c.scenario:
            out.append(x)
            continue
        sc = {k: v for k, v in c.scenario.items() if k != "recompute_layers"}
        r, _ = predict_run(replace(c, scenario=sc))
        ours = r.tokens_per_s / r.devices
        out.append({**x, "ours": ours, "error": ours / c.value_si - 1.0, "result": r})
    return out


def _ga_sensitivity() -> float:
    """The largest |relative change| of our tokens/s/GPU over the runs when each step is one
    micro-batch per rank instead of the row's global batch (the batch the table leaves out)."""
    from dataclasses import replace

    from .training_runs import predict_run

    worst = 0.0
    for c in vendor_training_cases():
        sc = dict(c.scenario)
        a, _ = predict_run(c)
        sc["global_batch"] = sc["micro_batch"] * a.dp
        b, _ = predict_run(replace(c, scenario=sc))
        worst = max(worst, abs(b.tokens_per_s / a.tokens_per_s - 1.0))
    return worst


def vendor_figures(rs: list[dict[str, Any]] | None = None,
                   rep: FitReport | None = None) -> dict[str, str]:
    """The figures the "Other vendors" prose of docs/validation/training-runs.md quotes (inline
    ``<!--v:KEY-->`` markers): each run's error as shipped (``tr.v.err.<id slug>``), their
    span and median, the no-recompute what-if, the implied hardware FLOP utilisation of the
    70B BF16 row, and the fit's values and errors in sample and held out."""
    from .holdout import fmt_pct, span_pct
    from .training_runs import _slug

    rs = vendor_rows() if rs is None else rs
    rep = cdna3_holdout() if rep is None else rep

    s = vendor_summary(rs)
    out = {f"tr.v.err.{_slug(x['id'])}": fmt_pct(x["error"], 1) for x in rs}
    out |= {"tr.v.n": str(s["n"]), "tr.v.span": span_pct([x["error"] for x in rs]),
            "tr.v.median": fmt_pct(s["median_abs_error"], 1, sign=False),
            "tr.v.geo": f"{s['geomean_ratio']:.2f}"}
    e, feasible = _whatif_none()
    out["tr.v.none70b"] = fmt_pct(e, 1) + ("" if feasible else " (over the part's memory)")
    alls = _whatif_all_layers(rs)
    s80 = vendor_summary(alls)
    out |= {f"tr.v.all.{_slug(x['id'])}": fmt_pct(x["error"], 1) for x in alls
            if x.get("recompute_layers") is not None}
    out |= {"tr.v.all.span": span_pct([x["error"] for x in alls]),
            "tr.v.all.median": fmt_pct(s80["median_abs_error"], 1, sign=False),
            "tr.v.all.geo": f"{s80['geomean_ratio']:.2f}"}
    by = {x["id"]: x for x in rs}
    r70, r70n = by["MI325X Llama 3.1 70B BF16, 64 GPUs"], by["MI325X Llama 3.1 70B BF16, 8 GPUs"]
    out["tr.v.gap70b"] = fmt_pct(r70["published"] / r70n["published"] - 1.0, 1)
    out["tr.v.ga"] = f"{_ga_sensitivity() * 100:.1f} %"
    scale = r70["published"] / r70["ours"]
    out |= {"tr.v.hfu70b": f"{r70['result'].hfu * scale:.2f}",
            "tr.v.mfu70b": f"{r70['result'].mfu * scale:.2f}"}
    import roofline as rl

    mamf = {c.id: c.value_si for c in load_cases("vendors").cases}
    for part, cid in (("mi300x", "mamf MI300X bf16"), ("mi325x", "mamf MI325X bf16")):
        out[f"tr.v.mamf.{part}"] = f"{mamf[cid] / rl.hardware(part).peak('bf16'):.2f}"
    without = [p.fitted_without.values["gemm_max"] for p in rep.per_source]
    out |= {"tr.v.shipped": f"{rep.shipped['gemm_max']:.3f}",
            "tr.v.refit": f"{rep.refit.values['gemm_max']:.3f}",
            "tr.v.without": f"{min(without):.3f}–{max(without):.3f}",
            "tr.v.fit.in_sample": fmt_pct(rep.refit_in_sample.median_abs, 1, sign=False),
            "tr.v.fit.worst": fmt_pct(rep.refit_in_sample.worst, 1),
            "tr.v.loso.median": fmt_pct(rep.loso.median_abs, 1, sign=False),
            "tr.v.loso.worst": fmt_pct(rep.loso.worst, 1)}
    return out
