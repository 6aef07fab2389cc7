"""Notebook display: ``_repr_html_`` cards and one-line ``__repr__`` for every result type.

The result classes delegate here lazily (``Result._repr_html_`` imports this module on first
display), so the engine never imports the presentation layer. A card is a compact summary
(model, hardware, bottleneck, time with its bound, MFU, fit) followed by collapsed sections:
the sortable per-op table and, where there is one, the chart (inline SVG, no matplotlib).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from ..engine.result import fill_phrase
from ..units import fmt_bytes, fmt_time
from .html import card, esc, pct, table_html

__all__ = ["repr_html", "repr_line", "summary_pairs", "OP_TABLE_COLUMNS", "CARD_OP_ROWS"]

#: columns of the per-op table in cards and the report
OP_TABLE_COLUMNS = ("name", "kind", "flops", "bytes", "intensity", "bound", "t_compute",
                    "t_memory", "overhead", "time", "share")
#: per-op rows a notebook card shows (the most expensive first)
CARD_OP_ROWS = 200


def repr_html(obj: Any) -> str:
    """The notebook card of any roofline result or table."""
    name = type(obj).__name__
    return _HTML.get(name, _html_text)(obj)


def repr_line(obj: Any) -> str:
    """A one-line ``repr`` (the dataclass dump is 1,000+ characters)."""
    fn = _LINE.get(type(obj).__name__)
    return " ".join(fn(obj).split()) if fn else object.__repr__(obj)


# -- one-line reprs ------------------------------------------------------------------------------

def _fits(ok: bool) -> str:
    return "fits" if ok else "does not fit"


def _line_result(r: Any) -> str:
    if not r.feasible and math.isnan(r.latency):
        return (f"<Result {r.model} on {r.hardware}, batch {r.batch}, {r.precision}: cannot run"
                f" — {r.reason}>")
    return (f"<Result {r.model} on {r.hardware}, batch {r.batch}, {r.precision}, {r.phase}: "
            f"{fmt_time(r.latency)}, {r.bottleneck}-bound, MFU {r.mfu * 100:.2f} %, "
            f"{_fits(r.feasible)}>")


def _line_table(t: Any) -> str:
    cols = t.columns
    shown = ", ".join(cols[:6]) + (f", … (+{len(cols) - 6})" if len(cols) > 6 else "")
    title = f" {t.title!r}" if t.title else ""
    return f"<Table{title}: {len(t)} rows × {len(cols)} columns: {shown}>"


def _line_sweep(s: Any) -> str:
    t = s.table
    n_hw = len(set(t["hardware"])) if len(t) else 0
    n_p = len(set(t["precision"])) if len(t) else 0
    n_b = len(set(t["batch"].tolist())) if len(t) else 0
    return (f"<Sweep {s.model}: {len(t)} rows = {n_hw} hardware × {n_p} precision × {n_b} "
            f"batch, preset {s.preset}>")


def _line_serve(s: Any) -> str:
    head = f"<ServeResult {s.model} on {s.devices}× {s.hardware}, batch {s.batch}"
    if not s.feasible and math.isnan(s.ttft):
        return f"{head}: cannot run — {s.reason}>"
    return (f"{head}: TTFT {fmt_time(s.ttft)}, TPOT {fmt_time(s.tpot)}, "
            f"{s.tokens_per_s:,.0f} tokens/s, {_fits(s.feasible)}>")


def _line_train(t: Any) -> str:
    head = (f"<TrainingResult {t.model} on {t.devices} × {t.device}, tp={t.tp} pp={t.pp} "
            f"dp={t.dp}")
    if not t.feasible:
        return f"{head}: does not run — {t.reason}>"
    return f"{head}: step {fmt_time(t.step_time)}, MFU {t.mfu * 100:.1f} %>"


def _line_capacity(c: Any) -> str:
    return (f"<Capacity {c.rate_per_s:,.4g} requests/s (limited by {c.limited_by}), "
            f"TTFT {fmt_time(c.ttft)}, TPOT {fmt_time(c.tpot)}>")


def _line_validation(v: Any) -> str:
    tot = v.summary.get("default", {}).get("all", {}) if v.summary else {}
    g = tot.get("geomean", math.nan)
    return f"<Validation on {v.hardware}: {len(v.rows)} items, geomean error {g:.3g}x>"


_LINE = {"Result": _line_result, "Table": _line_table, "Sweep": _line_sweep,
         "ServeResult": _line_serve, "TrainingResult": _line_train, "Capacity": _line_capacity,
         "Validation": _line_validation}


# -- cards ---------------------------------------------------------------------------------------

def op_table_sorted(r: Any) -> tuple[Any, np.ndarray]:
    """The result's per-op table, most expensive first (ties by kernel time), and the
    original index of each row."""
    t = r.ops
    if not len(t) or "time" not in t.columns:
        return t, np.arange(len(t))
    kernel = np.maximum(np.asarray(t["t_compute"], dtype=float),
                        np.asarray(t["t_memory"], dtype=float))
    order = np.lexsort((-kernel, -np.asarray(t["time"], dtype=float)))
    from ..engine.table import Table

    return Table({c: t[c][order] for c in t.columns}, t.units, t.title), order


_CARDS = itertools.count()


def new_prefix() -> str:
    """An id prefix unique in this process (several cards share one notebook page)."""
    return f"rl{next(_CARDS)}-"


def result_rows(r: Any) -> list[tuple[str, str]]:
    """The summary rows of a Result card (HTML-escaped values)."""
    if not r.feasible and math.isnan(r.latency):
        return [("cannot run", f'<span class="rl-bad">{esc(r.reason)}</span>')]
    unit = "tokens/s" if r.phase == "decode" else "samples/s"
    fit = ('<span class="rl-ok">fits</span>' if r.feasible
           else f'<span class="rl-bad">does not fit: {esc(r.reason)}</span>')
    rows = [
        ("bottleneck", f"<b>{esc(r.bottleneck)}-bound</b>"),
        ("latency", f"<b>{esc(fmt_time(r.latency))}</b> (roofline bound "
                    f"{esc(fmt_time(r.latency_bound))})"),
        ("time split", esc(f"compute {fmt_time(r.t_compute)}, memory {fmt_time(r.t_memory)}, "
                           f"overhead {fmt_time(r.t_overhead)}"
                           + ("; " + fill_phrase(r.t_fill, "the compute time")
                              if r.t_fill > 0 else ""))),
        ("throughput", esc(f"{r.throughput:,.1f} {unit}")),
        ("utilisation", esc(f"MFU {pct(r.mfu)}, MBU {pct(r.mbu)}")),
        ("intensity", esc(f"{r.arithmetic_intensity:,.4g} FLOP/B vs ridge "
                          f"{r.ridge_point:,.4g} ({r.precision})")),
        ("memory", f"{esc(fmt_bytes(r.memory_footprint))} of "
                   f"{esc(fmt_bytes(r.memory_capacity))} — {fit}"),
    ]
    return rows + econ_rows(r.economics, 1e6, "1M samples")


def econ_rows(e: Any, per: float, label: str) -> list[tuple[str, str]]:
    """Cost, energy and carbon rows of a card from an ``Economics`` (per unit of work; cost and
    carbon per ``per`` units, named ``label``); a missing figure says why."""
    unit = e.unit
    c, g, j = e.cost_per_unit, e.carbon_per_unit, e.energy_per_unit
    cost = (esc(f"${c * per:,.4g} per {label} (${e.usd_per_device_hour:,.4g}/device-h × "
                f"{e.devices})") if c is not None
            else f'<span class="rl-bad">no price</span> — {esc(e.price_source)}')
    energy = (esc(f"{j:,.4g} J per {unit} ({e.power_w_per_device:,.0f} W/device at "
                  f"u={e.utilisation:.0%}, PUE {e.pue:g})") if math.isfinite(j)
              else f'<span class="rl-bad">n/a</span> — {esc(e.power_source)}')
    carbon = (esc(f"{g * per:,.4g} kg CO2e per {label} ({e.intensity_source.split(';')[0]})")
              if g is not None else "n/a — no region given (region=...)")
    return [("cost", cost), ("energy", energy), ("carbon", carbon)]


def result_head(r: Any) -> str:
    ctx = f", T={r.seq_len}" if r.seq_len and r.phase != "decode" else ""
    ctx += f", context={r.context}" if r.context else ""
    return (f"<b>{esc(r.model)}</b> on <b>{esc(r.hardware)}</b> "
            f'<span class="rl-sub">— batch {r.batch}, {esc(r.precision)}, {esc(r.phase)}'
            f"{esc(ctx)}, preset {esc(r.preset)}</span>")


def _html_result(r: Any) -> str:
    rows = result_rows(r)
    t, order = op_table_sorted(r)
    if not len(t) or "time" not in t.columns:
        return card(result_head(r), rows)
    n = len(t)
    pre = new_prefix()
    det = table_html(t, columns=OP_TABLE_COLUMNS, max_rows=CARD_OP_ROWS,
                     row_ids=[f"{pre}op{i}" for i in order],
                     note_more="r.ops.to_html(max_rows=None) or r.to_html()")
    chart = result_chart(r, f"{pre}op")
    extra = (f"<details><summary>roofline chart</summary>{chart}</details>" if chart else "")
    return card(result_head(r), rows, extra=extra, details=det,
                details_label=f"per-operator table ({n} operators, click a header to sort)")


def result_chart(r: Any, row_prefix: str) -> str:
    """The inline-SVG roofline of a result; point k points at row ``{row_prefix}{i}`` where
    i is the op's index in ``r.ops``."""
    from ..specs.resolve import hardware
    from ..viz.roofline import op_points
    from .svg import roofline_svg

    hw = r.hardware_spec() if hasattr(r, "hardware_spec") else hardware(r.hardware_key)
    pts = op_points(r) if r.preset != "mlsysim" else None
    idx = pts["index"].tolist() if pts is not None else None
    return roofline_svg(r, hw, pts, row_prefix=row_prefix, row_index=idx)


