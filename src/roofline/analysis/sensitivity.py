"""Which ceiling is the time made of? Elasticities of time to every ceiling that can bind.

``sensitivity(result)`` re-prices the call that made ``result`` with one hardware ceiling
scaled at a time — the dense peak of the dtype it computes in, the bandwidth of every memory
level, the host link, the scale-up link (and, on a cluster, scale-out) — and reports the
elasticity ``e = d ln(time) / d ln(ceiling)``: −1 means time halves when the ceiling doubles,
0 that the ceiling does not bind. Costs are affine in the ceilings' reciprocals op by op, so
time is piecewise linear in them and a central difference of relative step ``h`` (default
1e-4) is exact away from a kink (where it gives the mean of the two one-sided slopes).

Fixed costs (launch, dispatch, link latency, step overheads) are not ceilings. Every term of
the time model is either a ceiling's work divided by the ceiling or such a fixed time, so
time is homogeneous: scaling every ceiling by λ and every fixed cost by 1/λ divides the time
by λ. Euler's relation then gives their elasticity without perturbing the presets:
``e_fixed = 1 + Σ e_ceiling`` — the share of the time that no ceiling moves.

Results: ``solve`` (latency), ``serve`` (TTFT, TPOT and end-to-end latency), ``train`` (step
time). A solve is differentiated on its own time model (``scaled_time``: every compute rate a
1/peak factor, every byte cost a 1/bandwidth one — microseconds, equal to re-solving on the
scaled part); serving and training re-run the call on scaled parts (milliseconds). "peak"
scales every dtype's peak together (the vector units too). ``preset="mlsysim"`` prices from
mlsysim's own device table, not the hardware spec, so an edited spec would not be honoured:
it is refused with that reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from .._call import Call, call_of
from .._display import Display
from ..errors import SpecError

__all__ = ["sensitivity", "Sensitivity", "scaled_hardware"]

_TIMES = {"solve": ("latency",), "serve": ("ttft", "tpot", "e2e_latency"),
          "train": ("step_time",)}


@dataclass(frozen=True, slots=True, repr=False)
class Sensitivity(Display):
    """Elasticities of each time of a result to each ceiling."""

    call: Call
    times: tuple[str, ...]  #: the result fields differentiated
    ceilings: tuple[str, ...]  #: e.g. "peak.bf16", "memory.HBM3", "link.scale_up", "fixed costs"
    values: tuple[float, ...]  #: the ceiling's value (FLOP/s, B/s; NaN for fixed costs)
    elasticity: dict[str, tuple[float, ...]]  #: time field -> one elasticity per ceiling
    step: float

    def __getitem__(self, ceiling: str) -> float:
        """The elasticity of the first time field to ``ceiling``."""
        if ceiling not in self.ceilings:
            raise KeyError(f"no ceiling {ceiling!r}; ceilings: {', '.join(self.ceilings)}")
        return self.elasticity[self.times[0]][self.ceilings.index(ceiling)]

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {t: dict(zip(self.ceilings, e)) for t, e in self.elasticity.items()}

    def __str__(self) -> str:
        head = f"{'ceiling':<22} {'value':>14} " + " ".join(f"{t:>12}" for t in self.times)
        lines = [f"Elasticity d ln(time) / d ln(ceiling) for {self.call}", head, "-" * len(head)]
        for i, c in enumerate(self.ceilings):
            v = self.values[i]
            unit = "FLOP/s" if c.startswith("peak") else "B/s"
            val = "—" if not math.isfinite(v) else f"{v:.4g} {unit}"
            lines.append(f"{c:<22} {val:>14} " + " ".join(
                f"{self.elasticity[t][i]:>+12.3f}" for t in self.times))
        return "\n".join(lines)


def scaled_hardware(hw: Any, *, peak: float = 1.0, memory: dict[int, float] | None = None,
                    host: float = 1.0, scale_up: float = 1.0, tag: str = "scaled") -> Any:
    """A copy of ``hw`` with every dtype's peak × ``peak``, memory level i's bandwidth ×
    ``memory[i]`` and the links' bandwidth × ``host`` / ``scale_up`` (hypothetical: the key
    and name say so)."""
    mem = tuple(replace(lv, bytes_per_s=lv.bytes_per_s * (memory or {}).get(i, 1.0))
                for i, lv in enumerate(hw.memory))
    hl = hw.host_link
    su = hw.scale_up_link
    return replace(hw, key=f"{hw.key}~{tag}", name=f"{hw.name} ({tag}, hypothetical)",
                   peak_flops_per_s={k: v * peak for k, v in hw.peak_flops_per_s.items()},
                   memory=mem,
                   host_link=replace(hl, bytes_per_s=hl.bytes_per_s * host) if hl else None,
                   scale_up_link=replace(su, bytes_per_s=su.bytes_per_s * scale_up)
                   if su else None)


def _device(call: Call) -> tuple[Any, Any]:
    """(hardware, cluster or None) of a call."""
    if call.fn == "train":
        from ..specs.resolve import cluster as resolve_cluster

        cl = resolve_cluster(call.hardware)
        return cl.device, cl
    from ..specs.resolve import hardware as resolve_hardware

    return resolve_hardware(call.hardware), None


def _compute_dtype(call: Call, result: Any) -> str:
    from ..specs.dtypes import precision

    p = call.kwargs.get("precision", "fp16" if call.fn == "solve" else "bf16")
    return precision(p).compute


def scaled_time(tm: Any, batch: float, *, peak: float = 1.0,
                memory: dict[int, float] | None = None) -> float:
    """The latency of the engine's time model ``tm`` (a solve's) at ``batch`` with every
    dtype's peak × ``peak`` and memory level i's bandwidth × ``memory[i]`` — the same numbers a
    re-solve on ``scaled_hardware`` gives (tested), without rebuilding the model: every compute
    rate is a 1/peak factor of the model and every byte cost a 1/bandwidth one."""
    t = object.__new__(type(tm))  # a shallow clone (copy.copy is slower on slotted classes)
    for a in type(tm).__slots__:
        object.__setattr__(t, a, getattr(tm, a))
    if peak != 1.0:
        for a in ("inv_c0", "inv_c1", "inv_cap", "inv_bound"):
            setattr(t, a, getattr(tm, a) / peak)
        t.peak = tm.peak * peak
    mem = memory or {}
    s0 = mem.get(0, 1.0)
    if tm.waves is not None and (peak != 1.0 or s0 != 1.0):
        t.waves = tm.waves.scaled(peak, s0)
    if s0 != 1.0:
        t.bw, t.inv_main, t.inv_act = tm.bw * s0, tm.inv_main / s0, tm.inv_act / s0
    if any(i > 0 for i in mem):
        bws = {lv.bytes_per_s: mem.get(i, 1.0) for i, lv in enumerate(tm.hw.memory) if i > 0}
        t.levels = [(cap, lbw * bws.get(lbw, 1.0)) for cap, lbw in tm.levels]
    t._env = t._env_arr = t._memo = None
    return float(t.ops(float(batch)).time.sum())


def _solve_fast(result: Any, step: float) -> Sensitivity | None:
    """Exact central differences on a solve's own time model (no re-solve): microseconds."""
    src = getattr(result, "_op_table", None)
    tm = getattr(src, "model", None)
    if tm is None or not hasattr(tm, "inv_c0"):
        return None
    call = call_of(result)
    hw = tm.hw
    dtype = tm.graph.precision.compute
    B = float(result.batch)
    names = [f"peak.{dtype}"] + [f"memory.{lv.name}" for lv in hw.memory
                                 if math.isfinite(lv.bytes_per_s)]
    values = [hw.peak(dtype)] + [lv.bytes_per_s for lv in hw.memory
                                 if math.isfinite(lv.bytes_per_s)]
    lo_f, hi_f = 1.0 - step, 1.0 + step
    dln = math.log(hi_f) - math.log(lo_f)
    el = [(math.log(scaled_time(tm, B, peak=hi_f)) - math.log(scaled_time(tm, B, peak=lo_f)))
          / dln]
    for i, lv in enumerate(hw.memory):
        if math.isfinite(lv.bytes_per_s):
            a = scaled_time(tm, B, memory={i: lo_f})
            b = scaled_time(tm, B, memory={i: hi_f})
            el.append((math.log(b) - math.log(a)) / dln)
    for lk, name in ((hw.host_link, "link.host"), (hw.scale_up_link, "link.scale_up")):
        if lk is not None:  # a solve prices no transfer over a link: exactly 0
            names.append(name)
            values.append(lk.bytes_per_s)
            el.append(0.0)
    names.append("fixed costs")
    values.append(math.nan)
    el.append(1.0 + sum(el))
    return Sensitivity(call=call, times=("latency",), ceilings=tuple(names),
                       values=tuple(values), elasticity={"latency": tuple(el)}, step=step)


