"""Device power: P(u) = idle + (peak − idle)·u, energy = P(u) × time × PUE.

``u`` is the utilisation of the binding resource — the larger of MFU and MBU for an inference
pass or a serving run (a memory-bound decode keeps the HBM busy, not the tensor cores), MFU for
training — clipped to [0, 1]. ``peak`` is the part's TDP (datasheet) and ``idle`` a fraction of
it (data/economics/power.toml, stated per part in ``PowerModel.source``); a part without a TDP
has no power model (energy is NaN with the reason, never zero).

preset="mlsysim" uses mlsysim 0.1.1's convention: P = TDP·(0.3 + 0.7·MFU) (its Engine.solve and
SustainabilityModel), with MFU, not max(MFU, MBU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecError
from ..specs.hardware import Hardware

__all__ = ["PowerModel", "power_model", "binding_utilisation", "device_power_w",
           "check_pue", "check_utilisation", "default_pue"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerModel:
    """Board power of one device between idle and full load, W."""

    idle_w: float
    peak_w: float
    source: str  #: where idle and peak come from (measurement, or TDP fallback)

    def power_w(self, utilisation: float) -> float:
        u = min(1.0, max(0.0, float(utilisation)))
        return self.idle_w + (self.peak_w - self.idle_w) * u


def power_model(hw: Hardware, preset: str = "default") -> PowerModel:
    """The power model of ``hw``: idle = fraction × TDP, peak = TDP (TDP fallback; no part has
    a published idle/peak measurement in data/economics/power.toml yet)."""
    from .data import mlsysim_table, power_defaults

    if preset == "mlsysim":
        frac = mlsysim_table()["conventions"]["idle_fraction"]
        src = "mlsysim 0.1.1 convention: TDP x (0.3 + 0.7 x MFU)"
    else:
        frac, prov = power_defaults()["idle_fraction"]
        src = (f"TDP fallback: peak = TDP {hw.tdp_w:g} W ({hw.provenance.get('power.tdp', '')}), "
               f"idle = {frac:.0%} of TDP ({prov.derivation})")
    tdp = hw.tdp_w
    if not (isinstance(tdp, float | int) and math.isfinite(tdp) and tdp > 0):
        return PowerModel(idle_w=math.nan, peak_w=math.nan,
                          source=f"{hw.name} has no TDP in its hardware file: no power model")
    return PowerModel(idle_w=frac * tdp, peak_w=float(tdp), source=src)


def binding_utilisation(mfu: float, mbu: float = math.nan) -> float:
    """Utilisation of the binding resource: max(MFU, MBU) ignoring NaNs, clipped to [0, 1]."""
    vals = [v for v in (mfu, mbu) if isinstance(v, float | int) and math.isfinite(v)]
    return min(1.0, max(0.0, max(vals))) if vals else math.nan


def device_power_w(hw: Hardware, utilisation: float, preset: str = "default") -> float:
    """W drawn by one ``hw`` at ``utilisation`` of its binding resource (the same arithmetic
    as ``power_model(hw, preset).power_w(u)``, without building the description: solve calls
    this once per result)."""
    frac = _idle_fraction(preset)
    tdp = hw.tdp_w
    if not (isinstance(tdp, float | int) and math.isfinite(tdp) and tdp > 0):
        return math.nan
    u = min(1.0, max(0.0, float(utilisation)))
    return frac * tdp + (1.0 - frac) * tdp * u


_FRAC: dict[str, float] = {}


def _idle_fraction(preset: str) -> float:
    hit = _FRAC.get(preset)
    if hit is None:
        from .data import mlsysim_table, power_defaults

        hit = mlsysim_table()["conventions"]["idle_fraction"] if preset == "mlsysim" else \
            power_defaults()["idle_fraction"][0]
        _FRAC[preset] = hit
    return hit


def check_utilisation(u: float, name: str = "utilisation") -> float:
    """A utilisation in (0, 1]; anything else is an error naming the value."""
    if isinstance(u, bool) or not isinstance(u, float | int) or not math.isfinite(u) \
            or not 0 < u <= 1:
        raise SpecError(f"{name} must be a number in (0, 1], got {u!r}")
    return float(u)


def check_pue(pue: float | None) -> float | None:
    """PUE >= 1 (facility energy over IT energy), or None for the sourced default."""
    if pue is None:
        return None
    if isinstance(pue, bool) or not isinstance(pue, float | int) or not math.isfinite(pue) \
            or pue < 1:
        raise SpecError(f"pue must be a number >= 1 (facility / IT energy), got {pue!r}")
    return float(pue)


def default_pue() -> float:
    """PUE of the default datacentre type (hyperscale, data/economics/datacenters.toml)."""
    from .data import datacenter

    return datacenter().pue
