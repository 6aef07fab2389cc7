"""rl.serve against published serving measurements (data/validation/serving.toml), and the one
fit of the serving-engine factors (data/presets/serving.toml) with its leave-one-source-out error.

Metrics (``Case.metric``): ``tok_s_gpu`` output tokens/s per GPU of a static batch
(``tokens_per_s_per_device``), ``tok_s`` of the whole deployment (``tokens_per_s``), ``ttft`` and
``tpot`` at batch 1, ``e2e`` the end-to-end latency of a static batch (prefill + every decode
step).

The fit (``fit_serving``, reconstructed from the code that set the shipped values, which
``benchmarks/bench_serving.py --fit`` ran): coordinate descent — a golden-section search of each
factor over its bounds, 18 steps, four rounds — on the RMS of log(ours / measured) over the cases
given, the factors of ``FIT_PARAMS`` of every engine at once, ``gemm_dtype_fp8`` shared by all
engines (same fp8 GEMM kernels). The shipped search started from the shipped values; here it
starts from ``START`` (no fixed costs, fp8 factor mid-range), so a fit without a source cannot
inherit what that source taught the shipped values. Factors not in FIT_PARAMS are not fitted:
the launch model (assumed) and the all-reduce / send latencies and efficiency (from
microbenchmarks, sourced in the TOML) stay as shipped; ``trtllm``'s ``step_overhead`` was set to
0 by hand (not separable from its per-layer cost on its cases) and is held at 0 — a fit of that
value. The shared fp8 factor ``gemm_dtype_fp8`` is held at the default preset's value
(``[gpu.gemm_dtype] fp8`` = 0.6125, a multiplier on each part's 16-bit GEMM fraction: 0.49 of
the fp8 peak at the [gpu] kind's 0.80, 0.312 at CDNA 3's 0.51 (MI300X; the MI325X at its clock
ratio); an earlier run of this fit set it
and docs/validation/fp8.md judges it on fp8 training runs). Every trial applies it as
``rl.serve`` applies the preset's, on the part's own 16-bit fraction (one pricing path: the
shipped column and a refit at the shipped values agree); since TensorRT-LLM v0.5 / v0.6.1 decode
attention reads each KV head once per query head (``kv_per_query_head``), the fit with the
factor free moves it to 0.70 (0.56 of the fp8 peak at 0.80) and puts 2.9 ms per prefill call
on the modern profile in exchange (the two trade along the NIM TTFTs); it is not re-shipped
from these cases (solve and train share it; docs/validation/serving.md says what it would do).
A profile that differs from a fitted one only in kernels (``FIT_ALIASES``: ``vllm-legacy``, vLLM's
PagedAttention decode) takes that engine's fitted values in every trial.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import RooflineError
from .cases import Case, load_cases
from .holdout import FitReport, Refit, error_summary, fmt_pct, golden_section, leave_one_source_out

__all__ = ["FIT_PARAMS", "FIT_ALIASES", "HAND_SET", "JUDGED_SOURCES", "START", "BOUNDS",
           "serving_cases", "predict_serving", "serving_errors", "serving_summary", "fit_serving",
           "serving_holdout", "serving_case_table", "serving_holdout_table",
           "shipped_serving_values", "summary_figures", "serving_summary_table",
           "serving_worst_table", "page_figures", "LEGACY_TERMS", "legacy_refit_figures"]

#: the factors the one fit adjusts, per engine
FIT_PARAMS: dict[str, tuple[str, ...]] = {
    "trtllm": ("layer_overhead", "request_overhead"),
    "trtllm-legacy": ("step_overhead", "layer_overhead", "request_overhead"),
    "vllm": ("step_overhead", "layer_overhead", "request_overhead"),
}
#: factors set by hand, not fitted: held at their shipped value in every fit (a fit of that value)
#: (``gemm_dtype_fp8``, shared by every engine, is listed under trtllm: the preset's fp8 factor)
HAND_SET: dict[str, tuple[str, ...]] = {"trtllm": ("step_overhead", "gemm_dtype_fp8")}
#: search interval of each factor (s, or the fp8 multiplier on the part's 16-bit GEMM fraction:
#: 0.375 ... 1.0 is 0.30 ... 0.80 of the fp8 peak on a part at the [gpu] kind's 0.80)
BOUNDS = {"step_overhead": (0.0, 5e-3), "layer_overhead": (0.0, 150e-6),
          "request_overhead": (0.0, 20e-3), "gemm_dtype_fp8": (0.375, 1.0)}
#: where the search starts: no fixed costs, the fp8 multiplier at 0.75 (0.60 of the fp8 peak
#: at the [gpu] kind's 16-bit 0.80)
START = {"step_overhead": 0.0, "layer_overhead": 0.0, "request_overhead": 0.0,
         "gemm_dtype_fp8": 0.75}
#: profiles priced with a fitted engine's factors (their ``base`` in data/presets/serving.toml,
#: differing only in kernels): their cases count as that engine's in the fit, and every trial
#: applies that engine's values to them
FIT_ALIASES: dict[str, str] = {"vllm-legacy": "vllm", "trtllm-v08": "trtllm-legacy"}
_SHARED = "gemm_dtype_fp8"
#: sources added after the shipped factors were set, judged by them (never fitted on by a
#: shipped value; the refit and leave-one-source-out columns take them like any source)
JUDGED_SOURCES = frozenset({"trt08"})
_ROUNDS, _STEPS = 4, 18


def _factors(engine: str) -> Any:
    from ..scenarios.serving.plan import serving_factors

    return serving_factors(engine)


def serving_cases() -> tuple[Case, ...]:
    """The published serving cases (data/validation/serving.toml)."""
    return load_cases("serving").cases


def _keys() -> list[str]:
    return [f"{e}.{n}" for e, ns in FIT_PARAMS.items() for n in ns]


def _hand_keys() -> list[str]:
    return [f"{e}.{n}" for e, ns in HAND_SET.items() for n in ns]


def shipped_serving_values() -> dict[str, float]:
    """The shipped values of FIT_PARAMS and HAND_SET ('engine.factor' -> value)."""
    out = {}
    for k in _keys() + _hand_keys():
        e, n = k.split(".", 1)
        out[k] = _shipped_fp8() if n == _SHARED else float(getattr(_factors(e), n))
    return out


def _shipped_fp8() -> float:
    """The shipped fp8 multiplier: the GPU preset's gemm_dtype fp8 factor (the one narrow-dtype
    factor solve, serve and train share, applied to each part's own 16-bit fraction)."""
    from ..engine.presets import default_tables

    return default_tables()["gpu"].gemm_dtype.of("fp8")


