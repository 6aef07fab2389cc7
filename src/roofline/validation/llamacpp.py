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
           "holdout_table", "MEMORY_GRID", "OVERHEAD_GRID_US", "device_class",
           "class_fractions", "class_study", "class_study_table", "llamacpp_figures"]

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
    cfg = resolve_model(c.scenario["model"]).config
    assert cfg is not None, f"llama.cpp case {cid}: the model is not a decoder"
    layers = cfg.n_layers
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
    mx = mem.get("max")
    assert mx is not None, "the llamacpp serving profile sets [efficiency.memory] max"
    return {"memory_max": float(mx), "layer_overhead": f.layer_overhead}


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


# -- per-device-class memory fractions: the study (not shipped) --------------------------------

def device_class(hardware: str) -> str:
    """"apple" (Apple silicon GPU), "nvidia" (an NVIDIA GPU), else "cpu-soc"."""
    from ..specs.resolve import hardware as resolve_hardware

    hw = resolve_hardware(hardware)
    if hw.vendor.lower().startswith("apple"):
        return "apple"
    return "nvidia" if hw.kind == "gpu" and hw.vendor.lower() == "nvidia" else "cpu-soc"


def _cls(c: Case) -> str:
    return device_class(c.scenario["hardware"])


def _classes_with_sources(cs: Sequence[Case], n: int = 2) -> tuple[str, ...]:
    """The device classes whose cases come from ``n`` sources or more."""
    by: dict[str, set[str]] = {}
    for c in cs:
        by.setdefault(_cls(c), set()).add(c.source)
    return tuple(sorted(k for k, v in by.items() if len(v) >= n))


def class_fractions(cs: Sequence[Case], classes: Sequence[str]) -> dict[str, float]:
    """The memory fraction of each of ``classes`` fitted on its cases in ``cs`` (grid
    MEMORY_GRID, RMS of log error); the per-layer time stays at the shipped value, other
    classes keep the shipped fraction."""
    lo = _shipped()["layer_overhead"]
    out = {}
    for k in classes:
        sub = [c for c in cs if _cls(c) == k]
        if sub:
            def sq_log_error(mm: float, sub: list[Any] = sub) -> float:
                return sum(math.log(predict(c, {"memory_max": mm, "layer_overhead": lo})
                                    / c.value_si) ** 2 for c in sub)

            out[k] = min(MEMORY_GRID, key=sq_log_error)
    return out


def _class_error(c: Case, fr: Mapping[str, float]) -> float:
    sh = _shipped()
    vals = {"memory_max": fr.get(_cls(c), sh["memory_max"]),
            "layer_overhead": sh["layer_overhead"]}
    return math.log(predict(c, vals) / c.value_si)


