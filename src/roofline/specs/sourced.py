"""Reading numbers with provenance out of TOML data files.

A number in ``data/`` is an inline table ``{ value = 312, unit = "TFLOP/s", source = "ds" }``
with optional ``derivation`` and ``note``. ``source`` is a key of the file's ``[sources]``
table or free text. The loader refuses a number without a source or unit.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import SourceError, SpecError
from ..units import UNIT_DIMENSION, UNIT_SCALE

__all__ = ["Provenance", "read_quantity", "check_source_id", "check_number", "PLAUSIBLE"]

#: dimension -> (lowest, highest) plausible value in SI units. Generous bounds, not physics:
#: they refuse a typo or a fuzzed value (a 1e-300 fraction, a 1.7e308 s overhead) that would
#: otherwise give an absurd result marked feasible. Fields with a tighter meaning pass their
#: own ``lo``/``hi`` (a sustained-clock fraction, a device count).
PLAUSIBLE: dict[str, tuple[float, float]] = {
    "compute": (1e3, 1e20),  # FLOP/s: a microcontroller to far beyond a wafer-scale part
    "bytes": (0.0, 1e17),  # B: workspaces may be 0; capacities are also checked > 0
    "bandwidth": (1e3, 1e18),  # B/s: a serial link to far beyond wafer-scale SRAM
    "time": (0.0, 60.0),  # s: per-op, per-step and per-collective overheads and latencies
    "power": (0.0, 1e7),  # W
    "ratio": (0.0, 1e12),  # fractions, factors, counts
    "money": (0.0, 1e12),  # USD
    "money_rate": (0.0, 1e6),  # USD/s
    "frequency": (1e6, 1e11),  # Hz: a clock of 1 MHz to 100 GHz
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Where one number came from."""

    source: str  #: document, table/page (resolved from the file's [sources])
    derivation: str = ""  #: arithmetic that produced it from the source, or "assumed: ..."
    note: str = ""  #: e.g. the sparse figure that was not used
    unit: str = ""  #: unit the number was written in
    value: float = math.nan  #: the number as written (in ``unit``)

    @property
    def measured(self) -> bool:
        return self.source.lower().startswith("measured")

    def __str__(self) -> str:
        s = self.source
        if self.derivation:
            s += f"; derivation: {self.derivation}"
        if self.note:
            s += f"; note: {self.note}"
        return s


def check_source_id(raw: Any, field: str, sources: Mapping[str, str], origin: str) -> None:
    """A spec file's quantity cites its source by an id of the file's ``[sources]``: an id with
    no citation (a typo) would be printed as if it were one, so it is a SpecError naming the
    field, the id and the ids defined (hardware and cluster specs)."""
    src = raw.get("source") if isinstance(raw, dict) else None
    if isinstance(src, str) and src.strip() and src not in sources:
        raise SpecError(f"{origin}: {field}.source={src!r} is not a key of [sources]; "
                        f"defined: {', '.join(sorted(sources)) or 'none'}")


def check_number(value: Any, where: str, *, lo: float = 0.0, hi: float = math.inf,
                 above: bool = False, nan_ok: bool = False, unit: str = "") -> float:
    """One number of a spec built in code (a ``Link``, a ``Hardware``, a ``Cluster``, an engine
    profile), refused in the words ``read_quantity`` uses for a spec file's: not a finite
    number, negative, or outside ``[lo, hi]`` (``above``: ``(lo, hi]``, the value must exceed
    ``lo``). ``nan_ok``: NaN means "unpublished" for this field and passes. Returns the value
    as a float.

    A spec built in code is not held to the file's ``PLAUSIBLE`` ranges: code makes
    hypothetical copies (``analysis.sensitivity.scaled_hardware`` scales a bandwidth by 1e6 or
    1e-6), so only what the field means bounds it (a bandwidth > 0, a fraction ≤ 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's too
        raise SpecError(f"{where} must be a finite number, got {value!r}")
    v = float(value)
    if nan_ok and v != v:
        return v
    if not math.isfinite(v):
        raise SpecError(f"{where} must be a finite number, got {value!r}")
    if v < 0 and lo >= 0:
        raise SpecError(f"{where} must be >= 0, got {value!r}")
    if not (lo < v if above else lo <= v) or v > hi:
        u = f" {unit}" if unit else ""
        raise SpecError(f"{where} = {v:g}{u} is outside the plausible range "
                        f"{'(' if above else '['}{lo:g}, {hi:g}{')' if hi == math.inf else ']'}{u}")
    return v


def read_quantity(
    raw: Any, *, field: str, dimension: str, sources: dict[str, str], origin: str,
    lo: float | None = None, hi: float | None = None,
) -> tuple[float, Provenance]:
    """Parse one sourced number; return (value in SI units, provenance).

    The value must be finite and within [lo, hi] (SI units; default: ``PLAUSIBLE`` for the
    dimension); the error names the file, the field, the value and the allowed range in the
    unit the file wrote."""
    where = f"{origin}: {field}"
    if not isinstance(raw, dict):
        raise SourceError(
            f"{where} must be a table like {{ value = 1.0, unit = \"GB/s\", source = \"...\" }}, "
            f"got {raw!r} (every number needs a unit and a source)"
        )
    unknown_keys = set(raw) - {"value", "unit", "source", "derivation", "note"}
    if unknown_keys:
        raise SpecError(f"{where} has unknown keys {sorted(unknown_keys)}; allowed: value, unit, "
                        "source, derivation, note")
    if "value" not in raw:
        raise SpecError(f"{where} has no 'value'")
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(f"{where}.value must be a finite number, got {value!r}")
    if value < 0:
        raise SpecError(f"{where}.value must be >= 0, got {value!r}")
    src = raw.get("source")
    if not isinstance(src, str) or not src.strip():
        raise SourceError(f"{where} has no 'source': every number in a data file must cite one")
    unit = raw.get("unit")
    if not isinstance(unit, str) or unit not in UNIT_SCALE:
        raise SpecError(f"{where}.unit={unit!r} is not a known unit. Allowed: "
                        + ", ".join(u for u, d in UNIT_DIMENSION.items() if d == dimension))
    if UNIT_DIMENSION[unit] != dimension:
        raise SpecError(f"{where}.unit={unit!r} measures {UNIT_DIMENSION[unit]}, expected a "
                        f"{dimension} unit: "
                        + ", ".join(u for u, d in UNIT_DIMENSION.items() if d == dimension))
    si = float(value) * UNIT_SCALE[unit]
    d_lo, d_hi = PLAUSIBLE.get(dimension, (0.0, math.inf))
    lo = d_lo if lo is None else lo
    hi = d_hi if hi is None else hi
    if not (lo <= si <= hi and math.isfinite(si)):
        k = UNIT_SCALE[unit]
        u = "" if unit == "1" else f" {unit}"
        raise SpecError(f"{where}.value = {value:g}{u} is outside the plausible range "
                        f"[{lo / k:g}, {hi / k:g}]{u}")
    prov = Provenance(
        source=sources.get(src, src),
        derivation=str(raw.get("derivation", "")),
        note=str(raw.get("note", "")),
        unit=unit,
        value=float(value),
    )
    return si, prov