def _profiles(values: Mapping[str, float] | None) -> dict[str, Any] | None:
    """ServingFactors per fitted engine with ``values`` ('engine.factor' -> value) applied;
    the shared gemm_max_fp8 (listed under one engine) applies to every engine."""
    if values is None:
        return None
    shared = {}
    for k, v in values.items():
        if k.endswith("." + _SHARED):
            shared[_SHARED] = v
    out = {}
    for e in (*FIT_PARAMS, *FIT_ALIASES):
        b = FIT_ALIASES.get(e, e)
        ch = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith(b + ".")}
        out[e] = replace(_factors(e), **{**ch, **shared})
    return out


def predict_serving(case: Case, factors: Any = None, preset: str = "default") -> float:
    """Our number for ``case`` in SI (tokens/s or s); ``factors``: a ServingFactors to use
    instead of the case's engine profile; ``preset``: rl.serve's (``"bound"``: the pure
    roofline README quotes)."""
    from ..scenarios.serving import serve
    from ..specs.dtypes import precision as make_precision

    sc = case.scenario
    p = make_precision(sc["precision"], activations=sc["activations"], kv=sc["kv"])
    s = serve(sc["model"], sc["hardware"], batch=sc["batch"], prompt_len=sc["prompt"],
              output_len=sc["output"], precision=p, tp=sc["tp"],
              engine=factors if factors is not None else sc["engine"], preset=preset)
    if not s.feasible:
        raise AssertionError(f"{case.id}: does not fit: {s.reason}")
    return float({"tok_s_gpu": s.tokens_per_s_per_device, "tok_s": s.tokens_per_s,
                  "ttft": s.ttft, "tpot": s.tpot, "e2e": s.e2e_latency}[case.metric])


def serving_errors(values: Mapping[str, float] | None = None,
                   cases: Sequence[Case] | None = None) -> list[tuple[Case, float, float]]:
    """(case, ours, log(ours / measured)) for each case; ``values``: fitted factors
    ('engine.factor' -> value) to use instead of the shipped ones."""
    return _errors(_profiles(values), serving_cases() if cases is None else cases)


def _errors(profiles: dict[str, Any] | None,
            cases: Sequence[Case]) -> list[tuple[Case, float, float]]:
    out = []
    for c in cases:
        f = None if profiles is None else profiles.get(c.scenario["engine"])
        ours = predict_serving(c, f)
        out.append((c, ours, math.log(ours / c.value_si)))
    return out


