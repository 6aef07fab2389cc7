"""preset="mlsysim": mlsysim 0.1.1's EconomicsModel, SustainabilityModel and ReliabilityModel.

Its conventions (mlsysim/core/solver.py, read off the 0.1.1 wheel; numbers in
data/economics/mlsysim.toml):

    power/device   TDP · (0.3 + 0.7 · MFU)
    IT energy      power · devices · hours;   facility energy = IT · PUE (grid's, else 1.12)
    carbon         facility energy · grid intensity (US_Avg 429 g/kWh when no grid)
    water          facility energy · WUE (the grid's; US_Avg 1.8 L/kWh)
    capex/period   unit cost · devices / 3 years · days / 365
    energy opex    facility kWh · 0.12 $/kWh;   maintenance = capex · 5 %/year · days / 365
    node MTBF      1 / (8/50,000 h + 8/150,000 h + 2/100,000 h) = 4,285.7 h (DGX: 8 GPUs,
                   8 NICs, 2 PSUs);  fleet MTBF = node MTBF / nodes
    interval       Young: √(2 · δ · M);   goodput = 1 − δ/τ − R/M (R = 300 s)
    P(failure)     1 − exp(−T/M);   expected failures = T / M

Where our defaults differ (docs/economics.md, "Where we differ from mlsysim"): the idle power
is the same 30 % of TDP but the utilisation is that of the binding resource (max MFU, MBU) and
PUE defaults to the hyperscale type (1.15); failures come from the Llama 3 run (1.97e-5 per
GPU-hour, 50,677 GPU-hours between failures vs mlsysim's 50,000 h GPU MTTF plus NICs and PSUs);
the interval is Daly's, and the wall-clock is Daly's exact expression, not 1 − δ/τ − R/M.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import SpecError, UnknownNameError
from ..specs.hardware import Hardware
from ..specs.resolve import hardware as resolve_hardware
from .reliability import Reliability, young_interval

__all__ = ["mlsysim_device_costs", "mlsysim_grid", "node_mtbf_hours", "tco_mlsysim",
           "reliability_mlsysim", "energy_mlsysim"]


def mlsysim_device_costs(hw: Hardware) -> dict[str, float] | None:
    """mlsysim's TDP and unit cost for ``hw`` (matched by zoo alias), None if it has none."""
    from .data import mlsysim_table

    for name, dev in mlsysim_table()["devices"].items():
        try:
            if resolve_hardware(name).key == hw.key:
                return dev
        except KeyError:
            continue
    return None


def mlsysim_grid(name: str | None) -> tuple[str, dict[str, float], bool]:
    """(name, {intensity, pue, wue}, explicit) of an mlsysim grid; None: US_Avg (implicit)."""
    from .data import mlsysim_table

    grids = mlsysim_table()["grids"]
    if name is None:
        return "US_Avg", grids["US_Avg"], False
    for k, g in grids.items():
        if k.lower() == str(name).lower():
            return k, g, True
    raise UnknownNameError(f"unknown mlsysim grid {name!r}; preset='mlsysim' knows "
                           f"{', '.join(grids)}")


def energy_mlsysim(tdp_w: float, mfu: float, seconds: float) -> float:
    """J: TDP · (0.3 + 0.7 · clamp(MFU, 0, 1)) · seconds (mlsysim's Engine.solve)."""
    from .data import mlsysim_table

    idle = mlsysim_table()["conventions"]["idle_fraction"]
    m = min(1.0, max(0.0, mfu))
    return tdp_w * (idle + (1 - idle) * m) * seconds