def class_study() -> dict[str, Any]:
    """In-sample and leave-one-source-out errors of per-class fractions (for the classes with
    cases from two sources or more) against the shipped single fraction: ``fractions`` (all
    cases), ``per_source`` (source -> fractions fitted without it), ``rows`` ((label, n,
    median abs error, RMS log) per case set)."""
    cs = fitted_cases()
    classes = _classes_with_sources(cs)  # apple, nvidia: two sources each; the Pi 5 one
    fr = class_fractions(cs, classes)
    inn = {c.id: _class_error(c, fr) for c in cs}
    held: dict[str, float] = {}
    per_source = {}
    for s in sorted({c.source for c in cs}):
        f = class_fractions([c for c in cs if c.source != s], classes)
        per_source[s] = f
        held.update({c.id: _class_error(c, f) for c in cs if c.source == s})
    shipped = {c.id: _class_error(c, {}) for c in cs}

    def row(label: str, errs: dict[str, float], keep: Any) -> tuple[str, int, float, float]:
        e = [v for k, v in errs.items() if keep(k)]
        med = sorted(abs(math.expm1(x)) for x in e)
        n = len(med)
        m = med[n // 2] if n % 2 else 0.5 * (med[n // 2 - 1] + med[n // 2])
        return label, n, m, math.sqrt(sum(x * x for x in e) / n)

    by = {c.id: _cls(c) for c in cs}
    rows = [row("all, one fraction (shipped)", shipped, lambda k: True),
            row("all, per-class fractions (in-sample)", inn, lambda k: True),
            row("all, per-class fractions (LOSO)", held, lambda k: True)]
    for k in ("apple", "nvidia"):
        rows += [row(f"{k}, one fraction (shipped)", shipped, lambda i, k=k: by[i] == k),
                 row(f"{k}, per-class (LOSO)", held, lambda i, k=k: by[i] == k)]
    return {"fractions": fr, "per_source": per_source, "rows": rows}


def class_study_table(study: Mapping[str, Any] | None = None) -> str:
    """The per-class table of docs/validation/llamacpp.md."""
    st = class_study() if study is None else study
    srcs = list(st["per_source"])
    head = ["| class | all cases | " + " | ".join(f"fit without {s}" for s in srcs) + " |",
            "|---|---:|" + "---:|" * len(srcs)]
    for k in sorted(st["fractions"]):
        head.append(f"| {k} | {st['fractions'][k]:.3f} | " + " | ".join(
            f"{st['per_source'][s].get(k, math.nan):.3f}" for s in srcs) + " |")
    head += ["", "| cases | n | median abs error | RMS log error |", "|---|---:|---:|---:|"]
    head += [f"| {lab} | {n} | {m:.1%} | {r:.3f} |" for lab, n, m, r in st["rows"]]
    return "\n".join(head)


# -- prompt processing (llama-bench pp rates): judged, nothing fitted ----------------------------

def pp_cases() -> tuple[Case, ...]:
    """The published prompt-processing rates (data/validation/llamacpp_pp.toml)."""
    return load_cases("llamacpp_pp").cases


def predict_pp(c: Case) -> float:
    """Our prompt tokens/s for ``c``: prompt / TTFT of ``rl.serve(engine="llamacpp")`` at batch
    1 with a one-token output (llama-bench's pp test: one prompt, no generation)."""
    from ..scenarios.serving import serve

    sc = c.scenario
    s = serve(sc["model"], sc["hardware"], batch=1, prompt_len=sc["prompt"], output_len=1,
              precision=sc["precision"], engine="llamacpp")
    return sc["prompt"] / s.ttft


def pp_rows() -> list[dict[str, Any]]:
    """Each prompt-processing case: published and our rate, the error, the device class."""
    return [{"id": c.id, "source": c.source, "class": _cls(c), "published": c.value_si,
             "ours": (o := predict_pp(c)), "error": o / c.value_si - 1.0,
             "outlier": c.known_outlier, "precision": c.scenario["precision"],
             "hardware": c.scenario["hardware"]} for c in pp_cases()]


def _median(xs: Sequence[float]) -> float:
    s, n = sorted(xs), len(xs)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def pp_table(rows: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The prompt-processing tables of docs/validation/llamacpp.md: every case, then the
    median |error| and the geometric-mean ratio ours / published per device class."""
    rs = pp_rows() if rows is None else rows
    lines = ["| case | hardware | precision | published [tok/s] | ours [tok/s] | error | source |",
             "|---|---|---|---:|---:|---:|---|"]
    for r in rs:
        tag = " (outlier)" if r["outlier"] else ""
        lines.append(f"| {r['id']}{tag} | {r['hardware']} | {r['precision']} | "
                     f"{r['published']:,.2f} | {r['ours']:,.2f} | {r['error']:+.1%} | "
                     f"{r['source']} |")
    lines += ["", "| device class | cases | median abs error | ours / published (geo-mean) |",
              "|---|---:|---:|---:|"]
    for k in sorted({r["class"] for r in rs}) + ["all"]:
        sub = [r for r in rs if not r["outlier"] and k in ("all", r["class"])]
        geo = math.exp(sum(math.log(1 + r["error"]) for r in sub) / len(sub))
        lines.append(f"| {k} | {len(sub)} | {_median([abs(r['error']) for r in sub]):.1%} | "
                     f"×{geo:.2f} |")
    return "\n".join(lines)


def llamacpp_figures(rep: FitReport | None = None, study: Mapping[str, Any] | None = None,
                     pp: Sequence[Mapping[str, Any]] | None = None) -> dict[str, str]:
    """The figures docs/validation/llamacpp.md's prose quotes (inline ``<!--v:KEY-->``
    markers), from the hold-out, class study and prompt-processing rows its tables use: the
    shipped factors, each device's decode errors (``lc.<hardware>``: a range), the named rows
    in sample and held out, the Pi 5's ratios, the class fractions, the pp rows' errors and the
    datacenter GPUs' ratio range."""
    from .holdout import fmt_pct, span_pct

    rep = llamacpp_holdout() if rep is None else rep
    st = class_study() if study is None else study
    rs = pp_rows() if pp is None else pp
    sh = rep.shipped
    out = {"lc.memory_max": f"{sh['memory_max']:.2f}",
           "lc.layer_us": f"{sh['layer_overhead'] * 1e6:.0f}",
           "lc.layer32_ms": f"{32 * sh['layer_overhead'] * 1e3:.1f}"}
    err = {c.id: predict(c) / c.value_si - 1 for c in fitted_cases()}
    held = {k: math.expm1(v) for k, v in rep.held_out_errors.items()}
    by_hw: dict[str, list[float]] = {}
    for c in fitted_cases():
        by_hw.setdefault(c.scenario["hardware"], []).append(err[c.id])
    for hw, es in by_hw.items():
        out[f"lc.{hw}"] = span_pct(es)
        out[f"lc.{hw}.abs"] = span_pct(es, signed=False)
        out[f"lc.{hw}.up_to"] = fmt_pct(max(map(abs, es)), sign=False)
    q40 = "XD2 H100 PCIe 7B q4_0"
    out |= {"lc.h100_q4_0": fmt_pct(err[q40]), "lc.h100_q4_0.held": fmt_pct(held[q40])}
    pi = [c.id for c in fitted_cases() if c.source == "pi5"]
    for tag, e in (("held", held), ("in", err)):
        r = sorted(1 + e[i] for i in pi)
        out[f"lc.pi5.{tag}"] = f"×{r[0]:.2f}–×{r[-1]:.2f}"
    fr = st["fractions"]
    out["lc.class.apple"] = f"{fr['apple']:.2f}"
    for s, f in st["per_source"].items():
        out[f"lc.class.nvidia.without.{s}"] = f"{f['nvidia']:.3g}"
    rows = {r[0]: r for r in st["rows"]}
    out |= {"lc.class.nvidia.shipped": fmt_pct(rows["nvidia, one fraction (shipped)"][2], 1,
                                               sign=False),
            "lc.class.nvidia.loso": fmt_pct(rows["nvidia, per-class (LOSO)"][2], 1, sign=False),
            "lc.class.loso_rms": f"{rows['all, per-class fractions (LOSO)'][3]:.3f}"}
    pr = {r["id"]: r for r in rs}
    for cid, key in (("XD3 pp512 RTX 4090 8B Q4_K_M", "4090_q4"), ("XD3 pp512 RTX 4090 8B F16",
                     "4090_f16"), ("XD3 pp512 H100 PCIe 8B Q4_K_M", "h100_q4"),
                     ("XD3 pp512 H100 PCIe 8B F16", "h100_f16")):
        out[f"lc.pp.{key}"] = fmt_pct(pr[cid]["error"])
    dc = [1 + r["error"] for r in rs if r["class"] == "nvidia" and not r["outlier"]
          and r["hardware"] != "rtx-4090"]
    out["lc.pp.datacenter"] = f"{min(dc):.1f}–{max(dc):.1f}×"
    return out
