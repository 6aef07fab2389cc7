"""Cost, energy, carbon and water per unit of work of a solve, serve or train result.

For a deployment of ``N`` devices doing ``W`` units of work per second (samples, output tokens,
training tokens):

    power      P   = N · P_dev(u) + P_other            W (P_dev: analysis/power.py)
    energy     E/W = P · PUE / W                        J per unit (facility energy)
    cost       C/W = N · price_per_device_hour / 3600 / W
    carbon     G/W = E/W · grid intensity (kg CO2e per J of the region, data/economics/grids.toml)
    water      L/W = (E/W / PUE) · WUE                  litres per unit (WUE is per IT kWh)

``price_per_device_hour``: the user's ``price_per_hour`` or the median public quote of the part
(data/economics/prices.toml); a part with neither gives ``None`` and a reason, never zero.
A result without ``region`` has no carbon (None and a reason naming the regions).

Bands (``Economics.uncertainty``): where the result's rate has an uncertainty band
(roofline.uncertainty, docs/validation/uncertainty.md), each figure per unit is that band
propagated, the price, PUE, grid intensity and WUE held as given (they are inputs, not
estimates): cost ∝ 1 / rate; energy at a rate r' does the same work at power activity
u' = min(1, u · r'/r) (MFU and MBU scale with the rate), so
E(r') = (N · P_dev(u') + P_other) · PUE / r'; carbon and water ∝ energy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .._display import Display
from ..errors import SpecError
from ..specs.hardware import Hardware
from .power import check_pue, default_pue, power_activity, power_model

__all__ = ["Economics", "check_price", "check_economics", "device_price", "economics",
           "for_solve", "for_serve", "for_train", "ECONOMICS_MODEL"]

ECONOMICS_MODEL = ("cost = devices x $/device-hour / throughput; energy = (devices x (idle + "
                   "(peak - idle) x u) + other) x PUE / throughput, u = power activity "
                   "min(1, w_c x MFU + w_m x MBU), idle measured per part or a fraction of TDP, "
                   "peak = TDP; carbon = energy x grid intensity of the region")


def check_price(price_per_hour: Any) -> float | None:
    """USD per device-hour > 0, or None (the part's public price)."""
    if price_per_hour is None:
        return None
    v = price_per_hour
    if isinstance(v, bool) or not isinstance(v, float | int) or not math.isfinite(v):
        raise SpecError(f"price_per_hour must be a number (USD per device-hour), got {v!r}")
    if v < 0:
        raise SpecError(f"price_per_hour must be >= 0 USD per device-hour, got {v!r}")
    return float(v)


def check_economics(price_per_hour: Any = None, region: Any = None,
                    pue: Any = None) -> tuple[float | None, str | None, float | None]:
    """Validated (price_per_hour, region key, pue); bad values raise naming the argument."""
    from .data import region as find_region

    key = None if region is None else find_region(region).key
    return check_price(price_per_hour), key, check_pue(pue)


def device_price(hw: Hardware, price_per_hour: float | None) -> tuple[float | None, str]:
    """(USD per device-hour or None, where it comes from or why there is none)."""
    if price_per_hour is not None:
        return price_per_hour, "price_per_hour given by the user"
    from .data import part_prices

    pp = part_prices(hw.key)
    if pp.usd_per_hour is None:
        return None, (f"no public price for {hw.name} ({hw.key}): {pp.no_rental}; "
                      "pass price_per_hour=USD per device-hour")
    return pp.usd_per_hour, pp.source


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Economics(Display):
    """Money, energy, carbon and water of one result, per unit of work. SI + USD."""

    unit: str  #: "sample", "output token", "token"
    devices: int
    units_per_s: float  #: work rate of the whole deployment
    utilisation: float  #: power activity a = min(1, w_c·MFU + w_m·MBU) (mlsysim: MFU)
    power_w_per_device: float
    other_power_w: float  #: beyond the devices (node CPUs, NICs, fans), W
    power_source: str
    pue: float
    pue_source: str
    usd_per_device_hour: float | None
    price_source: str  #: where the price comes from, or why there is none
    region: str | None
    intensity_kg_per_j: float | None
    intensity_source: str  #: the data set and year, or why there is no carbon figure
    wue_l_per_j: float
    reasons: tuple[str, ...] = field(default=())  #: why a figure is None
    #: the band of ``units_per_s`` (roofline.uncertainty.Band; None: the result has none)
    rate_band: Any = None
    _power_w: Any = field(default=None, compare=False)  #: activity -> W per device

    def _energy_at(self, rate: float) -> float:
        """J of facility energy per unit at the rate ``rate`` (the same work, so the power
        activity scales with the rate; clipped at 1)."""
        u = min(1.0, self.utilisation * rate / self.units_per_s)
        return (self.devices * self._power_w(u) + self.other_power_w) * self.pue / rate

    @property
    def uncertainty(self) -> dict[str, Any]:
        """``{"cost_per_unit", "energy_per_unit", "carbon_per_unit", "water_per_unit"}`` ->
        Band: the rate's band propagated (module docstring); a figure that is None or NaN, or a
        result without a rate band, has none."""
        from ..uncertainty import Band

        b = self.rate_band
        if b is None or not self.units_per_s > 0 or self._power_w is None:
            return {}

        def band(lo: float, hi: float) -> Band:
            return Band(min(lo, hi), max(lo, hi), b.level, b.cls, b.n)

        r = self.units_per_s
        out = {}
        c = self.cost_per_unit
        if c is not None:
            out["cost_per_unit"] = band(c * r / b.high, c * r / b.low)
        if math.isfinite(self.utilisation) and math.isfinite(self.energy_per_unit):
            e_lo, e_hi = self._energy_at(b.high), self._energy_at(b.low)
            out["energy_per_unit"] = band(e_lo, e_hi)
            if self.intensity_kg_per_j is not None:
                k = self.intensity_kg_per_j
                out["carbon_per_unit"] = band(e_lo * k, e_hi * k)
            w = self.wue_l_per_j / self.pue
            out["water_per_unit"] = band(e_lo * w, e_hi * w)
        return out

    @property
    def it_power_w(self) -> float:
        return self.devices * self.power_w_per_device + self.other_power_w

    @property
    def facility_power_w(self) -> float:
        return self.it_power_w * self.pue

    @property
    def energy_per_unit(self) -> float:
        """J of facility energy per unit of work."""
        return self.facility_power_w / self.units_per_s if self.units_per_s > 0 else math.nan

    @property
    def cost_per_unit(self) -> float | None:
        """USD per unit of work (None without a price)."""
        if self.usd_per_device_hour is None or not self.units_per_s > 0:
            return None
        return self.devices * self.usd_per_device_hour / 3600.0 / self.units_per_s

    @property
    def carbon_per_unit(self) -> float | None:
        """kg CO2e per unit of work (None without a region)."""
        if self.intensity_kg_per_j is None:
            return None
        return self.energy_per_unit * self.intensity_kg_per_j

    @property
    def water_per_unit(self) -> float:
        """Litres of site water per unit of work (WUE x IT energy)."""
        return self.energy_per_unit / self.pue * self.wue_l_per_j

    def for_seconds(self, seconds: float) -> dict[str, float | None]:
        """Totals over ``seconds`` of running: energy J, cost USD, carbon kg, water L."""
        e = self.facility_power_w * seconds
        cost = None if self.usd_per_device_hour is None else \
            self.devices * self.usd_per_device_hour * seconds / 3600.0
        co2 = None if self.intensity_kg_per_j is None else e * self.intensity_kg_per_j
        return {"energy_j": e, "cost_usd": cost, "carbon_kg": co2,
                "water_l": e / self.pue * self.wue_l_per_j, "device_hours":
                self.devices * seconds / 3600.0}

    def to_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__ if not f.startswith("_")}
        d["reasons"] = list(self.reasons)
        d["rate_band"] = None if self.rate_band is None else self.rate_band.to_dict()
        d.update(energy_per_unit=self.energy_per_unit, cost_per_unit=self.cost_per_unit,
                 carbon_per_unit=self.carbon_per_unit, water_per_unit=self.water_per_unit)
        d["uncertainty"] = {k: b.to_dict() for k, b in self.uncertainty.items()}
        return d

    def lines(self, per: float = 1.0, per_label: str = "") -> list[str]:
        """Human lines: cost, energy, carbon per ``per`` units (e.g. 1e6 tokens)."""
        from ..uncertainty import fmt_band

        lbl = per_label or self.unit
        c = self.cost_per_unit
        g = self.carbon_per_unit
        u = self.uncertainty

        def usd(v: float) -> str:
            return f"${v * per:,.4g}"

        def kwh(v: float) -> str:
            return f"{v * per / 3.6e6:,.4g}"

        def kg(v: float) -> str:
            return f"{v * per:,.4g}"

        out = [
            "  cost            " + (f"{usd(c)} per {lbl}{fmt_band(u.get('cost_per_unit'), usd)} "
                                    f"(${self.usd_per_device_hour:,.4g}/device-h × "
                                    f"{self.devices})" if c is not None else
                                    f"n/a — {self.price_source}"),
            f"  energy          {kwh(self.energy_per_unit)} kWh per {lbl}"
            f"{fmt_band(u.get('energy_per_unit'), kwh)} "
            f"({self.power_w_per_device:,.0f} W/device at activity {self.utilisation:.0%}, "
            f"PUE {self.pue:g})",
            "  carbon          " + (f"{kg(g)} kg CO2e per {lbl}"
                                    f"{fmt_band(u.get('carbon_per_unit'), kg)} "
                                    f"({self.intensity_source.split(';')[0]})"
                                    if g is not None else "n/a — no region given (region=...)"),
        ]
        return out


