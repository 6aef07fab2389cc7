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
time). ``preset="mlsysim"`` prices from mlsysim's own device table, not the hardware spec, so
an edited spec would not be honoured: it is refused with that reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from .._call import Call, call_of
from ..errors import SpecError

__all__ = ["sensitivity", "Sensitivity", "scaled_hardware"]

_TIMES = {"solve": ("latency",), "serve": ("ttft", "tpot", "e2e_latency"),
          "train": ("step_time",)}


@dataclass(frozen=True, slots=True)
class Sensitivity:
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
