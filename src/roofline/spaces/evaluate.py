"""Price one chunk of a space: one vectorised engine call, flat columns out.

Every kind returns the same shape: a dict of equal-length numpy columns, one row per point.
Coordinates (model, hardware, precision, ...) come first; then the results. ``FIELDS`` lists
the numeric and boolean fields each kind gives (what objectives and constraints may name).

Power: ``power_w`` is the devices' draw from the power model at the point's own activity
(analysis/power.py: idle + (peak − idle) × a, a = min(1, w_c·MFU + w_m·MBU); the mlsysim
preset: TDP·(0.3 + 0.7·MFU)) × the devices the point occupies, the figure solve, serve and
serve_sweep price energy with; NaN where the part has no power model. Energy: decode spaces'
``energy_per_output_token`` is serve_sweep's facility energy per token (device power × PUE,
as ``rl.serve`` reports it; ``tokens_per_joule`` its inverse); solve spaces'
``energy_per_sample`` is the device energy per sample, as ``rl.solve``'s. Cost (decode
spaces): ``cost_per_million_output_tokens`` from the part's sourced on-demand price
(data/economics/prices.toml, the economics module's ``device_price``); NaN where the zoo has
no price, and for every hypothetical part.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from .space import Chunk, GridPart

__all__ = ["evaluate_chunk", "FIELDS", "resolve_part"]

#: numeric / boolean result fields per kind (objectives and constraints name these)
FIELDS = {
    "decode": ("batch", "context", "tp", "devices", "tpot", "tokens_per_s",
               "tokens_per_s_per_device", "kv_cache_bytes", "power_w", "tokens_per_joule",
               "energy_per_output_token", "usd_per_device_hour",
               "cost_per_million_output_tokens",
               "peak_flops_per_s", "bandwidth_bytes_per_s", "capacity_bytes", "fits",
               "hypothetical"),
    "solve": ("batch", "devices", "latency", "latency_bound", "throughput", "tokens_per_s",
              "flops", "bytes", "arithmetic_intensity", "mfu", "memory_footprint", "power_w",
              "energy_per_sample", "peak_flops_per_s", "bandwidth_bytes_per_s",
              "capacity_bytes", "fits", "hypothetical"),
    "serve": ("batch", "tp", "pp", "devices", "ttft", "tpot", "e2e_latency", "tokens_per_s",
              "tokens_per_s_per_device", "mfu", "mbu", "max_batch", "power_w",
              "peak_flops_per_s", "bandwidth_bytes_per_s", "capacity_bytes", "fits",
              "hypothetical"),
    "train": ("global_batch", "seq_len", "micro_batch", "tp", "pp", "dp", "devices",
              "step_time", "tokens_per_s", "mfu", "hfu", "power_w", "fits"),
}
#: text coordinates per kind
LABELS = {"decode": ("model", "hardware", "precision"), "solve": ("model", "hardware",
                                                                   "precision"),
          "serve": ("model", "hardware", "precision"), "train": ("model", "hardware",
                                                                 "precision")}


@lru_cache(maxsize=4096)
def _grid_part(p: GridPart) -> Any:
    return p.build()


def resolve_part(h: Any) -> Any:
    """A Hardware from a chunk's recipe (zoo name, path, GridPart or Hardware)."""
    if isinstance(h, GridPart):
        return _grid_part(h)
    if isinstance(h, str):
        from ..specs.resolve import hardware as resolve_hardware

        return resolve_hardware(h)
    return h


def _hw_cols(hws: list[Any], dtype: Any, reps: int) -> dict[str, np.ndarray]:
    def per(f: Any) -> np.ndarray:
        return np.repeat(np.array([f(h) for h in hws], dtype=np.float64), reps)

    return {
        "peak_flops_per_s": per(lambda h: h.peak(dtype) if h.has(dtype) else math.nan),
        "bandwidth_bytes_per_s": per(lambda h: h.memory_bytes_per_s),
        "capacity_bytes": per(lambda h: h.memory_capacity_bytes),
        "tdp_w": per(lambda h: h.tdp_w),
        "hypothetical": np.repeat(np.array(["hypothetical" in h.name for h in hws]), reps),
    }


