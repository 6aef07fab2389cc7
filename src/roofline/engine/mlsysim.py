"""preset="mlsysim": mlsysim 0.1.1's whole-model conventions, reproduced exactly.

Its Engine.solve (see docs/mlsysim-conventions.md) prices the model as one aggregate:

    W          = params × bytes/param
    t_compute  = batch × flops_per_sample / (peak × 0.5)       efficiency on compute only
    t_memory   = W × (1 + 0.1 × batch) / bandwidth              activations = 10 % of W/sample
    latency    = max(t_compute, t_memory) + dispatch_tax + 0.01 ms × layers
    bottleneck = "memory" if t_memory > t_compute else "compute"
    MFU        = batch × flops / latency / peak

with its zoo's aggregate figures (ResNet-50: 4.1e9 "FLOPs", a MAC count; LLMs: 2 × params per
token). Where mlsysim's zoo lacks the model, our graph supplies params, 2 × params per token
(transformers) or MACs (CNNs, its convention), and layers. Where it lacks the device, our
datasheet figures are used with no dispatch tax. Unlike mlsysim, a dtype the device lacks is
an error, never a silent fallback to the fp16 peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import UnsupportedDtypeError
from ..graphs.model import Model
from ..specs.dtypes import DTYPE_BYTES, Precision
from ..specs.hardware import Hardware
from ..specs.sourced import read_quantity

__all__ = ["MlsysimDevice", "MlsysimModel", "mlsysim_device", "mlsysim_model", "conventions"]


@dataclass(frozen=True, slots=True)
class MlsysimDevice:
    peak_default: float  #: its `peak_flops` (fp16/bf16 and unlisted dtypes in mlsysim)
    peaks: dict[str, float]  #: its `precision_flops`
    bandwidth: float
    dispatch_tax: float

    def peak(self, dtype: str, hw: Hardware) -> float:
        if dtype in self.peaks:
            return self.peaks[dtype]
        if dtype in ("fp16", "bf16"):
            return self.peak_default
        # mlsysim would silently fall back to peak_default here; we refuse a missing dtype
        return hw.peak(dtype)


@dataclass(frozen=True, slots=True)
class MlsysimModel:
    params: float
    flops: float  #: per sample (CNN) or per token (LLM), mlsysim's convention
    layers: float


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    from .._data import DATA, read_toml

    doc = read_toml(DATA / "presets" / "mlsysim.toml")
    src = doc.get("sources", {})
    origin = "data/presets/mlsysim.toml"

    def q(raw: Any, fld: str, dim: str) -> float:
        return read_quantity(raw, field=fld, dimension=dim, sources=src, origin=origin)[0]

    conv = {k: q(v, f"conventions.{k}", "time" if k == "layer_tax" else "ratio")
            for k, v in doc["conventions"].items()}
    devices = {}
    for name, d in doc["hardware"].items():
        devices[name.lower()] = MlsysimDevice(
            q(d["peak"], f"hardware.{name}.peak", "compute"),
            {k: q(v, f"hardware.{name}.dtypes.{k}", "compute")
             for k, v in d.get("dtypes", {}).items()},
            q(d["bandwidth"], f"hardware.{name}.bandwidth", "bandwidth"),
            q(d["dispatch_tax"], f"hardware.{name}.dispatch_tax", "time"))
    models = {k: MlsysimModel(*(q(m[f], f"models.{k}.{f}", "ratio")
                                for f in ("params", "flops", "layers")))
              for k, m in doc["models"].items()}
    return {"conventions": conv, "devices": devices, "models": models}


def conventions() -> dict[str, float]:
    return dict(_table()["conventions"])


def mlsysim_device(hw: Hardware) -> MlsysimDevice:
    from ..specs.hardware import hardware as lookup

    devs = _table()["devices"]
    for name, dev in devs.items():
        try:
            if lookup(name).key == hw.key:
                return dev
        except KeyError:
            continue
    return MlsysimDevice(peak_default=math.nan, peaks=dict(hw.peak_flops_per_s),
                         bandwidth=hw.memory_bytes_per_s, dispatch_tax=0.0)


def mlsysim_model(m: Model) -> MlsysimModel:
    models = _table()["models"]
    if m.key in models:
        return models[m.key]
    g = m.graph(precision="fp16", batch=1) if not m.batch_dependent else \
        m.graph(precision="fp16", batch=1)
    params = float(g.params_total)
    if m.family in ("decoder", "encoder", "vision"):
        flops = 2.0 * params
    else:  # CNNs: MACs of conv and linear layers, as mlsysim's zoo stores them
        flops = sum(g.c1[0, i] for i, c in enumerate(g.classes) if c in ("conv", "matmul")) / 2
    layers = float(m.n_layers or sum(1 for c in g.classes if c in ("conv", "matmul")))
    return MlsysimModel(params, flops, layers)


def solve_mlsysim(m: Model, hw: Hardware, batch: int, p: Precision) -> dict[str, Any]:
    """mlsysim's Engine.solve arithmetic; returns the Result fields."""
    c = conventions()
    dev = mlsysim_device(hw)
    agg = mlsysim_model(m)
    try:
        peak = dev.peak(p.compute, hw)
    except UnsupportedDtypeError:
        raise
    if math.isnan(peak):
        peak = hw.peak(p.compute)
    bpp = DTYPE_BYTES[p.weights]
    W = agg.params * bpp
    flops = agg.flops * batch
    byts = W * (1 + c["activation_fraction"] * batch)
    t_c = flops / (peak * c["efficiency"])
    t_m = byts / dev.bandwidth
    overhead = dev.dispatch_tax + c["layer_tax"] * agg.layers
    latency = max(t_c, t_m) + overhead
    return dict(
        latency=latency, latency_bound=max(flops / peak, byts / dev.bandwidth),
        t_compute=t_c, t_memory=t_m, t_overhead=overhead,
        bottleneck="memory" if t_m > t_c else "compute", flops=flops, bytes=byts,
        peak=peak, bandwidth=dev.bandwidth, efficiency=c["efficiency"], weights=W,
        activations=byts - W,
    )


