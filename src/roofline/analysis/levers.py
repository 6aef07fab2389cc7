"""What should I change? Every design lever that applies, priced by the same engine.

``levers(model, hardware, **scenario)`` (or ``result.levers()``) re-runs the call with one
thing changed at a time — batch, precision and quantization, fusion by kind, the runtime,
sparsity, the activation function, width and depth, the parallel split, another chip — and
ranks the changes by the speed-up of the unit of work (a sample for ``solve``, an output token
per device for ``serve``, a token for ``train``). Every row carries the new time, the bound
before and after, the memory and whether it fits, a one-line ``why`` with the numbers that
decide it, and the exact ``call`` that reproduces it. A lever that does not apply is a row that
says why (``applies=False``), never a silent omission. ``combine=`` adds the best two- and
three-lever combinations.

Accuracy costs of quantization and sparsity are cited notes from data/levers.toml, never a
model of accuracy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._call import Call, call_of
from .._display import Display
from ..errors import SpecError
from ..uncertainty import pool_of, speedup_band

__all__ = ["Lever", "Levers", "levers", "LEVER_FAMILIES"]

#: lever families, in the order the issue lists them
LEVER_FAMILIES = ("batch", "precision", "fusion", "runtime", "sparsity", "activation", "shape",
                  "parallelism", "hardware")


@dataclass(frozen=True, slots=True)
class Change:
    """What one lever changes in a call."""

    kwargs: dict[str, Any] = field(default_factory=dict)
    model: Any = None  #: another model (activation / shape levers), None: keep
    hardware: Any = None  #: another part, None: keep

    def keys(self) -> set[str]:
        k = set(self.kwargs)
        if self.model is not None:
            k.add("<model>")
        if self.hardware is not None:
            k.add("<hardware>")
        return k

    def merged(self, other: Change) -> Change:
        return Change({**self.kwargs, **other.kwargs}, other.model or self.model,
                      other.hardware or self.hardware)


@dataclass(frozen=True, slots=True)
class Lever:
    """One row: a change, what it buys and why."""

    lever: str  #: family (LEVER_FAMILIES) or "a + b" for a combination
    setting: str  #: the change, in words
    applies: bool  #: False: the lever does not apply here (``why`` says why)
    time: float  #: s per unit of work (sample / output token per device / token)
    latency: float  #: s the user waits: solve latency, serve TPOT, train step time
    throughput: float  #: units of work per second
    speedup: float  #: base time per unit / this time per unit (>1 is faster)
    bottleneck_before: str
    bottleneck_after: str
    memory: float  #: bytes per device
    fits: bool
    meets_slo: bool | None  #: None when no SLO was given
    why: str  #: one line with the numbers that decide it
    note: str = ""  #: cited accuracy cost, caveats
    call: Call | None = None  #: the exact roofline call that reproduces the row
    result: Any = field(default=None, repr=False)
    change: Change | None = field(default=None, repr=False)
    #: ``{"speedup": Band, "latency": Band}`` where known (roofline.uncertainty): the speed-up's
    #: band from within-source paired residuals (``speedup_band``), for a single lever whose
    #: result lies in the base's validated class and whose family some pair of the base's pool
    #: changes (none for a combination or a family without pairs: not calibrated,
    #: docs/validation/uncertainty.md); the latency's from the row's own result
    uncertainty: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def usable(self) -> bool:
        return self.applies and self.fits and self.meets_slo is not False and \
            math.isfinite(self.speedup)


class Levers(Sequence[Lever], Display):
    """Ranked levers: usable rows by speed-up first, then those that do not fit, miss the SLO
    or do not apply."""

    def __init__(self, rows: list[Lever], base: Any, unit: str, base_call: Call) -> None:
        def rank(r: Lever) -> tuple[int, float]:
            return (0 if r.usable else 1 if r.applies else 2,
                    -r.speedup if math.isfinite(r.speedup) else math.inf)

        self._rows = sorted(rows, key=rank)
        self.base = base
        self.unit = unit
        self.base_call = base_call

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        return self._rows[i]

    def __iter__(self) -> Iterator[Lever]:
        return iter(self._rows)

    def family(self, name: str) -> list[Lever]:
        return [r for r in self._rows if r.lever == name]

    @property
    def best(self) -> Lever | None:
        """The usable lever with the largest speed-up (None if nothing helps)."""
        good = [r for r in self._rows if r.usable and r.speedup > 1.0]
        return good[0] if good else None

    def to_dicts(self) -> list[dict[str, Any]]:
        keys = ("lever", "setting", "applies", "time", "latency", "throughput", "speedup",
                "bottleneck_before", "bottleneck_after", "memory", "fits", "meets_slo", "why",
                "note")
        out = []
        for r in self._rows:
            d = {k: getattr(r, k) for k in keys}
            d["call"] = str(r.call) if r.call is not None else ""
            d["uncertainty"] = {k: b.to_dict() for k, b in r.uncertainty.items()}
            out.append(d)
        return out

    def to_pandas(self) -> Any:
        from ..errors import require_extra

        pd = require_extra("pandas", "pandas", "Levers.to_pandas()")
        return pd.DataFrame(self.to_dicts())

    def to_string(self, max_rows: int | None = 30, width: int | None = 100) -> str:
        """The ranked rows, two lines each (the row, then its ``why``), ``width`` characters
        wide (None: no limit); ``max_rows`` rows (None: all), saying how many are hidden."""
        from ..units import fmt_bytes, fmt_time

        def cut(text: str, n: int) -> str:
            return text if width is None or len(text) <= n else text[:n - 1] + "…"

        W = width or 10**6
        lines = [cut(f"Levers for {self.base_call} — speed-up per {self.unit}", W)]
        head = (f"{'lever':<16} {'setting':<30} {'latency':>9} {'speed-up':>8} "
                f"{'bound':<18} {'memory':>9} fits")
        lines += [head, "-" * len(head)]
        shown = self._rows if max_rows is None else self._rows[:max_rows]
        for r in shown:
            setting = r.setting if width is None else cut(r.setting, 30)
            lever = r.lever if width is None else cut(r.lever, 16)
            if not r.applies:
                lines.append(f"{lever:<16} {setting:<30} {'—':>9} {'—':>8}")
            else:
                bound = f"{r.bottleneck_before}->{r.bottleneck_after}"
                lines.append(f"{lever:<16} {setting:<30} {fmt_time(r.latency):>9} "
                             f"{r.speedup:>7.2f}x {bound:<18} {fmt_bytes(r.memory):>9} "
                             f"{'yes' if r.fits else 'no'}")
            slo = " (misses the SLO)" if r.meets_slo is False else ""
            b = r.uncertainty.get("speedup") if r.applies else None
            rng = "" if b is None else f"[{b.low:.2f}–{b.high:.2f}x] "
            lines.append(cut(f"    {rng}{r.why}{slo}", W))
        n = next((r.uncertainty["speedup"] for r in shown if "speedup" in r.uncertainty), None)
        if n is not None:
            lines.append(cut(f"[lo–hi x]: the speed-up's {n.level:.0%}".replace("%", " %")
                             + f" interval, from {n.n} pairs of published cases that differ in "
                             f"one lever ({n.cls}, docs/validation/uncertainty.md); none for a "
                             "combination or a family without pairs", W))
        if max_rows is not None and len(self._rows) > max_rows:
            lines.append(f"... {len(self._rows) - max_rows} more rows "
                         "(to_string(max_rows=None) / --wide shows all)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_string()


# -- the metric each kind of result is ranked by --------------------------------------------------
@dataclass(frozen=True, slots=True)
class Metric:
    unit: str
    time: Callable[[Any], float]  #: s per unit of work
    latency: Callable[[Any], float]
    bottleneck: Callable[[Any], str]
    memory: Callable[[Any], float]


def _serve_bottleneck(s: Any) -> str:
    try:
        return s.decode.bottleneck
    except Exception:  # an infeasible result has no decode pass
        return "none"


def _train_bottleneck(t: Any) -> str:
    b = dict(t.breakdown or {})
    if not b:
        return "none"
    # the fixed per-kernel fill is no work: counted as overhead, as solve's label does
    fill = t.t_fill if t.t_fill > 0 else 0.0
    comp = b.get("forward", 0) + b.get("backward", 0) + b.get("recompute", 0) + \
        b.get("optimizer", 0) - fill
    comm = sum(v for k, v in b.items() if k.endswith("_comm"))
    parts = {"compute": comp, "communication": comm, "bubble": b.get("bubble", 0.0)}
    if fill:
        parts["overhead"] = fill
    return max(parts, key=parts.__getitem__)


METRICS = {
    "solve": Metric("sample", lambda r: r.latency / r.batch, lambda r: r.latency,
                    lambda r: r.bottleneck, lambda r: r.memory_footprint),
    "serve": Metric("output token per device", lambda s: 1.0 / s.tokens_per_s_per_device
                    if s.tokens_per_s_per_device > 0 else math.inf, lambda s: s.tpot,
                    _serve_bottleneck, lambda s: sum(s.memory_breakdown.values())),
    "train": Metric("token (whole cluster)", lambda t: 1.0 / t.tokens_per_s
                    if t.tokens_per_s > 0 else math.inf, lambda t: t.step_time,
                    _train_bottleneck, lambda t: t.memory_per_device.get("total", math.nan)),
}


#: the result's band that a row's latency has (solve latency, serve TPOT, train step time)
LATENCY_KEY = {"solve": "latency", "serve": "tpot", "train": "step_time"}


# -- entry points ---------------------------------------------------------------------------------
def levers(model: Any = None, hardware: Any = None, *, result: Any = None,
           fn: str | None = None, latency_slo: float | None = None,
           only: Sequence[str] | None = None, combine: int = 3, objective: str = "throughput",
           **scenario: Any) -> Levers:
    """Every lever for one call, ranked.

    Either ``result=`` (a Result, ServeResult or TrainingResult from ``rl.solve`` / ``serve``
    / ``train``) or ``model``, ``hardware`` and the scenario keywords (``fn`` picks
    "solve" (default), "serve" or "train"). ``latency_slo`` (s) marks rows whose latency
    (solve: latency; serve: TPOT; train: step time) exceeds it, and adds "the largest batch
    under the SLO". ``only`` limits the families (LEVER_FAMILIES; one name or several).
    ``combine``: also price the best 2- (and 3-) lever combinations of different families (0
    or 1: none).
    ``objective``: "throughput" ranks by time per unit of work (a bigger batch helps);
    "latency" by the latency the user waits (solve latency, serve TPOT, train step time).
    """
    if objective not in ("throughput", "latency"):
        raise SpecError(f"objective={objective!r}; allowed: throughput, latency")
    if result is not None:
        base_call = call_of(result)
    else:
        if model is None or hardware is None:
            raise SpecError("levers needs result= or a model and a hardware")
        fn = fn or "solve"
        if fn not in METRICS:
            raise SpecError(f"fn={fn!r}; allowed: {', '.join(METRICS)}")
        base_call = Call(fn, model, hardware, dict(scenario))
        result = base_call.run()
    if latency_slo is not None:
        if isinstance(latency_slo, bool) or not isinstance(latency_slo, int | float) or \
                not math.isfinite(latency_slo) or latency_slo <= 0:
            raise SpecError(f"latency_slo must be a positive number of seconds, got "
                            f"{latency_slo!r}")
    # one name is one family (a str iterated by letters was refused as lever 'b')
    fams = tuple(LEVER_FAMILIES if only is None else (only,) if isinstance(only, str) else only)
    if not fams:  # an empty selection priced nothing and printed "best: none"
        raise SpecError(f"only must name at least one lever; allowed: {', '.join(LEVER_FAMILIES)}")
    for f in fams:
        if f not in LEVER_FAMILIES:
            import difflib

            close = difflib.get_close_matches(str(f), LEVER_FAMILIES, n=3)
            raise SpecError(f"only: unknown lever {f!r}; allowed: {', '.join(LEVER_FAMILIES)}"
                            + (f" (did you mean {', '.join(close)}?)" if close else ""))
    if isinstance(combine, bool) or not isinstance(combine, int) or not 0 <= combine <= 3:
        raise SpecError(f"combine must be 0, 1, 2 or 3, got {combine!r}")
    metric = METRICS[base_call.fn]
    if objective == "latency":
        metric = replace(metric, time=metric.latency, unit="latency")
    ctx = _Ctx(base_call, result, metric, latency_slo)
    from . import _lever_rules as rules

    rows: list[Lever] = []
    for f in fams:
        for item in rules.GENERATORS[base_call.fn].get(f, rules.not_for(base_call.fn, f))(ctx):
            rows.append(item)
    if combine >= 2:
        rows += _combinations(ctx, rows, combine)
    return Levers(rows, result, metric.unit, base_call)


def _kind(res: Any) -> str | None:
    """A solve result's device kind (gpu, tpu, accelerator, ...; None: not a solve Result)."""
    spec = getattr(res, "hardware_spec", None)
    try:
        return None if spec is None else str(spec().kind)
    except Exception:  # noqa: BLE001 - a result built by hand without a known spec
        return None


