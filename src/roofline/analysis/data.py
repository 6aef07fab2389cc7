"""The sourced tables behind money, energy, carbon and failures (``data/economics/*.toml``).

Every number is read with :func:`roofline.specs.sourced.read_quantity`, which refuses a number
without a ``source`` or a unit; a price quote also needs the ``date`` the page states. Values are
SI inside: USD/s, J, kg CO2e per J, litres per J, s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

from .._data import (
    DATA,
    alias_index,
    norm_name,
    read_toml,
    read_toml_tables,
    toml_key_lines,
    toml_tables,
)
from .._display import Display
from ..errors import SourceError, SpecError, unknown
from ..specs.sourced import Provenance, read_quantity

__all__ = [
    "PriceQuote", "PartPrices", "Region", "DatacenterType", "FailureRun", "ValidationRun",
    "part_prices", "region", "list_regions", "regions", "datacenter", "list_datacenters",
    "power_defaults", "failure_run", "validation_runs", "tco_defaults", "mlsysim_table",
    "parse_prices", "price_quotes", "embodied_carbon",
]

ECON = DATA / "economics"

#: plausible ranges (SI) of the economics dimensions, beyond specs.sourced.PLAUSIBLE: a typo
#: (a 1e9 g/kWh grid, a negative-looking 1e-30 price) is refused at load, naming the field
_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "time": (0.0, 1e10),  # s: run durations (days), MTTFs (1e5 h), restart and checkpoint costs
    "carbon_intensity": (0.0, 2.0 / 3.6e6),  # kg/J: 0..2,000 gCO2e/kWh
    "energy_price": (0.0, 10.0 / 3.6e6),  # USD/J: 0..10 $/kWh
    "water_intensity": (0.0, 100.0 / 3.6e6),  # L/J: 0..100 L/kWh
    "money_rate": (1e-9, 1e6 / 3600.0),  # USD/s: a positive price up to 1e6 $/h
}


def _reader(doc: Mapping[str, Any], origin: str) -> Any:
    sources = doc.get("sources", {})
    if not isinstance(sources, dict):
        raise SpecError(f"{origin}: [sources] must map short ids to citation strings")

    def q(raw: Any, fld: str, dim: str) -> tuple[float, Provenance]:
        if isinstance(raw, dict) and "date" in raw:
            raw = {k: v for k, v in raw.items() if k != "date"}
        lo, hi = _BOUNDS.get(dim, (None, None))
        return read_quantity(raw, field=fld, dimension=dim, sources=sources, origin=origin,
                             lo=lo, hi=hi)

    return q


# -- prices ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class PriceQuote:
    """One public on-demand price for one device-hour."""

    provider: str
    offer: str  #: instance type, region, billing
    date: str  #: the date the page states
    usd_per_s: float
    provenance: Provenance

    @property
    def usd_per_hour(self) -> float:
        return self.usd_per_s * 3600.0


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class PartPrices(Display):
    """The public prices of one zoo part."""

    key: str
    quotes: tuple[PriceQuote, ...] = ()
    purchase_usd: float | None = None  #: street price of one device, USD
    purchase_provenance: Provenance | None = None
    no_rental: str | None = None  #: why there is no quote (bought not rented, not in sources)
    no_purchase: str | None = None  #: why there is no purchase price
    single_provider: str | None = None  #: why only one cloud quotes it (e.g. TPUs: Google only)

    @property
    def providers(self) -> tuple[str, ...]:
        """The distinct clouds quoting this part."""
        return tuple(dict.fromkeys(q.provider for q in self.quotes))

    @property
    def usd_per_hour(self) -> float | None:
        """Default rental price: the median of the quotes (derived), None without quotes."""
        if not self.quotes:
            return None
        return float(statistics.median(q.usd_per_hour for q in self.quotes))

    @property
    def source(self) -> str:
        if not self.quotes:
            why = self.no_rental or "no record in data/economics/prices.toml"
            return f"no public price: {why}"
        parts = "; ".join(f"{q.provider} {q.usd_per_hour:.4g} $/h ({q.date})" for q in self.quotes)
        return f"median of {len(self.quotes)} quotes: {parts}"


def parse_prices(doc: Mapping[str, Any], origin: str) -> dict[str, PartPrices]:
    """Parse a prices table (see data/economics/prices.toml); every quote needs a date."""
    q = _reader(doc, origin)
    out: dict[str, PartPrices] = {}
    for key, raw in (doc.get("parts") or {}).items():
        if not isinstance(raw, dict):
            raise SpecError(f"{origin}: parts.{key} must be a table")
        quotes = []
        for i, e in enumerate(raw.get("on_demand", [])):
            where = f"parts.{key}.on_demand.{i}"
            for req in ("provider", "date", "price"):
                if req not in e:
                    raise SourceError(f"{origin}: {where} has no {req!r}: a price quote needs "
                                      "the provider, the date the page states and a sourced price")
            v, p = q(e["price"], f"{where}.price", "money_rate")
            if not v > 0:
                raise SpecError(f"{origin}: {where}.price must be > 0")
            quotes.append(PriceQuote(provider=str(e["provider"]), offer=str(e.get("offer", "")),
                                     date=str(e["date"]), usd_per_s=v, provenance=p))
        purchase = prov = None
        if "purchase" in raw:
            if "date" not in raw["purchase"]:
                raise SourceError(f"{origin}: parts.{key}.purchase has no 'date'")
            purchase, prov = q(raw["purchase"], f"parts.{key}.purchase", "money")
        pp = PartPrices(key=key, quotes=tuple(quotes), purchase_usd=purchase,
                        purchase_provenance=prov, no_rental=_why(raw, "no_rental", origin, key),
                        no_purchase=_why(raw, "no_purchase", origin, key),
                        single_provider=_why(raw, "single_provider", origin, key))
        _check_coverage(pp, origin)
        out[key] = pp
    return out


def _why(raw: Mapping[str, Any], name: str, origin: str, key: str) -> str | None:
    v = raw.get(name)
    if v is not None and not (isinstance(v, str) and v.strip()):
        raise SpecError(f"{origin}: parts.{key}.{name} must be a sentence saying why")
    return v


def _check_coverage(pp: PartPrices, origin: str) -> None:
    """A price record says why a number is missing, and has two clouds or says why not."""
    where = f"{origin}: parts.{pp.key}"
    if pp.quotes and pp.no_rental:
        raise SpecError(f"{where} has quotes and no_rental: one or the other")
    if not pp.quotes and not pp.no_rental:
        raise SourceError(f"{where} has no on_demand quote: say why in no_rental")
    if pp.purchase_usd is None and not pp.no_purchase:
        raise SourceError(f"{where} has no purchase price: say why in no_purchase")
    if len(pp.providers) == 1 and not pp.single_provider:
        raise SourceError(f"{where} is quoted by one cloud only ({pp.providers[0]}): add a "
                          "second public cloud or say why in single_provider")


@lru_cache(maxsize=1)
def _prices() -> dict[str, PartPrices]:
    path = ECON / "prices.toml"
    return parse_prices(read_toml(path), str(path))


def _cited(raw: Any) -> set[str]:
    """The ``source`` ids a parsed record cites, at any depth."""
    if isinstance(raw, dict):
        own = {raw["source"]} if isinstance(raw.get("source"), str) else set()
        return own.union(*(_cited(v) for v in raw.values()))
    if isinstance(raw, list):
        return set().union(*(_cited(v) for v in raw))
    return set()


@cache
def part_prices(key: str) -> PartPrices:
    """The prices of zoo part ``key`` (an empty PartPrices, saying there is no record, for a
    part outside data/economics/prices.toml, e.g. a user's own hardware file).

    Parses only [parts.<key>] of the file and the [sources] lines it cites (the whole file,
    which ``_prices`` reads and checks, is ~10 times the text); the same record
    (tests/test_toml_tables.py): a quote's provenance reads only the source it cites."""
    import tomllib

    path = ECON / "prices.toml"
    name = f"parts.{key}"
    if name not in toml_tables(path):
        return PartPrices(key=key, no_rental=(
            f"{key} has no record in data/economics/prices.toml"), no_purchase="no record")
    parts = read_toml_tables(path, name)["parts"]
    lines = toml_key_lines(path, "sources")
    cited = "".join(lines[k] for k in sorted(_cited(parts)) if k in lines)
    doc = {"sources": tomllib.loads(cited), "parts": parts}
    return parse_prices(doc, str(path))[key]


def price_quotes(hardware: Any) -> PartPrices:
    """The public prices of a part (zoo name, alias or Hardware): quotes with page and date,
    their median (the default ``price_per_hour``) and the street purchase price."""
    from ..specs.resolve import hardware as resolve

    return part_prices(resolve(hardware).key)


# -- regions ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Region(Display):
    """A grid region: yearly carbon intensity and, where published, electricity price."""

    key: str
    name: str
    year: int
    intensity_kg_per_j: float  #: kg CO2e per J of electricity
    electricity_usd_per_j: float | None = None
    aliases: tuple[str, ...] = ()
    provenance: Mapping[str, Provenance] = field(default_factory=dict)

    @property
    def g_per_kwh(self) -> float:
        return self.intensity_kg_per_j * 3.6e9

    @property
    def usd_per_kwh(self) -> float | None:
        return None if self.electricity_usd_per_j is None else self.electricity_usd_per_j * 3.6e6

    @property
    def assumed(self) -> bool:
        """True where the intensity is a stand-in (a coarser grid) rather than this grid's own."""
        return self.provenance["intensity"].derivation.startswith("assumed")


@lru_cache(maxsize=1)
def _regions() -> tuple[dict[str, Region], dict[str, str]]:
    path = ECON / "grids.toml"
    doc = read_toml(path)
    q = _reader(doc, str(path))
    out: dict[str, Region] = {}
    for key, raw in doc["regions"].items():
        prov: dict[str, Provenance] = {}
        if not isinstance(raw.get("year"), int):
            raise SourceError(f"{path}: regions.{key} needs the data set's 'year'")
        v, prov["intensity"] = q(raw.get("intensity"), f"regions.{key}.intensity",
                                 "carbon_intensity")
        price = None
        if "electricity_price" in raw:
            price, prov["electricity_price"] = q(raw["electricity_price"],
                                                 f"regions.{key}.electricity_price",
                                                 "energy_price")
        out[key] = Region(key=key, name=str(raw["name"]), year=raw["year"], intensity_kg_per_j=v,
                          electricity_usd_per_j=price, aliases=tuple(raw.get("aliases", ())),
                          provenance=prov)
    index = alias_index(((r.key, r.aliases) for r in out.values()), "region")
    return out, index


def regions() -> dict[str, Region]:
    """Every known region by key."""
    return dict(_regions()[0])


def list_regions() -> list[str]:
    """The region keys: the [regions.<key>] headers of data/economics/grids.toml (the keys of
    ``regions()``, without parsing the file; tests/test_toml_tables.py)."""
    return sorted(k[8:] for k in toml_tables(ECON / "grids.toml")
                  if k.startswith("regions.") and "." not in k[8:])


def region(name: str | Region) -> Region:
    """A region by key or alias (``"us-east"``, ``"eu-west-1"``, ``"quebec"``); an unknown name
    raises an error listing the known ones and the closest."""
    if isinstance(name, Region):
        return name
    if not isinstance(name, str):
        raise SpecError(f"region must be a region name, got {type(name).__name__}")
    by_key, index = _regions()
    key = index.get(norm_name(name))
    if key is None:
        from ..errors import UnknownNameError, closest

        every = [n for r in by_key.values() for n in (r.key, *r.aliases)]
        raise UnknownNameError(
            f"unknown region {name!r}.{closest(name, every)} Known regions: "
            f"{', '.join(sorted(by_key))} (cloud-region aliases too, e.g. us-east-1, eu-west-1)")
    return by_key[key]


# -- datacentre types --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class DatacenterType:
    key: str
    name: str
    pue: float
    wue_l_per_j: float  #: litres of site water per J of IT energy
    provenance: Mapping[str, Provenance] = field(default_factory=dict)


@lru_cache(maxsize=1)
def _datacenters() -> tuple[dict[str, DatacenterType], dict[str, str], str]:
    path = ECON / "datacenters.toml"
    doc = read_toml(path)
    q = _reader(doc, str(path))
    out: dict[str, DatacenterType] = {}
    aliases = []
    for key, raw in doc["types"].items():
        prov: dict[str, Provenance] = {}
        pue, prov["pue"] = q(raw.get("pue"), f"types.{key}.pue", "ratio")
        if pue < 1:
            raise SpecError(f"{path}: types.{key}.pue={pue} must be >= 1")
        wue, prov["wue"] = q(raw.get("wue"), f"types.{key}.wue", "water_intensity")
        out[key] = DatacenterType(key=key, name=str(raw["name"]), pue=pue, wue_l_per_j=wue,
                                  provenance=prov)
        aliases.append((key, tuple(raw.get("aliases", ()))))
    return out, alias_index(aliases, "datacenter type"), str(doc["default"])


def list_datacenters() -> list[str]:
    return sorted(_datacenters()[0])


def datacenter(name: str | None = None) -> DatacenterType:
    """A datacentre type (PUE, WUE) by name; None: the default (hyperscale)."""
    by_key, index, default = _datacenters()
    if name is None:
        return by_key[default]
    key = index.get(norm_name(str(name)))
    if key is None:
        raise unknown("datacenter type", str(name), list(index))
    return by_key[key]


# -- power, reliability, TCO defaults, mlsysim ------------------------------------------------

def _flat(path_name: str, section: str) -> dict[str, tuple[float, Provenance]]:
    path = ECON / path_name
    doc = read_toml(path)
    q = _reader(doc, str(path))
    out = {}
    for k, raw in doc[section].items():
        dim = raw.get("unit") if isinstance(raw, dict) else None
        from ..units import UNIT_DIMENSION

        out[k] = q(raw, f"{section}.{k}", UNIT_DIMENSION.get(str(dim), "ratio"))
    return out


@lru_cache(maxsize=1)
def power_defaults() -> dict[str, tuple[float, Provenance]]:
    """``idle_fraction`` (of TDP) and its provenance."""
    return _flat("power.toml", "default")


@lru_cache(maxsize=1)
def tco_defaults() -> dict[str, tuple[float, Provenance]]:
    """``years``, ``maintenance_per_year``, ``electricity_price`` (USD/J)."""
    return _flat("tco.toml", "defaults")


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureRun:
    """A published large run the failure rate is set from."""

    key: str
    name: str
    devices: float
    duration_s: float
    unexpected: float
    planned: float
    storage_bytes_per_s: float
    provenance: Mapping[str, Provenance]

    @property
    def rate_per_device_s(self) -> float:
        """Unexpected interruptions per device-second (derived: count / (devices x time))."""
        return self.unexpected / (self.devices * self.duration_s)

    @property
    def rate_per_device_hour(self) -> float:
        return self.rate_per_device_s * 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationRun:
    name: str
    devices: float
    duration_s: float
    events: float
    kind: str
    note: str
    gpu_share: float | None
    provenance: Mapping[str, Provenance]


@lru_cache(maxsize=1)
def _reliability() -> tuple[dict[str, FailureRun], str, tuple[ValidationRun, ...]]:
    path = ECON / "reliability.toml"
    doc = read_toml(path)
    q = _reader(doc, str(path))
    runs = {}
    for key, raw in doc["runs"].items():
        prov: dict[str, Provenance] = {}

        def g(name: str, dim: str, _raw: dict[str, Any] = raw, _key: str = key,
              _prov: dict[str, Provenance] = prov) -> float:
            v, _prov[name] = q(_raw[name], f"runs.{_key}.{name}", dim)
            return v

        runs[key] = FailureRun(key=key, name=str(raw["name"]), devices=g("devices", "ratio"),
                               duration_s=g("duration", "time"),
                               unexpected=g("unexpected_interruptions", "ratio"),
                               planned=g("planned_interruptions", "ratio"),
                               storage_bytes_per_s=g("storage_bandwidth", "bandwidth"),
                               provenance=prov)
    vals = []
    for i, raw in enumerate(doc.get("validation", [])):
        prov = {}
        dev, prov["devices"] = q(raw["devices"], f"validation.{i}.devices", "ratio")
        dur, prov["duration"] = q(raw["duration"], f"validation.{i}.duration", "time")
        ev, prov["events"] = q(raw["events"], f"validation.{i}.events", "ratio")
        share = None
        if "gpu_share" in raw:
            share, prov["gpu_share"] = q(raw["gpu_share"], f"validation.{i}.gpu_share", "ratio")
        vals.append(ValidationRun(name=str(raw["name"]), devices=dev, duration_s=dur, events=ev,
                                  kind=str(raw["kind"]), note=str(raw.get("note", "")),
                                  gpu_share=share, provenance=prov))
    return runs, str(doc["default"]), tuple(vals)


def failure_run(name: str | None = None) -> FailureRun:
    """The published run the default failure rate comes from (Llama 3 405B)."""
    runs, default, _ = _reliability()
    key = default if name is None else name
    if key not in runs:
        raise unknown("failure statistics run", key, runs)
    return runs[key]


def validation_runs() -> tuple[ValidationRun, ...]:
    """Published runs NOT used to set the failure rate (docs/validation/economics.md)."""
    return _reliability()[2]


@lru_cache(maxsize=1)
def mlsysim_table() -> dict[str, Any]:
    """mlsysim 0.1.1's conventions (data/economics/mlsysim.toml), SI values."""
    from ..units import UNIT_DIMENSION

    path = ECON / "mlsysim.toml"
    doc = read_toml(path)
    q = _reader(doc, str(path))

    def table(raw: Mapping[str, Any], where: str) -> dict[str, float]:
        return {k: q(v, f"{where}.{k}", UNIT_DIMENSION[v["unit"]])[0] for k, v in raw.items()}

    return {
        "conventions": table(doc["conventions"], "conventions"),
        "node": table(doc["node"], "node"),
        "devices": {k: table(v, f"devices.{k}") for k, v in doc["devices"].items()},
        "grids": {k: table(v, f"grids.{k}") for k, v in doc["grids"].items()},
    }


@lru_cache(maxsize=1)
def _embodied() -> dict[str, tuple[float, Provenance]]:
    path = ECON / "embodied.toml"
    doc = read_toml(path)
    q = _reader(doc, str(path))
    return {k: q(v["embodied"], f"parts.{k}.embodied", "carbon")
            for k, v in (doc.get("parts") or {}).items()}


def embodied_carbon(key: str) -> tuple[float, Provenance] | None:
    """(kg CO2e to make one device, provenance), or None where none is published."""
    return _embodied().get(key)


def _finite(x: float) -> bool:
    return isinstance(x, float | int) and math.isfinite(x)


def price_coverage_markdown() -> str:
    """Every zoo part's public prices as a markdown table (docs/economics.md shows it; a test
    pins the doc to the data): clouds quoting it, the median $/device-hour, the purchase price,
    or the data file's reason for a missing one."""
    import roofline as rl

    out = ["| part | clouds | median $/device-h | purchase | why a price is missing |",
           "|---|---|---:|---:|---|"]
    for key in rl.list_hardware():
        pp = part_prices(key)
        med = f"{pp.usd_per_hour:.2f}" if pp.usd_per_hour is not None else "—"
        buy = f"${pp.purchase_usd:,.0f}" if pp.purchase_usd is not None else "—"
        why = "; ".join(w for w in (pp.no_rental, pp.no_purchase, pp.single_provider) if w)
        out.append(f"| {key} | {', '.join(pp.providers) or '—'} | {med} | {buy} | {why} |")
    return "\n".join(out)