def serving_summary(errs: Sequence[tuple[Case, float, float]]) -> dict[str, float]:
    """n, RMS of log errors, median and max |log error| (the serving doc's numbers)."""
    e = sorted(abs(x) for _, _, x in errs)
    n = len(e)
    if not n:
        raise RooflineError("serving_summary: errs is empty; it needs at least one "
                            "(case, ours, log error) row, e.g. from serving_errors()")
    med = e[n // 2] if n % 2 else (e[n // 2 - 1] + e[n // 2]) / 2
    return {"n": n, "rms_log": math.sqrt(sum(x * x for x in e) / n),
            "median_abs_log": med, "max_abs_log": e[-1]}


def summary_figures(errs: Sequence[tuple[Case, float, float]] | None = None) -> dict[str, str]:
    """The figures the page's opening paragraph quotes (inline ``<!--v:KEY-->`` markers of
    docs/validation/serving.md): RMS, median and worst |log error|, the last two also as %,
    over every case (``serving.*``) and over the sources the shipped factors were fitted on
    (``serving.fitted.*``: the judged sources left out) — the stated tolerance's cases."""
    errs = serving_errors() if errs is None else errs
    out = {"serving.n": str(len(errs))}
    for key, sub in (("serving", list(errs)),
                     ("serving.fitted", [x for x in errs if x[0].source not in JUDGED_SOURCES])):
        s = serving_summary(sub)
        worst = max((e for _, _, e in sub), key=abs)
        out |= {f"{key}.rms": f"{s['rms_log']:.3f}", f"{key}.median": f"{s['median_abs_log']:.3f}",
                f"{key}.median_pct": fmt_pct(math.expm1(s["median_abs_log"]), sign=False),
                f"{key}.worst": f"{s['max_abs_log']:.3f}",
                f"{key}.worst_pct": fmt_pct(math.expm1(worst)), f"{key}.n": str(len(sub))}
    return out


def _golden(f: Any, lo: float, hi: float, steps: int = _STEPS) -> tuple[float, float]:
    """(x, f(x)): the better interior point after ``steps`` golden-section narrowings (ties
    move right: the shipped serving and serving_host fits were found so)."""
    _, _, (x1, f1), (x2, f2) = golden_section(f, lo, hi, steps=steps, left_ties=False)
    return (x1, f1) if f1 < f2 else (x2, f2)


def fit_serving(cases: Sequence[Case] | None = None,
                start: Mapping[str, float] | None = None) -> Refit:
    """The one fit of FIT_PARAMS on ``cases`` (default: all), started from ``start`` (per
    factor name or per 'engine.factor'; default START). Engines without a case among them are
    not fitted: each of their factors takes the mean of the fitted engines' values
    (what one would assume for an engine never measured), and the note says so."""
    cases = list(serving_cases() if cases is None else cases)
    st = dict(START if start is None else start)
    engines = {FIT_ALIASES.get(c.scenario["engine"], c.scenario["engine"]) for c in cases}
    fitted = [e for e in FIT_PARAMS if e in engines]
    has_fp8 = any(c.scenario["precision"] in ("fp8", "fp4", "int4") for c in cases)
    cur = {k: float(st[k] if k in st else st[k.split(".", 1)[1]]) for k in _keys()}
    ship = shipped_serving_values()
    cur.update({k: ship[k] for k in _hand_keys()})  # the search prices with them, as the tables

    def score(vals: dict[str, float]) -> float:
        return serving_summary(_errors(_profiles(vals), cases))["rms_log"]

    best = score(cur)
    for _ in range(_ROUNDS):
        for e in FIT_PARAMS:
            for nm in FIT_PARAMS[e]:
                if (nm == _SHARED and not has_fp8) or (nm != _SHARED and e not in fitted):
                    continue

                def f(v: float, k: str = f"{e}.{nm}") -> float:
                    return score({**cur, k: v})

                xv, fv = _golden(f, *BOUNDS[nm])
                if fv < best:
                    best = fv
                    cur[f"{e}.{nm}"] = xv
    notes = []
    for e in FIT_PARAMS:
        if e in fitted:
            continue
        for nm in FIT_PARAMS[e]:
            if nm == _SHARED:
                continue
            pool = [cur[f"{x}.{nm}"] for x in fitted if nm in FIT_PARAMS[x]]
            if pool:
                cur[f"{e}.{nm}"] = sum(pool) / len(pool)
        notes.append(f"no {e} case left: its {', '.join(n for n in FIT_PARAMS[e] if n != _SHARED)}"
                     f" take the mean of the fitted engines' values")
    if not has_fp8 and any(_SHARED in ns for ns in FIT_PARAMS.values()):
        notes.append("no fp8 case left: gemm_dtype_fp8 stays at its start value")
    return Refit(values=cur, note="; ".join(notes))


def serving_holdout(cases: Sequence[Case] | None = None) -> FitReport:
    """In-sample and leave-one-source-out error of the serving-engine profiles. Every fit of
    the report takes every source given, the judged ones (``JUDGED_SOURCES``) too, except the
    refit from the shipped values, which reconstructs the shipped fit on its own cases."""
    cs = list(serving_cases() if cases is None else cases)

    def log_errors(values: Mapping[str, float] | None, sub: Sequence[Case]) -> list[float]:
        return [e for _, _, e in _errors(_profiles(values), sub)]

    def from_shipped(sub: Sequence[Case]) -> Refit:
        # the shipped fit reconstructed on its own cases: the judged sources are left out
        return fit_serving([c for c in sub if c.source not in JUDGED_SOURCES],
                           start=shipped_serving_values())

    return leave_one_source_out("serving engines", cs, _keys() + _hand_keys(),
                                shipped_serving_values(), fit_serving, log_errors,
                                fit_from_shipped=from_shipped)


def _fmt(k: str, v: float) -> str:
    return f"{v:.4f}" if k.endswith(_SHARED) else f"{v * 1e6:.1f} µs"


def serving_holdout_table(rep: FitReport | None = None) -> str:
    """The markdown hold-out tables of docs/validation/serving.md."""
    from .holdout import holdout_tables

    return holdout_tables(serving_holdout() if rep is None else rep, _fmt,
                          labels={k: f"{k} (set by hand, not fitted)" for k in _hand_keys()})


def serving_case_table(errs: Sequence[tuple[Case, float, float]] | None = None) -> str:
    """The markdown case table of docs/validation/serving.md."""
    errs = serving_errors() if errs is None else errs
    unit = {"tok_s_gpu": ("tok/s/GPU", 1.0), "tok_s": ("tok/s", 1.0), "ttft": ("ms", 1e3),
            "tpot": ("ms", 1e3), "e2e": ("s", 1.0)}
    lines = ["| case | source | engine | ours | measured | unit | error |",
             "|---|---|---|---:|---:|---|---:|"]
    for c, ours, e in errs:
        u, k = unit[c.metric]
        lines.append(f"| {c.id} | {c.source} | {c.scenario['engine']} | {ours * k:,.4g} | "
                     f"{c.value_si * k:,.4g} | {u} | {math.exp(e) - 1:+.1%} |")
    return "\n".join(lines)


#: the rows of the page's summary block: label, the sources they take (None: every case)
SUMMARY_GROUPS: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("all cases", None),
    ("TensorRT-LLM v0.6.1 (the original cases)", frozenset({"trt061"})),
    ("TensorRT-LLM v0.5 high-throughput", frozenset({"trt05"})),
    ("NIM 1.8.0 (modern TensorRT-LLM), TP2", frozenset({"nim"})),
    ("vLLM (H200 CI, A100 PR #2192, MI300X OCI)", frozenset({"vllm_ci", "vllm2192", "oci405"})),
    ("TensorRT-LLM v0.8.0 (first tokens; H200 / H100 throughput)", frozenset({"trt08"})),
)
#: cases the page's "cannot capture" bullets quote, by inline-marker key
NAMED_CASES = {
    "long70b": ("llama-2-70b H100 fp8 B=480 tp=4 128/2048 tok/s/GPU",
                "llama-2-70b H100 fp8 B=64 tp=2 2048/2048 tok/s/GPU",
                "v0.5 llama-2-70b H100 fp8 B=64 tp=4 2048/2048 tok/s"),
    "v05_7b_short": ("v0.5 llama-2-7b H100 fp8 B=64 tp=1 128/128 tok/s",),
    "vllm_h200": ("vLLM llama-3.1-8b H200 bf16 B=8 tp=1 32/128 e2e",
                  "vLLM llama-3-70b H200 bf16 B=8 tp=4 32/128 e2e"),
    "vllm_a100_b64": ("vLLM llama-2-70b A100 fp16 B=64 tp=4 256/256 e2e",),
    "oci_b1": ("vLLM llama-3.1-405b MI300X fp8 B=1 tp=8 128/128 e2e",),
    "oci_b8": ("vLLM llama-3.1-405b MI300X fp8 B=8 tp=8 128/128 e2e",),
    "oci_b64": ("vLLM llama-3.1-405b MI300X fp8 B=64 tp=8 128/128 e2e",),
    "trt08_hopper_128": tuple(f"v0.8 {m} {h} fp8 tp=1 TTFT 128" for h in ("H200", "H100")
                              for m in ("llama-2-7b", "mistral-7b")),
    "trt08_l40s_70b": tuple(f"v0.8 llama-2-70b L40S fp8 tp=8 TTFT {p}" for p in (128, 2048)),
    "trt08_a100_70b": tuple(f"v0.8 llama-2-70b A100 fp16 tp=8 TTFT {p}" for p in (128, 2048)),
    "trt08_tput": tuple(f"v0.8 {r} tok/s/GPU" for r in (
        "llama-2-7b H200 fp8 B=896 tp=1 128/128", "llama-2-7b H200 fp8 B=120 tp=1 128/2048",
        "llama-2-7b H200 fp8 B=84 tp=1 2048/128", "llama-2-7b H200 fp8 B=56 tp=1 2048/2048",
        "llama-2-70b H200 fp8 B=512 tp=1 128/128", "llama-2-70b H200 fp8 B=512 tp=2 128/2048",
        "llama-2-70b H200 fp8 B=64 tp=1 2048/128", "llama-2-70b H200 fp8 B=64 tp=1 2048/2048",
        "llama-2-7b H100 fp8 B=896 tp=1 128/128", "llama-2-7b H100 fp8 B=120 tp=1 128/2048",
        "llama-2-7b H100 fp8 B=64 tp=1 2048/128", "llama-2-7b H100 fp8 B=56 tp=1 2048/2048",
        "llama-2-70b H100 fp8 B=1024 tp=2 128/128", "llama-2-70b H100 fp8 B=512 tp=4 128/2048",
        "llama-2-70b H100 fp8 B=96 tp=2 2048/128", "llama-2-70b H100 fp8 B=64 tp=2 2048/2048")),
    "trt08_70b_long": tuple(f"v0.8 llama-2-70b {r} tok/s/GPU" for r in (
        "H100 fp8 B=512 tp=4 128/2048", "H100 fp8 B=64 tp=2 2048/2048",
        "H200 fp8 B=512 tp=2 128/2048", "H200 fp8 B=64 tp=1 2048/2048")),
}


