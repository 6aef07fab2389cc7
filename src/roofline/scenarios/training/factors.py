"""The fitted factors of the training model, per hardware kind (data/presets/training.toml)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from ..._data import DATA, read_toml
from ...engine.efficiency import NARROW_DTYPES, Efficiency, Gemm, read_efficiency
from ...errors import SpecError
from ...ops.collectives import Links
from ...specs.cluster import Cluster
from ...specs.nccl import tuner_for
from ...specs.sourced import Provenance, read_quantity


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingFactors:
    """Fitted factors of the training model for one hardware kind: the matmul model of
    training kernels (``[<kind>.efficiency]`` of data/presets/training.toml, read by the one
    efficiency loader) and the collective efficiencies."""

    gemm: Gemm  #: the training matmul model (replaces the preset's ``gemm``)
    #: device keys this table is for (an architecture's parts); () for a hardware kind's table
    devices: tuple[str, ...] = ()
    #: multiplier on the preset's narrow-dtype factors (``gemm_dtype``: fp8, fp4, int8, int4)
    #: on this table's devices; 1: the preset's
    dtype_scale: float = 1.0
    scale_up_efficiency: float  #: busbw / link bandwidth on NVLink/ICI
    scale_out_efficiency: float  #: busbw / link bandwidth on the NICs
    provenance: dict[str, Provenance] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def fitted(cls, *, gemm_max: float, gemm_half_size: float, scale_up_efficiency: float,
               scale_out_efficiency: float) -> TrainingFactors:
        """The fit's parametrisation: efficiency halves at M = N = ``gemm_half_size``, K = half
        of it."""
        return cls(gemm=Gemm(max=gemm_max, a=gemm_half_size, b=gemm_half_size,
                             c=gemm_half_size / 2), scale_up_efficiency=scale_up_efficiency,
                   scale_out_efficiency=scale_out_efficiency)

    @property
    def gemm_max(self) -> float:
        return self.gemm.max

    @property
    def gemm_half_size(self) -> float:
        """The fit's size h at which M and N halve the efficiency (``gemm.a``)."""
        return self.gemm.a

    def efficiency(self, base: Efficiency, kind: str) -> Efficiency:
        """The preset's factors on the device with the training matmul model."""
        gd = base.gemm_dtype
        if self.dtype_scale != 1.0:
            gd = replace(gd, **{d: (getattr(gd, d) or 1.0) * self.dtype_scale
                                for d in NARROW_DTYPES})
        return replace(base, gemm=self.gemm, gemm_dtype=gd, label=f"training/{kind}")


@lru_cache(maxsize=1)
def _factor_tables() -> dict[str, TrainingFactors]:
    doc = read_toml(DATA / "presets" / "training.toml")
    sources = doc.get("sources", {})
    out = {}
    for kind, tbl in doc.items():
        if kind in ("schema", "sources"):
            continue
        devices = tbl.get("devices", [])
        if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
            raise SpecError(f"data/presets/training.toml [{kind}] devices must be a list of "
                            "hardware keys")
        origin = f"data/presets/training.toml [{kind}]"
        vals, prov = {}, {}
        for k in ("scale_up_efficiency", "scale_out_efficiency"):
            if k not in tbl:
                raise SpecError(f"{origin} lacks {k!r}")
            v, p = read_quantity(tbl[k], field=k, dimension="ratio", sources=sources,
                                 origin=origin)
            if not 0 < v <= 1:
                raise SpecError(f"{origin} {k}={v} must be in (0, 1]")
            vals[k], prov[k] = v, p
        if not isinstance(tbl.get("efficiency"), dict) or "gemm" not in tbl["efficiency"]:
            raise SpecError(f"{origin} lacks an [{kind}.efficiency.gemm] table")
        eff = read_efficiency(tbl["efficiency"], sources=sources, origin=f"{origin} efficiency",
                              label=f"training/{kind}")
        prov.update(eff.provenance)
        if "dtype_scale" in tbl:
            v, p = read_quantity(tbl["dtype_scale"], field="dtype_scale", dimension="ratio",
                                 sources=sources, origin=origin)
            vals["dtype_scale"], prov["dtype_scale"] = v, p
        out[kind] = TrainingFactors(gemm=eff.gemm, devices=tuple(devices), **vals,
                                    provenance=prov)
    return out


_OVERRIDE: dict[str, TrainingFactors] = {}


def factor_table_for(kind: str = "gpu", device: str | None = None) -> str:
    """The name of the factor table a device uses: the table listing its key in ``devices``
    (an architecture's table, e.g. "gpu-hopper"; a hypothetical ``<key>~<tag>`` variant, as
    analysis.sensitivity.scaled_hardware makes, keeps its part's), else its kind's ("gpu" where
    none)."""
    tables = _factor_tables()
    part = None if device is None else device.split("~", 1)[0]
    for name, f in tables.items():
        if part is not None and part in f.devices:
            return name
    return kind if kind in tables else "gpu"


def training_factors(kind: str = "gpu", device: str | None = None) -> TrainingFactors:
    """The fitted training factors for a device (its architecture's table where one lists it)
    or a hardware kind (GPU factors for kinds without a fit)."""
    name = factor_table_for(kind, device)
    if name in _OVERRIDE:
        return _OVERRIDE[name]
    return _factor_tables()[name]


def cluster_links(c: Cluster, f: TrainingFactors | None) -> Links:
    """The links training's collectives run on: the cluster's bandwidths times the fitted link
    efficiencies (``f``; None: the pure roofline, ideal links); on a fabric with in-switch
    reduction the NVLS all-reduce bandwidth per device, the cluster's measured fraction of the
    link (``scale_up.nvls``; ideal: the whole link, n bytes each way per rank). On a cluster
    NCCL runs on (``specs.nccl.tuner_for``) the links carry NCCL's tuner constants: the
    all-reduce / reduce-scatter / all-gather groups pay NCCL's latency per algorithm and
    protocol (``ops.nccl``; docs/validation/collectives.md) instead of the cluster's per-step
    α; the pure roofline (``f`` None) keeps the α model."""
    up_e, out_e = (1.0, 1.0) if f is None else (f.scale_up_efficiency, f.scale_out_efficiency)
    nvls = c.scale_up_nvls_fraction
    if f is None and nvls:
        nvls = 1.0
    return Links(domain=c.domain, up_bw=c.scale_up_bytes_per_s * up_e,
                 up_alpha=c.scale_up_latency_s, out_bw=c.scale_out_bytes_per_s * out_e,
                 out_alpha=c.scale_out_latency_s, nvls_bw=c.scale_up_bytes_per_s * nvls,
                 nccl=tuner_for(c) if f is not None else None)
