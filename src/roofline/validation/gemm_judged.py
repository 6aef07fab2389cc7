"""GEMM rows from sources no fit uses, judged against the NVIDIA tile sets
(docs/validation/gemm.md "Judged on sources no fit saw").

Cases: src/roofline/data/validation/gemm_judged.toml (DeepGEMM's published H800 fp8 table:
block-scaled fp8 GEMMs of DeepSeek-V3's layer shapes, kernel time). Each row is priced as
validation/gemm.py prices a case — the one-op graph's kernel time on the zoo part with the
default preset, at the harness's clock — with the shipped tile set of its dtype, and with the
smooth matmul model (what every GPU had before the tile sets; for fp8 the end-to-end
``gemm_dtype.fp8`` rule). Error = ours / published − 1 in FLOP/s (+: ours too fast). Nothing is
fitted here, and no fit of the project reads this file (checked by a test).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .cases import Case, load_cases

__all__ = ["gemm_judged_cases", "gemm_judged_rows", "gemm_judged_table", "gemm_judged_summary"]


def gemm_judged_cases() -> tuple[Case, ...]:
    """The rows of data/validation/gemm_judged.toml."""
    return load_cases("gemm_judged").cases


def _decides(c: Case) -> str:
    """"compute" or "memory": the larger side of the tile-set kernel time (the compute side
    holds the per-kernel fill and the whole waves)."""
    from ..engine.core import TimeModel
    from .gemm import _graph, _hw_eff

    hw, eff = _hw_eff(c["hardware"], c.get("clock"))
    ot = TimeModel(_graph(c["m"], c["n"], c["k"], c["dtype"]), hw, eff).evaluate(float(c["b"]))
    return "compute" if float(ot.t_compute.sum()) >= float(ot.t_memory.sum()) else "memory"


@lru_cache(maxsize=1)
def gemm_judged_rows() -> tuple[tuple[Case, float, float, str], ...]:
    """(case, error with the tile set, error with the smooth model, the side that decides)."""
    from .gemm import predict_gemm

    return tuple((c, predict_gemm(c) / c.value_si - 1.0,
                  predict_gemm(c, smooth=True) / c.value_si - 1.0, _decides(c))
                 for c in gemm_judged_cases())


def _stats(errs: Sequence[float]) -> tuple[int, float, float]:
    e = np.asarray(errs, dtype=float)
    return len(e), float(np.median(np.abs(e))), float(e[np.argmax(np.abs(e))])


def gemm_judged_summary() -> dict[str, tuple[int, float, float]]:
    """Per group ("all", "M 64-128", "M >= 1024", "memory decides", "compute decides"):
    (n, median |error|, worst signed error) with the tile set."""
    rows = gemm_judged_rows()
    groups: dict[str, list[float]] = {"all": [], "M 64–128": [], "M ≥ 1024": [],
                                      "memory decides": [], "compute decides": []}
    for c, e, _, side in rows:
        groups["all"].append(e)
        groups["M 64–128" if c["m"] < 1024 else "M ≥ 1024"].append(e)
        groups[f"{side} decides"].append(e)
    return {k: _stats(v) for k, v in groups.items() if v}


def gemm_judged_table() -> str:
    """Markdown: every judged row, then the medians per group."""
    lines = ["| row | published | ours (tile set) | error | decides | smooth model | error |",
             "|---|---:|---:|---:|---|---:|---:|"]
    for c, e, es, side in gemm_judged_rows():
        lines.append(f"| {c.id} | {c.value_si / 1e12:.0f} TFLOP/s | "
                     f"{c.value_si * (1 + e) / 1e12:.0f} | {e:+.1%} | {side} | "
                     f"{c.value_si * (1 + es) / 1e12:.0f} | {es:+.1%} |")
    smooth = _stats([es for _, _, es, _ in gemm_judged_rows()])
    lines += ["", "| rows | n | median \\|error\\| | worst |", "|---|---:|---:|---:|"]
    for k, (n, med, worst) in gemm_judged_summary().items():
        lines.append(f"| {k} | {n} | {med:.1%} | {worst:+.1%} |")
    lines.append(f"| all, smooth model (before) | {smooth[0]} | {smooth[1]:.1%} | "
                 f"{smooth[2]:+.1%} |")
    return "\n".join(lines)


def _main() -> Any:  # pragma: no cover - a convenience for reading the table
    print(gemm_judged_table())


if __name__ == "__main__":  # pragma: no cover
    _main()
