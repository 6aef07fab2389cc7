"""Notebook cards and one-line reprs of the analysis results: the serving simulation
(``ServingSim``), the serving plan (``ServingPlan``, ``PlanChoice``), ``Sensitivity``,
``Requirements``, ``ExploreResult``, ``Levers``, and the money/energy/reliability results
(``TCO``, ``Reliability``, ``Placement``, ``Economics``, ``TailLatency``) and the data
records the public look-ups return (``Region``, ``PartPrices``).

``notebook.repr_html`` / ``repr_line`` dispatch here by type name (``CARDS`` and ``LINES``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..engine.table import Table
from ..units import fmt_bytes, fmt_time
from .html import card, esc, pct, table_html

__all__ = ["CARDS", "LINES", "sim_head", "sim_rows", "plan_head", "plan_rows"]


def _t(v: float) -> str:
    return "unbounded" if isinstance(v, float) and math.isinf(v) else fmt_time(v)


# -- serving simulation ------------------------------------------------------------------------

def sim_head(s: Any) -> str:
    return (f"<b>simulated serving</b>: <b>{esc(s.layout)}</b> "
            f'<span class="rl-sub">— {s.requests:,} requests at {s.rate:g} req/s on '
            f"{s.devices} devices</span>")


def sim_rows(s: Any) -> list[tuple[str, str]]:
    """The summary rows of a ServingSim card (HTML)."""
    rows = [("TTFT p99", f"<b>{esc(_t(s.ttft.p99))}</b> (p50 {esc(_t(s.ttft.p50))})"),
            ("TPOT p99", f"<b>{esc(_t(s.tpot.p99))}</b> (p50 {esc(_t(s.tpot.p50))})"),
            ("end to end p99", esc(_t(s.e2e.p99))),
            ("throughput", esc(f"{s.throughput_tokens_per_s:,.0f} output tokens/s "
                               f"({s.tokens_per_s_per_device:,.0f} per device), mean decode "
                               f"batch {s.mean_batch:.1f} per replica"))]
    if s.slo is not None:
        ok = s.meets()
        rows.append(("goodput", esc(f"{s.goodput:.3g} req/s ({pct(s.goodput_fraction, 1)} of "
                                    f"requests meet {s.slo})") + " — "
                     + ('<span class="rl-ok">SLO met at p99</span>' if ok else
                        '<span class="rl-bad">SLO missed at p99</span>')))
    if s.overloaded:
        rows.append(("overloaded", f'<span class="rl-bad">{esc(s.overload_reason)}</span>'))
    if s.preemptions or s.rejected:
        rows.append(("KV pressure", esc(f"{s.preemptions} preemptions, {s.rejected} requests "
                                        "that never fit")))
    return rows


def _html_sim(s: Any) -> str:
    from .scenario_pages import percentile_table

    return card(sim_head(s), sim_rows(s), extra=table_html(percentile_table(s), max_rows=None),
                details="<p class=\"rl-note\">histograms and CDFs: <code>s.to_html()</code></p>",
                details_label="distributions")


def _line_sim(s: Any) -> str:
    tail = "OVERLOADED" if s.overloaded else (
        f"TTFT p99 {_t(s.ttft.p99)}, TPOT p99 {_t(s.tpot.p99)}")
    slo = "" if s.slo is None else f", SLO {'met' if s.meets() else 'missed'}"
    return f"<ServingSim {s.layout}, {s.requests:,} requests at {s.rate:g}/s: {tail}{slo}>"


# -- serving plan ------------------------------------------------------------------------------

def plan_head(p: Any) -> str:
    return (f"<b>serving plan</b>: <b>{esc(p.model)}</b> on up to {p.devices}× "
            f"<b>{esc(p.hardware)}</b>")


def plan_rows(p: Any) -> list[tuple[str, str]]:
    b = p.best
    return [("workload", esc(str(p.workload))), ("SLO", esc(str(p.slo))),
            ("best", esc(f"{b.mode} {b.layout}, {b.devices} devices, max concurrency "
                         f"{b.max_concurrency}, chunk {b.chunk_size or 'whole prompts'}") if b
             else '<span class="rl-bad">no layout meets the SLO on these devices</span>'),
            ("searched", esc(f"{len(p.pareto)} Pareto rows, {len(p.layouts)} frontier points, "
                             f"{len(p.infeasible)} infeasible layouts, {len(p.simulated)} "
                             "simulations"))]


def _html_plan(p: Any) -> str:
    from .notebook import new_prefix
    from .svg_charts import frontier_svg

    pre = new_prefix()
    det = table_html(p.pareto, max_rows=None,
                     row_ids=[f"{pre}pareto{i}" for i in range(len(p.pareto))])
    return card(plan_head(p), plan_rows(p), extra=frontier_svg(p, row_prefix=f"{pre}pareto"),
                details=det, details_label=f"Pareto frontier ({len(p.pareto)} rows)")


def _line_plan(p: Any) -> str:
    b = p.best
    best = f"best {b.mode} {b.layout} on {b.devices} devices" if b else "no layout meets the SLO"
    return f"<ServingPlan {p.model} on up to {p.devices}× {p.hardware}: {best}>"


def _html_choice(c: Any) -> str:
    rows = [("layout", esc(f"{c.mode} {c.layout}")), ("devices", str(c.devices)),
            ("replicas", esc(f"{c.replicas}" + (f" decode + {c.prefill_replicas} prefill "
                                                f"(tp {c.prefill_tp})" if c.prefill_replicas
                                                else ""))),
            ("max concurrency", str(c.max_concurrency)),
            ("chunk", esc(str(c.chunk_size or "whole prompts")))] + sim_rows(c.sim)
    return card(f"<b>deployment</b>: {esc(c.layout)}", rows,
                extra=f'<div class="rl-note">{esc(c.why)}</div>' if c.why else "")


def _line_choice(c: Any) -> str:
    return (f"<PlanChoice {c.mode} {c.layout}, {c.devices} devices, max concurrency "
            f"{c.max_concurrency}>")


# -- sensitivity, requirements -----------------------------------------------------------------

def sensitivity_table(s: Any) -> Table:
    cols: dict[str, Any] = {"ceiling": list(s.ceilings), "value": np.array(s.values, dtype=float)}
    for t in s.times:
        cols[f"elasticity_{t}"] = np.array(s.elasticity[t], dtype=float)
    return Table(cols, title=f"elasticity d ln(time) / d ln(ceiling) for {s.call}")


def _html_sensitivity(s: Any) -> str:
    from .notebook import _bar

    t0 = s.times[0]
    e = dict(zip(s.ceilings, s.elasticity[t0]))
    binding = max(e, key=lambda k: -e[k]) if e else "-"
    rows = [("call", esc(str(s.call))), ("times", esc(", ".join(s.times))),
            ("binds most", esc(f"{binding}: {e.get(binding, math.nan):+.3f} on {t0} (−1: time "
                               "halves when the ceiling doubles)"))]
    # −e of each ceiling is the share of the time it moves (they sum with fixed costs to 1)
    share = {k: -v for k, v in e.items() if k != "fixed costs" and -v > 0}
    if e.get("fixed costs", 0) > 0:
        share["fixed costs"] = e["fixed costs"]
    extra = (f'<div class="rl-note">share of {esc(t0)} each ceiling moves</div>' + _bar(share)
             + table_html(sensitivity_table(s), max_rows=None))
    return card("<b>sensitivity</b>: which ceiling the time is made of", rows, extra=extra)


def _line_sensitivity(s: Any) -> str:
    t0 = s.times[0]
    e = dict(zip(s.ceilings, s.elasticity[t0]))
    top = sorted(e.items(), key=lambda kv: kv[1])[:2]
    return (f"<Sensitivity of {t0} for {s.call}: "
            + ", ".join(f"{k} {v:+.2f}" for k, v in top) + ">")


def _html_requirements(r: Any) -> str:
    rows = [("target", esc(r.target)), ("call", esc(str(r.call))),
            ("reference", esc(f"{r.reference}: {fmt_time(r.reference_time)}")),
            ("floor", esc(f"{fmt_time(r.floor)} with every ceiling infinite"))]
    if not r.reachable:
        rows.append(("unreachable", f'<span class="rl-bad">{esc(r.reason)}</span>'))
        return card("<b>requirements</b>", rows)

    def show(v: float, unit: str) -> str:
        return "not by this ceiling alone" if not math.isfinite(v) else f"{v:.4g} {unit}"

    rows += [("least peak", esc(show(r.peak_flops_per_s, "FLOP/s") + " (bandwidth at reference)")),
             ("least bandwidth", esc(show(r.bandwidth_bytes_per_s, "B/s")
                                     + " (peak at reference)")),
             ("capacity", esc(fmt_bytes(r.capacity_bytes)))]
    if math.isfinite(r.link_bytes_per_s):
        rows.append(("scale-up link", esc(f"{r.link_bytes_per_s:.4g} B/s")))
    ok = r.meeting
    rows.append(("zoo parts meeting it", esc(f"{len(ok)}: {', '.join(ok) if ok else 'none'}")))
    fr = Table({"peak": np.array([p for p, _ in r.frontier], dtype=float),
                "bandwidth": np.array([b for _, b in r.frontier], dtype=float)},
               {"peak": "FLOP/s", "bandwidth": "B/s"}, title="(peak, bandwidth) meeting it")
    parts = Table({"part": [n for n, _, _ in r.parts],
                   "time": np.array([t for _, t, _ in r.parts], dtype=float),
                   "meets": np.array([m for _, _, m in r.parts], dtype=bool)}, {"time": "s"})
    return card("<b>requirements</b>: what hardware meets the target", rows,
                extra=table_html(fr, max_rows=None), details=table_html(parts, max_rows=None),
                details_label=f"zoo parts ({len(r.parts)})")


def _line_requirements(r: Any) -> str:
    if not r.reachable:
        return f"<Requirements {r.target}: unreachable — {r.reason}>"
    return (f"<Requirements {r.target}: peak ≥ {r.peak_flops_per_s:.3g} FLOP/s or bandwidth ≥ "
            f"{r.bandwidth_bytes_per_s:.3g} B/s, {len(r.meeting)} zoo parts meet it>")


# -- explore, levers ---------------------------------------------------------------------------

def _html_explore(e: Any) -> str:
    rows = [("points", esc(f"{e.evaluated:,} of {e.size:,} priced in {e.seconds:.2f} s "
                           f"({e.points_per_s:,.0f} points/s)")),
            ("constraints", esc(f"{e.passed:,} meet " + (" and ".join(map(str, e.constraints))
                                                         or "no constraint"))),
            ("Pareto front", esc(f"{len(e.pareto)} points on "
                                 + ", ".join(map(str, e.objectives))))]
    if e.failed:
        rows.append(("failed", f'<span class="rl-bad">{len(e.failed)} chunks: '
                               f"{esc(e.failed[0]['error'][:200])}</span>"))
    top = ""
    try:
        top = table_html(e.top(20), max_rows=None)
    except Exception:  # no objective tracked: the card keeps the front
        top = ""
    return card("<b>exploration</b>", rows, extra=table_html(e.pareto, max_rows=200),
                details=top, details_label=f"top 20 by {e.objectives[0]}" if top else "")


def _line_explore(e: Any) -> str:
    return (f"<ExploreResult {e.evaluated:,} points, {e.passed:,} pass, "
            f"{len(e._front.get('_chunk', []))} on the front>")


def _line_levers(L: Any) -> str:
    b = L.best
    return (f"<Levers {len(L)} rows for {L.base_call}; best: "
            + (f"{b.lever} {b.setting} {b.speedup:.2f}x>" if b else "none>"))


# -- money, energy, reliability: their printout as key/value rows --------------------------------

def text_rows(obj: Any) -> tuple[str, list[tuple[str, str]], list[str]]:
    """A printout of the form ``head`` / ``  key<2+ spaces>value`` lines as (head, rows, other
    lines), escaped."""
    import re

    lines = (obj if isinstance(obj, str) else str(obj)).splitlines()
    rows, rest = [], []
    for ln in lines[1:]:
        m = re.match(r"^\s{2}(\S.*?)\s{2,}(\S.*)$", ln)
        if m:
            rows.append((m.group(1), esc(m.group(2))))
        else:
            rest.append(ln.strip())
    return (esc(lines[0]) if lines else esc(type(obj).__name__)), rows, rest


def _html_text_card(obj: Any) -> str:
    head, rows, rest = text_rows(obj)
    extra = "".join(f'<div class="rl-note">{esc(r)}</div>' for r in rest if r)
    return card(f"<b>{head}</b>", rows, extra=extra)


def _html_tail(t: Any) -> str:
    rows = [("utilisation", esc(pct(t.utilisation, 1))), ("P(wait)", esc(pct(t.p_wait, 1))),
            ("mean wait", esc(_t(t.wait_mean))), ("p50", esc(_t(t.p50))),
            ("p99", f"<b>{esc(_t(t.p99))}</b>"),
            ("stable", '<span class="rl-ok">yes</span>' if t.stable else
             '<span class="rl-bad">no: arrivals exceed the servers</span>')]
    return card("<b>M/M/c response time</b> (Kingman-corrected)", rows)


def _line_tail(t: Any) -> str:
    return (f"<TailLatency utilisation {t.utilisation:.0%}, p50 {_t(t.p50)}, p99 {_t(t.p99)}"
            f"{'' if t.stable else ', unstable'}>")


def _econ_text(e: Any) -> str:
    return "\n".join([f"economics of {e.devices} device(s), per {e.unit}", *e.lines()])


def _html_econ(e: Any) -> str:
    head, rows, rest = text_rows(_econ_text(e))
    rows += [("power", esc(f"{e.power_w_per_device:,.0f} W per device ({e.power_source})")),
             ("PUE", esc(f"{e.pue:g} ({e.pue_source})")),
             ("price", esc(e.price_source))]
    rows += [("missing", esc(r)) for r in e.reasons]
    return card(f"<b>{head}</b>", rows)


def _line_econ(e: Any) -> str:
    c = e.cost_per_unit
    cost = "no price" if c is None else f"${c:.4g}"
    return (f"<Economics per {e.unit}: {cost}, {e.energy_per_unit:.4g} J on {e.devices} "
            "device(s)>")


def _html_region(r: Any) -> str:
    rows = [("carbon intensity", esc(f"{r.g_per_kwh:,.4g} g CO2e/kWh ({r.year})"
                                     + (" — assumed: a coarser grid's figure" if r.assumed
                                        else ""))),
            ("electricity", esc("no published price" if r.usd_per_kwh is None else
                                f"${r.usd_per_kwh:.4g}/kWh"))]
    rows += [(f"source: {k}", esc(v)) for k, v in r.provenance.items()]
    return card(f"<b>grid region</b> {esc(r.name)} ({esc(r.key)})", rows)


def _line_region(r: Any) -> str:
    usd = "" if r.usd_per_kwh is None else f", ${r.usd_per_kwh:.4g}/kWh"
    return f"<Region {r.key}: {r.g_per_kwh:,.4g} g CO2e/kWh ({r.year}){usd}>"


def _html_prices(p: Any) -> str:
    rows = [("rental", esc("none published" if p.usd_per_hour is None else
                           f"${p.usd_per_hour:.4g} per device-hour (median of the quotes)")),
            ("purchase", esc("none published" if p.purchase_usd is None else
                             f"${p.purchase_usd:,.0f} per device"))]
    t = Table({"provider": [q.provider for q in p.quotes], "offer": [q.offer for q in p.quotes],
               "date": [q.date for q in p.quotes],
               "usd_per_hour": np.array([q.usd_per_hour for q in p.quotes], dtype=float),
               "source": [str(q.provenance) for q in p.quotes]}) if p.quotes else None
    return card(f"<b>prices</b> of {esc(p.key)}", rows,
                extra=table_html(t, max_rows=None) if t is not None else "")


def _line_prices(p: Any) -> str:
    h = "no rental price" if p.usd_per_hour is None else f"${p.usd_per_hour:.4g}/device-h"
    return f"<PartPrices {p.key}: {h} ({len(p.quotes)} quotes)>"


# -- specs: a part, a cluster, a model (their own repr stays: Hardware('h100-sxm5')) ----------

def _html_hardware(h: Any) -> str:
    rows = [("kind", esc(f"{h.kind}" + (f", {h.vendor}" if h.vendor else "")
                         + (f", {h.year}" if h.year else ""))),
            ("main memory", esc(f"{h.main_memory.name} {fmt_bytes(h.memory_capacity_bytes)} at "
                                f"{h.memory_bytes_per_s / 1e9:,.4g} GB/s")),
            ("TDP", esc("unpublished" if math.isnan(h.tdp_w) else f"{h.tdp_w:,.0f} W"))]
    for nm, ln in (("host link", h.host_link), ("scale-up link", h.scale_up_link)):
        if ln is not None:
            rows.append((nm, esc(f"{ln.name}: {ln.bytes_per_s / 1e9:,.4g} GB/s per direction")))
    if h.origin:
        rows.append(("loaded from", esc(h.origin)))
    peaks = Table({"dtype": list(h.dtypes),
                   "peak": np.array([h.peak(d) for d in h.dtypes], dtype=float),
                   "ridge": np.array([h.ridge_point(d) for d in h.dtypes], dtype=float)},
                  {"peak": "FLOP/s", "ridge": "FLOP/B"}, title="dense peaks")
    mem = Table({"level": [m.name for m in h.memory],
                 "capacity": np.array([m.capacity_bytes for m in h.memory], dtype=float),
                 "bandwidth": np.array([m.bytes_per_s for m in h.memory], dtype=float)},
                {"capacity": "B", "bandwidth": "B/s"}, title="memory levels")
    src = Table({"field": list(h.provenance), "source": [str(v) for v in
                                                         h.provenance.values()]})
    return card(f"<b>{esc(h.name)}</b> <span class=\"rl-sub\">— {esc(h.key)}</span>", rows,
                extra=table_html(peaks, max_rows=None) + table_html(mem, max_rows=None),
                details=table_html(src, max_rows=None) if len(src) else "",
                details_label=f"sources ({len(src)} fields)")


def _html_cluster(c: Any) -> str:
    rows = [("devices", esc(f"{c.nodes} × {c.devices_per_node} {c.device.name} = {c.devices}")),
            ("scale-up", esc(f"{c.scale_up_bytes_per_s / 1e9:,.4g} GB/s per device over "
                             f"{c.scale_up_domain} devices")),
            ("scale-out", esc(f"{c.scale_out_bytes_per_s / 1e9:,.4g} GB/s per device; "
                              f"{c.nics} NICs of {c.nic_bytes_per_s / 1e9:,.4g} GB/s per node"))]
    return card(f"<b>{esc(c.name)}</b> <span class=\"rl-sub\">— {esc(c.key)}</span>", rows,
                details=_html_hardware(c.device), details_label=f"the device: {c.device.name}")


def _html_model(m: Any) -> str:
    rows = [("family", esc(m.family)), ("parameters", esc(f"{m.params / 1e6:,.1f} M")),
            ("phases", esc(", ".join(m.phases)))]
    if m.n_layers:
        rows.append(("layers", str(m.n_layers)))
    if m.default_seq_len:
        rows.append(("default sequence", f"{m.default_seq_len:,} tokens"))
    cfg = m.config
    if cfg is not None:
        rows.append(("shape", esc(f"d_model {cfg.d_model}, {cfg.n_heads} heads "
                                  f"({cfg.n_kv_heads} KV), d_ff {cfg.d_ff}, vocab {cfg.vocab}"
                                  + (f", {cfg.n_experts} experts" if cfg.n_experts else ""))))
    if m.unsupported_ops:
        rows.append(("unpriced ops", f'<span class="rl-bad">{len(m.unsupported_ops)} (see the '
                                     "model's summary)</span>"))
    if m.source:
        rows.append(("source", esc(m.source)))
    return card(f"<b>{esc(m.name)}</b> <span class=\"rl-sub\">— {esc(m.key)}</span>", rows)


def _line_text(obj: Any) -> str:
    first = str(obj).splitlines()[0] if str(obj) else ""
    return f"<{type(obj).__name__} {first[:150]}>"


CARDS = {"ServingSim": _html_sim, "ServingPlan": _html_plan, "PlanChoice": _html_choice,
         "Sensitivity": _html_sensitivity, "Requirements": _html_requirements,
         "ExploreResult": _html_explore, "TCO": _html_text_card,
         "Reliability": _html_text_card, "Placement": _html_text_card,
         "Economics": _html_econ, "TailLatency": _html_tail, "Region": _html_region,
         "PartPrices": _html_prices, "Hardware": _html_hardware, "Cluster": _html_cluster,
         "Model": _html_model, "ImportedModel": _html_model}
LINES = {"ServingSim": _line_sim, "ServingPlan": _line_plan, "PlanChoice": _line_choice,
         "Sensitivity": _line_sensitivity, "Requirements": _line_requirements,
         "ExploreResult": _line_explore, "Levers": _line_levers, "TCO": _line_text,
         "Reliability": _line_text, "Placement": _line_text, "Economics": _line_econ,
         "TailLatency": _line_tail, "Region": _line_region, "PartPrices": _line_prices}
