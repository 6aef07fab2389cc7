"""Fused-attention kernels (data/presets/attention.toml) against published kernel speeds on
H100 (docs/validation/attention.md).

Cases: src/roofline/data/validation/attention.toml — the FlashAttention-3 paper's H100 figures
(forward head dim 128 and backward head dim 64, FlashAttention-2 / cuDNN / FlashAttention-3,
sequence 512 to 16k) and pytorch/benchmark's FA3 measurements (a source the table did not take
a number from). Each case is one attention op priced by the time model: the kernel's time
(no launch or dispatch: the benchmarks time the kernel), its FLOPs counted as the benchmarks do
(4·B·N·T·S·H forward, 2.5× backward), as TFLOP/s.

The table takes one number per (kernel, direction) from the paper (the 16k forward and 2k
backward points), so the paper's other sequence lengths are in-sample for the kernel and
out-of-sample for the length; torchbench is held out entirely.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from .cases import Case, load_cases

__all__ = ["attention_cases", "predict_tflops", "attention_rows", "attention_table"]


def attention_cases() -> tuple[Case, ...]:
    return load_cases("attention").cases


def predict_tflops(case: Case) -> float:
    """Our TFLOP/s (FLOP/s) for one attention kernel call of ``case``."""
    from ..engine.core import time_model
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
    eff = efficiency_for(hw, "default", sc["kernel"])
    ot = time_model(g, hw, eff).evaluate(float(sc["batch"]))
    return float(ot.flops[idx] / ot.t_kernel[idx])


def attention_rows() -> list[dict[str, Any]]:
    out = []
    for c in attention_cases():
        ours = predict_tflops(c)
        out.append({"case": c, "ours": ours, "error": ours / c.value_si - 1.0})
    return out


def _median_abs(rs: list[dict[str, Any]]) -> float:
    return statistics.median(abs(r["error"]) for r in rs) if rs else math.nan


def attention_table(rows: list[dict[str, Any]] | None = None) -> str:
    """Markdown: every case with ours and the error; medians in-sample (the paper) and held out
    (torchbench)."""
    rows = attention_rows() if rows is None else rows
    lines = ["| case | published | ours | error | source |", "|---|---:|---:|---:|---|"]
    for r in rows:
        c = r["case"]
        lines.append(f"| {c.id} | {c.measured:g} TFLOP/s | {r['ours'] / 1e12:.0f} | "
                     f"{r['error']:+.1%} | {c.source} |")
    paper = [r for r in rows if r["case"].source == "fa3paper"]
    long = [r for r in paper if r["case"]["seq_len"] >= 2048]
    held = [r for r in rows if r["case"].source != "fa3paper"]
    worst = max(held, key=lambda r: abs(r["error"]))["error"]
    lines += ["", f"**FA3 paper (the table's source, {len(paper)} points): median |error| "
                  f"{_median_abs(paper):.1%} ({_median_abs(long):.1%} at sequence ≥ 2k); "
                  f"pytorch/benchmark held out ({len(held)} points): median |error| "
                  f"{_median_abs(held):.1%}, worst {worst:+.1%}.**"]
    return "\n".join(lines)
