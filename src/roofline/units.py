"""Conversion constants. Everything inside roofline is SI base units (s, B, FLOP, W);
human units appear only at the edges (data files, printouts).

Decimal and binary prefixes are distinct names and never mixed: ``GB = 1e9`` bytes,
``GiB = 2**30`` bytes. Datasheets state bandwidth in decimal GB/s and HBM capacity in
binary GiB (sold as "GB").
"""

from __future__ import annotations

__all__ = [
    "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB",
    "KILO", "MEGA", "GIGA", "TERA", "PETA",
    "ms", "us", "ns", "KWH",
    "UNIT_SCALE", "UNIT_DIMENSION", "to_si", "fmt_bytes", "fmt_time", "fmt_rate", "fmt_flops",
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
