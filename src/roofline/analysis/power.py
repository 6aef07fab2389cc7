"""Device power: P = idle + (peak − idle)·a, energy = P × time × PUE.

``a`` is the power *activity* of the device, a = min(1, w_c·MFU + w_m·MBU): tensor-core work
and memory traffic each draw power with their own weight, so a memory-bound decode (MBU 0.8,
MFU ≈ 0) draws far less than a compute-bound step. The weights are fitted to measured board
power and energy (data/economics/power.toml ``[model]``; in-sample and leave-one-source-out
errors in docs/validation/economics.md). Per part, ``idle`` is a published idle measurement
where one exists (``[parts.KEY]``), else a fraction of the datasheet TDP; ``peak`` is the TDP
(the board power limit). ``PowerModel.source`` states per part which was used; a part without
a TDP has no power model (energy is NaN with the reason, never zero).

preset="mlsysim" uses mlsysim 0.1.1's convention: P = TDP·(0.3 + 0.7·MFU) (its Engine.solve and
SustainabilityModel): the activity is MFU alone and idle is 30 % of TDP for every part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import SpecError
from ..specs.hardware import Hardware, spec_key
from ..specs.sourced import Provenance

__all__ = ["PowerModel", "power_model", "binding_utilisation", "power_activity",
           "activity_weights", "part_power", "device_power_w", "check_pue",
           "check_utilisation", "default_pue", "power_coverage_markdown"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerModel:
    """Board power of one device between idle and full load, W."""

    idle_w: float
    peak_w: float
    source: str  #: where idle and peak come from (measurement, or TDP fallback)
    idle_measured: bool = False  #: idle is a published measurement (not a fraction of TDP)

    def power_w(self, utilisation: float) -> float:
        """W at power activity ``utilisation`` (see :func:`power_activity`), clipped to [0, 1]."""
        u = min(1.0, max(0.0, float(utilisation)))
        return self.idle_w + (self.peak_w - self.idle_w) * u


@dataclass(frozen=True, slots=True, kw_only=True)
class PartPower:
    """A part's measured power readings (data/economics/power.toml ``[parts.KEY]``)."""

    idle_w: float | None = None
    idle: Provenance | None = None
    peak_w: float | None = None  #: measured full-load power, for a part without a TDP
    peak: Provenance | None = None
    note: str = ""


@lru_cache(maxsize=1)
def _power_doc() -> tuple[dict[str, PartPower], tuple[float, float]]:
    from .._data import read_toml
    from .data import ECON, _reader

    path = ECON / "power.toml"
    doc = read_toml(path)
    q = _reader(doc, str(path))
    parts = {}
    for key, raw in doc.get("parts", {}).items():
        unknown_keys = set(raw) - {"idle", "peak", "note"}
        if unknown_keys:
            raise SpecError(f"{path}: parts.{key} has unknown keys {sorted(unknown_keys)}; "
                            "allowed: idle, peak, note")
        got: dict[str, Any] = {"note": str(raw.get("note", ""))}
        for fld in ("idle", "peak"):
            if fld in raw:
                got[f"{fld}_w"], got[fld] = q(raw[fld], f"parts.{key}.{fld}", "power")
        if got.get("idle_w") is not None and got.get("peak_w") is not None \
                and not got["idle_w"] < got["peak_w"]:
            raise SpecError(f"{path}: parts.{key}: idle {got['idle_w']:g} W must be under peak "
                            f"{got['peak_w']:g} W")
        parts[key] = PartPower(**got)
    model = doc["model"]
    wc = q(model["compute_weight"], "model.compute_weight", "ratio")[0]
    wm = q(model["memory_weight"], "model.memory_weight", "ratio")[0]
    return parts, (wc, wm)


def part_power(key: str) -> PartPower:
    """The measured power readings of zoo part ``key`` (empty where none is published)."""
    return _power_doc()[0].get(key, PartPower())


def activity_weights() -> tuple[float, float]:
    """(w_c, w_m) of a = min(1, w_c·MFU + w_m·MBU), fitted (data/economics/power.toml)."""
    return _power_doc()[1]


def power_activity(mfu: Any, mbu: Any = math.nan) -> Any:
    """a = min(1, w_c·MFU + w_m·MBU), a NaN term counting as 0 (both NaN: NaN); scalars or
    arrays (numpy broadcasting)."""
    wc, wm = activity_weights()
    # two Python floats first: np.ndim costs ~1.5 µs a call, a tenth of rl.train's own work
    if (type(mfu) is float and type(mbu) is float) or (np.ndim(mfu) == 0 and np.ndim(mbu) == 0):
        f, b = _num(mfu), _num(mbu)
        if not (math.isfinite(f) or math.isfinite(b)):
            return math.nan
        a = wc * (f if math.isfinite(f) else 0.0) + wm * (b if math.isfinite(b) else 0.0)
        return min(1.0, max(0.0, a))
    fa, ba = np.asarray(mfu, dtype=np.float64), np.asarray(mbu, dtype=np.float64)
    aa = wc * np.nan_to_num(fa, nan=0.0) + wm * np.nan_to_num(ba, nan=0.0)
    return np.where(np.isnan(fa) & np.isnan(ba), np.nan, np.clip(aa, 0.0, 1.0))


