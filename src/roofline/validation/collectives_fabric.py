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

The NVLS factors these cases also depend on (the NVLS fractions and the NVLSTree pipeline's fill,
``collectives.fit_nvls``) are refitted inside each fold on the collectives cases of every source
the fold keeps: the fill's fit includes #309's 2-node 256 MiB row, one of the cases here, so the
shipped values would let a held-out #309 row be predicted with factors its own source set.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache, partial

from .._cache import make_room
from ..errors import SpecError
from ..specs.keys import SpecKey, frozen_key
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
            and c["ranks"] > C.case_cluster(c).scale_up_domain]


def _eff(case: Case, values: Mapping[str, float]) -> float:
    f = case.get("fabric")
    return values[f] if f in FABRICS and f in values else values[POOLED]


#: (the case's content key, the efficiency, the NVLS factors) -> log(ours / measured)
_ERRORS: dict[tuple[SpecKey, float, tuple[tuple[str, float], ...]], float] = {}
_ERRORS_CAP = 8192


def _log_error(case: Case, eff: float, nvls: Mapping[str, float] | None = None) -> float:
    """log(ours / measured) of ``case`` at the NIC efficiency ``eff`` and the NVLS factors
    ``nvls`` (by ``collectives.PARAMS`` name; None: the shipped ones). Cached on the case's
    content (every field, ``specs.keys.frozen_key``), so a case that is not on the page, or an
    edited copy under a recorded id, is priced as it is."""
    from . import collectives as C

    at = C.shipped_nvls() if nvls is None else {k: nvls[k] for k in C.PARAMS}
    ck = frozen_key(case)
    key = None if ck is None else (ck, float(eff), tuple(sorted(at.items())))
    if key is not None and (e := _ERRORS.get(key)) is not None:
        return e
    e = math.log(C.predict(case, at | {"scale_out": eff}) / case.value_si)
    if key is not None:
        make_room(_ERRORS, _ERRORS_CAP)
        _ERRORS[key] = e
    return e


def _log_errors(values: Mapping[str, float] | None, cases: Sequence[Case]) -> list[float]:
    """log(ours / measured) per case; ``None``: training's shipped efficiency and the shipped
    NVLS factors; otherwise a fold's efficiencies and its NVLS factors."""
    from . import collectives as C

    if values is None:
        return [math.log(C.predict(c) / c.value_si) for c in cases]
    return [_log_error(c, _eff(c, values), values) for c in cases]


@lru_cache(maxsize=16)
def _nvls_without(held: frozenset[str]) -> tuple[tuple[str, float], ...]:
    """The NVLS factors (``collectives.fit_nvls``) fitted on the packaged collectives cases of
    every source but ``held``."""
    from . import collectives as C

    r = C.fit_nvls([c for c in C.collective_cases() if c.source not in held])
    return tuple(r.values.items())


def _fold_nvls(cases: Sequence[Case], universe: Collection[str] | None) -> dict[str, float]:
    """The NVLS factors of a fold: refitted without the sources of ``universe`` that ``cases``
    lacks (the held-out source); ``universe`` None: the shipped factors (no refit)."""
    from . import collectives as C

    if universe is None:
        return C.shipped_nvls()
    held = frozenset(universe) - {c.source for c in cases}
    return dict(_nvls_without(held))


def _best(cases: Sequence[Case], nvls: Mapping[str, float] | None = None) -> float:
    """The efficiency that minimises the sum of squared log errors over ``cases`` (with the
    NVLS factors ``nvls``; None: the shipped ones)."""
    lo, hi = golden_bracket(lambda e: sum(_log_error(c, e, nvls) ** 2 for c in cases),
                            *EFF_RANGE, tol=0.002)
    return round((lo + hi) / 2, 3)


def fit_pooled(cases: Sequence[Case], universe: Collection[str] | None = None) -> Refit:
    """One efficiency for every fabric, fitted on ``cases``; with ``universe`` (the sources of
    the whole set) the NVLS factors are refitted without the sources ``cases`` lacks and
    returned beside it."""
    nv = _fold_nvls(cases, universe)
    return Refit(values={POOLED: _best(cases, nv)} | nv)


def fit_fabric(cases: Sequence[Case], universe: Collection[str] | None = None) -> Refit:
    """An efficiency per fabric (``FABRICS``) on its own cases, and the pooled one (every case)
    for cases that state no fabric and for fabrics without a case here; the NVLS factors as in
    ``fit_pooled``."""
    nv = _fold_nvls(cases, universe)
    vals = {POOLED: _best(cases, nv)}
    none = []
    for f in FABRICS:
        mine = [c for c in cases if c.get("fabric") == f]
        vals[f] = _best(mine, nv) if mine else vals[POOLED]
        if not mine:
            none.append(f)
    return Refit(values=vals | nv, note=f"no {', '.join(none)} case: the pooled value" if none
                 else "")


