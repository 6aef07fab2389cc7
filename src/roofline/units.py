"""Conversion constants. Everything inside roofline is SI base units (s, B, FLOP, W);
human units appear only at the edges (data files, printouts).

Decimal and binary prefixes are distinct names and never mixed: ``GB = 1e9`` bytes,
``GiB = 2**30`` bytes. Datasheets state bandwidth in decimal GB/s and HBM capacity in
binary GiB (sold as "GB").
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB",
    "KILO", "MEGA", "GIGA", "TERA", "PETA",
    "ms", "us", "ns", "KWH",
    "UNIT_SCALE", "UNIT_DIMENSION", "to_si", "fmt_bytes", "fmt_time", "fmt_rate", "fmt_flops",
    "FRACTION", "column_unit", "fmt_num",
]

KILO, MEGA, GIGA, TERA, PETA = 1e3, 1e6, 1e9, 1e12, 1e15
KB, MB, GB, TB = KILO, MEGA, GIGA, TERA
KiB, MiB, GiB, TiB = 2.0**10, 2.0**20, 2.0**30, 2.0**40
ms, us, ns = 1e-3, 1e-6, 1e-9
KWH = 3.6e6  #: J per kWh

#: unit string (as written in data files) -> factor to SI base units
UNIT_SCALE: dict[str, float] = {
    "FLOP/s": 1.0, "GFLOP/s": GIGA, "TFLOP/s": TERA, "PFLOP/s": PETA,
    "OP/s": 1.0, "GOP/s": GIGA, "TOP/s": TERA, "POP/s": PETA,
    "B": 1.0, "KB": KB, "MB": MB, "GB": GB, "TB": TB,
    "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB,
    "B/s": 1.0, "MB/s": MEGA, "GB/s": GIGA, "TB/s": TERA,
    "W": 1.0, "kW": KILO,
    "s": 1.0, "ms": ms, "us": us, "ns": ns, "h": 3600.0, "d": 86400.0,
    "USD": 1.0, "USD/h": 1.0 / 3600.0,
    "1": 1.0, "%": 0.01,
    # energy, money per energy, carbon and water (issue 13: cost, energy, carbon)
    "J": 1.0, "kWh": KWH, "MWh": 1e3 * KWH,
    "USD/kWh": 1.0 / KWH, "USD/MWh": 1.0 / (1e3 * KWH),
    "gCO2e/kWh": 1e-3 / KWH, "kgCO2e/kWh": 1.0 / KWH,  # -> kg CO2e per J
    "kgCO2e": 1.0, "tCO2e": 1e3,  # -> kg CO2e
    "L/kWh": 1.0 / KWH,  # -> litres per J
    "1/h": 1.0 / 3600.0,  # -> per second (failure rates)
    "Hz": 1.0, "MHz": MEGA, "GHz": GIGA,  # clock frequencies
}
#: unit string -> the dimension it measures (to reject e.g. a capacity given in GB/s)
UNIT_DIMENSION: dict[str, str] = {
    **{u: "compute" for u in ("FLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s",
                              "OP/s", "GOP/s", "TOP/s", "POP/s")},
    **{u: "bytes" for u in ("B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB")},
    **{u: "bandwidth" for u in ("B/s", "MB/s", "GB/s", "TB/s")},
    "W": "power", "kW": "power",
    **{u: "time" for u in ("s", "ms", "us", "ns", "h", "d")},
    "USD": "money", "USD/h": "money_rate", "1": "ratio", "%": "ratio",
    "J": "energy", "kWh": "energy", "MWh": "energy",
    "USD/kWh": "energy_price", "USD/MWh": "energy_price",
    "gCO2e/kWh": "carbon_intensity", "kgCO2e/kWh": "carbon_intensity",
    "kgCO2e": "carbon", "tCO2e": "carbon", "L/kWh": "water_intensity", "1/h": "rate",
    **{u: "frequency" for u in ("Hz", "MHz", "GHz")},
}


def to_si(value: float, unit: str) -> float:
    """Convert ``value`` given in ``unit`` to SI base units. Raises KeyError on an unknown unit."""
    return float(value) * UNIT_SCALE[unit]


def _fmt(value: float, unit: str, steps: tuple[tuple[float, str], ...]) -> str:
    for scale, prefix in steps:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


_DEC = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt_bytes(n: float) -> str:
    """Human bytes in decimal units (GB = 1e9 B)."""
    return _fmt(n, "B", _DEC)


def fmt_flops(n: float) -> str:
    return _fmt(n, "FLOP", _DEC)


def fmt_rate(n: float, unit: str) -> str:
    """A quantity with a decimal prefix (k, M, G, T, P; m below 1: ``0.348 J`` -> 348 mJ)."""
    if n == n and 0 < abs(n) < 1:
        return _fmt(n, unit, ((1e-3, "m"), (1e-6, "µ"), (1e-9, "n")))
    return _fmt(n, unit, _DEC)


def fmt_time(t: float) -> str:
    if t != t:  # NaN
        return "n/a"
    if t >= 1.0:
        return f"{t:.4g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.4g} ms"
    if t >= 1e-6:
        return f"{t * 1e6:.4g} µs"
    return f"{t * 1e9:.4g} ns"


# -- display: one engineering unit per column ------------------------------------------------------

#: units that take SI prefixes when displayed; time goes down (ms, µs, ns), the others go up
#: (decimal: k = 1e3, M = 1e6, G = 1e9 — bytes too: kB/MB/GB, never KiB/MiB/GiB in tables)
_UP = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_PREFIXED = ("B", "FLOP", "FLOP/s", "B/s", "J", "W", "tokens/s", "Wh")
#: a stored fraction displayed as a percentage
FRACTION = "fraction"


def column_unit(values: Any, unit: str) -> tuple[float, str]:
    """``(scale, label)`` for showing a whole column in one unit: divide by ``scale``.

    The prefix is chosen so that the column's largest finite magnitude lands in [1, 1000):
    seconds -> s/ms/µs/ns, bytes and FLOPs -> decimal k/M/G/T/P prefixes; ``"fraction"`` ->
    (0.01, "%"); any other unit is shown as stored.
    """
    if unit == FRACTION:
        return 0.01, "%"
    if unit != "s" and unit not in _PREFIXED:
        return 1.0, unit
    mags = [abs(float(v)) for v in values if _is_num(v) and math.isfinite(float(v)) and v != 0]
    if not mags:
        return 1.0, unit
    top = max(mags)
    if unit == "s":
        for scale, label in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if top >= scale:
                return scale, label
        return 1e-9, "ns"
    for scale, prefix in _UP:
        if top >= scale:
            return scale, prefix + unit
    return 1.0, unit


def fmt_num(v: Any) -> str:
    """A number for a table cell: no exponents; 4 significant digits below 1,000 (so a
    column in one unit lines up), thousands separators above; NaN -> "-"."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not _is_num(v):
        return str(v)
    f = float(v)
    if math.isnan(f):
        return "-"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f == 0:
        return "0"
    if isinstance(v, int) or (hasattr(v, "dtype") and v.dtype.kind in "iu"):
        return f"{int(v):,}"
    if abs(f) >= 1000:
        return f"{f:,.0f}"
    digits = 4 - 1 - math.floor(math.log10(abs(f)))
    s = f"{f:.{max(digits, 0)}f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def _is_num(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int | float):
        return True
    return hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iuf"
