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
           "case_work", "loso_rows", "X0_GRID", "P_GRID"]

#: the grid ``fit`` searches (x0 in work units, p)
X0_GRID = np.arange(10.0, 1000.0, 5.0)
P_GRID = np.round(np.arange(0.5, 3.0001, 0.05), 2)


def attention_cases() -> tuple[Case, ...]:
    return load_cases("attention").cases


def _op(case: Case) -> tuple[Any, int, Any, Any]:
    """(graph, index of the priced op, hardware, efficiency) of one case."""
    from ..engine.presets import efficiency_for
    from ..graphs.backward import backward_graph
    from ..graphs.graph import GraphBuilder
    from ..specs.dtypes import precision
    from ..specs.resolve import hardware

    sc = case.scenario
    hw = hardware(sc["hardware"])
    b = GraphBuilder("attention", "forward", precision("bf16"))
    b.add("attention", "attn", n_heads=sc["heads"], n_kv_heads=sc["heads"],
          head_dim=sc["head_dim"], q_len=sc["seq_len"], kv_len=sc["seq_len"],
          causal=sc["causal"])
    g = b.build()
    idx = 0
    if sc["direction"] == "bwd":
        g = backward_graph(g).graph
        idx = next(i for i, n in enumerate(g.names) if n.endswith(".bwd")
                   and g.classes[i] == "attention")
    return g, idx, hw, efficiency_for(hw, "default", sc["kernel"])


def predict_tflops(case: Case) -> float:
    """Our TFLOP/s (FLOP/s) for one attention kernel call of ``case`` (the shipped table)."""
    from ..engine.core import time_model

    g, idx, hw, eff = _op(case)
    ot = time_model(g, hw, eff).evaluate(float(case.scenario["batch"]))
    return float(ot.flops[idx] / ot.t_kernel[idx])


def case_work(case: Case) -> tuple[float, float, str]:
    """(work per query row as the engine counts it, 16-bit sustained peak FLOP/s, the
    architecture) of one case."""
    from ..engine.attention import architecture, row_work

    g, idx, hw, _ = _op(case)
    return (float(row_work(g)[idx]), hw.peak("bf16") * hw.sustained("bf16"),
            architecture(hw) or "")


def _key(case: Case, arch: str) -> tuple[str, str, str]:
    return (case["kernel"], arch, case["direction"])


def fit(cases: tuple[Case, ...] | list[Case] | None = None) -> dict[str, Any]:
    """The (x0, p) and fractions per (kernel, architecture, direction) minimising the RMS log
    error over ``cases`` (default: all): {"x0", "p", "fractions", "rms"}."""
    cases = list(attention_cases() if cases is None else cases)
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


def _predict_with(f: dict[str, Any], case: Case) -> float | None:
    xw, peak, arch = case_work(case)
    fr = f["fractions"].get(_key(case, arch))
    if fr is None:
        return None
    return fr * peak / (1.0 + (f["x0"] / max(xw, 1.0)) ** f["p"])


def loso_rows() -> dict[str, Any]:
    """Each source judged by the fit over the others: {source: [(case, error)], ...} (cases
    whose (kernel, architecture, direction) only that source has are left out)."""
    cases = attention_cases()
    out: dict[str, Any] = {}
    for s in sorted({c.source for c in cases}):
        f = fit([c for c in cases if c.source != s])
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
    """Markdown: every case with ours (shipped: the fit over all sources), the error and the
    error of the fit without its source; medians in-sample and per source held out."""
    rows = attention_rows() if rows is None else rows
    loso = loso_rows() if loso is None else loso
    held = {c.id: e for errs in loso.values() for c, e in errs}
    lines = ["| case | published | ours | error | source left out | source |",
             "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        c = r["case"]
        h = held.get(c.id)
        lines.append(f"| {c.id} | {c.measured:g} TFLOP/s | {r['ours'] / 1e12:.0f} | "
                     f"{r['error']:+.1%} | {'—' if h is None else f'{h:+.1%}'} | {c.source} |")
    errs = [r["error"] for r in rows]
    lines += ["", f"**In-sample (all {len(rows)} cases): median |error| {_median_abs(errs):.1%}, "
                  f"worst {max(errs, key=abs):+.1%}. Leave-one-source-out: "
              + "; ".join(f"{s} ({len(e)} cases) median {_median_abs([x for _, x in e]):.1%}, "
                          f"worst {max((x for _, x in e), key=abs):+.1%}"
                          for s, e in loso.items() if e) + ".**"]
    return "\n".join(lines)