def evaluate_chunk(chunk: Chunk) -> dict[str, np.ndarray]:
    """The chunk's points as flat columns (see the module docstring)."""
    return {"decode": _decode, "solve": _solve, "serve": _serve, "train": _train}[chunk.kind](
        chunk)


def _decode(c: Chunk) -> dict[str, np.ndarray]:
    from ..scenarios.serving import serve_sweep

    hws = [resolve_part(h) for h in c.hardware]
    kw = {k: v for k, v in c.fixed.items() if k != "phase"}
    tp = int(kw.pop("tp", 1))
    precs = c.vector["precision"]
    B = np.asarray(c.vector["batch"], dtype=np.float64)
    S = np.asarray(c.vector["context"], dtype=np.float64)
    o = serve_sweep(c.model, hws, batch=B, context=S, precision=precs, tp=tp, **kw)
    shape = o["tpot"].shape  # [h, p, b, s]
    n = int(np.prod(shape))
    H, P, NB, NS = shape
    hi = np.repeat(np.arange(H), P * NB * NS)
    pi = np.tile(np.repeat(np.arange(P), NB * NS), H)
    b = np.tile(np.repeat(B, NS), H * P)
    s = np.tile(S, H * P * NB)
    tpot = o["tpot"].reshape(n)
    tps = o["tokens_per_s"].reshape(n)
    from ..specs.dtypes import precision as make_precision

    out: dict[str, np.ndarray] = {
        "model": np.full(n, _model_name(c.model), dtype=object),
        "hardware": np.array([h.name for h in hws], dtype=object)[hi],
        "precision": np.array([str(p) for p in precs], dtype=object)[pi],
        "batch": b, "context": s, "tp": np.full(n, float(tp)), "devices": np.full(n, float(tp)),
        "tpot": tpot, "tokens_per_s": tps, "tokens_per_s_per_device": tps / tp,
        "kv_cache_bytes": o["kv_cache_bytes"].reshape(n),
        "fits": o["fits"].reshape(n) & np.isfinite(tpot),
    }
    hwc = [_hw_cols(hws, make_precision(p).compute, 1) for p in precs]
    for k in ("peak_flops_per_s", "bandwidth_bytes_per_s", "capacity_bytes", "tdp_w",
              "hypothetical"):
        arr = np.stack([h[k] for h in hwc], axis=1)  # [h, p]
        out[k] = np.repeat(arr.reshape(H * P), NB * NS)
    del out["tdp_w"]
    preset = str(kw.get("preset", "default"))
    idle, peak = _idle_peak_cols(hws, preset)  # [h]
    act = np.clip(o["power_activity"], 0.0, 1.0)  # [h, p, b, s]: serve_sweep's, as its energy
    out["power_w"] = ((idle[:, None, None, None] + (peak - idle)[:, None, None, None] * act)
                      * tp).reshape(n)
    price = np.array([_price(h) for h in hws])  # USD per device-hour, NaN without a price
    out["usd_per_device_hour"] = np.repeat(price, P * NB * NS)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["energy_per_output_token"] = o["energy_per_token"].reshape(n)  # facility (PUE)
        out["tokens_per_joule"] = 1.0 / out["energy_per_output_token"]
        out["cost_per_million_output_tokens"] = out["usd_per_device_hour"] * tp / 3600.0 \
            / tps * 1e6
    return out


def _idle_peak_cols(hws: list[Any], preset: str) -> tuple[np.ndarray, np.ndarray]:
    """Per part, the power model's idle and peak W (NaN where the part has none)."""
    from ..analysis.power import power_model

    pms = [power_model(h, preset) for h in hws]
    return (np.array([pm.idle_w for pm in pms], dtype=np.float64),
            np.array([pm.peak_w for pm in pms], dtype=np.float64))


def _price(hw: Any) -> float:
    """The part's sourced on-demand USD per device-hour (data/economics), NaN where there is
    none (every hypothetical part: it has no price)."""
    from ..analysis.economics import device_price

    if "hypothetical" in hw.name:
        return math.nan
    usd, _ = device_price(hw, None)
    return math.nan if usd is None else float(usd)


def _model_name(m: Any) -> str:
    if isinstance(m, str):
        return m
    return str(getattr(m, "key", None) or getattr(m, "name", "model"))