def _html_table(t: Any) -> str:
    head = f"<b>{esc(t.title)}</b>" if t.title else "<b>table</b>"
    head += f' <span class="rl-sub">— {len(t)} rows × {len(t.columns)} columns</span>'
    return (f'<div class="rl"><style>{_css()}</style><div class="rl-head">{head}</div>'
            f"{table_html(t, max_rows=CARD_OP_ROWS, note_more='t.to_html(max_rows=None)')}"
            f"<script>{_js()}</script></div>")


def sweep_charts(s: Any) -> str:
    """Throughput and latency vs batch, one line per (hardware, precision), the crossover
    batch (first compute-bound) ringed."""
    from .svg import lines_svg

    t = s.table
    series_t, series_l, marks = [], [], []
    cross = s.crossover()
    precs = sorted(set(t["precision"]))
    for hw in dict.fromkeys(t["hardware"]):
        for p in precs:
            m = (t["hardware"] == hw) & (t["precision"] == p)
            if not m.any():
                continue
            label = hw.replace("NVIDIA ", "") + (f" {p}" if len(precs) > 1 else "")
            b = t["batch"][m].astype(float)
            thr = t["throughput"][m]
            series_t.append({"label": label, "x": b, "y": thr})
            series_l.append({"label": label, "x": b, "y": t["latency"][m]})
            cb = cross.get(hw if len(precs) == 1 else f"{hw} {p}")
            if cb is not None:
                k = int(np.nonzero(t["batch"][m] == cb)[0][0])
                marks.append({"x": float(cb), "y": float(thr[k]),
                              "label": f"compute-bound from {cb}"})
    a = lines_svg(series_t, xlabel="batch", ylabel="throughput [samples/s]",
                  title=f"{s.model}: throughput vs batch", marks=marks)
    b = lines_svg(series_l, xlabel="batch", ylabel="latency [s]",
                  title=f"{s.model}: latency vs batch")
    return a + b


