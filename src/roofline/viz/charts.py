"""Charts beyond the roofline: a batch sweep (throughput and latency vs batch per device, the
crossover marked), serving (TTFT and TPOT vs batch), the training step breakdown (stacked bars
per split) and per-layer time (bars).

Every chart: one colour per device (Okabe–Ito) and one marker per precision or series, the
legend outside the plot area, units in the axis labels; returns the matplotlib Figure and saves
it when given ``path`` (Agg canvas, pyplot untouched). matplotlib is imported lazily.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SpecError
from .roofline import _HW_COLOURS, _figure

__all__ = ["plot_sweep", "plot_serving", "plot_training", "plot_layers", "layer_times",
           "plot_plan"]

_SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
#: stacked-bar colours of the time components (training breakdown, per-layer time)
_PART_COLOURS = ("#0072B2", "#56B4E9", "#009E73", "#E69F00", "#D55E00", "#CC79A7", "#F0E442",
                 "#999999", "#000000")


def _save(fig: Any, path: str | Path | None, dpi: int) -> Any:
    if path is not None:
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return fig


def _short(name: str) -> str:
    return str(name).replace("NVIDIA ", "")


def plot_sweep(sweep: Any, *, path: str | Path | None = None, figsize: tuple[float, float] =
               (11.0, 4.4), dpi: int = 110) -> Any:
    """Throughput (samples/s) and latency (s) vs batch, one line per (device, precision):
    colour = device, marker = precision; the first compute-bound batch of each line ringed and
    labelled. Rows that do not fit in memory are drawn hollow."""
    fig, _ = _figure(None, path, figsize, dpi)
    fig.clear()
    ax_t, ax_l = fig.subplots(1, 2)
    t = sweep.table
    hws = list(dict.fromkeys(t["hardware"]))
    precs = list(dict.fromkeys(t["precision"]))
    cross = sweep.crossover()
    for i, hw in enumerate(hws):
        colour = _HW_COLOURS[i % len(_HW_COLOURS)]
        for j, p in enumerate(precs):
            m = (t["hardware"] == hw) & (t["precision"] == p) & np.isfinite(
                np.asarray(t["latency"], dtype=float))
            if not m.any():
                continue
            b = np.asarray(t["batch"][m], dtype=float)
            thr = np.asarray(t["throughput"][m], dtype=float)
            lat = np.asarray(t["latency"][m], dtype=float)
            fits = np.asarray(t["feasible"][m], dtype=bool)
            mk = _SERIES_MARKERS[j % len(_SERIES_MARKERS)]
            cb = cross.get(hw if len(precs) == 1 else f"{hw} {p}")
            # the crossover goes in the legend: labels on the chart would pile up
            label = (_short(hw) + (f" {p}" if len(precs) > 1 else "")
                     + (f" (compute-bound from {cb})" if cb is not None else
                        " (never compute-bound)"))
            for ax, y in ((ax_t, thr), (ax_l, lat)):
                ax.plot(b, y, color=colour, lw=1.4, marker=mk, ms=0.01,
                        label=label if ax is ax_t else None)
                ax.scatter(b[fits], y[fits], color=colour, marker=mk, s=28, zorder=3)
                ax.scatter(b[~fits], y[~fits], facecolors="none", edgecolors=colour,
                           marker=mk, s=28, zorder=3)
            if cb is not None:
                k = int(np.nonzero(b == cb)[0][0])
                ax_t.scatter([cb], [thr[k]], s=160, facecolors="none", edgecolors="black",
                             linewidths=1.3, zorder=4)
    for ax, lab in ((ax_t, "throughput [samples/s]"), (ax_l, "latency [s]")):
        _batch_axis(ax)
        _log_y(ax)
        ax.set_xlabel("batch")
        ax.set_ylabel(lab)
        ax.grid(True, which="major", alpha=0.25)
    ax_t.set_title("throughput vs batch", fontsize=10)
    ax_l.set_title("latency vs batch", fontsize=10)
    if hws:
        ax_l.legend(*ax_t.get_legend_handles_labels(), fontsize=7.5, loc="upper left",
                    bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.suptitle(f"{sweep.model} sweep (preset {sweep.preset}); ringed: first compute-bound "
                 "batch; hollow: does not fit in memory", fontsize=10)
    return _save(fig, path, dpi)


def plot_serving(results: Sequence[Any], *, plan: Any = None, path: str | Path | None = None,
                 figsize: tuple[float, float] | None = None, dpi: int = 110) -> Any:
    """TTFT and TPOT (s) vs batch from a list of ServeResults, one line per (device, tp,
    precision): colour = device, marker = series. Configurations that cannot run are left out
    and counted in the title.

    ``plan`` (an ``rl.plan_serving`` result): a third panel overlays the results on the
    planner's frontier — output tokens/s per device against tokens/s per user (1 / TPOT):
    every layout × concurrency in grey, the Pareto frontier, the region meeting the TPOT p99
    shaded, the plan's best layout (simulated) starred, and each result as a point in its
    series' colour and marker (``tokens_per_s_per_device`` vs ``1 / tpot``)."""
    if not results:
        raise SpecError("plot_serving needs at least one ServeResult")
    if plan is not None and type(plan).__name__ != "ServingPlan":
        raise SpecError(f"plot_serving: plan must be a ServingPlan (rl.plan_serving), got "
                        f"{type(plan).__name__}")
    size = figsize or ((16.0, 4.6) if plan is not None else (11.0, 4.4))
    fig, _ = _figure(None, path, size, dpi)
    fig.clear()
    axes = fig.subplots(1, 3 if plan is not None else 2)
    ax_f, ax_p = axes[0], axes[1]
    series: dict[tuple[str, int, str], list[Any]] = {}
    for s in results:
        series.setdefault((s.hardware, s.tp, s.precision), []).append(s)
    hws = list(dict.fromkeys(k[0] for k in series))
    skipped = 0
    drawn: list[tuple[str, str, str, list[Any]]] = []
    for j, (key, rs) in enumerate(series.items()):
        hw, tp, prec = key
        colour = _HW_COLOURS[hws.index(hw) % len(_HW_COLOURS)]
        ok = sorted((r for r in rs if r.feasible and math.isfinite(r.ttft)),
                    key=lambda r: r.batch)
        skipped += len(rs) - len(ok)
        if not ok:
            continue
        b = [r.batch for r in ok]
        label = f"{_short(hw)}" + (f" tp{tp}" if tp > 1 else "") + f" {prec}"
        mk = _SERIES_MARKERS[j % len(_SERIES_MARKERS)]
        ax_f.plot(b, [r.ttft for r in ok], color=colour, marker=mk, ms=5, lw=1.4, label=label)
        ax_p.plot(b, [r.tpot for r in ok], color=colour, marker=mk, ms=5, lw=1.4)
        drawn.append((label, colour, mk, ok))
    for ax, lab in ((ax_f, "TTFT [s]"), (ax_p, "TPOT [s]")):
        _batch_axis(ax)
        _log_y(ax)
        ax.set_xlabel("batch (concurrent requests)")
        ax.set_ylabel(lab)
        ax.grid(True, which="major", alpha=0.25)
    ax_f.set_title("time to first token", fontsize=10)
    ax_p.set_title("time per output token", fontsize=10)
    last = ax_p
    if plan is not None:
        last = axes[2]
        _frontier(last, plan, drawn)
    handles, labels = ax_f.get_legend_handles_labels()
    if plan is not None:
        h2, l2 = last.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    last.legend(handles, labels, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                borderaxespad=0.0)
    r0 = results[0]
    fig.suptitle(f"{r0.model} serving, prompt {r0.prompt_len}, output {r0.output_len}"
                 + (f" ({skipped} configurations that do not fit left out)" if skipped else ""),
                 fontsize=10)
    return _save(fig, path, dpi)