def _num(x: Any) -> float:
    """A real number as float (numpy scalars included); anything else NaN."""
    if x is None or isinstance(x, bool | str):
        return math.nan
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def power_model(hw: Hardware, preset: str = "default") -> PowerModel:
    """The power model of ``hw``: measured idle where published, else a fraction of TDP;
    peak = TDP (a part without a TDP: its measured full-load power). ``source`` says which."""
    tdp = hw.tdp_w
    part = part_power(hw.key)
    if not (isinstance(tdp, float | int) and math.isfinite(tdp) and tdp > 0):
        if preset != "mlsysim" and part.idle_w is not None and part.peak_w is not None:
            wc, wm = activity_weights()
            return PowerModel(
                idle_w=part.idle_w, peak_w=part.peak_w, idle_measured=True,
                source=f"measured idle {part.idle_w:g} W ({part.idle}); measured full-load "
                       f"peak {part.peak_w:g} W ({part.peak}; {hw.name} has no TDP); activity "
                       f"a = min(1, {wc:g} x MFU + {wm:g} x MBU) (fitted to measured power, "
                       "docs/validation/economics.md)")
        return PowerModel(idle_w=math.nan, peak_w=math.nan,
                          source=f"{hw.name} has no TDP in its hardware file: no power model")
    tdp_src = f"peak = TDP {tdp:g} W ({hw.provenance.get('power.tdp', '')})"
    if preset == "mlsysim":
        from .data import mlsysim_table

        frac = mlsysim_table()["conventions"]["idle_fraction"]
        return PowerModel(idle_w=frac * tdp, peak_w=float(tdp),
                          source="mlsysim 0.1.1 convention: TDP x (0.3 + 0.7 x MFU)")
    wc, wm = activity_weights()
    act = (f"activity a = min(1, {wc:g} x MFU + {wm:g} x MBU) (fitted to measured power, "
           "docs/validation/economics.md)")
    if part.idle_w is not None and part.idle is not None and part.idle_w < tdp:
        return PowerModel(idle_w=part.idle_w, peak_w=float(tdp), idle_measured=True,
                          source=f"measured idle {part.idle_w:g} W ({part.idle}); {tdp_src}; "
                                 f"{act}")
    from .data import power_defaults

    frac, prov = power_defaults()["idle_fraction"]
    return PowerModel(idle_w=frac * tdp, peak_w=float(tdp),
                      source=f"TDP fallback (no published idle measurement): {tdp_src}, "
                             f"idle = {frac:.0%} of TDP ({prov.derivation}); {act}")


def binding_utilisation(mfu: float, mbu: float = math.nan) -> float:
    """Utilisation of the binding resource: max(MFU, MBU) ignoring NaNs, clipped to [0, 1]
    (reported; power uses :func:`power_activity`)."""
    vals = [v for v in (mfu, mbu) if isinstance(v, float | int) and math.isfinite(v)]
    return min(1.0, max(0.0, max(vals))) if vals else math.nan


def device_power_w(hw: Hardware, utilisation: float, preset: str = "default") -> float:
    """W drawn by one ``hw`` at power activity ``utilisation`` (:func:`power_activity`; the
    mlsysim preset: MFU) — the same arithmetic as ``power_model(hw, preset).power_w(u)``,
    cached per part: solve calls this once per result."""
    idle, peak = _idle_peak(hw, preset)
    u = min(1.0, max(0.0, float(utilisation)))
    return idle + (peak - idle) * u


#: (spec_key(hw), preset) -> (idle W, peak W): keyed on the spec's content (its key, TDP, ...:
#: everything power_model reads), so equal specs share an entry and an edited copy gets its own
_IDLE_PEAK: dict[tuple[Any, str], tuple[float, float]] = {}


def _idle_peak(hw: Hardware, preset: str) -> tuple[float, float]:
    ck = (spec_key(hw), preset)
    hit = _IDLE_PEAK.get(ck)
    if hit is None:
        pm = power_model(hw, preset)
        hit = (pm.idle_w, pm.peak_w)
        if len(_IDLE_PEAK) > 4096:
            _IDLE_PEAK.clear()
        _IDLE_PEAK[ck] = hit
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


def _short(source: str) -> str:
    """The citation's title part (up to its first ' (' or ':'), for a table cell."""
    cut = min((i for i in (source.find(" ("), source.find(":")) if i > 0), default=len(source))
    return source[:cut].replace("|", "/")


def _w(x: float) -> str:
    return f"{x:,.0f} W" if x >= 100 else f"{x:.3g} W"


def power_coverage_markdown() -> str:
    """Every zoo part's power model as a markdown table (docs/economics.md shows it; a test pins
    the doc to the data): TDP, idle and peak in W and where each comes from."""
    import roofline as rl

    out = ["| part | TDP | idle | peak | idle from |", "|---|---:|---:|---:|---|"]
    for key in rl.list_hardware():
        hw = rl.hardware(key)
        pm, part = power_model(hw), part_power(key)
        tdp = _w(hw.tdp_w) if math.isfinite(hw.tdp_w or math.nan) else "—"
        if not math.isfinite(pm.peak_w):
            out.append(f"| {key} | {tdp} | — | — | no TDP and no measurement: no power model |")
            continue
        if pm.idle_measured and part.idle is not None:
            src = f"measured: {_short(part.idle.source)}"
        else:
            src = f"TDP fallback: {pm.idle_w / pm.peak_w:.0%} of TDP (assumed)"
        out.append(f"| {key} | {tdp} | {_w(pm.idle_w)} | {_w(pm.peak_w)} | {src} |")
    return "\n".join(out)
