"""The one fp8 matmul factor (``[gpu.gemm_dtype] fp8`` of data/presets/default.toml) judged on
published fp8 training runs it was not fitted on (docs/validation/fp8.md).

The factor was fitted on fp8 *serving* runs (the serving fit's shared fraction of the fp8 peak,
0.49, over the 16-bit gemm.max 0.80: 0.6125). Training used to price fp8 matmuls at its bf16
fraction of the fp8 peak; now every scenario scales its own 16-bit model by the factor, and a
training table may scale it again (``dtype_scale``: on Hopper to MAMF's measured H100 fp8/bf16
ratio, data/presets/training.toml). The
NeMo fp8 fine-tuning runs on H100 (data/validation/training_runs.toml) were never part of a
fit: they judge it. ``fp8_rows(factor)`` prices them with any factor (1.0: before the term).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .training_runs import cases, predict_run

__all__ = ["fp8_rows", "fp8_table", "fp8_figures"]


def fp8_rows(factor: float | None = None) -> list[dict[str, Any]]:
    """The fp8 training runs with the shipped factors (None) or with fp8 matmuls at ``factor``
    times the training table's 16-bit fraction of the fp8 peak (the preset's factor set to
    ``factor`` over the table's ``dtype_scale``, so 1.0 is the 16-bit fraction): id, published
    and our tokens/s/GPU, error (ours / published − 1)."""
    from ..engine import presets
    from ..scenarios.training.factors import training_factors
    from ..specs.hardware import spec_key
    from ..specs.resolve import cluster

    fp8 = [c for c in cases() if c.scenario["precision"] == "fp8" and not c.known_outlier]
    hws = {spec_key(h): h for h in (cluster(c.scenario["cluster"]).device for c in fp8)}
    saved = {k: presets._CUSTOM.get(k) for k in hws}  # noqa: SLF001 - restored below
    try:
        if factor is not None:
            base = presets.default_tables()["gpu"]
            for h in hws.values():
                f8 = factor / training_factors(h.kind, h.key).dtype_scale
                eff = replace(base, gemm_dtype=replace(base.gemm_dtype, fp8=f8),
                              label=f"{base.label}/fp8={f8:g}")
                presets.register_efficiency(h, eff)
        out = []
        for c in fp8:
            r, _ = predict_run(c)
            ours = r.tokens_per_s / r.devices
            out.append({"id": c.id, "published": c.value_si, "ours": ours,
                        "error": ours / c.value_si - 1.0})
        return out
    finally:
        for k, v in saved.items():
            presets.register_efficiency(hws[k], v)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def fp8_table(rows: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None) -> str:
    """Markdown: each fp8 run before the factor (1.0) and with it; the medians. ``rows``:
    (fp8_rows(1.0), fp8_rows()) when already computed."""
    before, after = (fp8_rows(1.0), fp8_rows()) if rows is None else rows
    lines = ["| run | published | fp8 at the 16-bit training fraction | error | with the fp8 "
             "factors | error |", "|---|---:|---:|---:|---:|---:|"]
    for b, a in zip(before, after):
        lines.append(f"| {a['id']} | {a['published']:,.0f} tok/s/GPU | {b['ours']:,.0f} | "
                     f"{b['error']:+.1%} | {a['ours']:,.0f} | {a['error']:+.1%} |")
    mb = _median([abs(x["error"]) for x in before])
    ma = _median([abs(x["error"]) for x in after])
    lines += ["", f"**{len(after)} fp8 runs held out from every fit: median |error| {mb:.1%} "
                  f"at the 16-bit fraction, {ma:.1%} with the fp8 factors.**"]
    return "\n".join(lines)


def fp8_figures(rows: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None
                ) -> dict[str, str]:
    """The figures docs/validation/fp8.md's prose quotes (inline ``<!--v:KEY-->`` markers): the
    signed range of the errors at the 16-bit fraction ("−2 … +17 %"), the held-out median
    |error| there and with the shipped factors ("8.1 %"), and the range with them."""
    from .holdout import fmt_pct, span_pct

    before, after = (fp8_rows(1.0), fp8_rows()) if rows is None else rows
    def med(rs: list[dict[str, Any]]) -> str:
        return fmt_pct(_median([abs(x["error"]) for x in rs]), 1, sign=False)

    return {"fp8.before_range": span_pct([x["error"] for x in before]),
            "fp8.before_median": med(before), "fp8.after_median": med(after),
            "fp8.after_range": span_pct([x["error"] for x in after])}