# -- pricing one change ---------------------------------------------------------------------------
class _Ctx:
    """The base call and result, and how to price a change against them."""

    def __init__(self, call: Call, base: Any, metric: Metric, slo: float | None) -> None:
        self.call, self.base, self.metric, self.slo = call, base, metric, slo
        self.base_time = metric.time(base)
        self.base_bound = metric.bottleneck(base)
        self.base_cls = self._cls(base)
        self.base_pool = None if self.base_cls is None else pool_of(self.base_cls)

    def _cls(self, res: Any) -> str | None:
        """The uncertainty class of a result's latency (None: no band)."""
        b = (getattr(res, "uncertainty", None) or {}).get(LATENCY_KEY[self.call.fn])
        return None if b is None else b.cls

    def bands(self, res: Any, speedup: float, lever: str, combined: bool) -> dict[str, Any]:
        """The row's ``uncertainty``: its latency band, and its speed-up band when the lever is
        single, its result lies in the base's class (the pairs are within one class), the
        base's pool holds a pair of the lever's family (``speedup_band``) and, for a solve's
        hardware lever, the part is of the base's kind (the solve pool's hardware pairs are all
        GPU to GPU; ``gpu-inference`` also classes TPUs, NPUs and other accelerators)."""
        out = {}
        lat = (getattr(res, "uncertainty", None) or {}).get(LATENCY_KEY[self.call.fn])
        if lat is not None:
            out["latency"] = lat
        if not combined and self.base_pool is not None and self._cls(res) == self.base_cls \
                and not (lever == "hardware" and _kind(res) != _kind(self.base)):
            b = speedup_band(speedup, self.base_pool, family=lever)
            if b is not None:
                out["speedup"] = b
        return out

    def price(self, lever: str, setting: str, change: Change, why: Callable[[Any], str] | str,
              note: str = "", combined: bool = False) -> Lever:
        call = self.call.with_(model=change.model, hardware=change.hardware, **change.kwargs)
        try:
            res = call.run()
        except SpecError as e:
            return self.na(lever, setting, f"cannot run: {e}")
        m = self.metric
        t = m.time(res)
        feasible = bool(getattr(res, "feasible", True))
        if not feasible:
            return Lever(lever=lever, setting=setting, applies=True, time=t,
                         latency=m.latency(res), throughput=_inv(t), speedup=math.nan,
                         bottleneck_before=self.base_bound, bottleneck_after="none",
                         memory=m.memory(res), fits=False, meets_slo=None,
                         why=f"does not run: {getattr(res, 'reason', '')}"[:160], note=note,
                         call=call, result=res, change=change)
        lat = m.latency(res)
        meets = None if self.slo is None else bool(lat <= self.slo)
        w = why(res) if callable(why) else why
        speedup = self.base_time / t if t > 0 else math.inf
        return Lever(lever=lever, setting=setting, applies=True, time=t, latency=lat,
                     throughput=_inv(t), speedup=speedup,
                     bottleneck_before=self.base_bound, bottleneck_after=m.bottleneck(res),
                     memory=m.memory(res), fits=True, meets_slo=meets, why=w, note=note,
                     call=call, result=res, change=change,
                     uncertainty=self.bands(res, speedup, lever, combined))

    def na(self, lever: str, setting: str, why: str) -> Lever:
        return Lever(lever=lever, setting=setting, applies=False, time=math.nan,
                     latency=math.nan, throughput=math.nan, speedup=math.nan,
                     bottleneck_before=self.base_bound, bottleneck_after="", memory=math.nan,
                     fits=False, meets_slo=None, why=why)


