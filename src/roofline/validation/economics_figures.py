"""The figures docs/validation/economics.md's prose quotes (inline ``<!--v:KEY-->`` markers that
``python -m roofline.validation.regenerate`` rewrites), from the rows its two generated tables
are made of (``roofline.analysis.reliability.validation_rows``,
``roofline.analysis.power_validation.validation_rows``) and from ``rl.reliability`` for the
goodputs the failure section quotes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .holdout import fmt_pct

__all__ = ["economics_figures"]

#: the power cases the prose names, by the short key of their figures
_POWER = {"b1": "ML.ENERGY v3.0 anchor: H100 SXM5 at batch 1",
          "l8b": "ML.ENERGY v3.0: Llama 3.1 8B on H100, batch 64 (vLLM 0.11.1)",
          "v054": "ML.ENERGY v2.0: Llama 3.1 8B on H100, batch 64 (vLLM 0.5.4)",
          "h200": "Serial Alice: Phi-3-mini on H200 SXM, batch 128 (vLLM)",
          "b200": "Serial Alice: Phi-3-mini on B200 SXM, batch 128 (vLLM)",
          "latif": "Latif et al.: 8x H100 node training Llama2-13b (maximum)",
          "newkirk": "Newkirk et al.: 8x H100 node, compute-intensive training (76 % of 10.2 kW)",
          "m7b1": "Serial Alice: Mistral 7B on H100 SXM, batch 1 (vLLM)",
          "m7b128": "Serial Alice: Mistral 7B on H100 SXM, batch 128 (vLLM)"}


def _failures(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    from ..analysis.reliability import failure_rate_per_device_hour, reliability

    def under(case: str) -> str:
        r = next(x for x in rows if x["case"].startswith(case)
                 and x["fit"].startswith("Llama 3"))
        return f"{1 / r['ratio']:.2g}"

    ratios = [r["ratio"] for r in rows]
    out = {"econ.fail.opt_under": under("OPT-175B"), "econ.fail.b200_under": under("B200"),
           "econ.fail.span": f"{min(ratios):.2f} to {max(ratios):.2f}"}
    lam, _ = failure_rate_per_device_hour()
    for ck in (3.0, 60.0):
        for tag, rate in (("", lam), (".x2", 2 * lam)):
            g = reliability(devices=16384, job_hours=1296, checkpoint_s=ck,
                            failure_rate=rate).goodput
            out[f"econ.goodput.{ck:g}s{tag}"] = fmt_pct(g, 1, sign=False)
    return out


def _power(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    from ..analysis.power_validation import power_cases

    by = {r["case"]: r for r in rows}
    cases = {c.name: c for c in power_cases()}
    out: dict[str, str] = {}
    for key, name in _POWER.items():
        r = by[name]
        out |= {f"econ.pw.{key}.prev": f"{r['ratio_previous']:.2f}",
                f"econ.pw.{key}.in": f"{r['ratio']:.2f}",
                f"econ.pw.{key}.loso": f"{r['ratio_loso']:.2f}",
                f"econ.pw.{key}.mfu": f"{r['mfu']:.3f}"}
    out["econ.pw.b1.prev_w"] = f"{by[_POWER['b1']]['previous']:.0f}"
    for key in ("l8b", "m7b128"):
        c = cases[_POWER[key]]
        out[f"econ.pw.{key}.tok_s"] = f"{c.units_per_s:,.0f}"
        out[f"econ.pw.{key}.w_at_ours"] = f"{c.measured * c.units_per_s / c.devices:.0f}"
    batch128 = [by[_POWER[k]] for k in ("h200", "b200")]
    for tag, key in (("in", "ratio"), ("loso", "ratio_loso")):
        out[f"econ.pw.batch128.{tag}"] = fmt_pct(max(abs(r[key] - 1) for r in batch128), sign=False)
    fit = [r for r in rows if r["fit"]]
    for tag, key in (("in", "ratio"), ("loso", "ratio_loso")):
        med = math.expm1(float(np.median([abs(math.log(r[key])) for r in fit])))
        out[f"econ.pw.median.{tag}"] = fmt_pct(med, sign=False)
    return out


def economics_figures(failure_rows: Sequence[dict[str, Any]] | None = None,
                      power_rows: Sequence[dict[str, Any]] | None = None) -> dict[str, str]:
    """Every inline figure of docs/validation/economics.md by key (``econ.fail.*``,
    ``econ.goodput.*``, ``econ.pw.<case>.{prev,in,loso,mfu}``: ratios predicted / measured)."""
    from ..analysis import power_validation, reliability

    f = reliability.validation_rows() if failure_rows is None else failure_rows
    p = power_validation.validation_rows() if power_rows is None else power_rows
    return _failures(f) | _power(p)