def _solve(c: Chunk) -> dict[str, np.ndarray]:
    from ..analysis.power import power_activity
    from ..scenarios.sweep import sweep
    from ..specs.dtypes import precision as make_precision

    hws = [resolve_part(h) for h in c.hardware]
    kw = dict(c.fixed)
    prec = kw.pop("precision", "fp16")
    batches = [int(x) for x in c.vector.get("batch", [1])]
    t = sweep(c.model, hws, batch=batches, precision=[prec], **kw).table
    n = len(t)
    out = {k: np.asarray(t[k]) for k in ("model", "hardware", "precision")}
    for k in ("batch", "latency", "latency_bound", "throughput", "tokens_per_s", "flops",
              "bytes", "arithmetic_intensity", "mfu", "memory_footprint"):
        out[k] = np.asarray(t[k], dtype=np.float64)
    out["model"] = np.full(n, _model_name(c.model), dtype=object)
    out["fits"] = np.asarray(t["feasible"], dtype=bool) & np.isfinite(out["latency"])
    out["devices"] = np.ones(n)
    hwc = _hw_cols(hws, make_precision(prec).compute, len(batches))
    out.update({k: v for k, v in hwc.items() if k != "tdp_w"})
    preset = str(kw.get("preset", "default"))
    idle, peak = (np.repeat(x, len(batches)) for x in _idle_peak_cols(hws, preset))
    with np.errstate(divide="ignore", invalid="ignore"):  # as rl.solve: MBU over the latency
        mbu = out["bytes"] / (out["latency"] * out["bandwidth_bytes_per_s"])
        act = np.clip(out["mfu"], 0.0, 1.0) if preset == "mlsysim" else \
            power_activity(out["mfu"], mbu)
        out["power_w"] = idle + (peak - idle) * act
        out["energy_per_sample"] = out["power_w"] * out["latency"] / out["batch"]
    return out


def _one_row(c: Chunk, res: Any, fields: tuple[str, ...], hw: Any, dtype: str,
             devices: float) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {
        "model": np.array([_model_name(c.model)], dtype=object),
        "hardware": np.array([getattr(hw, "name", str(hw))], dtype=object),
        "precision": np.array([str(c.fixed.get("precision", "bf16"))], dtype=object)}
    for k in fields:
        if k in ("fits", "hypothetical", "power_w", "devices", "peak_flops_per_s",
                 "bandwidth_bytes_per_s", "capacity_bytes"):
            continue
        v = getattr(res, k, math.nan)
        out[k] = np.array([float(v) if v is not None else math.nan])
    out["devices"] = np.array([devices])
    out["fits"] = np.array([bool(getattr(res, "feasible", True))])
    return out


def _serve(c: Chunk) -> dict[str, np.ndarray]:
    from ..scenarios.serving import serve
    from ..specs.dtypes import precision as make_precision

    (h,) = c.hardware
    hw = resolve_part(h)
    s = serve(c.model, hw, **c.fixed)
    dtype = make_precision(c.fixed.get("precision", "bf16")).compute
    out = _one_row(c, s, FIELDS["serve"], hw, dtype, float(s.devices))
    hwc = _hw_cols([hw], dtype, 1)
    out.update({k: v for k, v in hwc.items() if k != "tdp_w"})
    # the power serve prices its energy with (economics.for_serve), over every device
    out["power_w"] = np.array([s.economics.power_w_per_device * s.devices])
    out["fits"] = out["fits"] & np.isfinite(out["tpot"])
    return out


def _train(c: Chunk) -> dict[str, np.ndarray]:
    from ..scenarios.training import train

    (h,) = c.hardware
    # a cluster name as given (a part in an execution mode, "x:weight-streaming", resolves as
    # one device there); a part object (Hardware, a grid's hypothetical part) is one device
    t = train(c.model, h if isinstance(h, str) else resolve_part(h), **c.fixed)
    out = _one_row(c, t, FIELDS["train"], h, "", float(t.devices))
    out["hardware"] = np.array([t.cluster], dtype=object)
    out["power_w"] = np.array([float(t.power_w)])
    out["fits"] = out["fits"] & np.isfinite(out["step_time"])
    return out