def _inv(t: float) -> float:
    return 1.0 / t if t > 0 and math.isfinite(t) else 0.0


def _combinations(ctx: _Ctx, rows: list[Lever], upto: int) -> list[Lever]:
    """The best 2- and 3-lever combinations of the top single levers of distinct families."""
    best: dict[str, Lever] = {}
    # the shape and activation levers change the model (and its quality): never combined
    free = [r for r in rows if r.lever not in ("shape", "activation")]
    for r in sorted((r for r in free if r.usable and r.speedup > 1.0 and r.change is not None),
                    key=lambda r: -r.speedup):
        best.setdefault(r.lever, r)
    top = list(best.values())[:5]
    out: list[Lever] = []
    priced: dict[frozenset[str], float] = {frozenset([r.lever]): r.speedup for r in top}
    for k in range(2, upto + 1):
        for combo in itertools.combinations(top, k):
            keys: set[str] = set()
            merged = Change()
            clash = False
            for r in combo:
                assert r.change is not None
                if keys & r.change.keys():
                    clash = True
                    break
                keys |= r.change.keys()
                merged = merged.merged(r.change)
            if clash:
                continue
            lever = " + ".join(r.lever for r in combo)
            setting = " + ".join(r.setting for r in combo)
            single = math.prod(r.speedup for r in combo)
            def together(res: Any, s: float = single) -> str:
                return (f"together x{ctx.base_time / ctx.metric.time(res):.2f} against "
                        f"x{s:.2f} if the gains multiplied")

            row = ctx.price(lever, setting, merged, together, combined=True)
            fam = frozenset(r.lever for r in combo)
            # a combination is shown only when it beats every smaller one it contains by 1 %
            subs = [v for f, v in priced.items() if f < fam]
            if row.usable and math.isfinite(row.speedup):
                priced[fam] = row.speedup
                if row.speedup > 1.01 * max(subs, default=0.0):
                    out.append(row)
    return out
