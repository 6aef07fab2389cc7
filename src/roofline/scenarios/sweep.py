"""Sweeps over batch × hardware × precision: one broadcast per precision, not a loop per config."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..engine.core import price
from ..engine.presets import check_preset, efficiency_for
from ..engine.solve import check_batch, solve
from ..engine.table import Table
from ..errors import SpecError
from ..graphs.model import Model, model as resolve_model
from ..specs.dtypes import precision as make_precision
from ..specs.hardware import Hardware, hardware as resolve_hardware

__all__ = ["sweep", "Sweep"]


class Sweep:
    """The sweep table plus crossover detection."""

    def __init__(self, table: Table, model_name: str) -> None:
        self.table = table
        self.model = model_name

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, key: str | int) -> Any:
        return self.table[key]

    def to_pandas(self) -> Any:
        return self.table.to_pandas()

    def to_dicts(self) -> list[dict[str, Any]]:
        return self.table.to_dicts()

    def crossover(self) -> dict[str, int | None]:
        """Smallest batch at which each (hardware, precision) turns compute-bound (None if
        it never does in the swept range). Keys are hardware names, suffixed with the
        precision when several precisions were swept."""
        t = self.table
        precs = sorted(set(t["precision"]))
        out: dict[str, int | None] = {}
        for hw in dict.fromkeys(t["hardware"]):
            for pr in precs:
                mask = (t["hardware"] == hw) & (t["precision"] == pr)
                b = t["batch"][mask]
                cb = t["bottleneck"][mask] == "compute"
                key = hw if len(precs) == 1 else f"{hw} {pr}"
                hits = b[cb]
                out[key] = int(hits.min()) if len(hits) else None
        return out

    def __str__(self) -> str:
        cols = ["hardware", "precision", "batch", "latency", "throughput", "bottleneck",
                "arithmetic_intensity", "mfu", "feasible"]
        body = self.table.to_string(cols, max_rows=60)
        cross = ", ".join(f"{k}: {v if v is not None else 'never'}"
                          for k, v in self.crossover().items())
        return f"{self.model} sweep\n{body}\ncompute-bound from batch — {cross}"


def _as_list(x: Any) -> list[Any]:
    if isinstance(x, str | Hardware | Model) or not isinstance(x, Iterable):
        return [x]
    return list(x)


def sweep(model: Any, hardware: Any, *, batch: Sequence[int] | int = (1,),
          precision: str | Sequence[str] = "fp16", preset: str = "default",
          phase: str | None = None, seq_len: int | None = None,
          context: int | None = None, fuse: bool = False) -> Sweep:
    """Price every (hardware, precision, batch); returns a Sweep (``.crossover()``,
    ``.to_pandas()``). Per-op pricing throughout; each precision is one vectorised pass."""
    m = resolve_model(model)
    hws = [resolve_hardware(h) for h in _as_list(hardware)]
    if not hws:
        raise SpecError("sweep needs at least one hardware")
    batches = np.array([check_batch(b) for b in _as_list(batch)], dtype=np.int64)
    if not len(batches):
        raise SpecError("sweep needs at least one batch")
    preset = check_preset(preset)
    precs = [make_precision(p) for p in _as_list(precision)]
    cols: dict[str, list[Any]] = {k: [] for k in (
        "model", "hardware", "precision", "batch", "latency", "latency_bound", "throughput",
        "tokens_per_s", "bottleneck", "flops", "bytes", "arithmetic_intensity", "ridge_point",
        "mfu", "memory_footprint", "feasible", "reason")}

    def emit(hw: Hardware, plabel: str, b: int, vals: dict[str, Any]) -> None:
        cols["model"].append(m.name)
        cols["hardware"].append(hw.name)
        cols["precision"].append(plabel)
        cols["batch"].append(int(b))
        for k, v in vals.items():
            cols[k].append(v)

    for p in precs:
        ok = [hw for hw in hws if hw.has(p.compute)]
        for hw in hws:
            if not hw.has(p.compute):
                for b in batches:
                    emit(hw, p.label, int(b), dict(
                        latency=math.nan, latency_bound=math.nan, throughput=0.0,
                        tokens_per_s=math.nan, bottleneck="none", flops=math.nan,
                        bytes=math.nan, arithmetic_intensity=math.nan, ridge_point=math.nan,
                        mfu=math.nan, memory_footprint=math.nan, feasible=False,
                        reason=f"{hw.name} has no {p.compute} peak"))
        if not ok:
            continue
        if preset == "mlsysim" or m.batch_dependent:
            # aggregate preset and MoE graphs: per-config solves (each is microseconds)
            for hw in ok:
                for b in batches:
                    r = solve(m, hw, batch=int(b), precision=p, preset=preset, phase=phase,
                              seq_len=seq_len, context=context, fuse=fuse)
                    emit(hw, p.label, int(b), _row(r.to_dict()))
            continue
        g = m.graph(precision=p, phase=phase, seq_len=seq_len, context=context, fuse=fuse)
        effs = [efficiency_for(hw, preset) for hw in ok]
        arr = price(g, ok, effs, batches.astype(np.float64))
        parts = np.stack([arr["t_compute_bound_ops"], arr["t_memory_bound_ops"],
                          arr["t_overhead"]])
        names = np.array(["compute", "memory", "overhead"], dtype=object)
        bott = names[parts.argmax(0)]
        live = np.array([g.live_activation_bytes(float(b)) for b in batches])
        for hi, hw in enumerate(ok):
            ws = effs[hi].workspace
            foot = g.weight_footprint_bytes + live + g.state_bytes_per_sample * batches + ws
            for bi, b in enumerate(batches):
                lat = float(arr["latency"][hi, bi])
                fl, by = float(arr["flops"][hi, bi]), float(arr["bytes"][hi, bi])
                fits = bool(foot[bi] <= hw.memory_capacity_bytes)
                emit(hw, p.label, int(b), dict(
                    latency=lat, latency_bound=float(arr["latency_bound"][hi, bi]),
                    throughput=b / lat, tokens_per_s=b * g.tokens_per_sample / lat
                    if g.meta.get("seq_len") else math.nan,
                    bottleneck=bott[hi, bi], flops=fl, bytes=by,
                    arithmetic_intensity=fl / by, ridge_point=hw.ridge_point(p.compute),
                    mfu=fl / (lat * hw.peak(p.compute)), memory_footprint=float(foot[bi]),
                    feasible=fits, reason="" if fits else
                    f"needs {foot[bi] / 1e9:.2f} GB of {hw.memory_capacity_bytes / 1e9:.2f} GB"))
    table = Table({k: np.array(v, dtype=object) if k in (
        "model", "hardware", "precision", "bottleneck", "reason") else np.array(v)
        for k, v in cols.items()}, units={"latency": "s", "latency_bound": "s",
                                          "throughput": "1/s", "flops": "FLOP", "bytes": "B",
                                          "memory_footprint": "B"})
    return Sweep(table, m.name)


def _row(d: dict[str, Any]) -> dict[str, Any]:
    nan = math.nan
    return dict(latency=d["latency"] if d["latency"] is not None else nan,
                latency_bound=d["latency_bound"] if d["latency_bound"] is not None else nan,
                throughput=d["throughput"], tokens_per_s=d["tokens_per_s"] or nan,
                bottleneck=d["bottleneck"], flops=d["flops"] or nan, bytes=d["bytes"] or nan,
                arithmetic_intensity=d["arithmetic_intensity"] or nan,
                ridge_point=d["ridge_point"] or nan, mfu=d["mfu"] or nan,
                memory_footprint=d["memory_footprint"] or nan, feasible=d["feasible"],
                reason=d["reason"])
