"""A power-capped card's sustained fraction of its peaks, from one harness run on it and on an
uncapped part of the same architecture (docs/validation/gemm.md, "H100 PCIe").

The H100 PCIe (350 W) and the H100 SXM5 (700 W) run the same Hopper tile model (the 16-bit set
of data/presets/tiles.toml, fitted on OpenXLA's SXM5 / B200 tables) at their own SM counts and
datasheet peaks. A harness run on both (source zzc_h100pcie and zzc_h100 of
data/validation/gemm.toml: square torch.mm, fp16 and bf16) is priced on each part with the
model; whatever the harness costs (its launches, its library version) cancels in the ratio

    s = median over (dtype, size >= 4096) of (PCIe measured / PCIe ours) / (SXM measured / SXM ours)

— the fraction of what the model prices for an uncapped part that the capped card sustains. It
is the ``[sustained]`` bf16 / fp16 value of data/hardware/nvidia/h100-pcie.toml (a test checks
that the shipped value is this fit's), which the default preset applies to every compute-class
op of those dtypes on the card. Judged on H100 PCIe measurements it was not fitted on: the
FlashAttention-3 rows of docs/validation/attention.md and the llama.cpp rows of
docs/validation/llamacpp.md.
"""

from __future__ import annotations

import numpy as np

from .cases import Case, load_cases

__all__ = ["PAIRS", "MIN_SIZE", "pair_cases", "sustained_fit", "sustained_table"]

#: capped part -> (its source, the uncapped reference part, the reference's source)
PAIRS: dict[str, tuple[str, str, str]] = {"h100-pcie": ("zzc_h100pcie", "h100-sxm5", "zzc_h100")}
#: the sizes the ratio is taken over (m = n = k >= this: the kernel time, not the launches)
MIN_SIZE = 4096


def pair_cases(part: str) -> tuple[tuple[Case, ...], tuple[Case, ...]]:
    """(the capped part's cases, the reference part's cases) of ``part``'s pair."""
    if part not in PAIRS:
        from ..errors import unknown

        raise unknown("capped part (validation.sustained.PAIRS)", part, PAIRS)
    src, _, ref_src = PAIRS[part]
    cs = load_cases("gemm").cases
    return (tuple(c for c in cs if c.source == src), tuple(c for c in cs if c.source == ref_src))


def _uncapped(case: Case) -> float:
    """Our FLOP/s for ``case`` on its part without any ``[sustained]`` fraction."""
    from .gemm import predict_gemm

    return predict_gemm(case, uncapped=True)


def sustained_fit(part: str = "h100-pcie") -> tuple[float, list[tuple[str, int, float]]]:
    """(s rounded to 0.01, the per (dtype, size) ratios it is the median of), as the module
    docstring defines them."""
    capped, ref = pair_cases(part)
    by = {(c["dtype"], c["m"]): c for c in ref}
    ratios = []
    for c in capped:
        if c["m"] < MIN_SIZE:
            continue
        r = by[(c["dtype"], c["m"])]
        ratios.append((c["dtype"], c["m"], (c.value_si / _uncapped(c))
                       / (r.value_si / _uncapped(r))))
    return round(float(np.median([x for _, _, x in ratios])), 2), ratios


def _row(c: Case, ours0: float, ours: float) -> str:
    return (f"| {c.id} | {c.value_si / 1e12:.1f} TFLOP/s | {ours0 / 1e12:.1f} | "
            f"{ours0 / c.value_si - 1:+.1%} | {ours / 1e12:.1f} | {ours / c.value_si - 1:+.1%} |")


def sustained_table(part: str = "h100-pcie") -> str:
    """Markdown: the fit, then every case of the pair without and with the part's shipped
    ``[sustained]`` fraction (the reference part has none: its two columns are equal)."""
    from ..specs.hardware import hardware
    from .gemm import predict_gemm

    s, ratios = sustained_fit(part)
    shipped = hardware(part).sustained("bf16")
    capped, ref = pair_cases(part)
    lines = [f"{part}: s = median of {len(ratios)} ratios (sizes >= {MIN_SIZE}) = **{s:.2f}** "
             f"(shipped [sustained] bf16 / fp16: {shipped:.2f}); ratios " + ", ".join(
                 f"{d} {m}: {x:.3f}" for d, m, x in ratios) + ".", "",
             "| case | published | ours, no derating | error | ours, shipped | error |",
             "|---|---:|---:|---:|---:|---:|"]
    for c in (*capped, *ref):
        lines.append(_row(c, _uncapped(c), predict_gemm(c)))
    for label, cs in (("capped part, sizes >= 4096", [c for c in capped if c["m"] >= MIN_SIZE]),
                      ("reference part, sizes >= 4096", [c for c in ref if c["m"] >= MIN_SIZE])):
        e0 = [abs(_uncapped(c) / c.value_si - 1) for c in cs]
        e1 = [abs(predict_gemm(c) / c.value_si - 1) for c in cs]
        lines.append(f"| median \\|error\\|, {label} ({len(cs)}) | | | {np.median(e0):.1%} | "
                     f"| {np.median(e1):.1%} |")
    return "\n".join(lines)

