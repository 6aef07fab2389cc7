"""Total cost of ownership of a fleet of devices.

    capex            C = devices × unit price                      (prices.toml purchase, or yours)
    amortised capex  C × period / amortisation years               (straight line)
    energy           devices × P(u) × hours × PUE × $/kWh          (P(u): analysis/power.py;
                                                                    $/kWh: the region's, else the
                                                                    US industrial average)
    maintenance      C × maintenance per year × period years
    TCO              amortised capex + energy + maintenance

Defaults (data/economics/tco.toml, each with its source): 3 amortisation years, 5 % of capex a
year for maintenance (mlsysim's conventions, marked assumed), 8.06 ¢/kWh (EIA 2023 US
industrial). ``preset="mlsysim"`` reproduces mlsysim 0.1.1's EconomicsModel (analysis/
mlsysim_compat.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .._display import Display
from .._text import summary_str
from ..errors import SpecError
from ..specs.resolve import hardware as resolve_hardware
from .power import check_pue, check_utilisation, power_model

__all__ = ["TCO", "tco"]

_YEAR_S = 365.0 * 86400.0


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class TCO(Display):
    """Cost of owning ``devices`` devices for ``period_s``. USD, J, kg, L."""

    hardware: str
    devices: int
    period_s: float
    utilisation: float
    pue: float
    region: str | None
    unit_price_usd: float | None
    capex_usd: float | None  #: full purchase of the fleet
    capex_period_usd: float | None  #: amortised over the period
    energy_usd: float
    maintenance_usd: float | None
    it_energy_j: float
    facility_energy_j: float
    carbon_kg: float | None
    water_l: float
    electricity_usd_per_kwh: float
    #: kg CO2e to manufacture the fleet (data/economics/embodied.toml), None where unpublished
    embodied_carbon_kg: float | None = None
    preset: str = "default"
    sources: dict[str, str] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()

    @property
    def total_usd(self) -> float | None:
        """Amortised capex + energy + maintenance (None without a unit price)."""
        if self.capex_period_usd is None or self.maintenance_usd is None:
            return None
        return self.capex_period_usd + self.energy_usd + self.maintenance_usd

    @property
    def opex_usd(self) -> float | None:
        return None if self.maintenance_usd is None else self.energy_usd + self.maintenance_usd

    @property
    def usd_per_device_hour(self) -> float | None:
        t = self.total_usd
        return None if t is None else t / (self.devices * self.period_s / 3600.0)

    def to_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d.update(total_usd=self.total_usd, opex_usd=self.opex_usd,
                 usd_per_device_hour=self.usd_per_device_hour, reasons=list(self.reasons))
        return d

    @summary_str
    def __str__(self) -> str:
        yrs = self.period_s / _YEAR_S

        def usd(v: float | None) -> str:
            return "n/a" if v is None else f"${v:,.0f}"

        lines = [
            f"TCO of {self.devices:,} × {self.hardware} for {yrs:,.4g} years at "
            f"{self.utilisation:.0%} utilisation" + (f", {self.region}" if self.region else ""),
            f"  capex           {usd(self.capex_usd)} "
            + (f"({self.devices:,} × ${self.unit_price_usd:,.0f}); " if self.unit_price_usd
               else "") + f"amortised over the period {usd(self.capex_period_usd)}",
            f"  energy          {usd(self.energy_usd)} ({self.facility_energy_j / 3.6e9:,.4g} "
            f"MWh at PUE {self.pue:g}, ${self.electricity_usd_per_kwh:.4g}/kWh)",
            f"  maintenance     {usd(self.maintenance_usd)}",
            f"  total           {usd(self.total_usd)}"
            + (f" = ${self.usd_per_device_hour:,.3f} per device-hour"
               if self.usd_per_device_hour is not None else ""),
            "  carbon          " + ("n/a (no region)" if self.carbon_kg is None else
                                    f"{self.carbon_kg / 1e3:,.4g} t CO2e")
            + f"; water {self.water_l / 1e3:,.4g} m³"
            + ("" if self.embodied_carbon_kg is None else
               f"; embodied {self.embodied_carbon_kg / 1e3:,.4g} t CO2e"),
        ]
        lines += [f"  note: {r}" for r in self.reasons]
        return "\n".join(lines)


def _num(v: Any, name: str, *, positive: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, float | int) or not math.isfinite(v) or v < 0 \
            or (positive and v == 0):
        raise SpecError(f"{name} must be a {'positive' if positive else 'non-negative'} number, "
                        f"got {v!r}")
    return float(v)


def tco(hardware: Any, *, devices: int, years: float | None = None, days: float | None = None,
        utilisation: float = 1.0, region: str | None = None, pue: float | None = None,
        unit_price: float | None = None, electricity_price: float | None = None,
        maintenance_per_year: float | None = None, amortisation_years: float | None = None,
        preset: str = "default") -> TCO:
    """TCO of ``devices`` × ``hardware`` over ``years`` (or ``days``; default: the amortisation
    period) at ``utilisation`` (0, 1]: the power activity of analysis/power.py, device power =
    idle + (peak − idle) × utilisation (from a run's MFU and MBU: ``power.power_activity``).

    ``unit_price`` (USD per device; default: the part's street price in prices.toml),
    ``electricity_price`` (USD/kWh; default: the region's, else the US industrial average),
    ``maintenance_per_year`` (fraction of capex), ``amortisation_years``, ``pue`` (default: the
    hyperscale datacentre type). ``preset="mlsysim"``: mlsysim 0.1.1's EconomicsModel
    conventions (region is one of its grids: US_Avg, Quebec, Poland, Norway).
    """
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise SpecError(f"devices must be a positive integer, got {devices!r}")
    u = check_utilisation(utilisation)
    if preset == "mlsysim":
        from .mlsysim_compat import tco_mlsysim

        return tco_mlsysim(hardware, devices=devices, years=years, days=days, utilisation=u,
                           region=region, pue=pue, unit_price=unit_price,
                           electricity_price=electricity_price)
    if preset != "default":
        raise SpecError(f"preset must be 'default' or 'mlsysim', got {preset!r}")
    from .data import datacenter, part_prices, tco_defaults
    from .data import region as find_region

    hw = resolve_hardware(hardware)
    d = tco_defaults()
    srcs: dict[str, str] = {}
    reasons = []
    amort = d["years"][0] if amortisation_years is None else _num(amortisation_years,
                                                                  "amortisation_years")
    if years is not None and days is not None:
        raise SpecError("give years= or days=, not both")
    period_years = amort if years is None and days is None else (
        _num(years, "years") if years is not None else _num(days, "days") / 365.0)
    maint = d["maintenance_per_year"][0] if maintenance_per_year is None else \
        _num(maintenance_per_year, "maintenance_per_year", positive=False)
    srcs["years"] = str(d["years"][1])
    srcs["maintenance_per_year"] = str(d["maintenance_per_year"][1])
    reg = None if region is None else find_region(region)
    if electricity_price is not None:
        kwh = _num(electricity_price, "electricity_price", positive=False)
        srcs["electricity_price"] = "given by the user"
    elif reg is not None and reg.usd_per_kwh is not None:
        kwh = reg.usd_per_kwh
        srcs["electricity_price"] = str(reg.provenance["electricity_price"])
    else:
        kwh = d["electricity_price"][0] * 3.6e6
        srcs["electricity_price"] = str(d["electricity_price"][1])
        if reg is not None:
            reasons.append(f"{reg.name} has no published electricity price; the US industrial "
                           "average is used")
    pue_v = check_pue(pue)
    dc = datacenter()
    if pue_v is None:
        pue_v = dc.pue
        srcs["pue"] = f"{dc.name}: {dc.provenance['pue'].source}"
    if unit_price is not None:
        price: float | None = _num(unit_price, "unit_price")
        srcs["unit_price"] = "given by the user"
    else:
        pp = part_prices(hw.key)
        price = pp.purchase_usd
        if price is None:
            why = f" ({pp.no_purchase})" if pp.no_purchase else ""
            reasons.append(f"no published purchase price for {hw.name}{why}: pass unit_price= "
                           "(capex, maintenance and total are n/a)")
        else:
            srcs["unit_price"] = str(pp.purchase_provenance)
    pm = power_model(hw)
    srcs["power"] = pm.source
    seconds = period_years * _YEAR_S
    it = devices * pm.power_w(u) * seconds
    fac = it * pue_v
    capex = None if price is None else price * devices
    from .data import embodied_carbon

    emb = embodied_carbon(hw.key)
    if emb is None:
        reasons.append(f"no published embodied carbon for {hw.name}")
    else:
        srcs["embodied_carbon"] = str(emb[1])
    return TCO(
        hardware=hw.name, devices=devices, period_s=seconds, utilisation=u, pue=pue_v,
        region=None if reg is None else reg.key, unit_price_usd=price, capex_usd=capex,
        capex_period_usd=None if capex is None else capex * period_years / amort,
        energy_usd=fac / 3.6e6 * kwh,
        maintenance_usd=None if capex is None else capex * maint * period_years,
        it_energy_j=it, facility_energy_j=fac,
        carbon_kg=None if reg is None else fac * reg.intensity_kg_per_j,
        water_l=it * dc.wue_l_per_j, electricity_usd_per_kwh=kwh, sources=srcs,
        embodied_carbon_kg=None if emb is None else emb[0] * devices, reasons=tuple(reasons))
