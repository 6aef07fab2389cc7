"""Cost, energy and carbon per unit of work as COLUMNS: the same arithmetic as
``analysis.economics.Economics`` over arrays of (throughput, utilisation), for the rows of
``serve_sweep``, ``best_parallelism`` and ``plan_serving``.

For ``N`` devices at utilisation ``u`` doing ``W`` units of work per second (arrays):

    energy per unit   E = (N · (idle + (peak − idle)·clip(u, 0, 1)) + other) · PUE / W     J
    cost per unit     C = N · price_per_device_hour / 3600 / W                             USD
    carbon per unit   G = E · grid intensity                                             kg CO2e

A missing price or region is NaN in the column and a sentence in ``EconColumns.reasons``;
never zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..specs.hardware import Hardware

__all__ = ["EconColumns", "econ_columns", "ECON_COLUMN_UNITS"]

#: units of the columns ``EconColumns.columns`` adds to a table
ECON_COLUMN_UNITS = {"usd_per_million_tokens": "USD", "energy_per_token": "J",
                     "carbon_per_million_tokens": "kg"}


@dataclass(frozen=True, slots=True, kw_only=True)
class EconColumns:
    """Per-row economics and the single price, PUE and grid they were computed with."""

    usd_per_unit: np.ndarray  #: USD per unit of work (NaN without a price)
    energy_per_unit: np.ndarray  #: J of facility energy per unit of work
    carbon_per_unit: np.ndarray  #: kg CO2e per unit of work (NaN without a region)
    usd_per_device_hour: float | None
    price_source: str
    pue: float
    region: str | None
    intensity_source: str
    reasons: tuple[str, ...] = field(default=())

    def columns(self, per: float = 1e6) -> dict[str, np.ndarray]:
        """``usd_per_million_tokens``, ``energy_per_token``, ``carbon_per_million_tokens``."""
        return {"usd_per_million_tokens": self.usd_per_unit * per,
                "energy_per_token": self.energy_per_unit,
                "carbon_per_million_tokens": self.carbon_per_unit * per}

    def note(self) -> str:
        """One line saying what the columns assume (price, PUE, grid) or why one is NaN."""
        price = (f"${self.usd_per_device_hour:.4g}/device-h ({self.price_source})"
                 if self.usd_per_device_hour is not None else f"no price: {self.price_source}")
        grid = self.intensity_source if self.region is not None else "no region: carbon NaN"
        return f"economics: {price}; PUE {self.pue:g}; {grid}"


def econ_columns(hw: Hardware, *, devices: Any, units_per_s: Any, utilisation: Any,
                 price_per_hour: float | None = None, region: str | None = None,
                 pue: float | None = None, other_power_w: Any = 0.0,
                 preset: str = "default") -> EconColumns:
    """The economics of each row: ``devices``, ``units_per_s``, ``utilisation`` and
    ``other_power_w`` broadcast together (arrays or scalars)."""
    from .economics import economics
    from .power import power_model

    one = economics(hw, devices=1, units_per_s=1.0, utilisation=0.5, unit="unit", preset=preset,
                    price_per_hour=price_per_hour, region=region, pue=pue)
    pm = power_model(hw, preset)
    n = np.asarray(devices, dtype=np.float64)
    w = np.asarray(units_per_s, dtype=np.float64)
    u = np.clip(np.asarray(utilisation, dtype=np.float64), 0.0, 1.0)
    other = np.asarray(other_power_w, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = np.isfinite(w) & (w > 0)
        power = n * (pm.idle_w + (pm.peak_w - pm.idle_w) * u) + other
        energy = np.where(ok, power * one.pue / np.where(ok, w, 1.0), np.nan)
        usd = one.usd_per_device_hour
        cost = (np.where(ok, n * usd / 3600.0 / np.where(ok, w, 1.0), np.nan)
                if usd is not None else np.full(np.broadcast(n, w).shape, np.nan))
    g = one.intensity_kg_per_j
    carbon = energy * g if g is not None else np.full(energy.shape, np.nan)
    reasons = list(one.reasons)
    if not math.isfinite(pm.peak_w):
        reasons.append(pm.source)
    return EconColumns(usd_per_unit=cost, energy_per_unit=energy, carbon_per_unit=carbon,
                       usd_per_device_hour=usd, price_source=one.price_source, pue=one.pue,
                       region=one.region, intensity_source=one.intensity_source,
                       reasons=tuple(reasons))