def tco_mlsysim(hardware: Any, *, devices: int, years: float | None, days: float | None,
                utilisation: float, region: str | None, pue: float | None,
                unit_price: float | None, electricity_price: float | None) -> Any:
    """mlsysim's EconomicsModel.solve (+ its SustainabilityModel energy, carbon, water)."""
    from .data import mlsysim_table
    from .tco import TCO

    hw = resolve_hardware(hardware)
    conv = mlsysim_table()["conventions"]
    dev = mlsysim_device_costs(hw) or {}
    h100 = mlsysim_table()["devices"]["H100"]
    tdp = dev.get("tdp", hw.tdp_w if math.isfinite(hw.tdp_w) else h100["tdp"])
    cost = unit_price if unit_price is not None else dev.get("unit_cost", h100["unit_cost"])
    if days is None:
        days = 365.0 * (conv["years"] if years is None else years)
    gname, grid, explicit = mlsysim_grid(region)
    pue_v = pue if pue is not None else (grid["pue"] if explicit else conv["default_pue"])
    hours = days * 24.0
    it_j = energy_mlsysim(tdp, utilisation, hours * 3600.0) * devices
    fac_j = it_j * pue_v
    kwh_price = conv["electricity_price"] * 3.6e6 if electricity_price is None else \
        float(electricity_price)
    capex = cost * devices
    return TCO(hardware=hw.name, devices=devices, period_s=days * 86400.0,
               utilisation=utilisation, pue=pue_v, region=gname, unit_price_usd=cost,
               capex_usd=capex, capex_period_usd=capex / conv["years"] * days / 365.0,
               energy_usd=fac_j / 3.6e6 * kwh_price,
               maintenance_usd=capex * conv["maintenance_per_year"] * days / 365.0,
               it_energy_j=it_j, facility_energy_j=fac_j,
               carbon_kg=fac_j * grid["intensity"], water_l=fac_j * grid["wue"],
               electricity_usd_per_kwh=kwh_price, preset="mlsysim",
               sources={"conventions": "mlsysim 0.1.1 (data/economics/mlsysim.toml)"})


def node_mtbf_hours(accelerators: int = 8, nics: int = 8, psus: int = 2) -> float:
    """mlsysim's compound node MTBF: 1 / Σ n_i / MTTF_i (hours)."""
    c = __import__("roofline.analysis.data", fromlist=["mlsysim_table"]).mlsysim_table()
    conv = c["conventions"]
    rate = accelerators / conv["gpu_mttf"] + nics / conv["nic_mttf"] + psus / conv["psu_mttf"]
    return 1.0 / rate / 3600.0  # mttf are in s (SI)


def reliability_mlsysim(*, devices: int, job_hours: float, checkpoint_s: float | None,
                        restart_s: float | None) -> Reliability:
    """mlsysim's ReliabilityModel.solve for ``devices`` in DGX nodes of 8."""
    from .data import mlsysim_table

    t = mlsysim_table()
    node = t["node"]
    per = int(node["accelerators"])
    if devices % per:
        raise SpecError(f"preset='mlsysim' models fleets of {per}-GPU nodes; devices={devices} "
                        f"is not a multiple of {per}")
    nodes = devices // per
    m_s = node_mtbf_hours(per, int(node["nics"]), int(node["psus"])) * 3600.0 / nodes
    delta = t["conventions"]["checkpoint"] if checkpoint_s is None else float(checkpoint_s)
    R = t["conventions"]["recovery"] if restart_s is None else float(restart_s)
    work = float(job_hours) * 3600.0
    tau = young_interval(delta, m_s)
    goodput = max(0.0, 1.0 - delta / tau - R / m_s) if tau > 0 else 0.0
    n = work / m_s
    return Reliability(
        devices=devices, work_s=work, failure_rate_per_device_hour=3600.0 / (m_s * devices),
        failure_source="mlsysim 0.1.1: node MTBF from GPU 50,000 h, NIC 150,000 h, PSU 100,000 h",
        mtbf_s=m_s, checkpoint_bytes=math.nan, checkpoint_s=delta, checkpoint_source="given",
        restart_s=R, method="young (mlsysim)", interval_s=tau,
        wallclock_s=work / goodput if goodput > 0 else math.inf, expected_failures=n,
        p_any_failure=-math.expm1(-n), lost_work_per_failure_s=tau / 2.0,
        checkpoint_overhead=delta / tau if tau > 0 else 0.0)
