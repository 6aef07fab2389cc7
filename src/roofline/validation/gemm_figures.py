"""The figures docs/validation/gemm.md's prose quotes (inline ``<!--v:KEY-->`` markers that
``python -m roofline.validation.regenerate`` rewrites), computed by the functions its tables
use (``roofline.validation.gemm``, ``cdna``, ``sustained``): named cases'
errors, ranges and medians over the groups the prose names, the fitted sets' values.

``gemm_page_figures(reports)`` takes what the page's tables already computed in the same run
(``reports``: ``{"fp8": fp8_fit_report(), "streamk": stream_k_report(), "holdout":
gemm_holdout()}``, any of them missing is computed here).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import numpy as np

from . import gemm as g
from .cases import Case
from .holdout import fmt_pct, span_pct

__all__ = ["gemm_page_figures"]


def _med(errs: Sequence[float]) -> float:
    return float(np.median(np.abs(np.asarray(errs))))


def _dot(like: Case, hw: str, m: int, n: int, k: int, dtype: str = "bf16") -> Case:
    return replace(like, scenario=MappingProxyType(
        {"hardware": hw, "dtype": dtype, "b": 1, "m": m, "n": n, "k": k}))


def _nvidia(rep: Mapping[str, Any]) -> dict[str, str]:
    """The NVIDIA sections: the H200 8192³ point, the A100 sources, the PCIe pair, the fp8 sets,
    the MAMF control rows, stream-K, the unseen pool, the limits' named dots."""
    from .sustained import MIN_SIZE, pair_cases

    out: dict[str, str] = {}
    like = g.kernel_cases()[0]
    big = _dot(like, "h200-sxm", 8192, 8192, 8192)
    out["gemm.h200_8192"] = f"{g.predict_gemm(big) / 1e12:.0f}"
    out["gemm.h200_8192.smooth"] = f"{g.predict_gemm(big, smooth=True) / 1e12:.0f}"
    # the A100 sources (op time, the transferred set)
    a100 = g.gemm_errors(cases=g.a100_cases())
    by_src: dict[str, list[float]] = {}
    for c, _, e in a100:
        by_src.setdefault(c.source, []).append(e)
    out["gemm.a100.others_within"] = fmt_pct(max(_med(v) for s, v in by_src.items()
                                                 if s != "tri6523"), sign=False)
    out["gemm.a100.azure"] = fmt_pct(_med(by_src["azure_a100"]), sign=False, digits=1)
    out["gemm.a100.all"] = fmt_pct(_med([e for v in by_src.values() for e in v]), sign=False,
                                   digits=1)
    out["gemm.a100.without_tri6523"] = fmt_pct(_med([e for s, v in by_src.items()
                                                     if s != "tri6523" for e in v]),
                                               sign=False, digits=1)
    thin = next(c for c, _, _ in a100 if c.source == "azure_a100" and c["m"] == 802816)
    out["gemm.a100.thin"] = fmt_pct(g.predict_gemm(thin) / thin.value_si - 1, sign=False)
    out["gemm.a100.thin.smooth"] = fmt_pct(g.predict_gemm(thin, smooth=True) / thin.value_si - 1,
                                           sign=False)
    # the H100 PCIe pair: without the derating (uncapped), and the small sizes with it
    pcie, sxm = pair_cases("h100-pcie")
    large = [c for c in pcie if c["m"] >= MIN_SIZE]
    out["gemm.pcie.uncapped"] = span_pct([g.predict_gemm(c, uncapped=True) / c.value_si - 1
                                          for c in large], signed=False)
    out["gemm.sxm.large"] = span_pct([g.predict_gemm(c) / c.value_si - 1 for c in sxm
                                      if c["m"] >= MIN_SIZE])
    out["gemm.pair.small"] = span_pct([g.predict_gemm(c) / c.value_si - 1 for c in pcie + sxm
                                       if c["m"] < MIN_SIZE])
    # fp8: Blackwell's fitted set, the 16-bit set, Hopper's max judged per source
    fit8, _, r8 = rep["fp8"]
    v8 = fit8.values
    out |= {"gemm.fp8.max": f"{v8['max']:g}", "gemm.fp8.a": f"{v8['a']:g}",
            "gemm.fp8.c": f"{v8['c']:g}", "gemm.fp8.fill": f"{v8['fill'] * 1e6:g}"}
    v16 = rep["holdout"].shipped
    out |= {"gemm.bf16.max": f"{v16['max']:g}", "gemm.bf16.c": f"{v16['c']:g}",
            "gemm.bf16.fill": f"{v16['fill'] * 1e6:g}"}
    hop = g.hopper_fp8_cases()
    held = {c.id: math.expm1(r8.held_out_errors[c.id]) for c in hop}
    bigs = [c for c in hop if g.sets_max(c)]
    out["gemm.fp8.held_large"] = fmt_pct(_med([held[c.id] for c in bigs]), sign=False, digits=1)
    after = {c.id: g.predict_gemm(c) / c.value_si - 1 for c in hop}
    small = [c for c in hop if not g.sets_max(c)]
    out["gemm.fp8.small.h100"] = span_pct([after[c.id] for c in small if "H100" in c.id
                                           and c["m"] != 802816])
    out["gemm.fp8.small.h200"] = span_pct([after[c.id] for c in small if "H200" in c.id
                                           and c["m"] != 802816], signed=False)
    out["gemm.fp8.small.thin"] = span_pct([after[c.id] for c in small if c["m"] == 802816],
                                          signed=False)
    out["gemm.fp8.before_large"] = span_pct([g.predict_gemm(c, smooth=True) / c.value_si - 1
                                             for c in bigs], signed=False)
    # MAMF's NVIDIA rows no tile fit uses (op time, as vendors.md prices them)
    for c in g.nvidia_control_cases():
        k = "gemm.mamf." + c.id.removeprefix("mamf ").replace(" ", "_")
        out[k] = fmt_pct(g.predict_gemm(c, op_time=True) / c.value_si - 1, digits=1)
        out[k + ".smooth"] = fmt_pct(g.predict_gemm(c, smooth=True, op_time=True) / c.value_si - 1,
                                     digits=1)
        out[k + ".ours"] = f"{g.predict_gemm(c, op_time=True) / 1e12:.1f}"
    out |= _stream_k_unseen_limits(rep, held)
    return out