def _html_sweep(s: Any) -> str:
    cross = ", ".join(f"{k}: {v if v is not None else 'never'}" for k, v in s.crossover().items())
    rows = [("rows", esc(_line_sweep(s)[len("<Sweep "):-1])),
            ("compute-bound from batch", esc(cross))]
    cols = ["hardware", "precision", "batch", "latency", "throughput", "bottleneck",
            "arithmetic_intensity", "mfu", "memory_footprint", "feasible"]
    det = table_html(s.table, columns=cols, max_rows=None)
    return card(f"<b>{esc(s.model)}</b> sweep <span class=\"rl-sub\">— preset "
                f"{esc(s.preset)}</span>", rows, extra=sweep_charts(s), details=det,
                details_label=f"sweep table ({len(s)} rows)")


def _bar(parts: dict[str, float]) -> str:
    from .svg import PALETTE

    tot = sum(v for v in parts.values() if v > 0) or 1.0
    spans, legend = [], []
    for i, (k, v) in enumerate((k, v) for k, v in parts.items() if v > 0):
        c = PALETTE[i % len(PALETTE)]
        spans.append(f'<span style="width:{100 * v / tot:.3f}%;background:{c}" '
                     f'title="{esc(k)} {100 * v / tot:.1f} %"></span>')
        legend.append(f'<span style="background:{c}"></span>{esc(k)} {100 * v / tot:.1f} %')
    return (f'<div class="rl-bar">{"".join(spans)}</div>'
            f'<div class="rl-legend rl-note">{"".join(legend)}</div>')