def economics(hw: Hardware, *, devices: int, units_per_s: float, utilisation: float,
              unit: str, preset: str = "default", price_per_hour: float | None = None,
              region: str | None = None, pue: float | None = None,
              other_power_w: float = 0.0, rate_band: Any = None) -> Economics:
    """The economics of ``devices`` × ``hw`` doing ``units_per_s`` units of work per second
    (``rate_band``: the Band of that rate, propagated to every figure; None: no bands)."""
    from .data import datacenter
    from .data import region as find_region

    reasons = []
    pm = power_model(hw, preset)
    pw = pm.power_w(utilisation) if math.isfinite(utilisation) else math.nan
    if preset == "mlsysim":
        from .data import mlsysim_table

        pue_v, pue_src = (pue, "pue given by the user") if pue is not None else \
            (mlsysim_table()["conventions"]["default_pue"], "mlsysim 0.1.1 default PUE 1.12")
    elif pue is not None:
        pue_v, pue_src = pue, "pue given by the user"
    else:
        dc = datacenter()
        pue_v, pue_src = default_pue(), f"{dc.name}: {dc.provenance['pue'].source}"
    usd, price_src = device_price(hw, price_per_hour)
    if usd is None:
        reasons.append(price_src)
    if region is None:
        from .data import list_regions

        intensity, isrc = None, ("no region given: pass region= one of "
                                 + ", ".join(list_regions()))
        reasons.append(isrc)
    else:
        r = find_region(region)
        intensity = r.intensity_kg_per_j
        p = r.provenance["intensity"]
        isrc = f"{r.name}, {r.g_per_kwh:.0f} gCO2e/kWh ({r.year})" + (
            f"; {p.derivation}" if p.derivation else "")
    if not math.isfinite(pw):
        reasons.append(pm.source)
    return Economics(unit=unit, devices=int(devices), units_per_s=float(units_per_s),
                     utilisation=utilisation, power_w_per_device=pw,
                     other_power_w=float(other_power_w), power_source=pm.source, pue=pue_v,
                     pue_source=pue_src, usd_per_device_hour=usd, price_source=price_src,
                     region=None if region is None else find_region(region).key,
                     intensity_kg_per_j=intensity, intensity_source=isrc,
                     wue_l_per_j=datacenter().wue_l_per_j, reasons=tuple(reasons),
                     rate_band=rate_band, _power_w=pm.power_w)