def _stream_k_unseen_limits(rep: Mapping[str, Any], held: Mapping[str, float]
                            ) -> dict[str, str]:
    out: dict[str, str] = {}
    sk = {on: (ins, lo) for name, on, ins, lo in rep["streamk"] if name.startswith("Hopper fp8")}
    for on, tag in ((False, "off"), (True, "on")):
        ins, lo = sk[on]
        out[f"gemm.streamk.hopper_fp8.{tag}.rms"] = f"{ins.rms_log:.3f}"
        out[f"gemm.streamk.hopper_fp8.{tag}.held"] = fmt_pct(lo.median_abs, sign=False, digits=1)
    out["gemm.unseen.hopper_fp8"] = fmt_pct(_med(list(held.values())), sign=False, digits=1)
    kern = {c.id: e for c, _, e in g.gemm_errors()}
    for cid, key in (("H100 bf16 256x256x4096", "h100_thin"), ("B200 bf16 256x256x4096",
                     "b200_thin"), ("B200 bf16 4096x4096x4096", "b200_4096")):
        out[f"gemm.{key}"] = fmt_pct(abs(kern[cid]), sign=False)
    return out


def _cdna() -> dict[str, str]:
    """The CDNA section: the smooth model's fitted max, the tables' medians, the large-shape
    rows in sample, held out and judged (as cdna_anchor_table prices them)."""
    from ..engine.presets import efficiency_for
    from ..specs.hardware import hardware
    from . import cdna

    out: dict[str, str] = {}
    for part in ("mi300x", "mi355x"):
        eff = efficiency_for(hardware(part), "default")
        out[f"gemm.cdna.smooth_max.{part}"] = f"{eff.gemm.max:.2f}"
    cs = cdna.cdna_table_cases()
    before = {c.id: e for c, _, e in g.gemm_errors(smooth=True, cases=cs)}
    after = {c.id: e for c, _, e in g.gemm_errors(cases=cs)}
    meds = {}
    for part, dt in sorted({(c["hardware"], c["dtype"]) for c in cs}):
        ids = [c.id for c in cs if (c["hardware"], c["dtype"]) == (part, dt)]
        meds[(part, dt)] = (_med([before[i] for i in ids]), _med([after[i] for i in ids]))
        out[f"gemm.cdna.{part}.{dt}"] = fmt_pct(meds[(part, dt)][1], sign=False)
    out["gemm.cdna.bf16"] = fmt_pct(max(meds[k][1] for k in meds if k[1] == "bf16"), sign=False)
    out["gemm.cdna.smooth"] = span_pct([meds[k][0] for k in meds], signed=False)
    big = [c.id for c in cs if (c["hardware"], c["dtype"]) == ("mi300x", "fp8")
           and c["m"] * c["n"] * c["k"] >= 2048 ** 3]
    out["gemm.cdna.mi300x_fp8_large"] = fmt_pct(_med([after[i] for i in big]), sign=False)
    r16 = cdna.cdna_holdout("cdna3", "bf16")
    for cid, part in (("mamf MI300X bf16", "mi300x"), ("mamf MI325X bf16", "mi325x")):
        out[f"gemm.cdna.no_mamf.{part}"] = fmt_pct(math.expm1(r16.held_out_errors[cid]))
    r4 = cdna.cdna_holdout("cdna4", "bf16")
    out["gemm.cdna.no_mamf.mi355x"] = fmt_pct(math.expm1(r4.held_out_errors["mamf MI355X bf16"]))
    table = next(p for p in r16.per_source if p.source != "mamf")
    out["gemm.cdna.table_held"] = fmt_pct(table.held_out.median_abs, sign=False, digits=1)
    out["gemm.cdna.table_in"] = fmt_pct(table.in_sample.median_abs, sign=False, digits=1)
    judged = cdna.cdna_judged_cases()[0]
    out["gemm.cdna.judged"] = fmt_pct(g.predict_gemm(judged) / judged.value_si - 1)
    out["gemm.cdna.judged.smooth"] = fmt_pct(g.predict_gemm(judged, smooth=True)
                                             / judged.value_si - 1)
    r8 = cdna.cdna_holdout("cdna3", "fp8")
    az = [c for c in cdna.cdna_anchor_cases() if c.source == "azure"]
    out["gemm.cdna.azure"] = span_pct([g.predict_gemm(c) / c.value_si - 1 for c in az])
    out["gemm.cdna.azure.held"] = span_pct([math.expm1(r8.held_out_errors[c.id]) for c in az])
    return out | _cdna_held() | _cdna_clock() | _cdna_aiter()


