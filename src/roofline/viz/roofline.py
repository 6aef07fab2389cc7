"""Roofline charts: ceilings of the hardware with a workload's operators and total on them.

Log-log axes: x is arithmetic intensity (FLOP/B), y is attainable FLOP/s. For each device:
a horizontal compute roof per dtype it has (solid for the result's dtype, dashed for the
others; dtypes with the same peak share one line), a memory slope ``y = bandwidth × x`` per
memory level with a published bandwidth, and the ridge point where the result's roof meets the
main-memory slope. Each operator is a point at (its intensity, its achieved FLOP/s =
flops / estimated time): marker area ∝ its share of the latency, colour = the roof that binds it.
The whole model is a star at (total flops / total bytes, total flops / latency).

matplotlib is imported lazily (``pip install 'roofline[plot]'``); saving uses a canvas-bound
Figure (the Agg renderer for PNG), never pyplot's global state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import _args as A
from .._text import mathtext_safe
from ..engine.result import Result
from ..errors import SpecError, require_extra
from ..specs.hardware import Hardware
from ..specs.resolve import hardware as resolve_hardware

__all__ = ["BOUND_COLOURS", "op_points", "plot_result", "plot_roofline"]

#: colour of an operator point by the roof that binds it
BOUND_COLOURS = {"compute": "#1f77b4", "memory": "#d62728"}
#: one colour per device (Okabe–Ito, colour-blind safe): its ceilings and its points share it
_HW_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
#: one marker per batch (or per result on a single device), cycled
_MARKERS = ("*", "o", "s", "^", "D", "v", "P", "X", "h", "<", ">", "p")
_SIZES = {"*": 260}  # other markers get 90 points²
_MIN_AREA, _MAX_AREA = 4.0, 320.0  # points²: floor, and the area of the largest time share
FLOP_NOTE = "2 FLOPs per multiply-add"
MLSYSIM_NOTE = ("preset mlsysim: whole-model aggregates in mlsysim's zoo convention (CNNs: "
                "1 FLOP per multiply-add, e.g. ResNet-50 4.1e9)")


def op_points(result: Result) -> dict[str, np.ndarray]:
    """The per-op points a chart draws: ops with FLOPs > 0, bytes > 0 and time > 0.

    Returns columns ``name``, ``intensity`` (FLOP/B), ``achieved`` (FLOP/s = flops / time),
    ``share`` (of latency), ``bound`` and ``index`` (the op's row in ``result.ops``).
    Zero-FLOP ops (views, copies, lookups) have no place on a log FLOP/s axis and are left
    out; preset "mlsysim" has no per-op table (its single aggregate row is the whole-model
    point), so it gives none.
    """
    t = result.ops
    empty = {"name": np.array([], dtype=object), "intensity": np.array([]),
             "achieved": np.array([]), "share": np.array([]),
             "bound": np.array([], dtype=object), "index": np.array([], dtype=np.int64)}
    if result.preset == "mlsysim" or not len(t) or "time" not in t.columns:
        return empty
    flops = np.asarray(t["flops"], dtype=float)
    byts = np.asarray(t["bytes"], dtype=float)
    time = np.asarray(t["time"], dtype=float)
    keep = (flops > 0) & (byts > 0) & (time > 0)
    return {"name": np.asarray(t["name"], dtype=object)[keep],
            "intensity": flops[keep] / byts[keep], "achieved": flops[keep] / time[keep],
            "share": np.asarray(t["share"], dtype=float)[keep],
            "bound": np.asarray(t["bound"], dtype=object)[keep],
            "index": np.nonzero(keep)[0]}


def plot_result(result: Result, path: str | Path | None = None, ax: Any = None,
                **kw: Any) -> Any:
    """Roofline chart of one result (``Result.plot()``); see :func:`plot_roofline`."""
    return plot_roofline(result, path=path, ax=ax, **kw)


@A.checked(results_or_hardware=A.anything, path=A.optional(A.path), ax=A.anything,
           ops=A.optional(A.flag), dtypes=A.optional(A.seq(A.dtype, what="dtype names")),
           title=A.optional(A.text),
           figsize=A.seq(A.real(0, 1000), min_len=2, max_len=2, what="inches (width, height)"),
           dpi=A.count(1, 2400))
def plot_roofline(results_or_hardware: Any, *, path: str | Path | None = None, ax: Any = None,
                  ops: bool | None = None, dtypes: Sequence[str] | None = None,
                  title: str | None = None, figsize: tuple[float, float] = (9.0, 6.0),
                  dpi: int = 110) -> Any:
    """Draw a roofline chart and return the matplotlib Figure (saved to ``path`` if given).

    ``results_or_hardware``: a Result, a Sweep, a Hardware or zoo name, or a list of these.
    Results on the same hardware share its ceilings (e.g. a batch sweep: one chart, a star
    per batch). ``ops``: draw every operator point (default: when one result is given).
    ``dtypes``: limit the compute roofs to these (default: every dtype the part has; with
    several devices, only the results' dtypes).
    ``path``: ``.png``, ``.svg`` or ``.pdf``.
    """
    results, hws = _split(results_or_hardware)
    if not results and not hws:
        raise SpecError("plot_roofline needs at least one Result, Sweep or Hardware")
    for r in results:
        hw = r.hardware_spec()
        if all(h.key != hw.key for h in hws):
            hws.append(hw)
    if dtypes is not None:
        for d in dtypes:
            if not any(h.has(d) for h in hws):
                raise SpecError(f"dtypes: no hardware on this chart has {d!r}; they have "
                                f"{', '.join(sorted({x for h in hws for x in h.dtypes}))}")
    show_ops = (len(results) == 1) if ops is None else bool(ops)
    if dtypes is None and len(hws) > 1 and results:
        dtypes = sorted({r.precision for r in results})  # keep a multi-device chart readable

    fig, ax = _figure(ax, path, figsize, dpi)
    main_dtypes = {r.hardware_key: r.precision for r in results}
    xs: list[float] = []
    ys: list[float] = []
    for r in results:
        if _finite(r.arithmetic_intensity, r.flops, r.latency):
            xs.append(r.arithmetic_intensity)
            ys.append(r.flops / r.latency)
        if show_ops:
            drawn = op_points(r)
            xs.extend(drawn["intensity"].tolist())
            ys.extend(drawn["achieved"].tolist())
    peaks = [v for h in hws for d, v in h.peak_flops_per_s.items()
             if dtypes is None or d in dtypes]
    ridges = [v / h.memory_bytes_per_s for h in hws for d, v in h.peak_flops_per_s.items()
              if dtypes is None or d in dtypes]
    x_lo = min([*xs, *ridges, 1.0]) / 4
    x_hi = max([*xs, *ridges]) * 8
    y_hi = max([*peaks, *ys]) * 3
    y_lo = min([*ys, *(h.memory_bytes_per_s * x_lo for h in hws)]) / 3

    several = len(hws) > 1
    hw_colour = {h.key: (_HW_COLOURS[i % len(_HW_COLOURS)] if several else "#333333")
                 for i, h in enumerate(hws)}
    labels: list[tuple[float, str, str]] = []
    for h in hws:
        labels += _ceilings(ax, h, main_dtypes.get(h.key), dtypes, x_lo, x_hi,
                            hw_colour[h.key], label_hw=several)
    _roof_labels(ax, labels, x_hi, y_lo, y_hi)

    all_pts: list[dict[str, np.ndarray] | None] = [op_points(r) if show_ops else None
                                                   for r in results]
    top_share = max([float(p["share"].max()) for p in all_pts if p is not None and
                     len(p["share"])] + [1e-300])
    styles = _result_styles(results, hw_colour)
    for i, r in enumerate(results):
        colour, mk = styles[i]
        pts = all_pts[i]
        if pts is not None:
            for bound, c in BOUND_COLOURS.items():
                sel = pts["bound"] == bound
                if sel.any():
                    ax.scatter(pts["intensity"][sel], pts["achieved"][sel],
                               s=np.maximum(_MAX_AREA * pts["share"][sel] / top_share,
                                            _MIN_AREA),
                               c=c, alpha=0.45, edgecolors="none", zorder=3,
                               label=f"op, {bound}-bound (area ∝ time share)"
                               if i == 0 else None)
        if _finite(r.arithmetic_intensity, r.flops, r.latency):
            ax.scatter([r.arithmetic_intensity], [r.flops / r.latency], marker=mk,
                       s=_SIZES.get(mk, 90), c=colour, edgecolors="white", linewidths=0.8,
                       zorder=5, label=_result_label(r, results))

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("arithmetic intensity [FLOP/B]")
    ax.set_ylabel("attainable performance [FLOP/s]")
    ax.grid(True, which="major", alpha=0.25)
    ax.set_title(title or _title(results, hws), fontsize=11)
    handles, _labels = ax.get_legend_handles_labels()
    if handles:
        # outside the plot area, so it never covers a point
        leg = ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                        borderaxespad=0.0, framealpha=0.9)
        hs = getattr(leg, "legend_handles", getattr(leg, "legendHandles", []))
        for h, text in zip(hs, leg.get_texts()):
            if hasattr(h, "set_sizes") and text.get_text().startswith("op, "):
                h.set_sizes([30.0])  # op markers: one readable size, whatever the first op's
    note = FLOP_NOTE
    if any(r.preset == "mlsysim" for r in results):
        note = MLSYSIM_NOTE
    elif results:
        note += "; achieved FLOP/s = flops / estimated latency"
    fig.text(0.01, 0.005, note, fontsize=7, color="#555555", ha="left", va="bottom")
    if path is not None:
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return fig


# -- pieces --------------------------------------------------------------------------------------

def _split(obj: Any) -> tuple[list[Result], list[Hardware]]:
    from ..scenarios.sweep import Sweep

    items: Iterable[Any]
    if isinstance(obj, Result | Sweep | Hardware | str | Path):
        items = [obj]
    elif isinstance(obj, Iterable):
        items = list(obj)
    else:
        raise SpecError(f"plot_roofline takes Results, a Sweep or hardware, got "
                        f"{type(obj).__name__}")
    results: list[Result] = []
    hws: list[Hardware] = []
    for it in items:
        if isinstance(it, Result):
            results.append(it)
        elif isinstance(it, Sweep):
            results.extend(_sweep_results(it))
        elif isinstance(it, Hardware | str | Path):
            hw = resolve_hardware(it if not isinstance(it, Path) else str(it))
            if all(h.key != hw.key for h in hws):
                hws.append(hw)
        else:
            raise SpecError(f"plot_roofline: cannot plot a {type(it).__name__}; pass Results, "
                            "a Sweep, Hardware or zoo names")
    return results, hws


def _sweep_results(s: Any) -> list[Result]:
    """A Sweep's rows as whole-model results (no per-op table): one star per row."""
    out = []
    for row in s.to_dicts():
        if not row["feasible"] and not _finite(row["latency"]):
            continue
        hw = getattr(s, "hardware_specs", {}).get(row["hardware"]) or \
            resolve_hardware(row["hardware"])
        peak = hw.peak(row["precision"]) if hw.has(row["precision"]) else math.nan
        out.append(Result(
            model=row["model"], hardware=hw.name, hardware_key=hw.key, _hardware=hw,
            batch=row["batch"],
            precision=row["precision"], preset=_sweep_preset(s), phase="", latency=row["latency"],
            latency_bound=row["latency_bound"], t_compute=math.nan, t_memory=math.nan,
            t_overhead=math.nan, t_fill=math.nan,  # a sweep row has no time split
            throughput=row["throughput"], bottleneck=row["bottleneck"],
            flops=row["flops"], bytes=row["bytes"],
            arithmetic_intensity=row["arithmetic_intensity"], ridge_point=row["ridge_point"],
            ridge_point_effective=math.nan, peak_flops_per_s=peak,
            bandwidth_bytes_per_s=hw.memory_bytes_per_s, mfu=row["mfu"], mbu=math.nan,
            memory_footprint=row["memory_footprint"], feasible=row["feasible"]))
    return out


def _sweep_preset(s: Any) -> str:
    return str(getattr(s, "preset", "") or "")


def _figure(ax: Any, path: Any, figsize: tuple[float, float], dpi: int) -> tuple[Any, Any]:
    require_extra("matplotlib", "plot", "plotting a roofline chart")
    if ax is not None:
        return ax.figure, ax
    if path is not None:
        # a Figure with its own Agg canvas: no pyplot, no global backend switch
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize, dpi=dpi)
        FigureCanvasAgg(fig)
        return fig, fig.add_subplot()
    import matplotlib.pyplot as plt  # interactive use: let pyplot pick the backend

    fig, ax = plt.subplots(figsize=figsize, dpi=dpi)
    return fig, ax


def _ceilings(ax: Any, hw: Hardware, main: str | None, only: Sequence[str] | None, x_lo: float,
              x_hi: float, colour: str, *, label_hw: bool) -> list[tuple[float, str, str]]:
    """Compute roofs (one per distinct peak), memory slopes (one per level with a bandwidth:
    the hierarchical roofline), the ridge point (named with its dtype). Returns the roof labels
    ``(y, text, colour)`` for :func:`_roof_labels` to place without overlap."""
    out: list[tuple[float, str, str]] = []
    prefix = f"{_short(hw.name)}: " if label_hw else ""
    groups: dict[float, list[str]] = {}
    for d in hw.dtypes:
        if only is None or d in only or d == main:
            groups.setdefault(hw.peak_flops_per_s[d], []).append(d)
    bw_main = hw.memory_bytes_per_s
    levels = [m for m in hw.memory if _finite(m.bytes_per_s)]
    top = max(groups) if groups else math.nan
    for peak, names in sorted(groups.items(), reverse=True):
        is_main = main in names if main else peak == top
        ridge = peak / bw_main
        ax.plot([ridge, x_hi], [peak, peak], color=colour, lw=2.0 if is_main else 1.0,
                ls="-" if is_main else "--", alpha=1.0 if is_main else 0.6, zorder=2)
        out.append((peak, f"{prefix}{'/'.join(names)} {peak / 1e12:.4g} TFLOP/s", colour))
    for j, lvl in enumerate(levels):
        x_end = top / lvl.bytes_per_s
        ax.plot([x_lo, x_end], [lvl.bytes_per_s * x_lo, top], color=colour,
                lw=2.0 if j == 0 else 1.0, ls="-" if j == 0 else ":", zorder=2,
                label=f"{prefix}{mathtext_safe(lvl.name)} {lvl.bytes_per_s / 1e9:,.0f} GB/s")
    if main and hw.has(main):
        peak = hw.peak(main)
        ridge = peak / bw_main
        ax.plot([ridge], [peak], marker="o", ms=7, mfc="white", mec=colour, mew=1.5, zorder=4,
                ls="none", label=f"{prefix}ridge {main}: {ridge:,.4g} FLOP/B")
        ax.axvline(ridge, color=colour, lw=0.6, ls=":", alpha=0.5, zorder=1)
    else:
        ridge = top / bw_main
        top_names = "/".join(groups.get(top, []))
        ax.plot([ridge], [top], marker="o", ms=7, mfc="white", mec=colour, mew=1.5, zorder=4,
                ls="none", label=f"{prefix}ridge {top_names}: {ridge:,.4g} FLOP/B")
    return out


def _roof_labels(ax: Any, labels: list[tuple[float, str, str]], x_hi: float, y_lo: float,
                 y_hi: float) -> None:
    """Roof labels at the right end of their roofs, pushed apart (downwards) so that no two
    overlap: at least 3.2 % of the log y-range between baselines."""
    gap = (math.log10(y_hi) - math.log10(y_lo)) * 0.032
    placed: list[float] = []
    for y, text, colour in sorted(labels, key=lambda t: -t[0]):
        ly = math.log10(y * 1.06)
        if placed and placed[-1] - ly < gap:
            ly = placed[-1] - gap
        placed.append(ly)
        ax.text(x_hi / 1.08, 10 ** ly, text, ha="right", va="bottom", fontsize=7.5,
                color=colour)


def _result_styles(results: Sequence[Result], hw_colour: dict[str, str]
                   ) -> list[tuple[str, str]]:
    """(colour, marker) per whole-model point: several devices -> colour by device and marker
    by batch; one device -> colour and marker by batch (viridis, so batches read in order)."""
    batches = sorted({r.batch for r in results})
    b_index = {b: i for i, b in enumerate(batches)}
    several = len({r.hardware_key for r in results}) > 1
    out = []
    for k, r in enumerate(results):
        bi = b_index[r.batch] if len(batches) > 1 else k
        mk = _MARKERS[bi % len(_MARKERS)]
        if several:
            out.append((hw_colour[r.hardware_key], mk))
        else:
            import matplotlib

            n = max(len(batches) if len(batches) > 1 else len(results), 2)
            cmap = matplotlib.colormaps["viridis"]
            out.append((matplotlib.colors.to_hex(cmap(0.85 * bi / (n - 1))), mk))
    return out


def _result_label(r: Result, all_results: Sequence[Result]) -> str:
    parts = []
    if len({x.model for x in all_results}) > 1:
        parts.append(r.model)
    if len({x.hardware_key for x in all_results}) > 1:
        parts.append(_short(r.hardware))
    if len({x.precision for x in all_results}) > 1:
        parts.append(r.precision)
    if len({x.batch for x in all_results}) > 1 or not parts:
        parts.append(f"batch {r.batch}")
    return mathtext_safe(f"{', '.join(parts)}: {r.arithmetic_intensity:,.3g} FLOP/B, "
                         f"{r.flops / r.latency / 1e12:,.3g} TFLOP/s ({r.bottleneck})")


def _title(results: Sequence[Result], hws: Sequence[Hardware]) -> str:
    return mathtext_safe(_title_text(results, hws))


def _title_text(results: Sequence[Result], hws: Sequence[Hardware]) -> str:
    if not results:
        return "Roofline: " + ", ".join(h.name for h in hws)
    batches = sorted({r.batch for r in results})
    b = f"batch {batches[0]}" if len(batches) == 1 else \
        f"batch {batches[0]}–{batches[-1]}" if len(batches) > 2 else \
        f"batch {batches[0]}, {batches[1]}"
    phase = _join(_phase(r) for r in results if _phase(r))
    return (f"{_join(r.model for r in results)} on {_join(h.name for h in hws)}\n{b}, "
            f"{_join(r.precision for r in results)}" + (f", {phase}" if phase else "")
            + (f", preset {preset}" if (preset := _join(r.preset for r in results if r.preset))
               else ""))


def _phase(r: Result) -> str:
    """The phase with its lengths: "prefill, T=2048", "decode, context=4096", "T=128"."""
    if r.phase == "decode":
        return "decode" + (f", context={r.context}" if r.context else "")
    t = f"T={r.seq_len}" if r.seq_len else ""
    if r.phase and r.phase != "forward":
        return r.phase + (f", {t}" if t else "")
    return t


def _join(items: Iterable[str]) -> str:
    return ", ".join(dict.fromkeys(items))


def _short(name: str) -> str:
    return mathtext_safe(name.replace("NVIDIA ", ""))


def _finite(*vals: Any) -> bool:
    try:
        return all(v is not None and math.isfinite(float(v)) and float(v) > 0 for v in vals)
    except (TypeError, ValueError):
        return False