def serving_summary_table(errs: Sequence[tuple[Case, float, float]] | None = None) -> str:
    """docs/validation/serving.md's ``summary`` block: n, RMS, median and max |log error| over
    every case and per group of sources (``SUMMARY_GROUPS``)."""
    errs = serving_errors() if errs is None else errs
    lines = ["| set | n | RMS log | median abs log | max abs log |", "|---|---:|---:|---:|---:|"]
    for label, srcs in SUMMARY_GROUPS:
        s = serving_summary([e for e in errs if srcs is None or e[0].source in srcs])
        lines.append(f"| {label} | {s['n']} | {s['rms_log']:.3f} | {s['median_abs_log']:.3f} | "
                     f"{s['max_abs_log']:.3f} |")
    return "\n".join(lines)


def serving_worst_table(errs: Sequence[tuple[Case, float, float]] | None = None, n: int = 5) -> str:
    """docs/validation/serving.md's ``worst`` block: the ``n`` cases of largest |log error|."""
    errs = serving_errors() if errs is None else errs
    lines = ["| case | error |", "|---|---:|"]
    for c, _, e in sorted(errs, key=lambda t: -abs(t[2]))[:n]:
        lines.append(f"| {c.id} | {math.expm1(e):+.1%} |")
    return "\n".join(lines)


