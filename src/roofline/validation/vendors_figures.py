"""The CDNA / Gaudi / NVIDIA-control figures docs/validation/vendors.md's "Read" section quotes
(inline ``<!--v:KEY-->`` markers that ``python -m roofline.validation.regenerate`` rewrites):
from the ``VendorReport`` its fit, case and judged tables are made of, and — for the rows the
prose also prices under the smooth model and the end-to-end fp8 rule, or held out by the CDNA
tile fit — from ``roofline.validation.gemm.predict_gemm`` and ``cdna.cdna_holdout``, the
functions gemm.md's tables use."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from .holdout import fmt_pct, span_pct

__all__ = ["vendors_read_figures"]


def _fits(rep: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in rep.fits:
        k = f"v.{f.arch}.{f.factor.split('.')[0]}"
        out |= {f"{k}.shipped": f"{f.shipped:.3g}", f"{k}.kind": f"{f.kind_default:.2f}",
                f"{k}.before": span_pct([e for _, e in f.before], signed=False),
                f"{k}.in": span_pct([e for _, e in f.in_sample])}
        if f.left_out:
            out[f"{k}.left_out"] = span_pct([e for _, _, e in f.left_out], signed=False)
        for cid, e in f.before:
            out[f"v.before.{cid.removeprefix('mamf ').replace(' ', '_')}"] = fmt_pct(e)
    return out


def _judged(rep: Any) -> dict[str, str]:
    err = {cid: e for cid, _, _, _, e in rep.judged}
    before = dict(rep.judged_before)

    def ids(pred: Callable[[str], bool]) -> list[str]:
        return [cid for cid in err if pred(cid)]

    hbm = ids(lambda i: i.startswith(("azure ND H100", "azure ND H200")) and "HBM" in i)
    mi = ids(lambda i: i.startswith("azure ND MI300X v5 fp8"))
    fp8 = ids(lambda i: i.startswith(("azure ND H100 v5 fp8", "azure ND H200 v5 fp8")))
    thin = [i for i in fp8 if "802816" in i]
    small = [i for i in fp8 if i not in thin and int(i.split()[-1].split("x")[0]) <= 2048]
    large = [i for i in fp8 if i not in thin and i not in small]
    out = {"v.nvidia_hbm": span_pct([err[i] for i in hbm]),
           "v.mi300x_fp8": span_pct([err[i] for i in mi]),
           "v.mi300x_fp8.before": span_pct([before[i] for i in mi]),
           "v.hopper_fp8.large": span_pct([err[i] for i in large]),
           "v.h100_small": span_pct([err[i] for i in small if "H100" in i], signed=False),
           "v.h200_small": span_pct([err[i] for i in small if "H200" in i], signed=False),
           "v.thin": span_pct([err[i] for i in thin], signed=False)}
    for cid in ids(lambda i: i.startswith(("mamf ", "mamf v1 "))):
        k = "v.row." + cid.removeprefix("mamf ").replace(" ", "_")
        out |= {k: fmt_pct(err[cid]), f"{k}.1": fmt_pct(err[cid], 1)}
    g3 = ids(lambda i: i.startswith("Intel "))
    out |= {"v.intelg3": span_pct([err[i] for i in g3]),
            "v.intelg3.median": fmt_pct(statistics.median(abs(err[i]) for i in g3), 1, sign=False),
            "v.intelg3.before": span_pct([before[i] for i in g3], signed=False),
            "v.intelg3.before.median": fmt_pct(statistics.median(abs(before[i]) for i in g3),
                                               sign=False)}
    return out


def _smooth(cdna_fp8: Any) -> dict[str, str]:
    """The rows priced by the smooth model (what serve and train price: the end-to-end fp8
    rule for fp8), at op time as this page prices them; the MI300X fp8 rows held out."""
    from . import cdna, gemm

    def rule(cs: Sequence[Any]) -> list[float]:
        return [gemm.predict_gemm(c, smooth=True, op_time=True) / c.value_si - 1 for c in cs]

    az = [c for c in cdna.cdna_anchor_cases() if c.source == "azure"]
    hop = [c for c in gemm.hopper_fp8_cases() if c.source == "azure" and gemm.sets_max(c)]
    out = {"v.mi300x_fp8.rule": span_pct(rule(az)), "v.hopper_fp8.rule": span_pct(rule(hop)),
           "v.mi300x_fp8.held": span_pct([math.expm1(cdna_fp8.held_out_errors[c.id])
                                          for c in az])}
    ctrl = {c.id: c for c in gemm.nvidia_control_cases()}
    ctrl |= {c.id: c for c in gemm.hopper_fp8_cases() if c.source == "mamf"}
    for cid, c in ctrl.items():
        out[f"v.rule.{cid.removeprefix('mamf ').replace(' ', '_')}"] = fmt_pct(rule([c])[0])
    for c in cdna.cdna_judged_cases():
        e = gemm.predict_gemm(c, smooth=True, op_time=True) / c.value_si - 1
        out[f"v.rule.{c.id.removeprefix('mamf ').replace(' ', '_')}"] = fmt_pct(e, 1)
    return out


def vendors_read_figures(rep: Any, cdna_fp8: Any | None = None) -> dict[str, str]:
    """Every figure of the "Read" section by key: ``v.<arch>.<gemm|memory>.*`` (the fits),
    ``v.row.<row>`` (a judged row's error), ``v.rule.<row>`` (the smooth model at op time),
    ranges over the row groups the prose names. ``rep``: ``vendors.vendors_report()``;
    ``cdna_fp8``: ``cdna.cdna_holdout("cdna3", "fp8")``."""
    from . import cdna

    c8 = cdna.cdna_holdout("cdna3", "fp8") if cdna_fp8 is None else cdna_fp8
    return _fits(rep) | _judged(rep) | _smooth(c8)