def _shipped() -> float:
    from ..scenarios.training.factors import training_factors

    return training_factors("gpu").scale_out_efficiency


@lru_cache(maxsize=1)
def fabric_reports() -> tuple[FitReport, FitReport]:
    """(one pooled efficiency, one per fabric): in-sample and leave-one-source-out."""
    from . import collectives as C

    cs = fabric_cases()
    s = _shipped()
    nv = C.shipped_nvls()
    # a fold refits the NVLS factors without the source it holds out (the one of these it lacks)
    every = frozenset(c.source for c in cs)
    pooled = leave_one_source_out("scale-out pooled", cs, (POOLED, *nv), {POOLED: s} | nv,
                                  partial(fit_pooled, universe=every), _log_errors)
    per = leave_one_source_out("scale-out per fabric", cs, (*FABRICS, POOLED, *nv),
                               dict.fromkeys((*FABRICS, POOLED), s) | nv,
                               partial(fit_fabric, universe=every), _log_errors)
    return pooled, per


def fabric_table() -> str:
    """Markdown: per source (its fabric), the median |error| with training's shipped
    efficiency, and held out (fitted without the source) with one pooled efficiency and with
    one per fabric; the efficiencies and the NVLS fill fitted without it; then every case
    together, and the fitted values."""
    pooled, per = fabric_reports()
    cs = fabric_cases()
    eff = (POOLED, *FABRICS)
    rows = ["| source | fabric | n | shipped 0.70 | pooled, held out | per fabric, held out "
            "| per fabric fitted without it | NVLS fill fitted without it |",
            "|---|---|---:|---:|---:|---:|---|---:|"]
    for p, q in zip(pooled.per_source, per.per_source, strict=True):
        fab = sorted({str(c.get("fabric", "not stated")) for c in cs if c.source == p.source})
        w = q.fitted_without.values
        vals = ", ".join(f"{k} {w[k]:.3f}" for k in eff)
        rows.append(f"| {p.source} | {' / '.join(fab)} | {p.n} | "
                    f"{p.in_sample.median_abs:.1%} | {p.held_out.median_abs:.1%} | "
                    f"{q.held_out.median_abs:.1%} | {vals} | {w['nvls_fill']:.2f} |")
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
    rows += ["", f"Fitted on every case (the NVLS factors on every collectives case): {fit}."]
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
           "coll.fab.pooled": f"{pooled.refit.values[POOLED]:.2f}",
           "coll.fab.fill.309": next(f"{p.fitted_without.values['nvls_fill']:.2f}"
                                     for p in per.per_source if p.source == "nccltests309")}
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
    """nccl-tests #119 (3 nodes, 4 HDR per 8 A100, Intel hosts): ours, its error, its error at
    an efficiency of 1.0, NCCL's pick and its latency there, the measured time above the NICs'
    line rate, and NCCL's own ring bandwidth (``coll.hdr3*``)."""
    from ..ops import collectives as coll
    from ..ops.nccl import nccl_latency, ring_plateau_factor
    from ..ops.xp import SCALAR
    from . import collectives as C
    from .holdout import fmt_pct

    c = next(c for c in C.collective_cases() if c.source == "nccltests119")
    ours = C.predict(c)
    links = C.case_links(c)
    t = links.nccl
    assert t is not None
    n, p = float(c["bytes"]), c["ranks"]
    o = coll.group_split(float(p), 1.0, links.domain, SCALAR)[1]
    a, proto, _ = coll.group_nccl_choice("all_reduce", n, p, 1, links)
    lat = float(nccl_latency("all_reduce", "ring", "Simple", p, o, t, SCALAR)
                * ring_plateau_factor("all_reduce", "ring", "Simple", n, p, o, t, SCALAR))
    bf = coll.bus_factor("all_reduce", p)
    # a ring's bus-bandwidth bound at the NICs' line rate: each GPU's share times the GPUs a
    # node boundary's stream is spread over (ops.collectives._ring_bw)
    line = C.case_cluster(c).devices_per_node * c["scale_out_gbps"] * 1e9
    ch, speed = t.search_nodes
    return {"coll.hdr3": f"{ours / 1e9:.0f}", "coll.hdr3.err": fmt_pct(ours / c.value_si - 1),
            "coll.hdr3.one.err": fmt_pct(math.expm1(_log_error(c, 1.0))),
            "coll.hdr3.pick": f"{a} {proto}",
            "coll.hdr3.lat": f"{lat * 1e6:.0f}",
            "coll.hdr3.meas.us": f"{bf * n / c.value_si * 1e6:.0f}",
            "coll.hdr3.line.us": f"{bf * n / line * 1e6:.0f}",
            "coll.hdr3.slack.us": f"{(bf * n / c.value_si - bf * n / line) * 1e6:.0f}",
            "coll.hdr3.search": f"{ch} × {speed / 1e9:g}",
            "coll.hdr3.search.err": fmt_pct(C.search_busbw(c) / c.value_si - 1)}
