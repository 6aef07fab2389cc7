"""Fused-attention kernels (data/presets/attention.toml) against published kernel speeds
(docs/validation/attention.md), and the fit of their rates and sequence-length curve.

Cases: src/roofline/data/validation/attention.toml — the FlashAttention-3 paper's H100 figures
(forward head dim 128 and backward head dim 64, FlashAttention-2 / cuDNN / FlashAttention-3,
sequence 512 to 16k), pytorch/benchmark's FA3 runs and flash-attention PR #1791's FA2 / FA3
runs (head dim 128, 8k, causal and not, forward and backward). Each case is one attention op
priced by the time model: the kernel's time (no launch or dispatch: the benchmarks time the
kernel), its FLOPs counted as the benchmarks do (4·B·N·T·S·H forward, about half causal, 2.5×
backward), as TFLOP/s.

The model (engine/attention.py): rate = fraction(kernel, architecture, direction) × 16-bit peak
× ``1 / (1 + (x0 / x)^p)``, x the work per query row (keys walked × head dim / 128). ``fit``
finds the one (x0, p) and the fractions minimising the RMS log error over the cases given
(for each (x0, p) of a grid the best fraction per group is the geometric mean of
measured / (peak · curve)); the shipped values are the fit over all sources (``fit()``), and
each source is judged by the fit without it (``loso_rows``).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

from .cases import Case, load_cases

__all__ = ["attention_cases", "predict_tflops", "attention_rows", "attention_table", "fit",
           "arch_fits", "fitted", "case_work", "loso_rows", "attention_figures", "X0_GRID",
           "P_GRID"]

#: the grid ``fit`` searches (x0 in work units, p)
X0_GRID = np.arange(10.0, 1000.0, 5.0)
P_GRID = np.round(np.arange(0.5, 3.0001, 0.05), 2)


def attention_cases() -> tuple[Case, ...]:
    return load_cases("attention").cases


def _op(case: Case) -> tuple[Any, int, Any]:
    """(graph, index of the priced op, hardware) of one case."""
    from ..graphs.backward import backward_graph
    from ..graphs.graph import GraphBuilder
    from ..specs.dtypes import precision
    from ..specs.resolve import hardware

    sc = case.scenario
    hw = hardware(sc["hardware"])
    b = GraphBuilder("attention", "forward", precision(sc.get("dtype", "bf16")))
    b.add("attention", "attn", n_heads=sc["heads"], n_kv_heads=sc["heads"],
          head_dim=sc["head_dim"], q_len=sc["seq_len"], kv_len=sc["seq_len"],
          causal=sc["causal"])
    g = b.build()
    idx = 0
    if sc["direction"] == "bwd":
        g = backward_graph(g).graph
        idx = next(i for i, n in enumerate(g.names) if n.endswith(".bwd")
                   and g.classes[i] == "attention")
    return g, idx, hw


def predict_tflops(case: Case) -> float:
    """Our TFLOP/s (FLOP/s) for one attention kernel call of ``case`` (the shipped table)."""
    from ..engine.core import time_model
    from ..engine.presets import efficiency_for

    g, idx, hw = _op(case)
    eff = efficiency_for(hw, "default", case.scenario["kernel"])
    ot = time_model(g, hw, eff).evaluate(float(case.scenario["batch"]))
    return float(ot.flops[idx] / ot.t_kernel[idx])


def case_work(case: Case) -> tuple[float, float, str]:
    """(work per query row as the engine counts it, sustained peak FLOP/s of the case's dtype
    (16-bit, or fp8 for an fp8 case), the architecture) of one case."""
    from ..engine.attention import architecture, row_work

    g, idx, hw = _op(case)
    d = case.scenario.get("dtype", "bf16")
    return (float(row_work(g)[idx]), hw.peak(d) * hw.sustained(d), architecture(hw) or "")


def _key(case: Case, arch: str) -> tuple[str, str, str]:
    """(kernel, architecture, field): the table field a case measures (fwd, bwd, fp8_fwd)."""
    fp8 = case.scenario.get("dtype") == "fp8"
    return (case["kernel"], arch, "fp8_fwd" if fp8 else case["direction"])


def fitted(cases: tuple[Case, ...] | list[Case] | None = None) -> list[Case]:
    """The cases a fit uses: all but those marked ``fit = false`` (judged only) and known
    outliers (host-bound calls: their ``reason``)."""
    return [c for c in (attention_cases() if cases is None else cases)
            if c.scenario.get("fit", True) and not c.known_outlier]


def arch_fits(cases: tuple[Case, ...] | list[Case] | None = None) -> dict[str, dict[str, Any]]:
    """``fit`` per architecture over the fitted cases (default: all): {arch: fit}. Each
    architecture has its own length curve (data/presets/attention.toml [curve.<arch>])."""
    by: dict[str, list[Case]] = {}
    for c in fitted(cases):
        by.setdefault(case_work(c)[2], []).append(c)
    return {a: fit(cs) for a, cs in sorted(by.items()) if a}


def fit(cases: tuple[Case, ...] | list[Case] | None = None) -> dict[str, Any]:
    """The (x0, p) and fractions per (kernel, architecture, field) minimising the RMS log
    error over ``cases`` (default: the fitted Hopper cases): {"x0", "p", "fractions",
    "rms"}."""
    cases = list([c for c in fitted() if case_work(c)[2] == "hopper"] if cases is None
                 else cases)
    work = [case_work(c) for c in cases]
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, (c, (_, _, arch)) in enumerate(zip(cases, work, strict=True)):
        groups.setdefault(_key(c, arch), []).append(i)
    x = np.array([w[0] for w in work])
    y = np.log(np.array([c.value_si / w[1] for c, w in zip(cases, work, strict=True)]))
    # lg[i, j, k]: log of the curve at x0_i, p_j for case k
    lg = -np.log1p((X0_GRID[:, None, None] / x[None, None, :]) ** P_GRID[None, :, None])
    resid = np.empty_like(lg)
    for idx in groups.values():
        r = y[idx] - lg[..., idx]
        resid[..., idx] = r - r.mean(axis=-1, keepdims=True)
    sse = (resid ** 2).sum(axis=-1)
    bi, bj = np.unravel_index(int(np.argmin(sse)), sse.shape)
    i, j = int(bi), int(bj)
    fr = {k: float(np.exp((y[idx] - lg[i, j, idx]).mean())) for k, idx in groups.items()}
    return {"x0": float(X0_GRID[i]), "p": float(P_GRID[j]), "fractions": fr,
            "rms": float(math.sqrt(sse[i, j] / len(cases)))}


def _predict_with(fs: dict[str, dict[str, Any]], case: Case) -> float | None:
    xw, peak, arch = case_work(case)
    f = fs.get(arch)
    fr = None if f is None else f["fractions"].get(_key(case, arch))
    if fr is None:
        return None
    assert f is not None
    return fr * peak / (1.0 + (f["x0"] / max(xw, 1.0)) ** f["p"])


def loso_rows() -> dict[str, Any]:
    """Each source judged by the fit over the others (per architecture): {source: [(case,
    error)], ...} (fitted cases only; cases whose (kernel, architecture, field) only that
    source has are left out)."""
    cases = fitted()
    out: dict[str, Any] = {}
    for s in sorted({c.source for c in cases}):
        f = arch_fits([c for c in cases if c.source != s])
        errs = []
        for c in cases:
            if c.source == s and (p := _predict_with(f, c)) is not None:
                errs.append((c, p / c.value_si - 1.0))
        out[s] = errs
    return out


def attention_rows() -> list[dict[str, Any]]:
    out = []
    for c in attention_cases():
        ours = predict_tflops(c)
        out.append({"case": c, "ours": ours, "error": ours / c.value_si - 1.0})
    return out


def _median_abs(errs: list[float]) -> float:
    return statistics.median(abs(e) for e in errs) if errs else math.nan


def attention_table(rows: list[dict[str, Any]] | None = None,
                    loso: dict[str, Any] | None = None) -> str:
    """Markdown: every case with ours (the shipped table: each architecture's fit over all its
    sources), the error and the error of the fit without its source ("judged": a case no fit
    uses; "outlier": a known outlier, its reason on the page); medians in-sample per
    architecture, per source held out, and over the judged cases."""
    rows = attention_rows() if rows is None else rows
    loso = loso_rows() if loso is None else loso
    held = {c.id: e for errs in loso.values() for c, e in errs}
    lines = ["| case | published | ours | error | source left out | source |",
             "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        c = r["case"]
        h = held.get(c.id)
        tag = ("outlier" if c.known_outlier else "judged" if not c.scenario.get("fit", True)
               else "—" if h is None else f"{h:+.1%}")
        lines.append(f"| {c.id} | {c.measured:g} TFLOP/s | {r['ours'] / 1e12:.0f} | "
                     f"{r['error']:+.1%} | {tag} | {c.source} |")
    fit_ids = {c.id for c in fitted([r["case"] for r in rows])}
    by_arch: dict[str, list[float]] = {}
    for r in rows:
        if r["case"].id in fit_ids:
            by_arch.setdefault(case_work(r["case"])[2], []).append(r["error"])
    judged = [r for r in rows if not r["case"].scenario.get("fit", True)]
    lines += ["", "**In-sample: " + "; ".join(
        f"{a} ({len(e)} cases) median |error| {_median_abs(e):.1%}, worst {max(e, key=abs):+.1%}"
        for a, e in sorted(by_arch.items(), reverse=True)) + ". Leave-one-source-out: "
        + "; ".join(f"{s} ({len(e)} cases) median {_median_abs([x for _, x in e]):.1%}, "
                    f"worst {max((x for _, x in e), key=abs):+.1%}"
                    for s, e in loso.items() if e) + ". Judged (in no fit): "
        + "; ".join(f"{k} ({len(g)} cases) median |error| "
                    f"{_median_abs([r['error'] for r in g]):.1%}"
                    for k, g in _judged_groups(judged).items()) + ".**"]
    return "\n".join(lines)


def _judged_groups(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        c = r["case"]
        out.setdefault(f"{c['kernel']} on {c['hardware']} ({c.source})", []).append(r)
    return out


def attention_figures(rows: list[dict[str, Any]] | None = None,
                      loso: dict[str, Any] | None = None,
                      fits: dict[str, dict[str, Any]] | None = None) -> dict[str, str]:
    """The figures docs/validation/attention.md's prose quotes (inline ``<!--v:KEY-->``
    markers), from the rows, held-out errors and per-architecture fits the table uses: each
    architecture's curve, fractions, RMS log error and case counts (``att.<arch>.*``), the
    in-sample and held-out errors the bullets cite, the judged cases' medians."""
    from .holdout import fmt_pct, span_pct

    rows = attention_rows() if rows is None else rows
    loso = loso_rows() if loso is None else loso
    fits = arch_fits() if fits is None else fits
    out: dict[str, str] = {}

    for arch, f in fits.items():
        k = f"att.{arch}"
        out |= {f"{k}.x0": f"{f['x0']:g}", f"{k}.p": f"{f['p']:g}",
                f"{k}.rms": f"{f['rms']:.3f}",
                f"{k}.n": str(sum(1 for c in fitted() if case_work(c)[2] == arch))}
        for (kern, _, field), fr in f["fractions"].items():
            out[f"{k}.{kern}.{field}"] = f"{fr:.3f}"
            out[f"{k}.{kern}.{field}.pct"] = fmt_pct(fr, sign=False)

        def curve(x: float, f: dict[str, Any] = f) -> float:
            return 1.0 / (1.0 + (f["x0"] / x) ** f["p"])

        out |= {f"{k}.at512": fmt_pct(curve(512.0), sign=False),
                f"{k}.at16k": fmt_pct(curve(16384.0), 1, sign=False)}
    by_id = {r["case"].id: r for r in rows}
    held = {s: [e for _, e in errs] for s, errs in loso.items()}
    held_id = {c.id: e for errs in loso.values() for c, e in errs}
    bw = [r["error"] for r in rows if r["case"] in fitted([r["case"] for r in rows])
          and case_work(r["case"])[2] == "blackwell"]
    out["att.outliers"] = str(sum(1 for r in rows if r["case"].known_outlier))
    out["att.blackwell.in_sample"] = fmt_pct(_median_abs(bw), 1, sign=False)
    for s, e in held.items():
        out[f"att.loso.{s}"] = fmt_pct(_median_abs(e), sign=False)
        out[f"att.loso.{s}.worst"] = fmt_pct(max(e, key=abs))
    fa1589 = min(((c, e) for c, e in loso.get("fa1589", [])), key=lambda ce: ce[1])
    out["att.fa1589.worst_ours"] = f"{fa1589[0].value_si * (1 + fa1589[1]) / 1e12:.0f}"
    short = [held_id[c] for c in held_id if c.startswith("fa2 fwd h128 s")
             and c.endswith("(fa3paper)") and int(c.split(" s")[1].split()[0]) <= 2048]
    out["att.fa3paper.fa2_short_loso"] = span_pct(short, signed=False)
    out["att.tb171.s16384"] = fmt_pct(held_id["fa2 fwd h128 s16384 B200 (tb171)"])
    out["att.gb200_cudnn.s512"] = fmt_pct(
        by_id["cudnn fwd h128 s512 causal GB200 (cudnnfe)"]["error"])
    out["att.fa2_causal_fwd"] = fmt_pct(by_id["fa2 fwd h128 s8192 causal (fa1791)"]["error"])

    def span(pred: Any) -> list[float]:
        return [r["error"] for r in rows if pred(r["case"].id)]

    out["att.fa3_bwd_h128"] = span_pct(span(lambda i: i.startswith("fa3 bwd h128")
                                            and "fa1791" in i), signed=False)
    out["att.fa3_bwd_h64"] = span_pct(span(lambda i: i.startswith("fa3 bwd h64")), signed=False)
    out["att.gb200_cudnn"] = span_pct(span(lambda i: i.startswith("cudnn ") and "fp8" not in i
                                           and "GB200 (cudnnfe)" in i))
    judged = [r for r in rows if not r["case"].scenario.get("fit", True)]
    for g in _judged_groups(judged).values():
        c = g[0]["case"]
        name = f"att.judged.{c['hardware']}.{c.source}"
        errs = [r["error"] for r in g]
        out[name] = fmt_pct(_median_abs(errs), sign=False)
        out[f"{name}.range"] = span_pct(errs, signed=False)
    return out
