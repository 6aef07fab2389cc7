"""Regions: grid carbon intensity, electricity price, and placement of a run.

``place(result_or_economics, by="carbon"|"cost")`` ranks the known regions for a run whose
energy is known: by carbon (grid intensity × energy) or by electricity cost (the region's
published $/kWh × energy; regions without a published price are left out and listed). Rental
prices do not vary by region in our data (prices.toml quotes are per provider), so "cheapest
region" means cheapest electricity — the owned-hardware (TCO) view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._display import Display
from ..errors import SpecError
from .data import Region, regions

__all__ = ["Placement", "place", "carbon_kg", "water_l"]


def carbon_kg(energy_j: float, region: str | Region) -> float:
    """kg CO2e of ``energy_j`` joules of facility energy drawn from ``region``'s grid."""
    from .data import region as find

    return energy_j * find(region).intensity_kg_per_j


def water_l(it_energy_j: float, wue_l_per_j: float) -> float:
    """Litres of site water for ``it_energy_j`` of IT energy at ``wue_l_per_j``."""
    return it_energy_j * wue_l_per_j


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Placement(Display):
    """Regions ranked for one run."""

    by: str  #: "carbon" or "cost"
    energy_j: float  #: facility energy of the run
    ranking: tuple[tuple[str, float], ...]  #: (region key, kg CO2e or USD), best first
    left_out: tuple[str, ...] = ()  #: regions without the figure ranked on

    @property
    def best(self) -> str:
        return self.ranking[0][0]

    def __str__(self) -> str:
        unit = "kg CO2e" if self.by == "carbon" else "USD of electricity"
        rows = [f"regions by {self.by} for {self.energy_j / 3.6e9:,.4g} MWh:"]
        rows += [f"  {k:<12} {v:,.4g} {unit}" for k, v in self.ranking]
        if self.left_out:
            rows.append(f"  (no published price: {', '.join(self.left_out)})")
        return "\n".join(rows)


def place(energy_j: float | Any, *, by: str = "carbon",
          candidates: list[str] | None = None) -> Placement:
    """Rank regions for a run of ``energy_j`` facility joules (or anything with ``energy_j``,
    e.g. the dict ``Economics.for_seconds`` returns)."""
    from .data import region as find

    if isinstance(energy_j, dict):
        energy_j = energy_j["energy_j"]
    if by not in ("carbon", "cost"):
        raise SpecError(f"by must be 'carbon' or 'cost', got {by!r}")
    # ranking by carbon skips regions whose intensity is a stand-in for a finer grid
    pool = [find(c) for c in candidates] if candidates else \
        [r for r in regions().values() if by == "cost" or not r.assumed]
    ranked, left = [], []
    for r in pool:
        if by == "carbon":
            ranked.append((r.key, energy_j * r.intensity_kg_per_j))
        elif r.electricity_usd_per_j is None:
            left.append(r.key)
        else:
            ranked.append((r.key, energy_j * r.electricity_usd_per_j))
    if not ranked:
        raise SpecError(f"no candidate region has a {by} figure")
    ranked.sort(key=lambda kv: kv[1])
    return Placement(by=by, energy_j=float(energy_j), ranking=tuple(ranked),
                     left_out=tuple(left))