def plot_plan(plan: Any, *, ax: Any = None, path: str | Path | None = None,
              figsize: tuple[float, float] = (8.0, 4.8), dpi: int = 110) -> Any:
    """A serving plan's frontier: tokens/s per device against per user (1 / TPOT), every layout
    × concurrency in grey, the Pareto frontier, the TPOT-SLO region shaded, the best layout
    (simulated) starred (``ServingPlan.plot``). Returns the axes."""
    fig, ax = _figure(ax, path, figsize, dpi)
    _frontier(ax, plan, [])
    ax.set_title(f"{plan.model} on {plan.hardware}: serving frontier", fontsize=10)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    _save(fig, path, dpi)
    return ax


def _frontier(ax: Any, plan: Any, drawn: Sequence[tuple[str, str, str, list[Any]]]) -> None:
    """The planner's frontier on ``ax`` (log-log) with the results overlaid."""
    L, P = plan.layouts, plan.pareto
    ax.scatter(L["tokens_per_s_per_user"], L["tokens_per_s_per_device"], s=8, c="0.78",
               label="planner: layout × concurrency", zorder=1)
    o = np.argsort(P["tokens_per_s_per_user"])
    ax.plot(P["tokens_per_s_per_user"][o], P["tokens_per_s_per_device"][o], "-", c="0.25",
            lw=1.6, label="planner: Pareto frontier", zorder=2)
    xs = [float(v) for v in L["tokens_per_s_per_user"]]
    for _, _, _, ok in drawn:
        xs += [1.0 / r.tpot for r in ok if r.tpot > 0]
    if plan.slo.tpot_p99 is not None and xs:
        x0 = 1.0 / plan.slo.tpot_p99
        ax.axvspan(x0, max(x0 * 1.05, max(xs) * 1.3), color="#009E73", alpha=0.12,
                   label=f"meets TPOT p99 ≤ {plan.slo.tpot_p99 * 1e3:g} ms", zorder=0)
    if plan.best is not None and plan.best.sim.tpot.mean > 0:
        sim = plan.best.sim
        ax.scatter([1 / sim.tpot.mean], [sim.tokens_per_s_per_device], marker="*", s=170,
                   c="#D55E00", edgecolors="white", linewidths=0.6, zorder=5,
                   label=f"planner's best: {plan.best.layout} (simulated)")
    for _label, colour, mk, ok in drawn:
        pts = [(1.0 / r.tpot, r.tokens_per_s_per_device) for r in ok if r.tpot > 0]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ls=":", lw=1.0, color=colour,
                    marker=mk, ms=6, markeredgecolor="white", zorder=4)
    ax.set_xscale("log")
    _log_y(ax)
    ax.set_xlabel("output tokens/s per user (1 / TPOT)")
    ax.set_ylabel("output tokens/s per device")
    ax.set_title(f"against the planner's frontier ({plan.devices}× max)", fontsize=10)
    ax.grid(True, which="major", alpha=0.25)


