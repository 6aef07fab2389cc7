"""The HTML report of the other scenarios: serving (``rl.serve``), training (``rl.train``), the
serving planner (``rl.plan_serving``) and the serving simulation (``rl.simulate_serving``).

Each page is self-contained like the solve report (``page.page``: inline styles and script, a
Content-Security-Policy that forbids any fetch) and shows numbers the library computed:

- serve: TTFT/TPOT/throughput, where the end-to-end time goes (per cause, s and %), prefill and
  decode side by side, the memory per device against capacity (KV cache, weights, workspace),
  TTFT, TPOT and tokens/s vs batch (the same call re-run at batches 1–256, rows that do not fit
  marked), the levers, the decode step's roofline and per-op table, conventions and sources;
- train: the split and its step time, the step-time breakdown as stacked bars for this split
  and the five fastest of ``best_parallelism`` with the same model, cluster and batch, memory
  per device, the levers, conventions;
- plan: the best layout and its simulated percentiles, the frontier chart (SLO region shaded),
  the Pareto rows, the infeasible layouts with their reasons, the sizing simulations;
- simulate: the percentile table, a histogram with the CDF per latency, throughput/goodput.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..engine.table import Table
from ..units import FRACTION, fmt_bytes, fmt_time
from .html import JS, esc, kv_table, pct, table_html

__all__ = ["serve_page", "train_page", "plan_page", "sim_page", "SERVE_BATCHES",
           "percentile_table"]

#: batches of the serving report's batch charts
SERVE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _doc(title: str, sections: list[str]) -> str:
    from .page import page

    body = (f'<div class="rl"><div class="rl-tip"></div>{"".join(sections)}'
            f"<script>{JS}</script></div>")
    return page(title, body)


def _hw_sources(hw: Any) -> str:
    from .page import BYTE_CONVENTION

    rows = [("bytes", BYTE_CONVENTION),
            ("times", "seconds inside; shown in one unit per column (s, ms, µs, ns)"),
            ("MFU / MBU / shares", "percent of the dense peak / of the bandwidth / of the "
                                   "latency"),
            ("peaks", "dense (a datasheet's with-sparsity figure is never used)")]
    if hw is None:
        return kv_table(rows)
    src = "".join(f"<tr><td>{esc(k)}</td><td style=\"text-align:left;white-space:normal\">"
                  f"{esc(v)}</td></tr>" for k, v in sorted(hw.provenance.items()))
    return (kv_table(rows) + f"<h3>Hardware numbers: {esc(hw.name)}</h3>"
            + (f'<table class="rl-kv"><thead><tr><th>field</th><th>source</th></tr></thead>'
               f"<tbody>{src}</tbody></table>" if src else
               '<p class="rl-note">no sources recorded for this hardware spec</p>'))


def _levers_section(result: Any) -> list[str]:
    from .notebook import levers_table

    try:
        L = result.levers()
    except Exception as e:  # a result whose call cannot be re-run says why, not a fake table
        return ["<h2>What to change</h2>", f'<p class="rl-note">levers unavailable: '
                f"{esc(e)}</p>"]
    return ["<h2>What to change</h2>",
            '<p class="rl-note">each row: one change, priced with the same model; '
            "<code>rl.levers(result=r).to_dicts()</code> holds the calls</p>",
            table_html(levers_table(L), max_rows=None)]


def _bar_rows(parts: dict[str, float], unit: str = "s") -> Table:
    tot = sum(v for v in parts.values() if v > 0)
    keys = [k for k, v in parts.items() if v > 0]
    return Table({"part": keys, "value": np.array([parts[k] for k in keys]),
                  "share": np.array([parts[k] / tot if tot else math.nan for k in keys])},
                 {"value": unit, "share": FRACTION})


# -- serve -------------------------------------------------------------------------------------

def serve_page(s: Any, *, batches: bool = True, levers: bool = True) -> str:
    from .notebook import (
        OP_TABLE_COLUMNS,
        _bar,
        op_table_sorted,
        result_chart,
        serve_head,
        serve_rows,
    )

    sec = [f"<h1>{serve_head(s)}</h1>", kv_table(serve_rows(s), raw=True)]
    if not s.feasible and math.isnan(s.ttft):
        return _doc(f"roofline: serving {s.model} on {s.hardware}", sec)
    sec += ["<h2>Where the end-to-end time goes</h2>",
            f'<p class="rl-note">end to end {esc(fmt_time(s.e2e_latency))} = TTFT + '
            f"(output − 1) × TPOT; <code>shares</code> (fractions) and "
            "<code>phase_seconds</code> (seconds) of the result</p>",
            _bar(s.phase_seconds), table_html(_bar_rows(s.phase_seconds), max_rows=None)]
    sec += ["<h2>Prefill and decode</h2>", _phases(s)]
    mem = dict(s.memory_breakdown)
    free = s.memory_capacity - sum(mem.values())
    if math.isfinite(free) and free > 0:
        mem["free"] = free
    sec += ["<h2>Memory per device</h2>", _bar(mem),
            kv_table([*((k, fmt_bytes(v)) for k, v in s.memory_breakdown.items()),
                      ("capacity", fmt_bytes(s.memory_capacity)),
                      ("KV cache, whole deployment", fmt_bytes(s.kv_cache_bytes)),
                      ("largest batch that fits", f"{s.max_batch:,}")])]
    if batches:
        ch = _serve_batches(s)
        if ch:
            sec += ["<h2>Serving charts: TTFT, TPOT and throughput vs batch</h2>", ch]
    if levers:
        sec += _levers_section(s)
    dec = s.decode if s.feasible else None
    if dec is not None and len(dec.ops) and "time" in dec.ops.columns:
        t, order = op_table_sorted(dec)
        sec += [f"<h2>Decode step (context {dec.context}): roofline and per-operator table</h2>",
                '<p class="rl-note">hover an operator to see its row; click a header to '
                "sort</p>", result_chart(dec, "op"),
                table_html(t, columns=OP_TABLE_COLUMNS, max_rows=None,
                           row_ids=[f"op{i}" for i in order])]
    hw = s._hw() if callable(s._hw) else None
    sec += ["<h2>Conventions and sources</h2>", f'<p class="rl-note">{esc(_queue_note())}</p>',
            _hw_sources(hw)]
    return _doc(f"roofline: serving {s.model} on {s.hardware}", sec)


def _queue_note() -> str:
    return ("TTFT is the prefill of the whole batch; TPOT the mean decode step over the "
            "generation (a context that grows from prompt to prompt + output)")


def _phases(s: Any) -> str:
    rows: dict[str, Any] = {"phase": ["prefill (TTFT)", f"decode ({s.output_len - 1} steps)"],
                            "time": np.array([s.ttft, (s.output_len - 1) * s.tpot]),
                            "per_step": np.array([s.ttft, s.tpot])}
    bott, mfu, mbu = [], [], []
    for r in (s.prefill, s.decode):
        bott.append(r.bottleneck if r is not None else "-")
        mfu.append(r.mfu if r is not None else math.nan)
        mbu.append(r.mbu if r is not None else math.nan)
    rows.update(bottleneck=bott, mfu=np.array(mfu), mbu=np.array(mbu))
    return table_html(Table(rows, {"time": "s", "per_step": "s", "mfu": FRACTION,
                                   "mbu": FRACTION}),
                      max_rows=None) + ('<p class="rl-note">bottleneck and utilisation of one '
                                        "device's prefill pass and decode step</p>")


def _serve_batches(s: Any) -> str:
    from .svg import lines_svg

    call = s._call
    if call is None:
        return ""
    bs = sorted(set(SERVE_BATCHES) | {s.batch})
    rs = []
    for b in bs:
        try:
            rs.append(call.with_(batch=b).run())
        except Exception:  # a batch this call refuses is left out, not faked
            continue
    ok = [r for r in rs if math.isfinite(r.ttft)]
    if not ok:
        return ""
    fit = [r for r in ok if r.feasible]
    no = [r for r in ok if not r.feasible]
    x = [float(r.batch) for r in fit]

    def series(f: Any, label: str) -> list[dict[str, Any]]:
        out = [{"label": f"{label} (fits)", "x": x, "y": [f(r) for r in fit]}]
        if no:
            out.append({"label": f"{label} (does not fit)", "x": [float(r.batch) for r in no],
                        "y": [f(r) for r in no]})
        return out

    here = [{"x": float(s.batch), "y": s.ttft, "label": f"this call: batch {s.batch}"}]
    a = lines_svg(series(lambda r: r.ttft, "TTFT"), xlabel="batch (concurrent requests)",
                  ylabel="TTFT [s]", title="time to first token vs batch", marks=here)
    b = lines_svg(series(lambda r: r.tpot, "TPOT"), xlabel="batch (concurrent requests)",
                  ylabel="TPOT [s]", title="time per output token vs batch",
                  marks=[{**here[0], "y": s.tpot}])
    c = lines_svg(series(lambda r: r.tokens_per_s, "tokens/s"),
                  xlabel="batch (concurrent requests)", ylabel="output tokens/s",
                  title="throughput vs batch", marks=[{**here[0], "y": s.tokens_per_s}])
    t = Table({"batch": np.array([r.batch for r in ok]), "ttft": np.array([r.ttft for r in ok]),
               "tpot": np.array([r.tpot for r in ok]),
               "tokens_per_s": np.array([r.tokens_per_s for r in ok]),
               "fits": np.array([r.feasible for r in ok])}, {"ttft": "s", "tpot": "s"})
    note = (f'<p class="rl-note">the same call at batches {bs[0]}–{bs[-1]}; the largest batch '
            f"that fits is {s.max_batch:,}</p>")
    return (note + a + b + c + "<details><summary>batch table</summary>"
            + table_html(t, max_rows=None) + "</details>")


# -- train -------------------------------------------------------------------------------------

def train_page(t: Any, *, compare: int = 5, levers: bool = True) -> str:
    from .notebook import _bar, train_head, train_rows

    sec = [f"<h1>{train_head(t)}</h1>", kv_table(train_rows(t), raw=True)]
    rows = _train_splits(t, compare) if t.feasible or compare else []
    if rows:
        from .svg_charts import stacked_bars_svg

        sec += ["<h2>Step-time breakdown per split</h2>",
                '<p class="rl-note">this split first, then the fastest splits of '
                "<code>best_parallelism</code> for the same model, cluster and batch; each bar "
                "sums to the step time</p>",
                stacked_bars_svg(rows, title="seconds per optimizer step",
                                 xlabel="seconds per optimizer step")]
    if t.feasible:
        sec.append(table_html(_bar_rows(t.breakdown), max_rows=None))
    mem = {k: v for k, v in t.memory_per_device.items() if k != "total"}
    free = t.memory_capacity - t.memory_per_device.get("total", math.nan)
    if math.isfinite(free) and free > 0:
        mem["free"] = free
    sec += ["<h2>Memory per device</h2>", _bar(mem),
            kv_table([*((k, fmt_bytes(v)) for k, v in t.memory_per_device.items()),
                      ("capacity", fmt_bytes(t.memory_capacity))])]
    if levers and t.feasible:
        sec += _levers_section(t)
    sec += ["<h2>Conventions and sources</h2>",
            '<p class="rl-note">MFU counts the model FLOPs (6 × parameters × tokens plus '
            "attention); HFU adds the recomputation</p>", _hw_sources(t._hw)]
    return _doc(f"roofline: training {t.model} on {t.cluster}", sec)


def _split(r: Any) -> str:
    return (f"tp{r.tp} pp{r.pp} dp{r.dp}" + (f" ep{r.ep}" if r.ep > 1 else "")
            + f" mb{r.micro_batch}" + (f" v{r.interleave}" if r.interleave > 1 else "")
            + f" {r.recompute} z{r.zero}")


def _train_splits(t: Any, k: int) -> list[tuple[str, dict[str, float], str]]:
    out: list[tuple[str, dict[str, float], str]] = []

    def row(r: Any, tag: str) -> tuple[str, dict[str, float], str]:
        if not r.feasible:
            return (f"{tag}{_split(r)}", {}, f"does not run: {r.reason[:60]}")
        return (f"{tag}{_split(r)}", dict(r.breakdown),
                f"{fmt_time(r.step_time)}, MFU {pct(r.mfu, 1)}")

    out.append(row(t, "this: "))
    call = t._call
    if call is None or k <= 0:
        return out if t.feasible else []
    from ..scenarios.training import best_parallelism

    keys = ("tp", "pp", "dp", "ep", "micro_batch", "interleave", "recompute", "zero")
    kw = {c: call.kwargs[c] for c in ("nodes", "preset", "fused_attention")
          if c in call.kwargs}
    kw.update(global_batch=t.global_batch, seq_len=t.seq_len, precision=t.precision)
    try:
        top = best_parallelism(call.model, call.hardware, top=k, **kw)
    except Exception:  # the comparison is extra; the page keeps this split without it
        return out
    mine = tuple(getattr(t, c) for c in keys)
    for i in range(len(top)):
        split = {c: (int(top[c][i]) if c != "recompute" else str(top[c][i])) for c in keys}
        if tuple(split.values()) == mine:
            continue
        try:
            r = call.with_(**split).run()
        except Exception:
            continue
        out.append(row(r, f"#{i + 1}: "))
    return out


# -- plan and simulation -----------------------------------------------------------------------

def percentile_table(sim: Any) -> Table:
    """Mean, p50, p90, p99 and max (rows) of TTFT, TPOT, end to end and queue delay (one
    column each, s)."""
    names = ("ttft", "tpot", "e2e", "queue_delay")
    stats = ("mean", "p50", "p90", "p99", "max")
    return Table({"statistic": list(stats),
                  **{n: np.array([getattr(getattr(sim, n), k) for k in stats]) for n in names}},
                 {n: "s" for n in names},
                 title="latency percentiles (requests after the warm-up)")


def sim_sections(sim: Any) -> list[str]:
    """Percentile table and one histogram + CDF per latency of a ServingSim."""
    from .cards import sim_rows
    from .svg_charts import hist_cdf_svg

    sec = [kv_table(sim_rows(sim), raw=True), table_html(percentile_table(sim), max_rows=None)]
    raw = sim._raw
    if not raw:
        return sec
    m = raw.get("measured", np.ones(len(raw["arrival"]), dtype=bool))
    arr, first, done, osl = raw["arrival"], raw["first"], raw["done"], raw["output"]
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = {"ttft": (first - arr)[m], "e2e": (done - arr)[m],
                "tpot": np.where(osl > 1, (done - first) / np.maximum(osl - 1, 1), np.nan)[m]}
    slo = sim.slo
    charts = []
    for key, title in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "end to end")):
        st = getattr(sim, key)
        lines = [("p50", st.p50), ("p90", st.p90), ("p99", st.p99)]
        lim = getattr(slo, f"{key}_p99", None) if slo is not None else None
        if lim is not None:
            lines.append(("SLO p99", lim))
        v = vals[key]
        top = float(np.nanmax(v)) if np.isfinite(v).any() else 0.0
        scale, unit = (1e-3, "ms") if top < 1 else (1.0, "s")
        charts.append(hist_cdf_svg(v, title=title, unit_s=scale, unit=unit, lines=lines))
    if sim.overloaded:
        sec.append('<p class="rl-bad">overloaded: the histograms show a queue that keeps '
                   "growing (the percentiles are unbounded)</p>")
    return sec + ["<h3>Distributions</h3>", *charts]


def sim_page(sim: Any) -> str:
    from .cards import sim_head

    return _doc(f"roofline: simulated serving {sim.layout}",
                [f"<h1>{sim_head(sim)}</h1>", *sim_sections(sim)])


def plan_page(p: Any) -> str:
    from .cards import plan_head, plan_rows
    from .svg_charts import frontier_svg

    sec = [f"<h1>{plan_head(p)}</h1>", kv_table(plan_rows(p), raw=True),
           "<h2>Frontier</h2>",
           '<p class="rl-note">grey: every layout at every max concurrency (closed form); blue: '
           "the Pareto frontier (hover a point to see its row); shaded: meets the TPOT p99; "
           "star: the best layout as simulated</p>", frontier_svg(p, row_prefix="pareto")]
    if p.best is not None:
        b = p.best
        sec += [f"<h2>Best layout: {esc(b.mode)} {esc(b.layout)}, {b.devices} devices</h2>",
                f'<p class="rl-note">{esc(b.why)}</p>' if b.why else "",
                *sim_sections(b.sim)]
    else:
        sec += ['<h2>No layout meets the SLO</h2>',
                *(f'<p class="rl-bad">{esc(n)}</p>' for n in p.notes)]
    sec += [f"<h2>Pareto frontier ({len(p.pareto)} rows)</h2>",
            table_html(p.pareto, max_rows=None, row_ids=[f"pareto{i}" for i in
                                                        range(len(p.pareto))]),
            f"<h2>Infeasible layouts ({len(p.infeasible)})</h2>",
            (table_html(p.infeasible, max_rows=None) if len(p.infeasible) else
             '<p class="rl-note">none: every layout searched can serve</p>'),
            f"<h2>Sizing simulations ({len(p.simulated)})</h2>",
            table_html(p.simulated, max_rows=None)]
    return _doc(f"roofline: serving plan for {p.model} on {p.hardware}", sec)