def _cdna_held() -> dict[str, str]:
    """Each CDNA table's median |error| held out (its set fitted without it)."""
    from . import cdna

    out = {}
    for arch, dt in (("cdna3", "bf16"), ("cdna4", "bf16"), ("cdna3", "fp8")):
        table = cdna.CDNA_SETS[(arch, dt)][0]
        p = next(x for x in cdna.cdna_holdout(arch, dt).per_source if x.source == table)
        out[f"gemm.cdna.held.{arch}_{dt}"] = fmt_pct(p.held_out.median_abs, sign=False,
                                                       digits=1)
    return out


#: the aiter fp8 row gemm.md reads as its example of the large GEMMs (m, n, k)
AITER_EXAMPLE = (16384, 8192, 28672)


def _cdna_aiter() -> dict[str, str]:
    """aiter's MI355X rows, held out (no fit saw them): the median |error| per dtype, as
    cdna_tuned.tuned_table's 'all M' rows; and the fp8 row ``AITER_EXAMPLE``, measured and
    ours in TFLOP/s and the error."""
    from . import cdna_tuned as ct

    errs = ct.tuned_errors()
    out = {f"gemm.cdna.aiter.{dt}": fmt_pct(_med([e for c, e in errs if c["dtype"] == dt]),
                                            sign=False, digits=1) for dt in ("fp8", "bf16")}
    rows = [(c, e) for c, e in errs
            if c["dtype"] == "fp8" and (c["m"], c["n"], c["k"]) == AITER_EXAMPLE]
    if len(rows) != 1:  # (gemm.md's sentence names this row: it must be there, once)
        raise ValueError(f"AITER_EXAMPLE={AITER_EXAMPLE}: {len(rows)} aiter fp8 rows of that "
                         "(m, n, k); allowed: exactly one (an fp8 row of "
                         "cdna_tuned.tuned_errors())")
    c, e = rows[0]
    flops = 2.0 * c["b"] * c["m"] * c["n"] * c["k"]
    out["gemm.cdna.aiter.example.measured"] = f"{flops / ct.measured_time(c) / 1e12:,.0f}"
    out["gemm.cdna.aiter.example.ours"] = f"{flops / ct.tuned_time(c) / 1e12:,.0f}"
    out["gemm.cdna.aiter.example.error"] = fmt_pct(e)
    return out


def _cdna_clock() -> dict[str, str]:
    """AMD's MAF rows with the shipped sets, and the MI325X's at the MI300X's clock (its
    clock ratio removed): what the measured clock moves."""
    from dataclasses import replace

    from . import cdna_tuned as ct

    rows = [c for c in ct.tuned_cases() if c.source == "amd_maf"]
    out = {"gemm.cdna.maf": span_pct([ct.measured_time(c) / ct.tuned_time(c) - 1
                                      for c in rows])}
    hw, eff = g._hw_eff("mi325x")
    at300 = replace(eff, tiles=replace(eff.tiles, clock=()))
    errs = [ct.measured_time(c) / ct.kernel_time(c, hw, at300) - 1 for c in rows
            if c["hardware"] == "mi325x"]
    out["gemm.cdna.maf.mi325x_at_mi300x_clock"] = span_pct(errs)
    return out


def gemm_page_figures(reports: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Every inline figure of docs/validation/gemm.md by key (see the module docstring)."""
    makers: dict[str, Callable[[], Any]] = {
        "fp8": g.fp8_fit_report, "streamk": g.stream_k_report, "holdout": g.gemm_holdout}
    rep = {k: (reports or {}).get(k) or make() for k, make in makers.items()}
    return _nvidia(rep) | _cdna()