def serve_head(s: Any) -> str:
    return (f"<b>{esc(s.model)}</b> on <b>{s.devices}× {esc(s.hardware)}</b> "
            f'<span class="rl-sub">— tp {s.tp}, pp {s.pp}, batch {s.batch}, prompt '
            f"{s.prompt_len}, output {s.output_len}, {esc(s.precision)}, preset "
            f"{esc(s.preset)}, engine {esc(s.engine)}</span>")


def serve_rows(s: Any) -> list[tuple[str, str]]:
    """The summary rows of a ServeResult card (HTML)."""
    if not s.feasible and math.isnan(s.ttft):
        return [("cannot run", f'<span class="rl-bad">{esc(s.reason)}</span>')]
    fit = ('<span class="rl-ok">fits</span>' if s.feasible
           else f'<span class="rl-bad">does not fit: {esc(s.reason)}</span>')
    mem = ", ".join(f"{k} {fmt_bytes(v)}" for k, v in s.memory_breakdown.items())
    return [("TTFT", f"<b>{esc(fmt_time(s.ttft))}</b>"),
            ("TPOT", f"<b>{esc(fmt_time(s.tpot))}</b>"),
            ("end to end", esc(fmt_time(s.e2e_latency))),
            ("throughput", esc(f"{s.tokens_per_s:,.0f} output tokens/s "
                               f"({s.tokens_per_s_per_device:,.0f} per device)")),
            ("continuous", esc(f"TPOT {fmt_time(s.steady_tpot)}, "
                               f"{s.steady_tokens_per_s:,.0f} tokens/s")),
            ("utilisation", esc(f"MBU {pct(s.mbu, 1)} (decode), MFU {pct(s.mfu, 1)}")),
            ("memory/device", f"{esc(mem)} of {esc(fmt_bytes(s.memory_capacity))}; max batch "
                              f"{s.max_batch} — {fit}")] + econ_rows(s.economics, 1e6,
                                                                    "1M output tokens")


def _html_serve(s: Any) -> str:
    rows = serve_rows(s)
    if not s.feasible and math.isnan(s.ttft):
        return card(serve_head(s), rows)
    extra = ("<div class=\"rl-note\">where the end-to-end time goes</div>" + _bar(s.shares)
             if s.shares else "")
    det, label = "", ""
    dec = s.decode if s.feasible else None
    if dec is not None and len(dec.ops):
        det = table_html(op_table_sorted(dec)[0], columns=OP_TABLE_COLUMNS,
                         max_rows=CARD_OP_ROWS,
                         note_more="s.decode.ops.to_html(max_rows=None)")
        label = f"decode step per operator ({len(dec.ops)} operators)"
    return card(serve_head(s), rows, extra=extra, details=det, details_label=label)


def train_head(t: Any) -> str:
    return (f"<b>{esc(t.model)}</b> on <b>{esc(t.cluster)}</b> "
            f'<span class="rl-sub">— {t.devices} × {esc(t.device)}, {esc(t.precision)}, '
            f"global batch {t.global_batch} × {t.seq_len} tokens</span>")


def train_rows(t: Any) -> list[tuple[str, str]]:
    """The summary rows of a TrainingResult card (HTML); no time when it does not run."""
    mem = t.memory_per_device
    split = (f"tp={t.tp} pp={t.pp} dp={t.dp} ep={t.ep} micro-batch={t.micro_batch} "
             f"(m={t.microbatches}) interleave={t.interleave} recompute={t.recompute} "
             f"zero={t.zero}")
    parts = ", ".join(f"{k} {fmt_bytes(v)}" for k, v in mem.items() if k != "total")
    rows = [("split", esc(split)),
            ("memory/device", esc(f"{fmt_bytes(mem.get('total', math.nan))} of "
                                  f"{fmt_bytes(t.memory_capacity)} ({parts})"))]
    if not t.feasible:
        rows.append(("does not run", f'<span class="rl-bad">{esc(t.reason)}</span>'))
        return rows
    rows += [("step time", f"<b>{esc(fmt_time(t.step_time))}</b>"),
             ("throughput", esc(f"{t.tokens_per_s:,.0f} tokens/s")),
             ("utilisation", esc(f"MFU {pct(t.mfu, 1)}, HFU {pct(t.hfu, 1)}"))]
    return rows + econ_rows(t.economics, 1e6, "1M tokens")


def _html_train(t: Any) -> str:
    rows = train_rows(t)
    if not t.feasible:
        return card(train_head(t), rows)
    extra = "<div class=\"rl-note\">step time breakdown</div>" + _bar(t.breakdown)
    return card(train_head(t), rows, extra=extra)


