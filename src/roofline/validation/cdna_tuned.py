"""The CDNA 4 tile sets judged on a second source no fit saw: AMD aiter's tuned MI355X GEMMs.

The MI355X sets of data/presets/tiles.toml are fitted on ROCm/xla's table (bf16 with MAMF's
best shape; fp8 on the table alone, so far in sample only: validation/cdna.py). AMD's aiter
library commits its tuner's pick per GEMM shape with the measured kernel time
(data/validation/cdna_tuned.toml: 374 fp8 rows, bf16 output; 76 bf16 rows, fp32 output; M ≥ 64,
N and K of LLM layers). Each row is priced as solve prices a matmul on the part — the one-op
graph's kernel time with the part's tile set (``smooth``: the smooth matmul model instead) —
with the output written at the row's width (``out_dtype``: 4 bytes for the bf16 rows' fp32 D;
an fp8 GEMM writes 16 bits by default, Precision.matmul_out_bytes). Error = ours / published −
1 in FLOP/s (published kernel time / ours − 1): + means we predict it faster. Nothing here is
fitted; the rows are held out from every fit by construction.

The same file holds AMD's Max-Achievable-FLOPs rows (source amd_maf: one hipBLASLt GEMM per
dtype on the MI300X and MI325X, TFLOP/s with the median clock of the run), judged the same way
against the CDNA 3 sets (``maf_table``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from .cases import Case, load_cases

__all__ = ["tuned_cases", "tuned_time", "kernel_time", "measured_time", "tuned_errors", "M_CLASSES",
           "tuned_table", "maf_table"]

#: the M (token) classes of the table: [lo, hi)
M_CLASSES: tuple[tuple[int, int], ...] = ((64, 256), (256, 1024), (1024, 4096), (4096, 1 << 30))


def tuned_cases() -> tuple[Case, ...]:
    """The aiter rows (data/validation/cdna_tuned.toml)."""
    return load_cases("cdna_tuned").cases


@lru_cache(maxsize=2048)
def _graph(m: int, n: int, k: int, dtype: str, out_dtype: str | None) -> Any:
    from ..graphs.graph import GraphBuilder
    from ..specs.dtypes import DTYPE_BYTES, precision

    b = GraphBuilder(f"dot {m}x{n}x{k}", "forward", precision(dtype))
    if out_dtype is None:
        b.add("matmul", "dot", m=m, k=k, n=n)
    else:
        b.add("matmul", "dot", m=m, k=k, n=n, out_bytes=DTYPE_BYTES[out_dtype])
    return b.build()


def tuned_time(c: Case, *, smooth: bool = False) -> float:
    """Our kernel time (s) of ``c``: the one-op graph on the part with its tile set (``smooth``:
    without it), the output at ``out_dtype``'s width where the case gives one."""
    from .gemm import _hw_eff

    hw, eff = _hw_eff(c["hardware"])
    if smooth:
        eff = replace(eff, tiles=None)
    return kernel_time(c, hw, eff)


def kernel_time(c: Case, hw: Any, eff: Any) -> float:
    """The one-op graph's kernel time (s) of ``c`` on ``hw`` priced by ``eff``."""
    from ..engine.core import TimeModel

    g = _graph(c["m"], c["n"], c["k"], c["dtype"], c.get("out_dtype"))
    return float(TimeModel(g, hw, eff).evaluate(float(c["b"])).t_kernel.sum())


def measured_time(c: Case) -> float:
    """The published kernel time of ``c`` (s): as published for a kernel_time row, the dot's
    FLOPs over the published rate for a flops_per_s row (AMD's MAF table)."""
    if c.metric == "kernel_time":
        return c.value_si
    return 2.0 * c["b"] * c["m"] * c["n"] * c["k"] / c.value_si


@lru_cache(maxsize=2)
def tuned_errors(smooth: bool = False) -> tuple[tuple[Case, float], ...]:
    """(case, ours / published − 1 in FLOP/s) for every aiter row."""
    return tuple((c, measured_time(c) / tuned_time(c, smooth=smooth) - 1.0)
                 for c in tuned_cases() if c.source.startswith("aiter"))


def maf_table() -> str:
    """Markdown: AMD's MAF rows (MI300X / MI325X, one large GEMM per dtype, the median clock the
    page gives), ours with the part's tile set and with the smooth model."""
    lines = ["| row | published | tile set (held out) | error | smooth model | error |",
             "|---|---:|---:|---:|---:|---:|"]
    for c in tuned_cases():
        if c.source != "amd_maf":
            continue
        f = 2.0 * c["b"] * c["m"] * c["n"] * c["k"]
        t, sm = tuned_time(c), tuned_time(c, smooth=True)
        lines.append(f"| {c.id} | {c.value_si / 1e12:.0f} TFLOP/s | {f / t / 1e12:.0f} | "
                     f"{measured_time(c) / t - 1:+.1%} | {f / sm / 1e12:.0f} | "
                     f"{measured_time(c) / sm - 1:+.1%} |")
    return "\n".join(lines)


def _stats(errs: Sequence[float]) -> tuple[float, float, float]:
    e = np.asarray(errs)
    lg = np.log1p(e)
    return float(np.median(np.abs(e))), float(np.sqrt(np.mean(lg ** 2))), \
        float(e[np.argmax(np.abs(e))])


def tuned_table() -> str:
    """Markdown: per dtype and M class, the smooth model's and the tile set's errors."""
    after, before = tuned_errors(), tuned_errors(smooth=True)
    lines = ["| rows | n | smooth model: median \\|error\\| | tile set (held out): median "
             "\\|error\\| | RMS log | worst |",
             "|---|---:|---:|---:|---:|---:|"]
    for dt in ("fp8", "bf16"):
        groups = [(f"MI355X {dt}, all M", (0, 1 << 30))] + [
            (f"MI355X {dt}, M {lo}–{hi - 1}" if hi < 1 << 30 else f"MI355X {dt}, M ≥ {lo}",
             (lo, hi)) for lo, hi in M_CLASSES]
        for label, (lo, hi) in groups:
            a = [e for c, e in after if c["dtype"] == dt and lo <= c["m"] < hi]
            b = [e for c, e in before if c["dtype"] == dt and lo <= c["m"] < hi]
            if not a:
                continue
            med, rms, worst = _stats(a)
            lines.append(f"| {label} | {len(a)} | {_stats(b)[0]:.1%} | {med:.1%} | {rms:.3f} | "
                         f"{worst:+.1%} |")
    return "\n".join(lines)
