"""The inverse roofline: what hardware a target takes.

``requirements(model, target_latency=... | target_throughput=..., reference="H100",
**scenario)`` prices the scenario on a reference part and asks, for each ceiling with the
others held at the reference: the least dense peak (every dtype scaled together), the least
main-memory bandwidth, the memory capacity (the footprint), and — for tensor-parallel serving —
the least scale-up link bandwidth that meet the target; then the frontier of (peak,
bandwidth) pairs that meet it exactly, and which zoo parts meet it as they are.

Time falls monotonically as a ceiling rises and is piecewise linear in its reciprocal, so
each least value is found by bisection on the scale factor (relative tolerance ``rtol``) and
a part built at that value meets the target to within ``rtol``. A target below the
fixed-overhead floor (the time with every ceiling infinite: launches, dispatch, latencies) is
reported as unreachable by any ceiling.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from .._call import Call
from .._display import Display
from .._text import summary_str
from ..errors import SpecError
from .sensitivity import scaled_hardware

__all__ = ["requirements", "Requirements"]

_HUGE = 1e6  # "infinite" ceiling scale for the floor


@dataclass(frozen=True, slots=True, repr=False)
class Requirements(Display):
    """What hardware meets a target (all values per device, SI units)."""

    call: Call  #: the scenario on the reference part
    target: str  #: "latency <= X s" or "throughput >= X /s"
    reference: str  #: the reference part's name
    reference_time: float  #: the reference part's latency (or 1/throughput), s
    floor: float  #: the time with every ceiling infinite (fixed costs only), s
    reachable: bool
    peak_flops_per_s: float  #: least dense peak of the compute dtype, bandwidth at reference
    #: (NaN: not reachable by peak alone)
    bandwidth_bytes_per_s: float  #: least main-memory bandwidth, peak at reference
    capacity_bytes: float  #: memory footprint the scenario needs
    link_bytes_per_s: float  #: least scale-up link bandwidth (serving with tp/pp > 1), else NaN
    frontier: tuple[tuple[float, float], ...]  #: (peak FLOP/s, bandwidth B/s) pairs meeting it
    parts: tuple[tuple[str, float, bool], ...]  #: zoo parts: (name, time, meets target)
    reason: str = ""
    _hw: Any = field(default=None, repr=False)
    _dtype: str = ""

    @property
    def meeting(self) -> list[str]:
        """Zoo parts that meet the target as they are."""
        return [n for n, _, ok in self.parts if ok]

    def hardware(self, peak_flops_per_s: float | None = None,
                 bandwidth_bytes_per_s: float | None = None) -> Any:
        """A hypothetical part: the reference with the given (default: least) peak and
        bandwidth, main-memory capacity at least the footprint (the other ceilings kept)."""
        from dataclasses import replace

        if not self.reachable:
            raise SpecError(f"requirements: {self.reason}")
        hw = self._hw
        pk = self.peak_flops_per_s if peak_flops_per_s is None else peak_flops_per_s
        bw = bandwidth_bytes_per_s
        if bw is None:
            bw = hw.memory_bytes_per_s if math.isfinite(pk) else self.bandwidth_bytes_per_s
            pk = pk if math.isfinite(pk) else hw.peak(self._dtype)
        h = scaled_hardware(hw, peak=pk / hw.peak(self._dtype),
                            memory={0: bw / hw.memory_bytes_per_s}, tag="required")
        main = h.memory[0]
        if main.capacity_bytes < self.capacity_bytes:
            h = replace(h, memory=(replace(main, capacity_bytes=self.capacity_bytes),
                                   *h.memory[1:]))
        return h

    @summary_str
    def __str__(self) -> str:
        from ..units import fmt_bytes, fmt_time

        have = getattr(self._hw, "memory_capacity_bytes", math.inf)
        lines = [f"Requirements for {self.target}: {self.call}",
                 f"  reference      {self.reference}: {fmt_time(self.reference_time)}" + (
                     f" if it fit (it does not: needs {fmt_bytes(self.capacity_bytes)}, has "
                     f"{fmt_bytes(have)})" if self.capacity_bytes > have else ""),
                 f"  floor          {fmt_time(self.floor)} with every ceiling infinite "
                 "(launch, dispatch, latencies)"]
        if not self.reachable:
            lines.append(f"  unreachable    {self.reason}")
            return "\n".join(lines)

        def show(v: float, unit: str) -> str:
            return "not by this ceiling alone" if not math.isfinite(v) else f"{v:.4g} {unit}"

        lines += [f"  peak           {show(self.peak_flops_per_s, 'FLOP/s')} (bandwidth at "
                  "reference)",
                  f"  bandwidth      {show(self.bandwidth_bytes_per_s, 'B/s')} (peak at "
                  "reference)",
                  f"  capacity       {fmt_bytes(self.capacity_bytes)}"]
        if math.isfinite(self.link_bytes_per_s):
            lines.append(f"  scale-up link  {self.link_bytes_per_s:.4g} B/s")
        lines.append("  frontier       " + ", ".join(
            f"({p / 1e12:,.0f} TFLOP/s, {b / 1e9:,.0f} GB/s)" for p, b in self.frontier))
        ok = self.meeting
        lines.append(f"  zoo parts      {len(ok)} meet it: {', '.join(ok) if ok else 'none'}")
        return "\n".join(lines)


def _bisect(ok: Any, lo: float, hi: float, rtol: float) -> float:
    """Least scale in [lo, hi] with ok(scale) (ok monotone, ok(hi) True)."""
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _least(f: Any, goal: float, lo: float, hi: float, rtol: float) -> float:
    """Least scale s in [lo, hi] with f(s) <= goal, f falling in s (f(hi) <= goal < f(lo)).

    Time is piecewise linear in x = 1/s, so regula falsi on x (Illinois variant) lands on the
    root in a few evaluations; it stops with a bracket [s, s(1+rtol)] and returns its upper
    end (which meets the goal)."""
    xa, xb = 1.0 / lo, 1.0 / hi  # xa > xb; g(xa) > 0 >= g(xb)
    ga, gb = f(lo) - goal, f(hi) - goal
    side = 0
    for _ in range(100):
        if xa / xb <= 1.0 + rtol:
            break
        x = xb - gb * (xa - xb) / (ga - gb) if ga != gb else 0.5 * (xa + xb)
        if not xb < x < xa:
            x = 0.5 * (xa + xb)
        # keep steps from hugging one end: at most a factor (1+rtol) from it
        x = min(max(x, xb * (1.0 + 0.5 * rtol)), xa / (1.0 + 0.5 * rtol))
        gx = f(1.0 / x) - goal
        if gx <= 0:
            xb, gb = x, gx
            if side == -1:
                ga *= 0.5
            side = -1
        else:
            xa, ga = x, gx
            if side == 1:
                gb *= 0.5
            side = 1
    return 1.0 / xb


def requirements(model: Any, *, target_latency: float | None = None,
                 target_throughput: float | None = None, reference: Any = "H100",
                 fn: str = "solve", rtol: float = 1e-4, frontier_points: int = 5,
                 **scenario: Any) -> Requirements:
    """The least ceilings that meet a target (see the module docstring).

    ``target_latency`` (s): solve's latency, serve's TPOT. ``target_throughput`` (1/s):
    solve's samples/s (tokens/s for decode), serve's output tokens/s per device.
    ``reference``: the part whose other ceilings are held (zoo name, file or Hardware).
    """
    tgt = _check_target(target_latency, target_throughput, fn, rtol)
    from ..specs.dtypes import precision as make_precision
    from ..specs.resolve import hardware as resolve_hardware
    from ..specs.resolve import list_hardware

    hw = resolve_hardware(reference)
    call = Call(fn, model, hw, dict(scenario))
    dtype = make_precision(scenario.get("precision", "fp16" if fn == "solve" else "bf16")).compute
    if not hw.has(dtype):
        raise SpecError(f"reference {hw.name} has no {dtype} peak; pick a reference part that "
                        f"has it (reference=...)")

    def unit_time(res: Any) -> float:
        if not getattr(res, "feasible", True) and "needs" not in getattr(res, "reason", ""):
            return math.inf  # cannot run for another reason than memory
        if target_latency is not None:
            return res.latency if fn == "solve" else res.tpot
        rate = res.throughput if fn == "solve" else res.tokens_per_s_per_device
        return 1.0 / rate if rate > 0 else math.inf

    goal = float(tgt) if target_latency is not None else 1.0 / float(tgt)
    keep: list[Any] = []
    counter = [0]

    base = call.run()
    tm = getattr(getattr(base, "_op_table", None), "model", None)
    fast = fn == "solve" and tm is not None and hasattr(tm, "inv_c0")
    per_unit = 1.0 if target_latency is not None else 1.0 / float(base.batch)

    @functools.cache  # the searches revisit their bracket ends
    def at(peak: float = 1.0, bw: float = 1.0, link: float = 1.0) -> float:
        if fast:  # a solve: its own time model at scaled ceilings (equal to a re-solve)
            from .sensitivity import scaled_time

            return scaled_time(tm, base.batch, peak=peak, memory={0: bw}) * per_unit
        counter[0] += 1
        h = scaled_hardware(hw, peak=peak, memory={0: bw}, scale_up=link,
                            tag=f"req{counter[0]}")
        # capacity is its own requirement: never let the fit decide a time
        main = h.memory[0]
        from dataclasses import replace

        h = replace(h, memory=(replace(main, capacity_bytes=1e18), *h.memory[1:]))
        res = call.with_(hardware=h).run()
        keep.append((h, res))
        return unit_time(res)

    ref_time = at()
    floor = at(_HUGE, _HUGE, _HUGE)
    target_s = (f"latency <= {tgt:g} s" if target_latency is not None
                else f"throughput >= {tgt:g} /s")
    cap = _capacity(base, fn)
    parts = []
    for key in list_hardware():  # every zoo part that has the dtype: does it meet the goal?
        p = resolve_hardware(key)
        if p.has(dtype):
            r = call.with_(hardware=p).run()
            t = unit_time(r) if getattr(r, "feasible", True) else math.inf
            parts.append((p.name, t, bool(t <= goal * (1 + 1e-12))))
    common: dict[str, Any] = dict(call=call, target=target_s, reference=hw.name,
                                  reference_time=ref_time, floor=floor, capacity_bytes=cap,
                                  parts=tuple(parts), _hw=hw, _dtype=dtype)
    if floor > goal:
        return Requirements(reachable=False, peak_flops_per_s=math.nan,
                            bandwidth_bytes_per_s=math.nan, link_bytes_per_s=math.nan,
                            frontier=(), reason=f"the target ({goal:.4g} s per unit) is below "
                            f"the fixed-overhead floor ({floor:.4g} s): no ceiling reaches it; "
                            "cut launches (runtime='compiled', fusion) or batch", **common)

    def least(var: str) -> float:
        def ok(s: float) -> bool:
            return at(**{var: s}) <= goal

        if not ok(_HUGE):
            return math.nan
        lo, hi = _bracket(ok)
        if ok(lo):
            return lo
        return _least(lambda x: at(**{var: x}), goal, lo, hi, rtol)

    s_peak = least("peak")
    s_bw = least("bw")
    link = math.nan
    if fn == "serve" and (scenario.get("tp", 1) > 1 or scenario.get("pp", 1) > 1) \
            and hw.scale_up_link is not None:
        s_link = least("link")
        link = hw.scale_up_link.bytes_per_s * s_link if math.isfinite(s_link) else math.nan
    front = _frontier(at, hw, dtype, goal, rtol, s_bw, frontier_points) \
        if math.isfinite(s_bw) else []
    return Requirements(reachable=True,
                        peak_flops_per_s=hw.peak(dtype) * s_peak if math.isfinite(s_peak)
                        else math.nan,
                        bandwidth_bytes_per_s=hw.memory_bytes_per_s * s_bw
                        if math.isfinite(s_bw) else math.nan,
                        link_bytes_per_s=link, frontier=tuple(front), **common)


def _check_target(target_latency: float | None, target_throughput: float | None, fn: str,
                  rtol: Any) -> float:
    """The one target given (a positive finite number), after checking ``fn`` and ``rtol``."""
    if (target_latency is None) == (target_throughput is None):
        raise SpecError("requirements needs exactly one of target_latency= or "
                        "target_throughput=")
    tgt = target_latency if target_latency is not None else target_throughput
    name = "target_latency" if target_latency is not None else "target_throughput"
    if isinstance(tgt, bool) or not isinstance(tgt, int | float) or not math.isfinite(tgt) \
            or tgt <= 0:
        raise SpecError(f"{name} must be a positive finite number, got {tgt!r}")
    if fn not in ("solve", "serve"):
        raise SpecError(f"fn={fn!r}; allowed: solve, serve")
    if not (isinstance(rtol, float) and 1e-9 <= rtol <= 0.1):
        raise SpecError(f"rtol must be a float in [1e-9, 0.1], got {rtol!r}")
    return float(tgt)


def _frontier(at: Any, hw: Any, dtype: str, goal: float, rtol: float, s_bw: float,
              points: int) -> list[tuple[float, float]]:
    """(peak, bandwidth) pairs that just meet the goal: bandwidth from its least value (peak
    infinite there) up to x4 the reference's, the least peak at each."""
    front = []
    lo_bw = _least_bw_with_infinite_peak(at, goal, rtol)
    for i in range(points):
        b = lo_bw * (max(4.0, s_bw * 1.5) / lo_bw) ** (i / max(1, points - 1))

        def ok_p(s: float, b: float = b) -> bool:
            return bool(at(peak=s, bw=b) <= goal)

        if not ok_p(_HUGE):
            continue
        lo, hi = _bracket(ok_p)
        sp = lo if ok_p(lo) else _least(lambda x, b=b: at(peak=x, bw=b), goal, lo, hi,
                                        max(rtol, 1e-3))  # frontier: 0.1 % is plenty
        front.append((hw.peak(dtype) * sp, hw.memory_bytes_per_s * b))
    return front


def _bracket(ok: Any) -> tuple[float, float]:
    """(lo, hi) a factor 4 apart with ok(hi) and not ok(lo) (or lo = 1e-6 if every scale
    down to it is ok): a tight start for the regula falsi."""
    hi = 1.0
    if ok(hi):
        while hi > 1e-6:
            lo = hi / 4.0
            if not ok(lo):
                return lo, hi
            hi = lo
        return 1e-6, hi
    while not ok(hi):
        hi *= 4.0
    return hi / 4.0, hi


def _least_bw_with_infinite_peak(at: Any, goal: float, rtol: float) -> float:
    lo, hi = 1e-6, 1.0
    while at(peak=_HUGE, bw=hi) > goal:
        lo, hi = hi, hi * 4.0
    return _least(lambda s: at(peak=_HUGE, bw=s), goal, lo, hi, max(rtol, 1e-3)) * \
        (1.0 + max(rtol, 1e-3))


def _capacity(res: Any, fn: str) -> float:
    if fn == "solve":
        return float(res.memory_footprint)
    return float(sum(res.memory_breakdown.values()))
