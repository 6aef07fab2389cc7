"""``validate``: run real PyTorch workloads and compare them with our predictions.

For every item of the suite (``workloads.py``: ≥ 30 single ops and whole models) the median
measured time is set beside the prediction from the measured spec (``default`` preset, which
uses the spec's fitted ``[efficiency]`` model) and beside the pure roofline (``bound``).
The error factor of one item is ``max(pred/meas, meas/pred)``; the summary gives its geometric
mean and the share of items within 1.25×, 1.5× and 2×, split into compute-bound ops,
memory-bound ops (as the pure roofline classifies them: FLOPs/peak vs bytes/main-memory
bandwidth) and whole models.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from .. import _args as A
from .._display import Display
from .._text import csv_row, printable_str
from ..engine.core import time_model
from ..engine.presets import efficiency_for
from ..engine.solve import solve
from ..errors import SpecError, require_extra
from ..progress import Progress, progress_stream
from ..specs.hardware import Hardware
from ..specs.resolve import hardware as resolve_hardware
from .timing import Sample, stable_sample, thread_limit, time_call
from .workloads import Item, suite

__all__ = ["validate", "Validation", "Row", "summarize", "error_factor", "THRESHOLDS"]

THRESHOLDS = (1.25, 1.5, 2.0)
GROUPS = ("compute", "memory", "model")


def error_factor(pred: float, meas: float) -> float:
    """max(pred/meas, meas/pred): 1 is exact, 2 is off by a factor of two either way."""
    if not (pred > 0 and meas > 0):
        return math.inf
    return max(pred / meas, meas / pred)


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    name: str
    group: str  #: "compute", "memory" or "model"
    measured_s: float  #: median
    spread: float  #: (p90 - p10) / median of the measured samples
    predicted_s: float  #: default preset with the measured spec
    bound_s: float  #: pure roofline (bound preset) with the same spec
    #: minor page faults per call while it was timed (fresh memory the allocator mapped);
    #: NaN where the OS does not report them
    faults_per_call: float = math.nan
    #: why the item's timing is not trusted ("" when it is): its rounds never agreed, so it is
    #: listed but kept out of the summary (timing.stable_sample)
    unstable: str = ""

    @property
    def ratio(self) -> float:
        return self.predicted_s / self.measured_s

    @property
    def error(self) -> float:
        return error_factor(self.predicted_s, self.measured_s)

    @property
    def bound_error(self) -> float:
        return error_factor(self.bound_s, self.measured_s)


def _stats(errs: Sequence[float]) -> dict[str, float]:
    if not errs:
        return {"n": 0, "geomean": math.nan, **{f"within_{t}": math.nan for t in THRESHOLDS}}
    e = np.asarray(errs, dtype=np.float64)
    return {"n": len(e), "geomean": float(np.exp(np.log(e).mean())),
            **{f"within_{t}": float((e <= t).mean()) for t in THRESHOLDS}}


def summarize(rows: Sequence[Row]) -> dict[str, dict[str, dict[str, float]]]:
    """{"default"|"bound": {"all"|"compute"|"memory"|"model": {n, geomean, within_1.25, ...}}}.
    Unstable items (``Row.unstable``) are left out: a spike is not the model's error."""
    rows = [r for r in rows if not r.unstable]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for preset, attr in (("default", "error"), ("bound", "bound_error")):
        out[preset] = {"all": _stats([getattr(r, attr) for r in rows])}
        for g in GROUPS:
            out[preset][g] = _stats([getattr(r, attr) for r in rows if r.group == g])
    return out


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Validation(Display):
    """Predicted vs measured for every item, and the summary."""

    hardware: str
    rows: tuple[Row, ...]
    summary: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    wall_s: float = math.nan

    def to_dicts(self) -> list[dict[str, Any]]:
        return [{"name": r.name, "group": r.group, "measured_s": r.measured_s,
                 "spread": r.spread, "predicted_s": r.predicted_s, "bound_s": r.bound_s,
                 "ratio": r.ratio, "error": r.error, "bound_error": r.bound_error,
                 "faults_per_call": r.faults_per_call, "unstable": r.unstable}
                for r in self.rows]

    @printable_str
    def to_string(self) -> str:
        w = max([len(r.name) for r in self.rows] + [4])
        lines = [f"Predicted vs measured on {self.hardware} "
                 f"(default = fitted model, bound = pure roofline)",
                 f"{'item':<{w}}  {'group':<7} {'measured':>10} {'spread':>6} "
                 f"{'default':>10} {'pred/meas':>9} {'bound':>10} {'bnd/meas':>8} "
                 f"{'faults':>7}"]
        for r in self.rows:
            flt = "" if math.isnan(r.faults_per_call) else f"{r.faults_per_call:,.0f}"
            lines.append(f"{r.name:<{w}}  {r.group:<7} {_ms(r.measured_s):>10} "
                         f"{r.spread:>6.0%} {_ms(r.predicted_s):>10} {r.ratio:>9.2f} "
                         f"{_ms(r.bound_s):>10} {r.bound_s / r.measured_s:>8.2f} {flt:>7}"
                         + ("  UNSTABLE, not in the summary" if r.unstable else ""))
        lines += ["(faults: minor page faults per call while timed: fresh memory the allocator "
                  "mapped)"]
        lines += [f"{r.name}: {r.unstable}" for r in self.rows if r.unstable]
        lines += ["", self.summary_string()]
        return "\n".join(lines)

    def summary_string(self) -> str:
        s = self.summary
        lines = [f"{'subset':<9} {'n':>3}  {'geomean error':>13} {'<=1.25x':>8} {'<=1.5x':>7} "
                 f"{'<=2x':>6}   {'bound: geomean':>14} {'<=1.5x':>7}"]
        for g in ("all",) + GROUPS:
            d, b = s["default"][g], s["bound"][g]
            if not d["n"]:
                continue
            lines.append(f"{g:<9} {d['n']:>3}  {d['geomean']:>12.3f}x {d['within_1.25']:>8.0%} "
                         f"{d['within_1.5']:>7.0%} {d['within_2.0']:>6.0%}   "
                         f"{b['geomean']:>13.3f}x {b['within_1.5']:>7.0%}")
        return "\n".join(lines)

    def write_csv(self, path: str | os.PathLike[str]) -> None:
        rows = self.to_dicts()
        try:
            with open(path, "w", newline="", encoding="utf-8") as f:
                wr = csv.DictWriter(f, fieldnames=list(rows[0]))
                wr.writeheader()
                wr.writerows(csv_row(r) for r in rows)
        except OSError as e:
            raise SpecError(f"cannot write CSV {str(path)!r}: {e.strerror}") from None

    def plot(self, path: str | os.PathLike[str] | None = None) -> Any:
        """Predicted-vs-measured scatter (log-log, 1× and 1.5× bands); saved when ``path``."""
        require_extra("matplotlib", "plot", "the validation scatter plot")
        import matplotlib

        if path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.4, 6.0))
        meas = np.array([r.measured_s for r in self.rows])
        lo, hi = meas.min() / 3, meas.max() * 3
        xs = np.array([lo, hi])
        ax.plot(xs, xs, "k-", lw=1, label="exact")
        for f, ls in ((1.5, "--"), (2.0, ":")):
            ax.plot(xs, xs * f, "k" + ls, lw=0.7, label=f"{f}x")
            ax.plot(xs, xs / f, "k" + ls, lw=0.7)
        marks = {"compute": ("o", "tab:blue"), "memory": ("s", "tab:orange"),
                 "model": ("*", "tab:green")}
        for g, (mk, col) in marks.items():
            sel = [r for r in self.rows if r.group == g]
            if sel:
                ax.scatter([r.measured_s for r in sel], [r.predicted_s for r in sel], marker=mk,
                           color=col, s=60 if g == "model" else 30, label=f"{g} (default)")
        ax.scatter(meas, [r.bound_s for r in self.rows], marker=".", color="0.6", s=12,
                   label="pure roofline (bound)")
        # name the whole models and the items off by more than 1.5x (the rest would pile up)
        named = [r for r in self.rows if r.group == "model" or r.error > 1.5]
        for k, r in enumerate(sorted(named, key=lambda r: r.measured_s)):
            ax.annotate(r.name, (r.measured_s, r.predicted_s), fontsize=6, alpha=0.85,
                        xytext=(5, 6 if k % 2 else -9), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("measured median time (s)")
        ax.set_ylabel("predicted time (s)")
        tot = self.summary["default"]["all"]
        ax.set_title(f"{self.hardware}\ngeomean error {tot['geomean']:.2f}x, "
                     f"{tot['within_1.5']:.0%} within 1.5x", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        if path is not None:
            try:
                fig.savefig(path, dpi=110)
            except OSError as e:
                raise SpecError(f"cannot write plot {str(path)!r}: {e.strerror}") from None
            plt.close(fig)
        return fig

    @printable_str
    def __str__(self) -> str:
        return self.to_string()


def _minor_faults() -> float:
    """Minor page faults of this process so far (NaN where the OS does not say)."""
    try:
        import resource
    except ImportError:
        return math.nan
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def _ms(t: float) -> str:
    return f"{t * 1e3:.4g} ms"


def _predict(item: Item, hw: Hardware) -> tuple[float, float, bool]:
    """(default-preset seconds, bound seconds, compute-bound?) for one item."""
    if item.graph is not None:
        g = item.graph()
        if not hw.has(g.precision.compute):
            raise SpecError(f"{hw.name} has no {g.precision.compute} peak for {item.name}")
        d = time_model(g, hw, efficiency_for(hw, "default")).totals_at(item.batch)
        bd = time_model(g, hw, efficiency_for(hw, "bound")).totals_at(item.batch)
        # compute- vs memory-bound as the pure roofline classifies it (FLOPs/peak vs bytes/BW)
        return d.latency, bd.latency_bound, bool(bd.t_compute >= bd.t_memory)
    args = dict(item.solve_args or {})
    name = args.pop("model")
    r = solve(name, hw, preset="default", **args)
    rb = solve(name, hw, preset="bound", **args)
    return r.latency, rb.latency, r.bottleneck == "compute"


@A.checked(hardware=A.anything, quick=A.flag, models=A.flag, csv_path=A.optional(A.path),
           plot_path=A.optional(A.path), progress=A.progress,
           items=A.optional(A.seq(A.anything, what="validation items")),
           min_time_s=A.optional(A.real(0, 3600, unit="s")), threads=A.optional(A.count(1, 4096)))
def validate(hardware: str | os.PathLike[str] | Hardware | None = None, *,
             quick: bool = False, models: bool = True, csv_path: str | os.PathLike[str] | None
             = None, plot_path: str | os.PathLike[str] | None = None,
             progress: bool | TextIO = True, items: Sequence[Item] | None = None,
             min_time_s: float | None = None, threads: int | None = None) -> Validation:
    """Run the validation suite on this machine and compare with predictions from ``hardware``.

    ``hardware``: a measured spec (path or Hardware); None measures this machine first (in the
    same run, so ceilings and workloads see the same conditions). ``quick``: a small fast
    subset (for tests). ``items``: run these instead of the suite. ``threads``: compute
    threads for the measurement (when ``hardware`` is None) and the workloads.
    """
    import time

    torch = require_extra("torch", "torch", "roofline validate (it runs real PyTorch workloads)")
    out = progress_stream(progress)  # type: ignore[arg-type]
    t_start = time.perf_counter()
    if hardware is None:
        from .measure import measure

        hw = measure(quick=quick, progress=out or False, threads=threads)
    else:
        hw = resolve_hardware(hardware)
    if csv_path is not None:
        from .measure import check_writable

        check_writable(csv_path)
    todo = list(items) if items is not None else suite(quick, models)
    mt = min_time_s if min_time_s is not None else (0.02 if quick else 0.15)
    device = "cuda" if hw.kind == "gpu" else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SpecError(f"{hw.name} is a GPU spec but PyTorch sees no CUDA device here; "
                        "validate a spec on the machine it was measured on")
    sync = torch.cuda.synchronize if device == "cuda" else None
    rows = []
    pr = Progress(len(todo), out, unit="workload")
    # workloads build their tensors and modules on the default device
    with torch.inference_mode(), torch.device(device), thread_limit(threads):
        for it in todo:
            if not hw.has(it.dtype):
                pr.step(it.name, f"skipped ({hw.name} has no {it.dtype} peak)")
                continue
            pred, bound, cb = _predict(it, hw)
            fn = it.make(torch)
            warm = 1 if it.group == "model" else 2
            f0 = _minor_faults()
            calls: list[int] = []

            def one_round(fn: Any = fn, warm: int = warm, it: Item = it,
                          calls: list[int] = calls) -> Sample:
                w = 0 if calls else warm
                smp = time_call(fn, warmup=w, sync=sync,
                                min_reps=3 if it.group == "model" else 5, min_time_s=mt,
                                max_time_s=8.0)
                calls.append(w + smp.n + smp.discarded)
                return smp

            # rounds until two agree: a spike in one round is never reported as an error
            s, unstable = stable_sample(one_round)
            faults = (_minor_faults() - f0) / max(sum(calls), 1)
            group = "model" if it.group == "model" else ("compute" if cb else "memory")
            row = Row(name=it.name, group=group, measured_s=s.median_s, spread=s.spread,
                      predicted_s=pred, bound_s=bound, faults_per_call=faults,
                      unstable=unstable)
            rows.append(row)
            del fn
            pr.step(it.name, f"measured {_ms(s.median_s)}, predicted {_ms(pred)} "
                             f"({row.ratio:.2f}x), bound {_ms(bound)}"
                             + (f" — {unstable}; left out of the summary" if unstable else ""))
    pr.close()
    if not rows:
        raise SpecError(f"no validation item could run on {hw.name}")
    v = Validation(hardware=hw.name, rows=tuple(rows), summary=summarize(rows),
                   wall_s=time.perf_counter() - t_start)
    if csv_path is not None:
        v.write_csv(csv_path)
    if plot_path is not None:
        v.plot(plot_path)
    return v