def _hw_of(obj: Any, name_attr: str) -> Hardware:
    spec = getattr(obj, "hardware_spec", None)
    if callable(spec):  # Result keeps the Hardware it priced
        return spec()  # type: ignore[no-any-return]
    hw = getattr(obj, "_hw", None)
    if callable(hw):
        hw = hw()
    if isinstance(hw, Hardware):
        return hw
    from ..specs.resolve import hardware

    key = getattr(obj, "hardware_key", None) or getattr(obj, name_attr)
    return hardware(str(key).split(" → ")[0])


def _rate_band(result: Any, key: str) -> Any:
    """The result's band of its rate ``key`` (None: it has none)."""
    return (getattr(result, "uncertainty", None) or {}).get(key)


def for_solve(r: Any) -> Economics:
    """Per sample of a solve Result (one device)."""
    hw = _hw_of(r, "hardware")
    u = r.mfu if r.preset == "mlsysim" else power_activity(r.mfu, r.mbu)
    return economics(hw, devices=1, units_per_s=r.throughput, utilisation=u, unit="sample",
                     preset=r.preset, price_per_hour=getattr(r, "price_per_hour", None),
                     region=getattr(r, "region", None), pue=getattr(r, "pue", None),
                     rate_band=_rate_band(r, "throughput"))


def for_serve(s: Any) -> Economics:
    """Per output token of a ServeResult (all its devices)."""
    hw = _hw_of(s, "hardware")
    u = min(1.0, max(0.0, s.mfu)) if s.preset == "mlsysim" else power_activity(s.mfu, s.mbu)
    return economics(hw, devices=s.devices, units_per_s=s.tokens_per_s, utilisation=u,
                     unit="output token", preset=s.preset,
                     price_per_hour=getattr(s, "price_per_hour", None),
                     region=getattr(s, "region", None), pue=getattr(s, "pue", None),
                     rate_band=_rate_band(s, "tokens_per_s"))


def for_train(t: Any) -> Economics:
    """Per training token of a TrainingResult (the whole cluster; node overhead included)."""
    hw = _hw_of(t, "device")
    other = getattr(t, "other_power_w", 0.0) or 0.0
    return economics(hw, devices=t.devices, units_per_s=t.tokens_per_s,
                     utilisation=(min(1.0, max(0.0, t.mfu)) if t.preset == "mlsysim" else
                                  power_activity(t.mfu)), unit="token", preset=t.preset,
                     price_per_hour=getattr(t, "price_per_hour", None),
                     region=getattr(t, "region", None), pue=getattr(t, "pue", None),
                     other_power_w=other, rate_band=_rate_band(t, "tokens_per_s"))
