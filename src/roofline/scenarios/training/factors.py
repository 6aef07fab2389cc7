"""The fitted factors of the training model, per hardware kind (data/presets/training.toml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..._data import DATA, read_toml
from ...errors import SpecError
from ...specs.sourced import Provenance, read_quantity


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingFactors:
    """Fitted factors of the training model for one hardware kind."""

    gemm_max: float  #: achievable fraction of the matmul peak in training kernels
    gemm_half_size: float  #: GEMM M/N size (K: half of it) at which efficiency halves
    scale_up_efficiency: float  #: busbw / link bandwidth on NVLink/ICI
    scale_out_efficiency: float  #: busbw / link bandwidth on the NICs
    provenance: dict[str, Provenance] = field(default_factory=dict)


@lru_cache(maxsize=1)
def _factor_tables() -> dict[str, TrainingFactors]:
    doc = read_toml(DATA / "presets" / "training.toml")
    sources = doc.get("sources", {})
    out = {}
    for kind, tbl in doc.items():
        if kind in ("schema", "sources"):
            continue
        vals, prov = {}, {}
        for k in ("gemm_max", "gemm_half_size", "scale_up_efficiency", "scale_out_efficiency"):
            if k not in tbl:
                raise SpecError(f"data/presets/training.toml [{kind}] lacks {k!r}")
            v, p = read_quantity(tbl[k], field=k, dimension="ratio", sources=sources,
                                 origin=f"data/presets/training.toml [{kind}]")
            if k != "gemm_half_size" and not 0 < v <= 1:
                raise SpecError(f"data/presets/training.toml [{kind}] {k}={v} must be in (0, 1]")
            vals[k], prov[k] = v, p
        out[kind] = TrainingFactors(**vals, provenance=prov)
    return out


_OVERRIDE: dict[str, TrainingFactors] = {}


def training_factors(kind: str = "gpu") -> TrainingFactors:
    """The fitted training factors for a hardware kind (GPU factors for kinds without a fit)."""
    if kind in _OVERRIDE:
        return _OVERRIDE[kind]
    tables = _factor_tables()
    return tables.get(kind, tables["gpu"])
