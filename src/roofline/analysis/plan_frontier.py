"""The closed-form half of ``plan_serving`` (analysis/plan.py, pass 2): each feasible layout at
each max concurrency C of a ladder up to its KV capacity, in steady state with C requests in
flight — a decode step at C sequences of the mean context plus, per completed request, the
prefill of a mean prompt mixed into those steps. Gives TPOT, requests/s per replica and the
two frontier axes (output tokens/s per device and per user, 1/TPOT). Disaggregated xPyD pairs
a prefill layout (its rate 1/prefill time of a mean prompt per worker) with a decode layout
whose steps carry no prefill. Also the Pareto filter of the layouts table, the shortfall note
when nothing passes, and the layout labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine.table import Table
from .plan_power import u_aggregated, u_decode, u_prefill
from .stepcost import StepCosts
from .workload import SLO

__all__: list[str] = []  # plan_serving's internals; the public names are analysis.plan's

#: the max concurrencies each layout is priced at (up to its KV capacity)
LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(slots=True)
class _Point:
    """A layout at one concurrency, in closed form."""

    mode: str
    costs: StepCosts
    pcosts: StepCosts | None
    conc: int
    tpot: float
    rate: float  #: requests/s one unit (replica, or xPyD ratio group) sustains
    dev_per_rate: float  #: devices per (request/s)
    tps_device: float
    tps_user: float
    ratio: float = 0.0  #: prefill workers per decode worker (disaggregated)
    util: float = math.nan  #: device-weighted utilisation of the binding resource (power model)


def _steady(c: StepCosts, C: int, P: float, n: float, att_pair: float,
            with_prefill: bool) -> tuple[float, float]:
    """(mean TPOT, requests/s) of one replica with C requests in flight."""
    d = c.decode_time(C, C * (P + n / 2))
    if not with_prefill:
        return d, C / (n * d)
    # per completed request, its prompt's tokens join the steps: what they add to a pass of C
    # tokens, plus their attention
    add = c.prompt_add(C, P, att_pair)
    cycle = n * d + C * add  # time for C requests to each emit n tokens
    return cycle / n, C / cycle


def _frontier(feas: list[StepCosts], hw: Any, Pm: float, nm: float, disaggregated: bool,
              c_tpot: float = 0.0) -> list[_Point]:
    """Each layout (and prefill / decode pair) at each concurrency, closed form (+ c_tpot)."""
    pts: list[_Point] = []
    for c in feas:
        att_mean = float(c.pair[min(int(Pm), c.n_max)]) * Pm * (Pm + 1) / 2
        cap = c.kv_capacity_batch(Pm + nm)
        for C in LADDER:
            if C > max(cap, 1):
                break
            tpot, r = _steady(c, C, Pm, nm, att_mean, True)
            tpot += c_tpot
            pts.append(_Point("aggregated", c, None, C, tpot, r, c.devices / r,
                              r * nm / c.devices, 1 / tpot,
                              util=u_aggregated(c, hw, C, Pm, nm, att_mean)))
    if disaggregated:
        for cd in feas:
            for cpf in feas:
                if (cpf.precision, cpf.kv_precision, cpf.weight_precision, cpf.ep) != \
                        (cd.precision, cd.kv_precision, cd.weight_precision, cd.ep) or \
                        cpf.pp > 1:
                    continue  # same precision and ep; prefill workers without pipeline stages
                att_mean = float(cpf.pair[min(int(Pm), cpf.n_max)]) * Pm * (Pm + 1) / 2
                rate_p = 1.0 / cpf.prompt_add(0, Pm, att_mean)
                up = u_prefill(cpf, hw, Pm, 1.0 / rate_p)  # prefill workers run flat out
                cap = cd.kv_capacity_batch(Pm + nm)
                for C in LADDER:
                    if C > max(cap, 1):
                        break
                    tpot, rd = _steady(cd, C, Pm, nm, 0.0, False)
                    tpot += c_tpot
                    ratio = rd / rate_p  # prefill workers per decode worker
                    dev = cd.devices + ratio * cpf.devices
                    ud = u_decode(cd, hw, C, Pm + nm / 2, tpot)
                    pts.append(_Point("disaggregated", cd, cpf, C, tpot, rd, dev / rd,
                                      rd * nm / dev, 1 / tpot, ratio,
                                      util=(cd.devices * ud + ratio * cpf.devices * up) / dev))
    return pts


def _shortfall(pts: list[_Point], slo: SLO, devices: int, lam: float) -> str:
    """Why nothing passed: the most requests/s any layout sustains on the devices given
    (closed form, aggregated replicas at the TPOT target)."""
    best_r, best_p = 0.0, None
    for p in pts:
        if p.mode != "aggregated" or (slo.tpot_p99 is not None and p.tpot > slo.tpot_p99):
            continue
        r = (devices // p.costs.devices) * p.rate
        if r > best_r:
            best_r, best_p = r, p
    if best_p is None:
        return "no layout meets the TPOT target even at batch 1 on these devices"
    return (f"at most ~{best_r:.3g} req/s fit on {devices} devices within the TPOT target "
            f"(closed form: {devices // best_p.costs.devices} × {best_p.costs.label} at max "
            f"concurrency {best_p.conc}), against {lam:g} req/s asked: about "
            f"{math.ceil(devices * lam / best_r)} devices would be needed")


def _label(p: _Point, R: int = 0, X: int = 0) -> str:
    if p.mode == "aggregated":
        return p.costs.label
    assert p.pcosts is not None
    pre = p.pcosts.label.split()[0]
    if R:
        return f"{X}P {pre} + {R}D {p.costs.label}"
    return f"P {pre} + D {p.costs.label} ({p.ratio:.2f} P/D)"


def _pareto(t: Table) -> Table:
    """Rows not dominated on (tokens/s per device, tokens/s per user), both higher-better."""
    x, y = t["tokens_per_s_per_user"], t["tokens_per_s_per_device"]
    n = len(x)
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        dom = (x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i]))
        keep[i] = not dom.any()
    out = t.where(keep).sort("tokens_per_s_per_user", descending=False)
    out.title = "Pareto frontier (non-dominated: tokens/s per device vs per user)"
    return out
