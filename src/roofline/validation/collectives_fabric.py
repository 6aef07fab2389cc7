"""A scale-out (NIC) efficiency per fabric, fitted and judged on the collectives page's
bandwidth cases across nodes (docs/validation/collectives.md, "Scale-out efficiency per fabric").

Training prices every NIC at one fitted efficiency (``scale_out_efficiency`` = 0.70 in
data/presets/training.toml, fitted on A100 Megatron runs). Here the nccl-tests runs across
nodes whose size makes the NICs matter (busbw cases of 128 MiB and more with more ranks than one
scale-up domain) are priced with an efficiency per fabric the source states (the case's
``fabric``: "ib", "roce", "efa"; cases that do not state one take the pooled value) and
compared, in-sample and leave-one-source-out, with the shipped 0.70 and with one efficiency
fitted on the same cases (``pooled``). Each efficiency minimises the sum of squared log errors
over its fabric's cases (golden section on ``EFF_RANGE``); a fabric without cases in a fold
takes that fold's pooled value. Judged, not shipped: the page says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

from ..errors import SpecError
from .cases import Case
from .holdout import FitReport, Refit, golden_bracket, leave_one_source_out

__all__ = ["FABRICS", "fabric_cases", "fit_pooled", "fit_fabric", "fabric_reports",
           "fabric_table", "fabric_figures"]

#: the fabrics a case may state (``fabric``)
FABRICS = ("ib", "roce", "efa")
POOLED = "pooled"
#: the range each efficiency is searched in
EFF_RANGE = (0.30, 1.00)
#: the fit's cases: busbw runs across nodes at this size and more
MIN_BYTES = 2**27


def fabric_cases(cases: Sequence[Case] | None = None) -> list[Case]:
    """The busbw cases of 128 MiB and more whose ranks span more than one scale-up domain;
    SpecError for a case whose ``fabric`` is not one of ``FABRICS``."""
    from . import collectives as C

    cs = C.collective_cases() if cases is None else cases
    bad = next((c for c in cs if c.get("fabric", FABRICS[0]) not in FABRICS), None)
    if bad is not None:  # a misspelt fabric would silently take the pooled value
        raise SpecError(f"collectives case {bad.id!r}: fabric {bad['fabric']!r}; allowed: "
                        f"{', '.join(FABRICS)} (or absent: not stated)")
    return [c for c in cs if c.metric == "busbw" and c["bytes"] >= MIN_BYTES
            and c["ranks"] > C._case_cluster(c).scale_up_domain]


def _eff(case: Case, values: Mapping[str, float]) -> float:
    f = case.get("fabric")
    return values[f] if f in FABRICS and f in values else values[POOLED]


def _log_error(case: Case, eff: float) -> float:
    return _log_error_of(case.id, eff)


@lru_cache(maxsize=4096)
def _log_error_of(case_id: str, eff: float) -> float:
    """log(ours / measured) of the recorded case ``case_id`` (ids are unique on the page)."""
    from . import collectives as C

    case = next(c for c in C.collective_cases() if c.id == case_id)
    return math.log(C.predict(case, C.shipped_nvls() | {"scale_out": eff}) / case.value_si)


def _log_errors(values: Mapping[str, float] | None, cases: Sequence[Case]) -> list[float]:
    """log(ours / measured) per case; ``None``: training's shipped efficiency."""
    from . import collectives as C

    if values is None:
        return [math.log(C.predict(c) / c.value_si) for c in cases]
    return [_log_error(c, _eff(c, values)) for c in cases]


def _best(cases: Sequence[Case]) -> float:
    """The efficiency that minimises the sum of squared log errors over ``cases``."""
    lo, hi = golden_bracket(lambda e: sum(_log_error(c, e) ** 2 for c in cases), *EFF_RANGE,
                            tol=0.002)
    return round((lo + hi) / 2, 3)


def fit_pooled(cases: Sequence[Case]) -> Refit:
    """One efficiency for every fabric, fitted on ``cases``."""
    return Refit(values={POOLED: _best(cases)})


def fit_fabric(cases: Sequence[Case]) -> Refit:
    """An efficiency per fabric (``FABRICS``) on its own cases, and the pooled one (every case)
    for cases that state no fabric and for fabrics without a case here."""
    vals = {POOLED: _best(cases)}
    none = []
    for f in FABRICS:
        mine = [c for c in cases if c.get("fabric") == f]
        vals[f] = _best(mine) if mine else vals[POOLED]
        if not mine:
            none.append(f)
    return Refit(values=vals, note=f"no {', '.join(none)} case: the pooled value" if none
                 else "")


def _shipped() -> float:
    from ..scenarios.training.factors import training_factors

    return training_factors("gpu").scale_out_efficiency