def _span(es: Sequence[float]) -> str:
    """'+17.0 %' for one error, '+17.0 % … +19.5 %' for several (ours / measured − 1)."""
    lo, hi = min(es), max(es)
    return fmt_pct(lo, 1) if lo == hi else f"{fmt_pct(lo, 1)} … {fmt_pct(hi, 1)}"


def page_figures(errs: Sequence[tuple[Case, float, float]] | None = None,
                 rep: FitReport | None = None) -> dict[str, str]:
    """Every figure docs/validation/serving.md's prose quotes beyond the opening paragraph's
    (inline ``<!--v:KEY-->`` markers): the hold-out discussion's (``rep``: serving_holdout(),
    its medians by ``holdout_figures`` keys ``serving...``, RMS and fitted values), and the
    errors of the cases the "cannot capture" bullets name (``case/KEY``, ``NAMED_CASES``)."""
    from .holdout import holdout_figures

    errs = serving_errors() if errs is None else errs
    rep = serving_holdout() if rep is None else rep
    by_id = {c.id: math.expm1(e) for c, _, e in errs}
    out = {f"case/{k}": _span([by_id[i] for i in ids]) for k, ids in NAMED_CASES.items()}
    out |= holdout_figures(rep, "serving")
    out |= {"serving.shipped_rms": f"{rep.shipped_in_sample.rms_log:.3f}",
            "serving.refit_rms": f"{rep.refit_in_sample.rms_log:.3f}",
            "serving.loso_rms": f"{rep.loso.rms_log:.3f}"}
    for p in rep.per_source:
        out[f"serving/{p.source}.held_out_rms"] = f"{p.held_out.rms_log:.3f}"
    out |= {f"refit/{k}": _fmt(k, v) for k, v in rep.refit.values.items()}
    if rep.refit_from_shipped is not None:
        fs = rep.refit_from_shipped.values
        out |= {f"from_shipped/{k}": _fmt(k, v) for k, v in fs.items()}
        below = 1 - fs["vllm.layer_overhead"] / rep.shipped["vllm.layer_overhead"]
        out["from_shipped/vllm.layer_overhead.below"] = fmt_pct(below, sign=False)
    for p in rep.per_source:
        out |= {f"without/{p.source}/{k}": _fmt(k, v) for k, v in p.fitted_without.values.items()}
    return out | legacy_refit_figures(errs, rep)


