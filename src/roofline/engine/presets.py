"""Presets: which factors turn the pure roofline into an estimate.

- ``"bound"``: the pure roofline, ``max(flops/peak, bytes/bandwidth)`` per op, summed; no
  efficiency, no overhead.
- ``"default"``: efficiency by op class and size plus per-op launch/dispatch costs, from
  ``data/presets/default.toml`` (each factor with its provenance), per hardware kind.
- ``"mlsysim"``: mlsysim 0.1.1's whole-model conventions (see engine/mlsysim.py).
- a measured hardware spec may carry its own fitted ``[efficiency]`` table; the default preset
  then uses it instead of the per-kind one.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import SpecError, unknown
from ..specs.hardware import KINDS, Hardware
from ..specs.sourced import Provenance, read_quantity

__all__ = ["Efficiency", "PRESETS", "efficiency_for", "load_efficiency_table", "check_preset"]

PRESETS = ("default", "bound", "mlsysim")

_DIM = {"gemm_max": "ratio", "gemm_a": "ratio", "gemm_b": "ratio", "gemm_c": "ratio",
        "vector_max": "ratio", "memory_max": "ratio", "kernel_gap": "time", "dispatch": "time",
        "cache_fraction": "ratio", "workspace": "bytes"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """The fitted/assumed factors of the default preset for one hardware (kind)."""

    gemm_max: float = 1.0  #: best achievable fraction of the dense matmul peak
    gemm_a: float = 0.0  #: rows at which the M-penalty halves efficiency (1/e ∝ 1 + a/M)
    gemm_b: float = 0.0  #: as gemm_a for N
    gemm_c: float = 0.0  #: as gemm_a for K
    vector_max: float = 1.0  #: fraction of the vector peak elementwise math reaches
    memory_max: float = 1.0  #: achievable fraction of each level's bandwidth
    kernel_gap: float = 0.0  #: s between back-to-back kernels (device side)
    dispatch: float = 0.0  #: s of host time per op (framework dispatch)
    cache_fraction: float = 0.0  #: share of an on-chip level usable for activations (0: off)
    workspace: float = 0.0  #: bytes reserved by runtime/framework
    synchronous: bool = False  #: CPU: dispatch adds to kernel time instead of overlapping
    provenance: dict[str, Provenance] = field(default_factory=dict)
    label: str = "bound"

    def __post_init__(self) -> None:
        for f in ("gemm_max", "vector_max", "memory_max"):
            v = getattr(self, f)
            if not 0 < v <= 1:
                raise SpecError(f"efficiency {self.label}: {f}={v!r} must be in (0, 1]")

    @property
    def is_bound(self) -> bool:
        return self.label == "bound"


BOUND = Efficiency()


def load_efficiency_table(tbl: dict[str, Any], *, sources: dict[str, str], origin: str,
                          synchronous: bool, label: str) -> Efficiency:
    vals: dict[str, Any] = {}
    prov: dict[str, Provenance] = {}
    for k, raw in tbl.items():
        if k not in _DIM:
            raise SpecError(f"{origin}: unknown efficiency factor {k!r}; allowed: "
                            f"{', '.join(_DIM)}")
        v, p = read_quantity(raw, field=k, dimension=_DIM[k], sources=sources, origin=origin)
        vals[k] = v
        prov[k] = p
    return Efficiency(**vals, synchronous=synchronous, provenance=prov, label=label)


@lru_cache(maxsize=1)
def _default_tables() -> dict[str, Efficiency]:
    path = resources.files("roofline") / "data" / "presets" / "default.toml"
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    sources = doc.get("sources", {})
    out = {}
    for kind in KINDS:
        if kind not in doc:
            raise SpecError(f"data/presets/default.toml lacks a [{kind}] table")
        out[kind] = load_efficiency_table(doc[kind], sources=sources,
                                          origin=f"data/presets/default.toml [{kind}]",
                                          synchronous=(kind == "cpu"), label=f"default/{kind}")
    return out


_CUSTOM: dict[str, Efficiency] = {}


def register_efficiency(hw_key: str, eff: Efficiency) -> None:
    """Attach fitted factors to one hardware key (used for measured specs)."""
    _CUSTOM[hw_key] = eff


def efficiency_for(hw: Hardware, preset: str) -> Efficiency:
    """The factors ``preset`` applies on ``hw``."""
    if preset == "bound":
        return BOUND
    if preset == "default":
        if hw.key in _CUSTOM:
            return _CUSTOM[hw.key]
        return _default_tables()[hw.kind]
    raise unknown("preset", preset, PRESETS)


def check_preset(preset: str) -> str:
    if not isinstance(preset, str) or preset not in PRESETS:
        raise unknown("preset", str(preset), PRESETS)
    return preset