def plot_training(results: Sequence[Any], *, path: str | Path | None = None,
                  figsize: tuple[float, float] | None = None, dpi: int = 110) -> Any:
    """Step-time breakdown per split as stacked horizontal bars (forward, backward, recompute,
    optimizer, exposed communication, bubble: they sum to the step time), with MFU at the end.
    Splits that do not run are listed with their reason instead of a bar."""
    if not results:
        raise SpecError("plot_training needs at least one TrainingResult")
    run = [r for r in results if r.feasible]
    parts = list(dict.fromkeys(k for r in run for k in r.breakdown))
    h = figsize or (10.0, 1.2 + 0.45 * len(results))
    fig, ax = _figure(None, path, h, dpi)
    labels = [f"tp={r.tp} pp={r.pp} dp={r.dp} ep={r.ep} mb={r.micro_batch} "
              f"v={r.interleave} {r.recompute} z{r.zero}" for r in results]
    y = np.arange(len(results))[::-1]
    for k, part in enumerate(parts):
        left = np.array([sum(r.breakdown.get(p, 0.0) for p in parts[:k]) if r.feasible else 0.0
                         for r in results])
        width = np.array([r.breakdown.get(part, 0.0) if r.feasible else 0.0 for r in results])
        ax.barh(y, width, left=left, color=_PART_COLOURS[k % len(_PART_COLOURS)],
                edgecolor="white", linewidth=0.5, label=part)
    for yi, r in zip(y, results):
        if r.feasible:
            ax.text(r.step_time, yi, f"  {r.step_time:.3g} s, MFU {r.mfu * 100:.1f} %",
                    va="center", fontsize=7.5)
        else:
            ax.text(0, yi, f"  does not run: {r.reason[:70]}", va="center", fontsize=7.5,
                    color="#b42318")
    ax.set_yticks(y, labels, fontsize=7.5)
    ax.set_xlabel("seconds per optimizer step")
    top = max([r.step_time for r in run] + [1e-9])
    ax.set_xlim(0, top * 1.35)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    r0 = results[0]
    ax.set_title(f"{r0.model} on {r0.cluster}: step-time breakdown per split "
                 f"(global batch {r0.global_batch} × {r0.seq_len})", fontsize=10)
    return _save(fig, path, dpi)