#: the legacy profile's fitted terms: the fit over every case (trt08 included) moves them;
#: judged on docs/validation/serving.md (``legacy_refit_figures``) and not shipped
LEGACY_TERMS = tuple(f"trtllm-legacy.{n}" for n in FIT_PARAMS["trtllm-legacy"])
#: the case groups that judgement reports: label -> sources (None: every case)
_LEGACY_GROUPS: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("all", None), ("trt061", frozenset({"trt061"})), ("trt05", frozenset({"trt05"})),
    ("trt08", frozenset({"trt08"})))


def legacy_refit_figures(errs: Sequence[tuple[Case, float, float]],
                         rep: FitReport) -> dict[str, str]:
    """What shipping the all-cases refit's legacy terms (``LEGACY_TERMS`` from ``rep.refit``,
    every other factor as shipped) would do to the in-sample errors: per group median and RMS
    before -> after (``legacy_refit/GROUP.median`` ...), the cases made worse (|error| up by
    more than half a point) per source, the v0.8 Hopper 128-token first tokens, and the largest
    |log error| against the fitted sources' stated bound log(1.35). The held-out errors do not
    move: every leave-one-source-out fit starts from ``START``, not from the shipped values."""
    vals = {**shipped_serving_values(), **{k: rep.refit.values[k] for k in LEGACY_TERMS}}
    new = serving_errors(vals, [c for c, _, _ in errs])
    out = {f"legacy_refit/{k}": _fmt(k, rep.refit.values[k]) for k in LEGACY_TERMS}
    for label, srcs in _LEGACY_GROUPS:
        for tag, es in (("before", errs), ("after", new)):
            s = error_summary([(c.id, e) for c, _, e in es if srcs is None or c.source in srcs])
            out[f"legacy_refit/{label}.median.{tag}"] = fmt_pct(s.median_abs, 1, sign=False)
            out[f"legacy_refit/{label}.rms.{tag}"] = f"{s.rms_log:.3f}"
    worse = [c.source for (c, _, e0), (_, _, e1) in zip(errs, new)
             if abs(math.expm1(e1)) > abs(math.expm1(e0)) + 0.005]
    for src in ("trt061", "trt05", "trt08"):
        out[f"legacy_refit/{src}.worse"] = str(worse.count(src))
    by_id = {c.id: math.expm1(e) for c, _, e in new}
    out["legacy_refit/case/trt08_hopper_128"] = _span(
        [by_id[i] for i in NAMED_CASES["trt08_hopper_128"]])
    c, _, e = max(new, key=lambda t: abs(t[2]))
    out["legacy_refit/worst"] = f"{fmt_pct(math.expm1(e), 1)} ({c.id})"
    out["legacy_refit/worst_log"] = f"{abs(e):.3f}"
    return out