@lru_cache(maxsize=1)
def fabric_reports() -> tuple[FitReport, FitReport]:
    """(one pooled efficiency, one per fabric): in-sample and leave-one-source-out."""
    cs = fabric_cases()
    s = _shipped()
    pooled = leave_one_source_out("scale-out pooled", cs, (POOLED,), {POOLED: s}, fit_pooled,
                                  _log_errors)
    per = leave_one_source_out("scale-out per fabric", cs, (*FABRICS, POOLED),
                               dict.fromkeys((*FABRICS, POOLED), s), fit_fabric, _log_errors)
    return pooled, per


def fabric_table() -> str:
    """Markdown: per source (its fabric), the median |error| with training's shipped
    efficiency, and held out (fitted without the source) with one pooled efficiency and with
    one per fabric; then every case together, and the fitted values."""
    pooled, per = fabric_reports()
    cs = fabric_cases()
    rows = ["| source | fabric | n | shipped 0.70 | pooled, held out | per fabric, held out "
            "| per fabric fitted without it |",
            "|---|---|---:|---:|---:|---:|---|"]
    for p, q in zip(pooled.per_source, per.per_source, strict=True):
        fab = sorted({str(c.get("fabric", "not stated")) for c in cs if c.source == p.source})
        vals = ", ".join(f"{k} {v:.3f}" for k, v in q.fitted_without.values.items())
        rows.append(f"| {p.source} | {' / '.join(fab)} | {p.n} | "
                    f"{p.in_sample.median_abs:.1%} | {p.held_out.median_abs:.1%} | "
                    f"{q.held_out.median_abs:.1%} | {vals} |")
    rows += ["", "| model | n | median abs error | RMS log error | worst |",
             "|---|---:|---:|---:|---|"]
    for label, s in (("training's 0.70 (not fitted here)", pooled.shipped_in_sample),
                     ("pooled, in-sample", pooled.refit_in_sample),
                     ("pooled, leave-one-source-out", pooled.loso),
                     ("per fabric, in-sample", per.refit_in_sample),
                     ("per fabric, leave-one-source-out", per.loso)):
        rows.append(f"| {label} | {s.n} | {s.median_abs:.1%} | {s.rms_log:.3f} | "
                    f"{s.worst:+.1%} ({s.worst_case}) |")
    fit = ", ".join(f"{k} {v:.3f}" for k, v in per.refit.values.items())
    rows += ["", f"Fitted on every case: {fit}."]
    return "\n".join(rows)


def fabric_figures() -> dict[str, str]:
    """The figures the page's prose quotes (``coll.fab.*``)."""
    from .holdout import fmt_pct

    pooled, per = fabric_reports()
    out = {"coll.fab.n": str(pooled.shipped_in_sample.n),
           "coll.fab.n_src": str(len(pooled.per_source)),
           "coll.fab.shipped": fmt_pct(pooled.shipped_in_sample.median_abs, 1, sign=False),
           "coll.fab.pooled.in": fmt_pct(pooled.refit_in_sample.median_abs, 1, sign=False),
           "coll.fab.pooled.loso": fmt_pct(pooled.loso.median_abs, 1, sign=False),
           "coll.fab.per.in": fmt_pct(per.refit_in_sample.median_abs, 1, sign=False),
           "coll.fab.per.loso": fmt_pct(per.loso.median_abs, 1, sign=False),
           "coll.fab.shipped.rms": f"{pooled.shipped_in_sample.rms_log:.3f}",
           "coll.fab.pooled.loso.rms": f"{pooled.loso.rms_log:.3f}",
           "coll.fab.per.loso.rms": f"{per.loso.rms_log:.3f}",
           "coll.fab.pooled": f"{pooled.refit.values[POOLED]:.2f}"}
    for k in FABRICS:
        out[f"coll.fab.{k}"] = f"{per.refit.values[k]:.2f}"
    for p in per.per_source:  # each fabric's value fitted without the source
        for k in FABRICS:
            out[f"coll.fab.without.{p.source}.{k}"] = f"{p.fitted_without.values[k]:.2f}"
    held = [math.expm1(per.held_out_errors[c.id]) for c in fabric_cases()
            if c.get("fabric") == "efa"]
    out["coll.fab.efa.held"] = fmt_pct(max(held, key=abs))
    out |= _hdr3_figures()
    return out


def _hdr3_figures() -> dict[str, str]:
    """nccl-tests #119 (3 nodes, 4 HDR per 8 A100): ours, its error, and its error at an
    efficiency of 1.0 (``coll.hdr3*``)."""
    from . import collectives as C
    from .holdout import fmt_pct

    c = next(c for c in C.collective_cases() if c.source == "nccltests119")
    ours = C.predict(c)
    return {"coll.hdr3": f"{ours / 1e9:.0f}", "coll.hdr3.err": fmt_pct(ours / c.value_si - 1),
            "coll.hdr3.one.err": fmt_pct(math.expm1(_log_error(c, 1.0)))}
