"""Result: the answer of one solve, with its per-op table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .._display import Display
from .._frozen import fast_init
from .._text import summary_str
from ..units import FRACTION, fmt_bytes, fmt_flops, fmt_rate, fmt_time
from .table import Table

__all__ = ["Result", "POWER_MODEL", "OP_SHOW", "fill_phrase"]


def fill_phrase(t_fill: float, inside: str) -> str:
    """How every result prints its ``t_fill`` (s): where the fill sits and how the bottleneck
    label counts it, in the same words for solve, serve and train; "" when there is none."""
    if not t_fill > 0:
        return ""
    return (f"kernel fill {fmt_time(t_fill)} (in {inside}; fixed per kernel: overhead in the "
            "bottleneck)")

#: per-op columns printed by default (``print(r.ops)``), most wanted first: the last ones are
#: left out first when a line would pass 100 characters
OP_SHOW = ("name", "kind", "bound", "time", "share", "flops", "bytes", "intensity", "t_compute",
           "t_memory", "overhead")

POWER_MODEL = ("energy = (idle + (TDP − idle) × u) × latency, u = power activity "
               "min(1, w_c × MFU + w_m × MBU) with weights fitted to measured power, idle = the "
               "part's measured idle or 30 % of TDP (data/economics/power.toml; per part: "
               "economics.power_source); preset mlsysim: TDP × (0.3 + 0.7 × MFU) × latency")


def _energy_on_read(r: Result) -> float:
    """``r.energy`` passed as ``LAZY``: ``fn(*args)`` of ``r._energy_of`` (engine/solve.py's
    power model with the inputs of the solve, so a ``replace`` cannot make it stale)."""
    src = r._energy_of
    if src is None:
        raise RuntimeError("Result: energy=LAZY needs _energy_of=(function, *arguments)")
    return float(src[0](*src[1:]))


@fast_init(lazy={"energy": _energy_on_read})
@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Result(Display):
    """Latency, throughput and why, for one model × hardware × scenario. SI units throughout."""

    model: str  #: model name
    hardware: str  #: hardware name
    hardware_key: str
    batch: int
    precision: str
    preset: str
    phase: str
    seq_len: int | None = None  #: T (tokens per sample in forward/prefill)
    context: int | None = None  #: S (decode: tokens in the KV cache)
    latency: float  #: s, the estimate (equals latency_bound under preset="bound")
    latency_bound: float  #: s, pure roofline: Σ max(flops/peak, bytes/bandwidth)
    t_compute: float  #: s, Σ compute time of every op (at the preset's efficiencies)
    t_memory: float  #: s, Σ memory time of every op
    t_overhead: float  #: s, launch/dispatch time not hidden behind kernels
    #: s, the fixed per-kernel fill of tiled matmuls not hidden under memory (latency that does
    #: not scale with the work; counted with ``t_overhead`` in ``bottleneck``); 0 when none
    t_fill: float = 0.0
    throughput: float  #: samples/s (a sample is one image/sequence; in decode, one token)
    tokens_per_s: float | None = None  #: tokens/s for sequence models
    #: "compute", "memory" or "overhead" (largest share of the latency; "overhead" counts launch,
    #: dispatch and the fixed per-kernel fill of tiled matmuls: time that does not scale with work)
    bottleneck: str
    flops: float  #: FLOPs per batch (2 per multiply-add)
    bytes: float  #: bytes moved to/from main memory per batch
    arithmetic_intensity: float  #: flops / bytes
    ridge_point: float  #: peak FLOP/s / bandwidth of the compute dtype, FLOP/B
    ridge_point_effective: float  #: the same at the preset's best efficiencies
    peak_flops_per_s: float  #: dense peak of the compute dtype
    bandwidth_bytes_per_s: float  #: main-memory bandwidth
    mfu: float  #: flops / (latency × peak)
    mbu: float  #: bytes / (latency × bandwidth)
    memory_footprint: float  #: bytes: weights + live activations + KV cache + workspace
    memory_breakdown: dict[str, float] = field(default_factory=dict)
    memory_capacity: float = math.nan  #: bytes of main memory
    feasible: bool = True
    reason: str = ""  #: why it is infeasible (or notes)
    energy: float = math.nan  #: J per batch (see POWER_MODEL), device only (no PUE)
    power_model: str = POWER_MODEL
    #: what the numbers leave out or assume (ops without a formula: "N ops unpriced (x % of
    #: bytes)"); empty when nothing is
    warnings: tuple[str, ...] = ()
    #: s a client adds end to end, included in ``latency`` (solve(client=True)); 0: device only
    client_time: float = 0.0
    price_per_hour: float | None = None  #: USD per device-hour given by the user (None: public)
    region: str | None = None  #: grid region for carbon (data/economics/grids.toml)
    pue: float | None = None  #: facility / IT energy given by the user (None: sourced default)
    #: the per-op columns, or an OpTableSource that builds them on first access
    _op_table: Any = field(default=None, repr=False)
    #: the Hardware priced (a user's TOML spec need not be in the zoo); see hardware_spec()
    _hardware: Any = field(default=None, repr=False)
    _call: Any = field(default=None, repr=False, compare=False)  #: the call (levers re-run it)
    #: (function, *arguments) giving ``energy`` on first read when it was passed as ``LAZY``
    #: (solve: the power model costs ~2 µs, a tenth of a solve, and most callers never read it)
    _energy_of: Any = field(default=None, repr=False, compare=False)

    def levers(self, **kw: Any) -> Any:
        """Every design lever for the call that made this result, ranked (``rl.levers``)."""
        from ..analysis.levers import levers

        return levers(result=self, **kw)

    @property
    def ops(self) -> Table:
        """Per-operator table: name, kind, FLOPs, bytes, AI, bound, times, share of latency."""
        if self._op_table is None:
            return Table({"name": []}, title="no per-op table")
        src = self._op_table
        if isinstance(src, OpTableSource):
            src = src.build()
            object.__setattr__(self, "_op_table", src)
        return Table(src["columns"], src["units"],
                     title=f"{self.model} on {self.hardware}, batch {self.batch}, {self.precision}",
                     show=OP_SHOW)

    @property
    def uncertainty(self) -> dict[str, Any]:
        """``{"latency": Band(low, high, level, cls, n)}``: the 80 % interval of the latency
        from the validation residuals of its class (roofline.uncertainty; method in
        docs/validation/uncertainty.md); empty for a preset or result without a validated
        class (and for a client-side end-to-end latency, ``client=True``: its two sources do
        not calibrate a band, docs/validation/uncertainty.md; docs/validation/client.md gives
        its errors). ``low, high = r.uncertainty["latency"]``; also ``"throughput"`` (the latency
        band inverted) and ``"energy"`` (J per batch at the band's latencies, the same work: the
        power activity scales with MFU and MBU)."""
        from ..uncertainty import Band, bands

        cls = _solve_class(self)
        if cls is None or not self.feasible or self.client_time > 0:
            return {}
        out = bands({"latency": (self.latency, cls, False),
                     "throughput": (self.throughput, cls, True)})
        lat, src = out.get("latency"), self._energy_of
        if lat is not None and src is not None and math.isfinite(self.energy):
            # the same work over a latency L' runs at MFU and MBU scaled by L / L'
            fn, hw, preset, t, mfu, mbu = src
            e = [fn(hw, preset, x, mfu * t / x, mbu * t / x) for x in (lat.low, lat.high)]
            out["energy"] = Band(min(e), max(e), lat.level, lat.cls, lat.n)
        return out

    @property
    def latency_per_sample(self) -> float:
        return self.latency / self.batch

    @property
    def energy_per_sample(self) -> float:
        return self.energy / self.batch

    def hardware_spec(self) -> Any:
        """The Hardware this result was priced on (the zoo entry of ``hardware_key`` for a
        result built without one)."""
        if self._hardware is not None:
            return self._hardware
        from ..specs.resolve import hardware

        return hardware(self.hardware_key)

    # -- money, energy with PUE, carbon (roofline.analysis.economics) --------------------------
    @property
    def economics(self) -> Any:
        """Cost, facility energy, carbon and water per sample, with their sources and the
        reasons a figure is missing (``analysis.economics.Economics``)."""
        from ..analysis.economics import for_solve

        return for_solve(self)

    @property
    def cost_per_sample(self) -> float | None:
        """USD per sample (None without a price: see ``economics.price_source``)."""
        return self.economics.cost_per_unit

    @property
    def carbon_per_sample(self) -> float | None:
        """kg CO2e per sample (None without ``region``)."""
        return self.economics.carbon_per_unit

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain Python data (no per-op table; see ``ops.to_dicts()``)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        d["memory_breakdown"] = dict(self.memory_breakdown)
        d["warnings"] = list(self.warnings)
        d["uncertainty"] = {k: b.to_dict() for k, b in self.uncertainty.items()}
        for k, v in d.items():
            if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
                d[k] = None
        return d

    def plot(self, path: str | None = None, **kw: Any) -> Any:
        """Roofline chart of this result (needs ``pip install 'roofline[plot]'``)."""
        from ..viz.roofline import plot_result

        return plot_result(self, path=path, **kw)

    def plot_layers(self, path: str | None = None, **kw: Any) -> Any:
        """Time per layer as stacked bars (``roofline.viz.charts.plot_layers``)."""
        from ..viz.charts import plot_layers

        return plot_layers(self, path=path, **kw)

    @summary_str
    def __str__(self) -> str:
        from ..uncertainty import fmt_band

        if not self.feasible and math.isnan(self.latency):
            return (f"{self.model} on {self.hardware} (batch {self.batch}, {self.precision}, "
                    f"preset {self.preset}): cannot run — {self.reason}") + "".join(
                        f"\n  WARNING         {w}" for w in self.warnings)
        unit = "tokens/s" if self.phase == "decode" else "samples/s"
        lines = [
            f"{self.model} on {self.hardware} — batch {self.batch}, {self.precision}, "
            f"{self.phase}" + (f", T={self.seq_len}" if self.seq_len and self.phase != "decode"
                               else "") + (f", context={self.context}" if self.context else "")
            + f", preset {self.preset}",
            f"  bottleneck      {self.bottleneck}-bound",
            f"  latency         {fmt_time(self.latency)}"
            + fmt_band(self.uncertainty.get("latency"), fmt_time)
            + f" (roofline bound {fmt_time(self.latency_bound)})",
            f"    compute {fmt_time(self.t_compute)}, memory {fmt_time(self.t_memory)}, "
            f"overhead {fmt_time(self.t_overhead)}",
            *(["    " + fill_phrase(self.t_fill, "the compute time")] if self.t_fill > 0 else []),
            f"  throughput      {self.throughput:,.1f} {unit}"
            + (f" ({self.tokens_per_s:,.0f} tokens/s)" if self.tokens_per_s and self.phase !=
               "decode" else "")
            + fmt_band(self.uncertainty.get("throughput"), lambda v: f"{v:,.1f}"),
            f"  work            {fmt_flops(self.flops)} ("
            + ("mlsysim's zoo figure: MACs for CNNs, 2 × params per token for LLMs"
               if self.preset == "mlsysim" else "2 FLOPs per multiply-add")
            + f"), {fmt_bytes(self.bytes)} moved",
            f"  intensity       {self.arithmetic_intensity:,.4g} FLOP/B vs {self.precision} ridge "
            f"{self.ridge_point:,.4g} (effective {self.ridge_point_effective:,.4g})",
            f"  utilisation     MFU {self.mfu:.2%}, MBU {self.mbu:.2%}",
            f"  memory          {fmt_bytes(self.memory_footprint)} of "
            f"{fmt_bytes(self.memory_capacity)}"
            + (" — fits" if self.feasible else f" — DOES NOT FIT: {self.reason}"),
            "    " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in self.memory_breakdown.items()
                               if v),
        ]
        if not math.isnan(self.energy):
            from ..analysis.power import power_activity

            act = min(1.0, max(0.0, self.mfu)) if self.preset == "mlsysim" else \
                power_activity(self.mfu, self.mbu)
            lines.append(f"  energy          {fmt_rate(self.energy, 'J')} per batch"
                         + fmt_band(self.uncertainty.get("energy"), lambda v: fmt_rate(v, "J"))
                         + f" ({fmt_rate(self.energy_per_sample, 'J')} per sample, device power "
                         f"at activity {act:.0%} × latency)")
        if self.price_per_hour is not None or self.region is not None or self.pue is not None:
            lines += self.economics.lines(per=1e6, per_label="1M samples")
        lines += [f"  WARNING         {w}" for w in self.warnings]
        return "\n".join(lines)


#: hardware kind -> uncertainty class of preset default (docs/validation/uncertainty.md: the
#: TPU / accelerator kinds borrow the GPU cases, the SoC kind the measured-CPU runs)
_KIND_CLASS = {"gpu": "gpu-inference", "tpu": "gpu-inference", "accelerator": "gpu-inference",
               "cpu": "cpu-measured", "soc": "cpu-measured", "mcu": "cpu-measured",
               "npu": "gpu-inference"}


def _solve_class(r: Result) -> str | None:
    if r.preset not in ("default", "bound"):
        return None
    try:
        kind = r.hardware_spec().kind
    except Exception:  # noqa: BLE001 - a result built by hand without a known spec
        return None
    cls = _KIND_CLASS.get(kind)
    if r.preset == "bound":
        return "gpu-inference-bound" if cls == "gpu-inference" else None
    return cls


class OpTableSource:
    """Builds the per-op columns lazily (a solve that nobody inspects per op stays fast)."""

    __slots__ = ("graph", "ot", "batch", "latency", "model")

    def __init__(self, graph: Any, ot: Any, batch: int, latency: float, model: Any) -> None:
        self.graph, self.ot, self.batch, self.latency = graph, ot, batch, latency
        self.model = model  #: the engine's TimeModel of (graph, hardware, efficiency)

    def build(self) -> dict[str, Any]:
        from ..graphs.graph import Q

        g = self.graph
        if self.ot is None:
            self.ot = self.model.evaluate(self.batch)
        ot = self.ot
        ev = {"bytes": ot.bytes, "flops": ot.flops, "compute_bound": ot.compute_bound,
              "time": ot.time, "t_compute": ot.t_compute, "t_memory": ot.t_memory,
              "t_bound": ot.t_bound, "overhead": ot.overhead, "fill": ot.fill}
        q = g.c0 + g.c1 * self.batch
        byts = ev["bytes"]
        flops = ev["flops"]
        with np.errstate(divide="ignore", invalid="ignore"):
            ai = np.where(byts > 0, flops / byts, np.inf)
        has = (flops + byts) > 0
        t = ev["time"]
        cols = {
            "name": list(g.names), "kind": list(g.kinds), "class": list(g.classes),
            "flops": flops, "bytes": byts,
            "weight_bytes": q[Q["weight_bytes_read"]] + q[Q["weight_bytes_written"]],
            "act_bytes": q[Q["act_bytes_read"]] + q[Q["act_bytes_written"]],
            "kv_bytes": q[Q["kv_bytes_read"]] + q[Q["kv_bytes_written"]],
            "intensity": ai,
            "bound": np.where(has, np.where(ev["compute_bound"], "compute", "memory"),
                              "-").astype(object),
            "t_compute": ev["t_compute"], "t_memory": ev["t_memory"], "t_bound": ev["t_bound"],
            "overhead": ev["overhead"], "fill": ev["fill"], "time": t,
            "share": t / self.latency if self.latency > 0 else t * 0,
        }
        units = {"flops": "FLOP", "bytes": "B", "weight_bytes": "B", "act_bytes": "B",
                 "kv_bytes": "B", "intensity": "FLOP/B", "t_compute": "s", "t_memory": "s",
                 "t_bound": "s", "overhead": "s", "fill": "s", "time": "s", "share": FRACTION}
        return {"columns": cols, "units": units}