#: the layer an op belongs to: the name up to its block index (layers.3, layer4.1, blocks.7)
_LAYER = re.compile(r"^(.*?(?:layers?|blocks?|h|encoder\.layer)\d*\.\d+)(?:\.|$)")


def layer_times(result: Any) -> dict[str, dict[str, float]]:
    """Seconds per layer (the op name up to its block index; ops outside a block keep their
    own name), split into compute-bound kernel time, memory-bound kernel time and overhead;
    in the order the layers first appear. The overhead is launch / dispatch plus each tiled
    op's fixed per-kernel fill (the op table's ``fill``), as the bottleneck label counts it:
    the kernel buckets hold the work only."""
    t = result.ops
    out: dict[str, dict[str, float]] = {}
    for name, bound, time, over, fill in zip(t["name"], t["bound"], t["time"], t["overhead"],
                                             t["fill"]):
        m = _LAYER.match(str(name))
        key = m.group(1) if m else str(name)
        d = out.setdefault(key, {"compute-bound": 0.0, "memory-bound": 0.0, "overhead": 0.0})
        o = min(float(over) + float(fill), float(time))
        d["overhead"] += o
        d["compute-bound" if bound == "compute" else "memory-bound"] += float(time) - o
    return out


def plot_layers(result: Any, *, path: str | Path | None = None, top: int | None = 40,
                figsize: tuple[float, float] | None = None, dpi: int = 110) -> Any:
    """Time per layer as stacked horizontal bars (compute-bound kernels, memory-bound kernels,
    overhead: launch, dispatch and kernel fill), in model order; ``top`` keeps the most
    expensive layers (None: all)."""
    lt = layer_times(result)
    if not lt:
        raise SpecError("plot_layers: this result has no per-op table (preset mlsysim?)")
    names = list(lt)
    if top is not None and len(names) > top:
        keep = set(sorted(names, key=lambda k: -sum(lt[k].values()))[:top])
        names = [n for n in names if n in keep]
    scale, unit = _time_unit(max(sum(lt[n].values()) for n in names))
    fig, ax = _figure(None, path, figsize or (9.0, 1.2 + 0.22 * len(names)), dpi)
    y = np.arange(len(names))[::-1]
    left = np.zeros(len(names))
    for k, part in enumerate(("compute-bound", "memory-bound", "overhead")):
        w = np.array([lt[n][part] for n in names]) / scale
        ax.barh(y, w, left=left, color=("#1f77b4", "#d62728", "#999999")[k],
                label="overhead (launch + kernel fill)" if part == "overhead" else part,
                edgecolor="white", linewidth=0.4)
        left += w
    ax.set_yticks(y, names, fontsize=7)
    ax.set_xlabel(f"time [{unit}]")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    shown = "" if len(names) == len(lt) else f" ({len(names)} costliest of {len(lt)})"
    ax.set_title(f"{result.model} on {result.hardware}, batch {result.batch}, "
                 f"{result.precision}: time per layer{shown}", fontsize=10)
    return _save(fig, path, dpi)


def _log_y(ax: Any) -> None:
    """Log y with labels on the decades only (minor labels crowd the axis title)."""
    from matplotlib.ticker import NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_minor_formatter(NullFormatter())


def _batch_axis(ax: Any) -> None:
    """A log2 batch axis labelled 1, 2, 4, ... (not 2^k)."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def _time_unit(top: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if top >= scale:
            return scale, unit
    return 1e-9, "ns"