def summary_pairs(obj: Any) -> list[tuple[str, str]]:
    """The card's summary as plain ``(quantity, value)`` text, headline first (markdown and
    the CLI's other formats use it)."""
    import html
    import re

    name = type(obj).__name__
    fn = {"Result": lambda o: (result_head(o), result_rows(o)),
          "ServeResult": lambda o: (serve_head(o), serve_rows(o)),
          "TrainingResult": lambda o: (train_head(o), train_rows(o))}.get(name)
    if fn is None:
        return []

    def plain(h: str) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", h))

    head, rows = fn(obj)
    return [("scenario", plain(head))] + [(k, plain(v)) for k, v in rows]


def _html_capacity(c: Any) -> str:
    rows = [("rate", f"<b>{c.rate_per_s:,.4g} requests/s</b>"),
            ("limited by", esc(c.limited_by)),
            ("concurrency", esc(f"{c.concurrency:,.3g} requests in decode")),
            ("TTFT / TPOT", esc(f"{fmt_time(c.ttft)} / {fmt_time(c.tpot)}")),
            ("throughput", esc(f"{c.tokens_per_s:,.0f} output tokens/s"))]
    if c.economics is not None and c.tokens_per_s > 0:
        rows += econ_rows(c.economics, 1e6, "1M output tokens")
    return card("<b>serving capacity</b>", rows, extra=f'<div class="rl-note">'
                f"{esc(c.queue_model)}</div>")


def _html_validation(v: Any) -> str:
    from ..engine.table import Table

    d = v.to_dicts()
    cols = {k: [r[k] for r in d] for k in ("name", "group", "measured_s", "predicted_s",
                                           "ratio", "bound_s")}
    tab = Table(cols, {"measured_s": "s", "predicted_s": "s", "bound_s": "s"})
    tot = v.summary.get("default", {}).get("all", {}) if v.summary else {}
    rows = [("items", str(len(v.rows))),
            ("geomean error", esc(f"{tot.get('geomean', math.nan):.3f}x")),
            ("within 1.5x", esc(pct(tot.get("within_1.5", math.nan), 0)))]
    return card(f"<b>predicted vs measured</b> on <b>{esc(v.hardware)}</b>", rows,
                details=table_html(tab, max_rows=None), details_label="per item")


def levers_table(L: Any, top: int | None = 15) -> Any:
    """The ranked levers as a Table (usable rows first, as ``rl.levers`` ranks them)."""
    from ..engine.table import Table

    rows = L.to_dicts()[:top] if top is not None else L.to_dicts()
    keys = ("lever", "setting", "latency", "speedup", "speedup_low", "speedup_high",
            "bottleneck_after", "memory", "fits", "why")
    for r in rows:  # the speed-up's 80 % band (rl.levers: lever.uncertainty; none: NaN)
        b = r["uncertainty"].get("speedup", {})
        r["speedup_low"], r["speedup_high"] = b.get("low", math.nan), b.get("high", math.nan)
    cols = {k: [r[k] if r[k] is not None else math.nan for r in rows] for k in keys}
    return Table(cols, {"latency": "s", "memory": "B"},
                 title=f"levers for {L.base_call} (speed-up per {L.unit})")


def _html_levers(L: Any) -> str:
    b = L.best
    rows = [("call", esc(str(L.base_call))), ("levers", str(len(L))),
            ("best", esc(f"{b.lever}: {b.setting} — {b.speedup:.2f}x ({b.why})") if b
             else "nothing helps")]
    t = levers_table(L, None)
    return card("<b>what to change</b>", rows, details=table_html(t, max_rows=None),
                details_label=f"every lever ({len(L)} rows, click a header to sort)")


def _html_text(obj: Any) -> str:
    """Any other result: its printout in a card (names escaped)."""
    return (f'<div class="rl"><style>{_css()}</style><div class="rl-head"><b>'
            f"{esc(type(obj).__name__)}</b></div><pre>{esc(obj)}</pre></div>")


def _css() -> str:
    from .html import CSS

    return CSS


def _js() -> str:
    from .html import JS

    return JS


_HTML = {"Result": _html_result, "Table": _html_table, "Sweep": _html_sweep,
         "ServeResult": _html_serve, "TrainingResult": _html_train,
         "Capacity": _html_capacity, "Validation": _html_validation, "Levers": _html_levers}


def _register() -> None:
    from .cards import CARDS, LINES

    _HTML.update(CARDS)
    _LINE.update(LINES)


_register()