def sensitivity(result: Any, *, step: float = 1e-4) -> Sensitivity:
    """Elasticities of ``result``'s times to every ceiling (see the module docstring)."""
    call = call_of(result)
    if call.kwargs.get("preset") == "mlsysim":
        raise SpecError("sensitivity: preset='mlsysim' prices with mlsysim 0.1.1's own device "
                        "table (its peak, bandwidth and dispatch tax), not the hardware spec, so "
                        "a scaled ceiling would not be honoured; use preset='default' or "
                        "'bound'")
    if not getattr(result, "feasible", True):
        raise SpecError(f"sensitivity: the result does not run ({result.reason}); there is no "
                        "time to differentiate")
    if not (isinstance(step, float) and 0 < step < 0.1):
        raise SpecError(f"step must be a float in (0, 0.1), got {step!r}")
    if call.fn == "solve":
        fast = _solve_fast(result, step)
        if fast is not None:
            return fast
    hw, cl = _device(call)
    dtype = _compute_dtype(call, result)
    times = _TIMES[call.fn]
    specs: list[tuple[str, float, dict[str, Any]]] = [
        (f"peak.{dtype}", hw.peak(dtype), {"peak": None})]
    for i, lv in enumerate(hw.memory):
        if math.isfinite(lv.bytes_per_s):
            specs.append((f"memory.{lv.name}", lv.bytes_per_s, {"memory": i}))
    if hw.host_link is not None:
        specs.append(("link.host", hw.host_link.bytes_per_s, {"host": None}))
    if cl is not None:
        specs.append(("link.scale_up", cl.scale_up_bytes_per_s, {"cl_up": None}))
        specs.append(("link.scale_out", cl.scale_out_bytes_per_s, {"cl_out": None}))
    elif hw.scale_up_link is not None:
        specs.append(("link.scale_up", hw.scale_up_link.bytes_per_s, {"scale_up": None}))
    keep: list[Any] = []  # hold every variant: no cache may see a recycled object

    def run(what: dict[str, Any], f: float) -> Any:
        (k, v), = what.items()
        tag = f"sens-{k}{'' if v is None else v}-{f!r}"  # a distinct key per variant
        if k == "peak":
            h = scaled_hardware(hw, peak=f, tag=tag)
        elif k == "memory":
            h = scaled_hardware(hw, memory={v: f}, tag=tag)
        elif k == "host":
            h = scaled_hardware(hw, host=f, tag=tag)
        elif k == "scale_up":
            h = scaled_hardware(hw, scale_up=f, tag=tag)
        else:
            h = scaled_hardware(hw, tag=tag)
        if cl is not None:
            c2 = replace(cl, key=f"{cl.key}~{tag}", device=h,
                         scale_up_bytes_per_s=cl.scale_up_bytes_per_s * (f if k == "cl_up"
                                                                         else 1.0),
                         scale_out_bytes_per_s=cl.scale_out_bytes_per_s * (f if k == "cl_out"
                                                                           else 1.0))
            keep.append(c2)
            res = call.with_(hardware=c2).run()
        else:
            res = call.with_(hardware=h).run()
        keep.append((h, res))
        return res

    el: dict[str, list[float]] = {t: [] for t in times}
    lo_f, hi_f = 1.0 - step, 1.0 + step
    dln = math.log(hi_f) - math.log(lo_f)
    for _name, _v, what in specs:
        lo, hi = run(what, lo_f), run(what, hi_f)
        for t in times:
            a, b = getattr(lo, t), getattr(hi, t)
            el[t].append((math.log(b) - math.log(a)) / dln if a > 0 and b > 0 else math.nan)
    names = tuple(s[0] for s in specs) + ("fixed costs",)
    values = tuple(s[1] for s in specs) + (math.nan,)
    out = {t: tuple(e) + (1.0 + sum(e),) for t, e in el.items()}
    return Sensitivity(call=call, times=times, ceilings=names, values=values, elasticity=out,
                       step=step)
